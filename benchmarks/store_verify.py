"""Benchmark: `store verify` on an engine-written store (commitlog, consume queues, index, checkpoint).

Writes a store with the engine (~200-byte records on 8 queues of 4 topics, a KEYS and a
UNIQ_KEY each, so two index entries per record), then reports, in the same run:
  * baseline: the header-only commitlog walk (`HeaderScan`, what `store stats` runs), records/s;
  * `verify_store`, each run in a fresh process: seconds, records/s, ratio to the walk, and the
    process's peak anonymous memory (RssAnon, sampled every 5 ms) and peak resident memory
    (ru_maxrss, which also counts the mapped store files' pages), with the store's size beside it;
  * with --reference, the same for the record-by-record verify it replaced
    (tests/store/verify_reference.py), whose report must be equal.

    python benchmarks/store_verify.py [--mib 256] [--quick] [--repeat 3] [--reference] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mqtool_store.logscan import HeaderScan  # noqa: E402
from mqtool_store.mappedfiles import ReadOnlyMap, list_mapped_files  # noqa: E402
from mqtool_store.messagestore import Message, MessageStore  # noqa: E402
from mqtool_store.storeconfig import MessageStoreConfig  # noqa: E402

# Runs in a child process: the report's shape and the child's own peak memory, as JSON.
# Peak RssAnon is sampled every 5 ms: ru_maxrss would also count the mapped store files' pages.
CHILD = """
import json, resource, sys, threading, time
sys.path.insert(0, {repo!r})
if {reference!r}:
    from tests.store.verify_reference import verify_store
else:
    from mqtool_store.verify import verify_store
peak, done = [0], threading.Event()
def sample():
    while not done.wait(0.005):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    peak[0] = max(peak[0], int(line.split()[1]))
threading.Thread(target=sample, daemon=True).start()
t0 = time.perf_counter()
report = verify_store({root!r})
dt = time.perf_counter() - t0
done.set()
d = report.to_dict()
print(json.dumps({{"seconds": dt, "peak_rss_anon_kib": peak[0],
                  "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "records": d["records"], "queue_units": d["queue_units"], "index_entries": d["index_entries"],
                  "ok": d["ok"], "report": d}}))
"""


def write_store(root: Path, mib: int) -> int:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 << 20)
    n = (mib << 20) // 200 // 512 * 512
    with MessageStore(cfg) as s:
        s.put(Message("VerifyTopic0", 0, b"first", {"TAGS": "A"}))
        for lo in range(0, n, 512):
            topic, queue = f"VerifyTopic{lo // 512 % 4}", lo // 2048 % 8
            s.put_batch([Message(topic, queue, b"v" * 64, {"KEYS": f"k{i}", "TAGS": "TagA", "UNIQ_KEY": f"{i:032X}"},
                                 f"KEYS\x01k{i}\x02TAGS\x01TagA\x02UNIQ_KEY\x01{i:032X}\x02")
                         for i in range(lo, lo + 512)])
    return n + 1


def walk(root: Path) -> int:
    count = 0
    for f in list_mapped_files(root / "commitlog"):
        with ReadOnlyMap(f.path) as m:
            for table in HeaderScan(m.buf):
                count += len(table["position"])
    return count


def verify_child(root: Path, reference: bool) -> dict:
    code = CHILD.format(repo=str(REPO), reference=reference, root=str(root))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="commit log data to write")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None, help="runs per figure (median); 3, 1 with --quick")
    ap.add_argument("--reference", action="store_true", help="also time the record-by-record verify")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    mib = 8 if args.quick else args.mib
    repeat = args.repeat or (1 if args.quick else 3)
    base = Path(tempfile.mkdtemp(prefix="mqtool-verify-", dir=args.dir))
    try:
        root = base / "store"
        written = write_store(root, mib)
        store_bytes = sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())
        walk_s = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            walked = walk(root)
            walk_s.append(time.perf_counter() - t0)
        assert walked == written
        walk_rate = walked / statistics.median(walk_s)
        kinds = {"verify": False, **({"reference": True} if args.reference else {})}
        results = {}
        for name, reference in kinds.items():
            runs = [verify_child(root, reference) for _ in range(repeat)]
            assert all(r["ok"] and r["records"] == written for r in runs), runs[0]["report"]["problems"][:3]
            secs = statistics.median(r["seconds"] for r in runs)
            results[name] = {"seconds": round(secs, 2), "records_per_s": round(written / secs),
                             "vs_header_walk": round(written / secs / walk_rate, 3),
                             "peak_rss_anon_mib": round(max(r["peak_rss_anon_kib"] for r in runs) / 1024, 1),
                             "peak_rss_mib": round(max(r["peak_rss_kib"] for r in runs) / 1024, 1),
                             "runs_s": [round(r["seconds"], 2) for r in runs],
                             "queue_units": runs[0]["queue_units"], "index_entries": runs[0]["index_entries"]}
            results[name]["_report"] = runs[0]["report"]
        if args.reference:
            assert results["verify"]["_report"] == results["reference"]["_report"], "the two verifies disagree"
        for r in results.values():
            del r["_report"]
        out = {
            "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
            "data": {"records": written, "commitlog_mib": mib, "store_bytes_on_disk": store_bytes, "repeat": repeat,
                     "figures": "medians of the runs; peak RSS the largest"},
            "baseline": {"header_walk_records_per_s": round(walk_rate)},
            **results,
        }
        print(json.dumps(out) if args.json else json.dumps(out, indent=2))
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
