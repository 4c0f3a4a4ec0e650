"""Benchmark: `spark export` throughput (issue 6).

Writes a synthetic store (default 2 GiB of ~214-byte records, the same generator as
store_scan.py), then exports it to Parquet with Spark on 1 and 2 cores (local[1], local[2]),
beside a single-process pyarrow export of the same data with the same decoder in the same run.
Reports MB/s, messages/s and the speed-up over the single-process baseline.

    python benchmarks/spark_export.py [--size-mib 2048] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_scan import write_store  # noqa: E402


def baseline_pyarrow(root: Path, out: Path) -> tuple[int, float]:
    """One process, the same decoder and Arrow conversion as the Spark tasks, one Parquet writer."""
    import pyarrow.parquet as pq
    from mqtool.spark.export import arrow_schema, plan_splits, split_batches
    t0 = time.perf_counter()
    n = 0
    with pq.ParquetWriter(out, arrow_schema()) as writer:
        for split in plan_splits(root):
            for batch in split_batches(split, None, None, None, True):
                writer.write_batch(batch)
                n += batch.num_rows
    return n, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=2048)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        from mqtool.spark.export import run_export
        from mqtool.spark.session import spark_session
        import pyarrow  # noqa: F401
    except ImportError as exc:
        print(json.dumps({"skipped": f"spark extra not installed: {exc}"}))
        return 0
    mib = 32 if args.quick else args.size_mib
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-bench-spark-"))
    try:
        records, file_size, _ = write_store(tmp / "store", mib << 20)
        data_mb = (mib << 20) / 1e6
        n_base, t_base = baseline_pyarrow(tmp / "store", tmp / "baseline.parquet")
        runs = {}
        for cores in (1, 2):
            spark, _log = spark_session(f"local[{cores}]", {"spark.sql.shuffle.partitions": str(cores * 2)})
            t0 = time.perf_counter()
            res = run_export(spark, tmp / "store", str(tmp / f"out{cores}"), include_system=True,
                             split_bytes=max(8 << 20, (mib << 20) // (cores * 8)))
            dt = time.perf_counter() - t0
            spark.stop()
            runs[f"local[{cores}]"] = {"messages": res["messages"], "seconds": round(dt, 2),
                                       "MBps": round(data_mb / dt, 1), "msg_per_s": round(res["messages"] / dt),
                                       "vs_single_process": round(t_base / dt, 2)}
        result = {
            "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
            "data": {"commitlog_mib": mib, "records": records, "file_size": file_size,
                     "mode": "local disk, warm page cache, Parquet (snappy) output"},
            "baseline": {"single_process_pyarrow": {"messages": n_base, "seconds": round(t_base, 2),
                                                    "MBps": round(data_mb / t_base, 1)}},
            "spark": runs,
        }
        print(json.dumps(result) if args.json else json.dumps(result, indent=2))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
