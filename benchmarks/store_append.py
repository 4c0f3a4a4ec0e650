"""Benchmark: the storage engine (issue 3).

Reports, in one run on the same disk:
  * baseline: raw sequential write bandwidth (os.write of 1 MiB blocks into a pre-sized file,
    then fsync), MB/s;
  * ASYNC_FLUSH append throughput for 128 B, 1 KiB and 16 KiB bodies (msg/s, MB/s, ratio to raw,
    µs per put, and CPU µs per put of the whole process, every thread, user and system, which
    other work on a shared machine disturbs less than the clock); the clock stops once every
    record is dispatched to its consume queue and the index, and the messages are built before
    it starts, properties dict and text, as the broker builds them (the store does not; until
    2026-11-25 the text was left out and formatted inside the clock, ~0.5 µs per put);
  * ASYNC_FLUSH batches of 16, 128 and 512 messages of 1 KiB (put_batch, as a SEND_BATCH_MESSAGE
    is stored: runs of one topic and queue, store/recordrun.py, through the store kernel when it
    is built, "kernel" in the output; without it 16 is below RUN_MIN and takes the
    record-by-record loop), same ratios;
  * SYNC_FLUSH with 1, 16 and 64 writer threads (msg/s; group commit shares fsyncs: rounds), and
    with 64 writers as tasks on one asyncio loop, each waiting on a future the flusher releases
    (how the broker's sends wait: mqtool/broker/flushwait.py);
  * dispatch lag under load (bytes not yet in consume queues/index after the last put);
  * recovery time per GiB of commitlog, normal and abnormal;
  * anonymous memory (RssAnon) before and after, which must stay flat as the store grows.

    python benchmarks/store_append.py [--quick] [--mib 256] [--repeat 3] [--json]

With --repeat N every figure is the median of N runs (each run's figures are kept under "runs").
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mqtool_store.kernel import kernel  # noqa: E402
from mqtool_store.messagestore import Message, MessageStore  # noqa: E402
from mqtool_store.storeconfig import MessageStoreConfig  # noqa: E402


def rss_anon_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return -1


BATCHES = (16, 128, 512)


def raw_write_mbps(d: Path, mib: int) -> float:
    path = d / "raw.bin"
    block = os.urandom(1 << 20)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, mib << 20)
    t0 = time.perf_counter()
    for _ in range(mib):
        os.write(fd, block)
    os.fsync(fd)
    dt = time.perf_counter() - t0
    os.close(fd)
    path.unlink()
    return mib / dt * 1.048576


def cfg(root: Path, **kw) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=256 << 20, **kw)


class Clock:
    """Wall and process CPU time of the timed parts only (building messages is not timed)."""

    def __init__(self):
        self.wall = self.cpu = 0.0

    def run(self, fn, *args):
        t0, c0 = time.perf_counter(), time.process_time()
        fn(*args)
        self.wall += time.perf_counter() - t0
        self.cpu += time.process_time() - c0


def _each(put, items) -> None:
    for item in items:
        put(item)


def append_run(root: Path, size: int, total_bytes: int) -> dict:
    body = os.urandom(size)
    n = max(1000, total_bytes // (size + 150))
    chunk = 5_000
    clock = Clock()
    with MessageStore(cfg(root)) as s:
        for lo in range(0, n, chunk):
            msgs = [Message("Bench", i & 7, body, {"KEYS": f"k{i}", "TAGS": "A"}, f"KEYS\x01k{i}\x02TAGS\x01A\x02")
                    for i in range(lo, min(n, lo + chunk))]
            clock.run(_each, s.put, msgs)
        lag = s.dispatch_behind_bytes
        clock.run(s.drain_dispatch)
        written = s.commitlog_max_offset
        assert s.dispatch_behind_bytes == 0 and s.max_offset("Bench", 7) == n // 8
    dt, cpu = clock.wall, clock.cpu
    return {"size": size, "messages": n, "msg_per_s": round(n / dt), "MBps": round(written / dt / 1e6, 1),
            "us_per_put": round(dt / n * 1e6, 2), "cpu_us_per_put": round(cpu / n * 1e6, 2), "dispatch_lag_bytes_at_last_put": lag}


def batch_run(root: Path, size: int, batch: int, total_bytes: int) -> dict:
    """ASYNC_FLUSH appends of batches (put_batch: what a SEND_BATCH_MESSAGE stores), each of one
    topic and queue, the messages built as the broker builds them (properties text and dict)."""
    body = os.urandom(size)
    n = max(batch * 8, total_bytes // (size + 150)) // (batch * 8) * (batch * 8)
    clock = Clock()
    with MessageStore(cfg(root)) as s:
        s.put(Message("Bench", 0, body, {"TAGS": "A"}))          # the topic's first put (not a run)
        for lo in range(0, n, 64 * batch):
            batches = [[Message("Bench", i // batch & 7, body, {"KEYS": f"k{i}", "TAGS": "A"}, f"KEYS\x01k{i}\x02TAGS\x01A\x02")
                        for i in range(b, b + batch)] for b in range(lo, min(n, lo + 64 * batch), batch)]
            clock.run(_each, s.put_batch, batches)
        clock.run(s.drain_dispatch)
        written = s.commitlog_max_offset
        assert s.dispatch_behind_bytes == 0 and sum(s.max_offset("Bench", q) for q in range(8)) == n + 1
    dt, cpu = clock.wall, clock.cpu
    return {"size": size, "batch": batch, "messages": n, "msg_per_s": round(n / dt), "MBps": round(written / dt / 1e6, 1),
            "us_per_message": round(dt / n * 1e6, 2), "cpu_us_per_message": round(cpu / n * 1e6, 2)}


def sync_run(root: Path, threads: int, seconds: float) -> dict:
    body = os.urandom(128)
    stop = time.perf_counter() + seconds
    counts = [0] * threads
    with MessageStore(cfg(root, flushDiskType="SYNC_FLUSH")) as s:
        def worker(k):
            while time.perf_counter() < stop:
                s.put(Message("Sync", k & 7, body, {"KEYS": "k"}))
                counts[k] += 1
        ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        dt = time.perf_counter() - t0
        rounds = s.flusher.rounds
    return {"threads": threads, "msg_per_s": round(sum(counts) / dt), "fsync_rounds": rounds,
            "puts_per_fsync": round(sum(counts) / max(rounds, 1), 1)}


def sync_run_loop(root: Path, writers: int, seconds: float) -> dict:
    """SYNC_FLUSH with `writers` asyncio tasks: put without blocking, then await the group commit."""
    import asyncio

    from mqtool.broker.flushwait import FlushWaiters
    body = os.urandom(128)
    counts = [0] * writers

    async def run(s):
        waiters = FlushWaiters(asyncio.get_running_loop(), s.flusher)
        stop = time.perf_counter() + seconds

        async def writer(k):
            while time.perf_counter() < stop:
                r = s.put(Message("Sync", k & 7, body, {"KEYS": "k"}), wait_flush=False)
                if not await waiters.wait(r.end, 5.0):
                    raise RuntimeError("a SYNC_FLUSH put was not flushed within 5 s")
                counts[k] += 1
        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(writer(k) for k in range(writers)))
        return time.perf_counter() - t0, time.process_time() - c0
    with MessageStore(cfg(root, flushDiskType="SYNC_FLUSH")) as s:
        dt, cpu = asyncio.run(run(s))
        rounds = s.flusher.rounds
    n = sum(counts)
    return {"writers": writers, "msg_per_s": round(n / dt), "fsync_rounds": rounds,
            "puts_per_fsync": round(n / max(rounds, 1), 1), "cpu_us_per_put": round(cpu / max(n, 1) * 1e6, 1)}


def recovery_run(root: Path) -> dict:
    size = sum(p.stat().st_size for p in (root / "commitlog").iterdir())
    used = MessageStore(cfg(root)).start()
    used_bytes = used.commitlog_max_offset
    used.shutdown()
    t0 = time.perf_counter()
    MessageStore(cfg(root)).start().shutdown()
    normal = time.perf_counter() - t0
    (root / "abort").touch()
    (root / "checkpoint").write_bytes(bytes(4096))     # worst case: scan from the first file
    t0 = time.perf_counter()
    MessageStore(cfg(root)).start().shutdown()
    abnormal = time.perf_counter() - t0
    gib = used_bytes / 2**30
    return {"commitlog_bytes": used_bytes, "file_bytes": size, "normal_s_per_GiB": round(normal / gib, 2),
            "abnormal_s_per_GiB": round(abnormal / gib, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mib", type=int, default=256, help="data per append run")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=None, help="runs per figure (median reported); 3, 1 with --quick")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    mib = 16 if args.quick else args.mib
    secs = 1.0 if args.quick else 5.0
    base = Path(tempfile.mkdtemp(prefix="mqtool-append-", dir=args.dir))
    try:
        rss0 = rss_anon_kib()
        runs = []
        for k in range(repeat):
            run = {"raw": raw_write_mbps(base, mib), "append": {}, "sync": {}}
            for size in (128, 1024, 16384):
                last = k == repeat - 1 and size == 1024        # kept for the recovery figures
                r = append_run(base / f"a{size}", size, mib << 20)
                r["vs_raw_write"] = round(r["MBps"] / run["raw"], 3)
                run["append"][size] = r
                if not last:
                    shutil.rmtree(base / f"a{size}", ignore_errors=True)
            run["batch"] = {}
            for batch in BATCHES:
                r = batch_run(base / f"b{batch}", 1024, batch, mib << 20)
                r["vs_raw_write"] = round(r["MBps"] / run["raw"], 3)
                run["batch"][batch] = r
                shutil.rmtree(base / f"b{batch}", ignore_errors=True)
            for t in (1, 16, 64):
                run["sync"][t] = sync_run(base / f"s{t}", t, secs)
                shutil.rmtree(base / f"s{t}", ignore_errors=True)
            run["sync_loop"] = sync_run_loop(base / "sl", 64, secs)
            shutil.rmtree(base / "sl", ignore_errors=True)
            runs.append(run)
        raw = median(r["raw"] for r in runs)
        appends = [{key: median(r["append"][size][key] for r in runs) for key in runs[0]["append"][size]}
                   for size in (128, 1024, 16384)]
        batches = [{key: median(r["batch"][b][key] for r in runs) for key in runs[0]["batch"][b]} for b in BATCHES]
        syncs = [{key: median(r["sync"][t][key] for r in runs) for key in runs[0]["sync"][t]} for t in (1, 16, 64)]
        sync_loop = {key: median(r["sync_loop"][key] for r in runs) for key in runs[0]["sync_loop"]}
        recovery = recovery_run(base / "a1024")
        result = {
            "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                        "kernel": kernel is not None},
            "data": {"mib_per_append_run": mib, "sync_seconds": secs, "mode": "ASYNC_FLUSH unless noted",
                     "disk": str(base), "repeat": repeat, "figures": "medians of the runs"},
            "baseline": {"raw_sequential_write_MBps": round(raw, 1)},
            "append_async": appends, "append_async_batches": batches, "sync_flush": syncs, "sync_flush_loop_writers": sync_loop, "recovery": recovery,
            "memory": {"rss_anon_start_kib": rss0, "rss_anon_end_kib": rss_anon_kib()},
            "runs": runs,
        }
        print(json.dumps(result) if args.json else json.dumps(result, indent=2))
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
