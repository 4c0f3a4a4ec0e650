"""Offline statistics of a store root: what is on disk, per topic and queue, per file."""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .checkpoint import Checkpoint, decode_checkpoint, implausible_fields
from .codes import CQ_UNIT_SIZE
from .configfiles import apply_journal, journal_entries, load_config
from .consumequeue import list_queues, queue_files, read_units, valid_prefix
from .layout import StorePaths
from .mappedfiles import ReadOnlyMap
from .query import index_files
from .reader import CommitLogReader
from .errors import StoreError
from .indexfile import IndexFile
from .kernel import kernel
from .logscan import HeaderScan
from .topicids import TopicIds


def commitlog_stats(reader: CommitLogReader, progress=None, workers: int | None = None) -> dict:
    """Per file and per (topic, queue) totals of the valid records, from header scans.

    The scan runs on `workers` threads (default: one per available core, at most SCAN_WORKERS):
    numpy releases the GIL in the gathers, comparisons and searches that make up most of it.
    With at least as many files as threads each thread scans whole files; with fewer, files are
    scanned one after the other and each file's chunks are spread over the threads. Totals are
    merged in file and chunk order, so the answer is the same either way.
    """
    files = reader.files
    workers = min(workers or available_cores(), SCAN_WORKERS)
    local = threading.local()
    topic_cache: dict[bytes, str] = {}

    def chunk_totals(buf, table) -> dict[tuple[str, int], dict]:
        if kernel is not None:
            return kernel_totals(buf, table, topic_cache)
        ids = getattr(local, "ids", None)
        if ids is None:
            ids = local.ids = TopicIds(topic_cache)      # one per thread: it learns as it goes
        tids = ids(buf, table["topic_pos"], table["topic_len"])
        return {(ids.names[tid], qid): agg for (tid, qid), agg in queue_totals(tids, table).items()}

    def file_stats(f, chunk_pool=None) -> tuple[dict, dict]:
        buf = reader.buffer(f)
        scan = HeaderScan(buf, ranges=reader.data_ranges(f))
        groups: dict[tuple[str, int], dict] = {}
        n = 0
        def counted(table):
            return len(table["position"]), chunk_totals(buf, table)
        for count, totals in scan.map(counted, chunk_pool):
            n += count
            _merge_into(groups, totals)
        end = scan.end
        return {"file": f.path.name, "start": f.start, "size": f.size, "records": n,
                "write_position": end.position, "end": end.reason, "detail": end.detail,
                "invalid_bytes": end.invalid_bytes}, groups

    entries = []
    groups: dict[tuple[str, int], dict] = {}
    pool = ThreadPoolExecutor(workers) if workers > 1 else None
    try:
        if pool is None or len(files) < workers:
            per_file = (file_stats(f, pool) for f in files)
        else:
            per_file = pool.map(file_stats, files)
        for f, (entry, file_groups) in zip(files, per_file):
            entries.append(entry)
            _merge_into(groups, file_groups)
            if progress:
                progress(f.size)
    finally:
        if pool is not None:     # a Ctrl-C or an error: what has not started never does
            pool.shutdown(cancel_futures=True)
    queues = [{"topic": t, "queue_id": q, **v} for (t, q), v in sorted(groups.items())]
    return {"files": entries, "queues": queues}


SCAN_WORKERS = 8   # threads scanning at once, at most


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:      # not Linux
        return os.cpu_count() or 1


def _merge_into(groups: dict, more: dict) -> None:
    for key, agg in more.items():
        g = groups.get(key)
        groups[key] = agg if g is None else _merge(g, agg)


def _merge(g: dict, agg: dict) -> dict:
    return {"messages": g["messages"] + agg["messages"], "bytes": g["bytes"] + agg["bytes"],
            "min_queue_offset": min(g["min_queue_offset"], agg["min_queue_offset"]),
            "max_queue_offset": max(g["max_queue_offset"], agg["max_queue_offset"]),
            "first_store_time": min(g["first_store_time"], agg["first_store_time"]),
            "last_store_time": max(g["last_store_time"], agg["last_store_time"])}


