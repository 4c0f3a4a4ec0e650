"""Benchmark: `spark export` throughput (issue 6).

Writes a synthetic store (default 2 GiB of ~200-byte records in 1 GiB commitlog files, the
generator of store_scan.py), then exports it to Parquet with Spark on 1 and 2 cores
(local[1], local[2]) beside a single-process pyarrow export of the same data with the same
plan, decoder and Arrow batches (`mqtool.spark.export.export_local`), in the same run.
Reports MB/s (commitlog bytes exported) and messages/s, and each Spark run's ratio to the
single-process baseline. Spark's start-up (JVM, session) is timed separately.

    python benchmarks/spark_export.py [--size-mib 2048] [--quick] [--json] [--dir DIR]
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


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(x.split()[1]) // 1024 for x in Path("/proc/meminfo").read_text().splitlines()
                   if x.startswith("MemTotal"))
    except (OSError, StopIteration):
        mem = None
    import pyarrow
    import pyspark
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_mib": mem, "python": platform.python_version(),
            "pyspark": pyspark.__version__, "pyarrow": pyarrow.__version__}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=2048)
    ap.add_argument("--quick", action="store_true", help="32 MiB, for a smoke run (< 1 min)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the data (default: a temp dir)")
    args = ap.parse_args()
    try:
        from mqtool.spark.export import export_local, run_export
        from mqtool.spark.selection import Selection
        from mqtool.spark.session import spark_session
    except ImportError as exc:
        print(json.dumps({"skipped": f"spark extra not installed: {exc}"}))
        return 0
    mib = 32 if args.quick else args.size_mib
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-bench-spark-", dir=args.dir))
    everything = Selection(include_system=True)
    try:
        t0 = time.perf_counter()
        records, file_size, _ = write_store(tmp / "store", mib << 20)
        gen_s = time.perf_counter() - t0
        shutil.rmtree(tmp / "store" / "consumequeue")
        data_mb = sum(f.stat().st_size for f in (tmp / "store" / "commitlog").iterdir()) / 1e6
        t0 = time.perf_counter()
        split_bytes = (4 << 20) if args.quick else (64 << 20)     # quick: still several splits per core
        base = export_local(tmp / "store", str(tmp / "baseline.parquet"), everything, split_bytes)
        t_base = time.perf_counter() - t0
        assert base["messages"] == records, (base["messages"], records)
        runs = {}
        for cores in (1, 2):
            t0 = time.perf_counter()
            spark, _log = spark_session(f"local[{cores}]", {"spark.driver.memory": "2g"})
            startup = time.perf_counter() - t0
            t0 = time.perf_counter()
            res = run_export(spark, tmp / "store", str(tmp / f"out{cores}"), everything, split_bytes=split_bytes)
            dt = time.perf_counter() - t0
            spark.stop()
            assert res["messages"] == records
            runs[f"local[{cores}]"] = {"seconds": round(dt, 2), "startup_seconds": round(startup, 2),
                                       "splits": res["splits"], "MBps": round(data_mb / dt, 1),
                                       "msg_per_s": round(records / dt), "vs_single_process": round(t_base / dt, 2)}
            shutil.rmtree(tmp / f"out{cores}")
        result = {
            "machine": machine(),
            "data": {"commitlog_mb": round(data_mb, 1), "records": records, "avg_record_bytes": 200,
                     "file_size": file_size, "generate_seconds": round(gen_s, 2),
                     "mode": "local disk, warm page cache, every record exported, Parquet (snappy) output"},
            "baseline": {"single_process_pyarrow": {"seconds": round(t_base, 2), "MBps": round(data_mb / t_base, 1),
                                                    "msg_per_s": round(records / t_base)}},
            "spark": runs,
        }
        if args.json:
            print(json.dumps(result))
        else:
            print(json.dumps(result, indent=2))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
