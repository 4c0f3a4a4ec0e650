"""Benchmark: what it costs to bring a commit log's fresh pages into the page cache (issue 33).

Every byte a broker appends lands on a page of a new, sparse commit log file, and the first touch of
each page costs far more than the copy into it on some machines (a VM whose host hands memory back
only when the guest first touches it). This measures, per KiB of a fresh file, the CPU time
(`time.process_time`: every thread of this process, kernel time included) of:

- `zeros`: pwrite of zeros over the file (the pre-write without the store kernel);
- `populate`: madvise(MADV_POPULATE_WRITE) over its map (the store kernel's `populate`, the
  broker's pre-write);
- `touch`: a copy into its map page by page (what a broker without a pre-write, such as Apache
  RocketMQ with warmMapedFileEnable=false, pays in its put path);

against the baseline measured in the same run: zeros written again over the same, now cached, pages
(a plain copy into the page cache). Memory the kernel freed moments before (a deleted file's pages)
is cheap to touch again on such a VM, until the guest has handed it back to the host (free page
reporting, within seconds); a broker's appends meet the second kind. So each measurement starts
`--settle` seconds after the one before deleted its file, the runs alternate, and each figure is
reported as measured, not averaged.

    python benchmarks/page_touch.py [--mib 512] [--rounds 2] [--settle 5] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mqtool_store.kernel import kernel  # noqa: E402

CHUNK = 4 << 20
ZEROS = bytes(CHUNK)


def _zeros(fd: int, size: int) -> None:
    pos = 0
    while pos < size:
        pos += os.pwrite(fd, ZEROS, pos)


def _populate(mm: mmap.mmap, size: int) -> None:
    for pos in range(0, size, CHUNK):
        if not kernel.populate(mm, pos, min(size, pos + CHUNK)):
            raise SystemExit("MADV_POPULATE_WRITE is not supported by this kernel")


def _touch(mm: mmap.mmap, size: int) -> None:
    for pos in range(0, size, CHUNK):
        mm[pos:pos + CHUNK] = ZEROS


def one(way: str, root: Path, size: int) -> float:
    """CPU µs per KiB of `way` over a fresh sparse file of `size` bytes (deleted after)."""
    path = root / f"{way}.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size)
        try:
            start = time.process_time()
            if way == "zeros":
                _zeros(fd, size)
            elif way == "populate":
                _populate(mm, size)
            elif way == "touch":
                _touch(mm, size)
            else:               # "cached": the same file written twice, the second time measured
                _zeros(fd, size)
                start = time.process_time()
                _zeros(fd, size)
            return (time.process_time() - start) * 1e6 / (size / 1024)
        finally:
            mm.close()
    finally:
        os.close(fd)
        path.unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--settle", type=float, default=5.0, help="seconds between measurements")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.mib, args.rounds, args.settle = 32, 1, 0.0
    ways = ["cached", "zeros", "touch"] + (["populate"] if kernel is not None else [])
    runs: dict[str, list[float]] = {w: [] for w in ways}
    with tempfile.TemporaryDirectory(prefix="mqtool-bench-pages-") as tmp:
        for _ in range(args.rounds):
            for way in ways:
                time.sleep(args.settle)
                runs[way].append(round(one(way, Path(tmp), args.mib << 20), 3))
    base = min(runs["cached"])
    result = {"machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                          "kernel": platform.release()},
              "mode": {"file_mib": args.mib, "rounds": args.rounds, "settle_s": args.settle, "order": ways},
              "baseline": {"cached_rewrite_cpu_us_per_kib": runs["cached"]},
              "cpu_us_per_kib": {w: runs[w] for w in ways if w != "cached"},
              "ratio_to_cached_rewrite": {w: [round(v / base, 1) for v in runs[w]] for w in ways if w != "cached"}}
    if kernel is None:
        result["populate"] = {"skipped": "the store kernel is not built"}
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
