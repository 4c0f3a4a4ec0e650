"""A store's start-up with many non-empty consume queues, beside the per-file work any start does.

    python benchmarks/store_open.py [--queues 4000] [--quick] [--json]

Builds a store (default sizes: 5.7 MiB consume queue files, created sparse) holding one 100 B
message in each of QUEUES queues (QUEUES/8 topics of 8 queues), closes it cleanly, then in fresh
processes, each three times:
- baseline: open and map every consume queue file and read its first unit (what any start does
  per file);
- the store's start (`MessageStore` open and close: recovery plan, consume queue recovery).
Reports the medians and their ratio. A start that read whole files (5.7 MiB each) grew with the
files' size, not with the units they hold.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

BASELINE = r"""
import mmap, os, sys, time
from pathlib import Path
t0 = time.perf_counter()
n = 0
for path in Path(sys.argv[1], "consumequeue").glob("*/*/*"):
    fd = os.open(path, os.O_RDONLY)
    m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    n += m[8:12] != b"\0\0\0\0"
    m.close()
    os.close(fd)
print(time.perf_counter() - t0, n)
"""

START = r"""
import sys, time
from mqtool_store.messagestore import MessageStore
from mqtool_store.storeconfig import MessageStoreConfig
t0 = time.perf_counter()
with MessageStore(MessageStoreConfig(storePathRootDir=sys.argv[1])) as s:
    n = len(s.queues)
print(time.perf_counter() - t0, n)
"""


def build(root: Path, queues: int) -> None:
    from mqtool_store.messagestore import Message, MessageStore
    from mqtool_store.storeconfig import MessageStoreConfig
    with MessageStore(MessageStoreConfig(storePathRootDir=str(root))) as s:
        for i in range(queues):
            s.put(Message(f"Topic{i // 8}", i % 8, b"x" * 100, {"WAIT": "true"}, None))
        s.drain_dispatch()


def timed(code: str, root: Path) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", code, str(root)], cwd=REPO, capture_output=True, text=True,
                         timeout=600, check=True)
    seconds, count = out.stdout.split()
    return float(seconds), int(count)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="200 queues, one round")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.queues, a.rounds = 200, 1
    root = Path(tempfile.mkdtemp(prefix="mqtool-bench-open-"))
    try:
        build(root, a.queues)
        base, start = [], []
        for _ in range(a.rounds):
            seconds, files = timed(BASELINE, root)
            base.append(seconds)
            seconds, queues = timed(START, root)
            start.append(seconds)
        if files != a.queues or queues != a.queues:
            raise SystemExit(f"expected {a.queues} queues, found {files} files and {queues} queues")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base_s, start_s = statistics.median(base), statistics.median(start)
    result = {"queues": a.queues, "rounds": a.rounds, "start_s": round(start_s, 3),
              "start_ms_per_queue": round(1000 * start_s / a.queues, 3), "ratio_to_baseline": round(start_s / base_s, 1),
              "baseline": {"map_every_file_s": round(base_s, 3)}}
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