def queue_totals(tids: np.ndarray, table: dict) -> dict[tuple[int, int], dict]:
    """Per (topic id, queue id): messages, bytes, queue offset and store time ranges."""
    qid = table["queue_id"].astype(np.int64)
    qmin = int(qid.min())
    span = int(qid.max()) - qmin + 1
    if (int(tids.max()) + 1) * span <= 1 << 20:   # a dense code: no sort needed
        code = tids * span
        code += qid
        if qmin:
            code -= qmin
        n_codes = (int(tids.max()) + 1) * span
        uniq = None
    else:
        uniq, code = np.unique((tids << 32) | (qid & 0xFFFFFFFF), return_inverse=True)
        n_codes = len(uniq)
    messages = np.bincount(code, minlength=n_codes)
    nbytes = np.bincount(code, weights=table["total_size"], minlength=n_codes)
    qoff = table["queue_offset"].astype(np.int64)
    store_time = table["store_timestamp"].astype(np.int64)
    ranges = {"min_queue_offset": _reduce(np.minimum, code, qoff, n_codes),
              "max_queue_offset": _reduce(np.maximum, code, qoff, n_codes),
              "first_store_time": _reduce(np.minimum, code, store_time, n_codes),
              "last_store_time": _reduce(np.maximum, code, store_time, n_codes)}
    out = {}
    for c in np.flatnonzero(messages).tolist():
        if uniq is None:
            key = (c // span, c % span + qmin)
        else:
            k = int(uniq[c])
            q = k & 0xFFFFFFFF
            key = (k >> 32, q - (1 << 32) if q & 0x80000000 else q)
        out[key] = {"messages": int(messages[c]), "bytes": int(nbytes[c]),
                    **{name: int(v[c]) for name, v in ranges.items()}}
    return out


def kernel_totals(buf, table, names: dict[bytes, str]) -> dict[tuple[str, int], dict]:
    """queue_totals' answer through the store kernel: one C pass, topics told apart by their bytes
    (decoded once each, through `names`, as the pure-Python path decodes them)."""
    col = lambda name: np.ascontiguousarray(table[name], np.int64)     # noqa: E731
    out: dict[tuple[str, int], dict] = {}
    for raw, qid, messages, nbytes, qmin, qmax, first, last in kernel.queue_totals(
            buf, col("position"), col("sys_flag"), col("topic_pos"), col("topic_len")):
        topic = names.get(raw)
        if topic is None:
            topic = names[raw] = raw.decode("utf-8", "replace")
        agg = {"messages": messages, "bytes": nbytes, "min_queue_offset": qmin, "max_queue_offset": qmax,
               "first_store_time": first, "last_store_time": last}
        g = out.get((topic, qid))                 # two byte strings may decode to one name
        out[(topic, qid)] = agg if g is None else _merge(g, agg)
    return out


def _reduce(op, inv: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    start = np.iinfo(np.int64).max if op is np.minimum else np.iinfo(np.int64).min
    out = np.full(n, start, dtype=np.int64)
    op.at(out, inv, values)
    return out


def consumequeue_stats(root: Path) -> list[dict]:
    d = StorePaths.of(root).consumequeue
    if not d.is_dir():
        return []
    out = []
    for q in list_queues(d):
        files = queue_files(q)
        units_total, min_off, max_off, damaged = 0, None, 0, []
        for i, f in enumerate(files):
            with ReadOnlyMap(f.path) as m:
                units = read_units(m.buf)
                n = valid_prefix(units)
                if units[n:]["size"].any() or units[n:]["offset"].any():
                    damaged.append(f"{f.path} at offset {n * CQ_UNIT_SIZE}: invalid consume queue unit "
                                   "followed by more data")
                if n and min_off is None:
                    first_real = np.flatnonzero(units["size"][:n] != 0x7FFFFFFF)
                    if first_real.size:
                        min_off = f.start // 20 + int(first_real[0])
                units_total += n
                if n:
                    max_off = f.start // 20 + n
        out.append({"topic": q.topic, "queue_id": q.queue_id, "files": len(files), "units": units_total,
                    "min_offset": min_off or 0, "max_offset": max_off, **({"damaged": damaged} if damaged else {})})
    return out


def index_stats(root: Path) -> list[dict]:
    out = []
    for path in index_files(root):
        try:
            with ReadOnlyMap(path) as m:
                h = IndexFile(m.buf, path).header
        except (StoreError, OSError, ValueError) as exc:
            out.append({"file": path.name, "size": path.stat().st_size, "error": str(exc)})
            continue
        out.append({"file": path.name, "size": path.stat().st_size, **vars(h)})
    return out


def config_stats(root: Path) -> dict:
    cfg = StorePaths.of(root).config
    out = {}
    if not cfg.is_dir():
        return out
    for key, name, table in (("topics", "topics.json", "topicConfigTable"),
                             ("subscription_groups", "subscriptionGroup.json", "subscriptionGroupTable")):
        loaded = load_config(cfg / name)
        journal = journal_entries(cfg / name)
        data = apply_journal(loaded.data, table, journal)
        warnings = loaded.warnings + ([f"{len(journal)} changes from {name}.journal applied (the broker did not "
                                       "stop cleanly)"] if journal else [])
        out[key] = {"count": len(data.get(table, {})), "source": loaded.path.name, "warnings": warnings,
                    "unreadable": loaded.unreadable}
    offsets = load_config(cfg / "consumerOffset.json")
    table = offsets.data.get("offsetTable", {})
    out["consumer_offsets"] = {"entries": {k: {int(q): o for q, o in v.items()} for k, v in table.items()},
                               "source": offsets.path.name, "warnings": offsets.warnings,
                               "unreadable": offsets.unreadable}
    delay = load_config(cfg / "delayOffset.json")
    out["delay_offsets"] = {"levels": {int(k): v for k, v in delay.data.get("offsetTable", {}).items()},
                            "source": delay.path.name, "warnings": delay.warnings,
                            "unreadable": delay.unreadable}
    return out


def store_stats(root, progress=None) -> dict:
    paths = StorePaths.of(root)
    result: dict = {"root": str(paths.root), "abort": paths.abort.exists(), "lock": paths.lock.exists()}
    if paths.commitlog.is_dir():
        with CommitLogReader(paths.commitlog, populate=True) as reader:
            result["commitlog"] = commitlog_stats(reader, progress)
    else:
        result["commitlog"] = {"files": [], "queues": []}
    result["consumequeues"] = consumequeue_stats(paths.root)
    result["index"] = index_stats(paths.root)
    result["checkpoint"] = None
    if paths.checkpoint.is_file():
        with ReadOnlyMap(paths.checkpoint) as m:
            result["checkpoint"] = vars(decode_checkpoint(m.buf, paths.checkpoint))
    result["config"] = config_stats(paths.root)
    result["unreadable"] = unreadable_parts(result, paths)
    return result


def unreadable_parts(result: dict, paths: StorePaths) -> list[str]:
    """One line for each part of the store the stats could not read: a commit log file that ends in
    bytes that are no record, consume queue units that are none, a checkpoint no broker wrote, a
    config file that is no config. (Damaged index files are listed in result["index"].)"""
    out = [f"{paths.commitlog / f['file']} at offset {f['write_position']}: {f['detail'] or 'corrupt'}"
           for f in result["commitlog"]["files"] if f["end"] == "corrupt"]
    out += [line for q in result["consumequeues"] for line in q.get("damaged", [])]
    cp = result["checkpoint"]
    if cp is not None:
        out += [f"{paths.checkpoint} at offset {off}: {why}"
                for off, why in implausible_fields(Checkpoint(**cp), int(time.time() * 1000))]
    out += [w for part in result["config"].values() if part.get("unreadable") for w in part["warnings"][:1]]
    return out
