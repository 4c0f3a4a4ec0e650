"""Benchmark: offline commitlog and consume queue scans (issue 2), stats and dump --json.

Writes a synthetic store of ~200-byte records (default 1 GiB of commitlog), then reports, in
the same run and on the same (page-cached) data:
  * baseline: raw read bandwidth over the mmap (numpy sum of every byte), and the construct
    schema parse rate (on a sample, since it is ~100x slower);
  * header-only commitlog scan (`HeaderScan`: vectorised walk, header tables chunk by chunk,
    as `store stats` and `scan_file` run it): records/s, MB/s; beside it the scan as it was (the Python hop loop `walk_loop`, then one
    header_table call per file);
  * `store stats`' commitlog part (`commitlog_stats`, on one thread per core): records/s and its
    ratio to the (one-thread) scan; the same ratio with one thread, and on the first file alone
    (whose chunks, not whole files, go to the threads);
  * `store dump --json` rows: the fast writer (`store/dumpjson.py`) against the reference path
    (a row dict per record + the CLI's json.dumps), in process, --body none and --body text,
    on the first --dump-records records; and the CLI end to end (`python -m mqtool store dump
    FILE --json`, stdout to /dev/null, start-up included);
  * `store dump --json --body none` of every record against the bare Python walk of the record
    length chain (`walk_loop`: one TOTALSIZE hop per record, the baseline), in back-to-back pairs
    of alternating order: in process with the store kernel's writer, without it (the Python
    writer, as before issue 44), and the CLI (start-up included); the CLI also in CPU time
    (user + system, its own against the walk's), which a busy machine moves less than wall time;
  * full decode with properties: records/s, MB/s;
  * consume queue scan (numpy over 20-byte units): GB/s;
each also as a ratio to its baseline, and the anonymous memory (RssAnon) before/after, which
must stay flat as files grow because everything is mmap'ed and streamed. With --repeat N every
timed figure is the median of N runs (the machine is shared: single runs vary a lot).

    python benchmarks/store_scan.py [--size-mib 1024] [--quick] [--dir DIR] [--repeat N] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mqtool_store.commitlog import MessageRecordSchema, encode_blank, encode_record, new_record  # noqa: E402
from mqtool_store.consumequeue import CqUnitSchema, read_units, valid_prefix  # noqa: E402
from mqtool_store import dumpjson  # noqa: E402
from mqtool_store.dump import Filters, dump_commitlog  # noqa: E402
from mqtool_store.dumpjson import commitlog_json  # noqa: E402
from mqtool_store.logscan import HeaderScan, RecordIterator, header_table, walk_loop  # noqa: E402
from mqtool_store.mappedfiles import ReadOnlyMap, list_mapped_files, offset_to_file_name  # noqa: E402
from mqtool_store.reader import CommitLogReader  # noqa: E402
from mqtool_store.stats import SCAN_WORKERS, available_cores, commitlog_stats  # noqa: E402
from mqtool.cli.output import json_line, render_body  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

FILE_SIZE = 256 * 1024 * 1024


def rss_anon_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return -1


def make_block(n: int, start_offset: int) -> tuple[bytes, list[tuple[int, int]]]:
    """n records of ~200 bytes with realistic properties; (offset, size) of each."""
    parts, units, off = [], [], start_offset
    for i in range(n):
        body = (b"payload-%06d " % i) * 6
        rec = new_record(f"BenchTopic{i % 4}", body[:16 + i % 20],
                         {"KEYS": f"k-{i}", "TAGS": "TagA" if i % 2 else "TagB",
                          "UNIQ_KEY": f"{i:032X}", "CLUSTER": "DefaultCluster"},
                         queue_id=i % 8, queue_offset=i // 8, physical_offset=off,
                         born_timestamp=1700000000000 + i, store_timestamp=1700000000100 + i)
        raw = encode_record(rec)
        parts.append(raw)
        units.append((off, len(raw)))
        off += len(raw)
    return b"".join(parts), units


def write_store(root: Path, total: int) -> tuple[int, int, Path]:
    """Commitlog files of FILE_SIZE (or smaller in quick mode), and one consume queue file."""
    cl = root / "commitlog"
    cl.mkdir(parents=True)
    file_size = min(FILE_SIZE, total)
    block, units = make_block(5000, 0)
    block = bytearray(block)
    rec_pos = np.array([off for off, _ in units], dtype=np.int64)
    phys = np.ndarray(shape=(len(block) - 7,), dtype=">i8", buffer=block, strides=(1,))
    records = 0
    for start in range(0, total, file_size):
        with open(cl / offset_to_file_name(start), "wb") as f:
            written = 0
            while written + len(block) + 8 <= file_size:
                phys[rec_pos + 28] = start + written + rec_pos   # PHYSICALOFFSET as a broker writes it
                f.write(block)
                written += len(block)
                records += len(units)
            f.write(encode_blank(file_size - written))
            f.truncate(file_size)
    units = np.zeros(records, dtype=[("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
    units["offset"] = np.arange(records) * 200
    units["size"] = 200
    units["tags_code"] = 2598919
    cq = root / "consumequeue" / "BenchTopic0" / "0" / offset_to_file_name(0)
    cq.parent.mkdir(parents=True)
    units.tofile(cq)
    return records, file_size, cq


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def median_timed(fn, repeat: int):
    """(result of the last run, median seconds, every run's seconds), after one untimed run."""
    if repeat > 1:
        fn()
    times = []
    for _ in range(repeat):
        out, t = timed(fn)
        times.append(t)
    return out, statistics.median(times), times


def dump_reference(directory: Path, limit: int, body: str, **filters) -> int:
    """The reference `store dump --json`: a row dict per record, the CLI's rendering and encoder."""
    n = 0
    with CommitLogReader(directory) as reader, open(os.devnull, "w", encoding="utf-8") as out:
        for row in dump_commitlog(reader, Filters(limit=limit, **filters)):
            if row["kind"] == "message":
                text, cut = render_body(row.pop("body_bytes"), body, None)
                row["body"], row["body_truncated"], row["body_encoding"] = text, cut, body
                n += 1
            out.write(json_line(row))
    return n


def dump_fast(directory: Path, limit: int, body: str, count: bool = False, **filters) -> int:
    """The fast writer, as the CLI drives it (chunks of lines straight to a binary output: the store
    kernel's as bytes, the rest encoded); with `count`, the number of lines written (an untimed
    check: counting costs ~8% of the run)."""
    n = 0
    with CommitLogReader(directory) as reader, open(os.devnull, "wb") as out:
        for item in commitlog_json(reader, Filters(limit=limit, **filters), body, None, None, as_bytes=True):
            if isinstance(item, str):
                item = item.encode()
            if isinstance(item, bytes):
                if count:
                    n += item.count(b"\n")
                out.write(item)
    return n


def dump_cli(path: Path, limit: int, body: str) -> float:
    """Seconds for `mqtool store dump PATH --json --body BODY --limit N > /dev/null`."""
    t0 = time.perf_counter()
    with open(os.devnull, "w") as null:
        subprocess.run([sys.executable, "-m", "mqtool", "store", "dump", str(path), "--json", "--body", body,
                        "--limit", str(limit)], stdout=null, check=True, cwd=REPO)
    return time.perf_counter() - t0


def cli_cpu(path: Path, limit: int, body: str) -> float:
    """CPU seconds (user + system) of dump_cli's command: on a shared machine, steadier than its wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    dump_cli(path, limit, body)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--quick", action="store_true", help="64 MiB, for a smoke run")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the data (default: a temp dir)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="runs per timed figure (the median is reported)")
    ap.add_argument("--dump-records", type=int, default=500_000,
                    help="records per dump --json run (the reference path runs a tenth of them)")
    args = ap.parse_args()
    total = (64 if args.quick else args.size_mib) * 1024 * 1024
    if args.quick:
        args.dump_records = min(args.dump_records, 20_000)
    root = Path(tempfile.mkdtemp(prefix="mqtool-bench-", dir=args.dir))
    try:
        rss0 = rss_anon_kib()
        records, file_size, cq_path = write_store(root, total)
        files = sorted((root / "commitlog").iterdir())
        data_bytes = sum(p.stat().st_size for p in files)

        def raw_read():
            s = 0
            for p in files:
                with ReadOnlyMap(p) as m:
                    s += int(np.frombuffer(m.buf, np.uint8).sum(dtype=np.uint64))
            return s
        raw_read()  # warm the page cache so every pass reads the same memory
        _, t_raw = timed(raw_read)

        def header_scan(paths=files):
            """The header-only walk the tools run (`HeaderScan`: vectorised walk, header tables
            chunk by chunk; `scan_file` concatenates the same tables), on one thread."""
            n = 0
            for p in paths:
                with ReadOnlyMap(p, populate=True) as m:
                    for table in HeaderScan(m.buf):
                        n += len(table["position"])
                    del table
            return n

        def header_scan_before():
            """The scan as it was: the Python hop loop, then one header_table call per file."""
            n = 0
            for p in files:
                with ReadOnlyMap(p, populate=True) as m:
                    positions, _ = walk_loop(m.buf)
                    table, valid = header_table(m.buf, positions)
                    n += valid
                    del table
            return n
        n_hdr, t_hdr, runs_hdr = median_timed(header_scan, args.repeat)
        rss_after_scan = rss_anon_kib()
        n_loop, t_loop, runs_loop = median_timed(header_scan_before, args.repeat)

        def stats(workers=None, paths=files):
            reader = CommitLogReader(root / "commitlog", [f for f in list_mapped_files(root / "commitlog")
                                                          if f.path in paths], populate=True)
            with reader:
                return sum(q["messages"] for q in commitlog_stats(reader, workers=workers)["queues"])
        n_stats, t_stats, runs_stats = median_timed(stats, args.repeat)

        def paired(fn, walk=header_scan) -> list[float]:
            """walk time / fn time from back-to-back pairs in alternating order: on a shared machine
            whose speed drifts between two series (±30% from one second to the next here), pairs
            see the same conditions."""
            ratios = []
            for i in range(max(2 * args.repeat + 1, 3)):
                if i % 2:
                    t_s, t_w = timed(fn)[1], timed(walk)[1]
                else:
                    t_w, t_s = timed(walk)[1], timed(fn)[1]
                ratios.append(t_w / t_s)
            return ratios
        paired_threads = paired(stats)
        paired_one = paired(lambda: stats(1))
        # a store of one file: its chunks (not whole files) on the threads
        paired_one_file = paired(lambda: stats(None, files[:1]), lambda: header_scan(files[:1]))

        cl_dir = root / "commitlog"
        dump_n = min(args.dump_records, records)
        dump = {}
        for body in ("none", "text"):
            n_ref, t_ref, _ = median_timed(lambda: dump_reference(cl_dir, dump_n // 10, body), args.repeat)
            n_fast = dump_fast(cl_dir, dump_n, body, count=True)
            _, t_fast, runs_fast = median_timed(lambda: dump_fast(cl_dir, dump_n, body), args.repeat)
            t_cli = statistics.median(dump_cli(cl_dir, dump_n, body) for _ in range(args.repeat))
            t_start = statistics.median(dump_cli(cl_dir, 1, body) for _ in range(args.repeat))
            assert n_ref == dump_n // 10 and n_fast == dump_n, (n_ref, n_fast)
            dump[f"body_{body}"] = {
                "reference_records_per_s": round(n_ref / t_ref), "fast_records_per_s": round(n_fast / t_fast),
                "fast_runs_s": [round(t, 3) for t in runs_fast],
                "vs_reference": round((n_fast / t_fast) / (n_ref / t_ref), 1),
                "cli_records_per_s": round(dump_n / t_cli), "cli_seconds": round(t_cli, 2),
                "cli_start_seconds": round(t_start, 2),   # the same command with --limit 1
                "cli_records_per_s_after_start": round(dump_n / max(t_cli - t_start, 1e-9)),
                "records": dump_n, "reference_records": n_ref}

        # Filtered dumps: lines written per second, the fast writer's row masks against the reference
        # path, which decodes every record to test it. (name, filters, lines, what they select)
        for name, filters, want, note in (
                ("topic_filter_body_none", {"topic": "BenchTopic0"}, dump_n // 4, "one topic of four"),
                ("tag_filter_body_none", {"tag": "TagA"}, dump_n // 4, "one tag of two"),
                ("key_filter_body_none", {"key": "k-1234"}, min(100, records // 5000), "one record in 5,000")):
            n_tref, t_tref, _ = median_timed(lambda: dump_reference(cl_dir, want // 10, "none", **filters), args.repeat)
            n_tfast = dump_fast(cl_dir, want, "none", count=True, **filters)
            _, t_tfast, runs_tfast = median_timed(lambda: dump_fast(cl_dir, want, "none", **filters), args.repeat)
            assert n_tref == want // 10 and n_tfast == want, (name, n_tref, n_tfast)
            dump[name] = {
                "reference_lines_per_s": round(n_tref / t_tref), "fast_lines_per_s": round(n_tfast / t_tfast),
                "fast_runs_s": [round(t, 3) for t in runs_tfast],
                "vs_reference": round((n_tfast / t_tfast) / (n_tref / t_tref), 1), "lines": want, "of_records": note}

        # Every record's --body none line against the bare Python walk, in alternating pairs (issue 44.13).
        def bare_walk():
            n = 0
            for p in files:
                with ReadOnlyMap(p, populate=True) as m:
                    n += len(walk_loop(m.buf)[0])
            return n

        def python_writer():
            compiled, dumpjson.kernel = dumpjson.kernel, None
            try:
                return dump_fast(cl_dir, None, "none")
            finally:
                dumpjson.kernel = compiled
        # (the walk also hops each file's closing blank record)
        assert bare_walk() - len(files) == records == dump_fast(cl_dir, None, "none", count=True)
        with_kernel = paired(lambda: dump_fast(cl_dir, None, "none"), bare_walk)
        without_kernel = paired(python_writer, bare_walk)
        through_cli = paired(lambda: dump_cli(cl_dir, records, "none"), bare_walk)
        cli_cpu_pairs = []           # the same in CPU time: walk (this process) / CLI (the child)
        for i in range(max(2 * args.repeat + 1, 3)):
            t0 = time.process_time()
            bare_walk()
            walk_cpu = time.process_time() - t0
            cli_cpu_pairs.append(walk_cpu / cli_cpu(cl_dir, records, "none"))
        _, t_walk, runs_walk = median_timed(bare_walk, args.repeat)
        dump["all_records_body_none_vs_walk"] = {
            "records": records, "walk_records_per_s": round(records / t_walk),
            "walk_runs_s": [round(t, 3) for t in runs_walk],
            "kernel_writer_vs_walk": round(statistics.median(with_kernel), 3),
            "kernel_writer_pairs": [round(r, 3) for r in with_kernel],
            "python_writer_vs_walk": round(statistics.median(without_kernel), 3),
            "python_writer_pairs": [round(r, 3) for r in without_kernel],
            "cli_vs_walk": round(statistics.median(through_cli), 3),
            "cli_pairs": [round(r, 3) for r in through_cli],
            "cli_vs_walk_cpu": round(statistics.median(cli_cpu_pairs), 3),
            "cli_cpu_pairs": [round(r, 3) for r in cli_cpu_pairs],
            "kernel": dumpjson.kernel is not None, "target": "kernel_writer_vs_walk and cli_vs_walk >= 0.5"}

        def full_decode():
            n = 0
            for p in files:
                with ReadOnlyMap(p, populate=True) as m:
                    for _pos, rec in RecordIterator(m.buf):
                        n += 1
            return n
        n_full, t_full = timed(full_decode)

        with ReadOnlyMap(files[0]) as m:
            sample = []
            pos = 0
            while len(sample) < 5000:
                size = struct.unpack_from(">i", m.buf, pos)[0]
                sample.append(bytes(m.buf[pos:pos + size]))
                pos += size
        _, t_construct = timed(lambda: [MessageRecordSchema.parse(b) for b in sample])
        construct_rate = len(sample) / t_construct

        with ReadOnlyMap(cq_path) as m:
            cq_bytes = len(m.buf)
            np.frombuffer(m.buf, np.uint8).sum(dtype=np.uint64)

            def cq_scan():
                u = read_units(m.buf)
                n = valid_prefix(u)
                s = int(u["offset"][:n].sum()) + int(u["size"][:n].sum())
                del u
                return s
            _, t_cq = timed(cq_scan)
            unit_sample = [bytes(m.buf[i * 20:i * 20 + 20]) for i in range(20000)]
        _, t_cq_construct = timed(lambda: [CqUnitSchema.parse(b) for b in unit_sample])
        rss_end = rss_anon_kib()

        mb = data_bytes / 1e6
        result = {
            "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                        "python": platform.python_version(), "numpy": np.__version__},
            "data": {"commitlog_bytes": data_bytes, "files": len(files), "file_size": file_size,
                     "records": records, "avg_record_bytes": round(data_bytes / records, 1),
                     "cq_bytes": cq_bytes, "mode": "warm page cache, read-only mmap, one core (stats: one thread per core and file)"},
            "baseline": {"raw_read_MBps": round(mb / t_raw, 1),
                         "construct_records_per_s": round(construct_rate)},
            "header_scan": {"records_per_s": round(n_hdr / t_hdr), "MBps": round(mb / t_hdr, 1),
                            "runs_s": [round(t, 3) for t in runs_hdr],
                            "vs_raw_read": round(t_raw / t_hdr, 3),
                            "vs_construct": round(n_hdr / t_hdr / construct_rate, 1),
                            "vs_before": round(t_loop / t_hdr, 2)},
            "header_scan_before": {"records_per_s": round(n_loop / t_loop),
                                             "runs_s": [round(t, 3) for t in runs_loop]},
            "stats": {"records_per_s": round(n_stats / t_stats), "runs_s": [round(t, 3) for t in runs_stats],
                      "vs_header_scan": round(t_hdr / t_stats, 2),
                      "workers": min(available_cores(), SCAN_WORKERS),
                      "vs_header_scan_paired": round(statistics.median(paired_threads), 2),
                      "paired_ratios": [round(r, 2) for r in paired_threads],
                      "one_thread_vs_header_scan_paired": round(statistics.median(paired_one), 2),
                      "one_thread_paired_ratios": [round(r, 2) for r in paired_one],
                      "one_file_vs_its_header_scan_paired": round(statistics.median(paired_one_file), 2),
                      "one_file_paired_ratios": [round(r, 2) for r in paired_one_file]},
            "dump_json": dump,
            "full_decode": {"records_per_s": round(n_full / t_full), "MBps": round(mb / t_full, 1),
                            "vs_raw_read": round(t_raw / t_full, 3),
                            "vs_construct": round(n_full / t_full / construct_rate, 1)},
            "consume_queue": {"GBps": round(cq_bytes / t_cq / 1e9, 2),
                              "units_per_s": round(cq_bytes / 20 / t_cq),
                              "vs_construct": round((cq_bytes / 20 / t_cq) / (len(unit_sample) / t_cq_construct), 1)},
            "memory": {"rss_anon_start_kib": rss0, "after_header_scan_kib": rss_after_scan,
                       "end_kib": rss_end},
        }
        assert n_hdr == n_loop == n_stats == n_full == records, (n_hdr, n_loop, n_stats, n_full, records)
        if args.json:
            print(json.dumps(result))
        else:
            print(json.dumps(result, indent=2))
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
