"""Benchmark: `spark export` throughput (issues 6 and 11).

Writes a synthetic store (default 2 GiB of ~200-byte records in 256 MiB commitlog files, the
generator of store_scan.py), then exports it to Parquet with Spark on 1 and 2 cores
(local[1], local[2]) beside a single-process export of the same data in the same run. The
baseline uses the same plan, the same fast decoder (`columns.fast_batches`) and the same pyarrow
Parquet writer as a Spark task (`mqtool.spark.export.export_local`), so the ratio measures
Spark's parallelism, not a decoder change. Each timed export runs `--repeat` times; the median is
reported with every run.

For a plan beyond 2 cores it also reports where the time goes: the baseline's seconds per phase
(header walk, properties, bodies and CRC, strings, Arrow, Parquet write), the Spark runs' plan,
task and commit stages, the CPU seconds of the driver, the JVM and the Python workers during the
write stage, and an empty job with as many tasks (Spark's scheduling cost per task).
`--reference` adds the single-process export with the reference decoder (one `decode_record`
per record, the previous baseline), `--jvm` the previous Spark path (reference decoder,
mapInArrow, Spark's Parquet writer) on 2 cores.

    python benchmarks/spark_export.py [--size-mib 2048] [--repeat 3] [--cores 1,2] [--reference] [--jvm] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
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


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def process_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of every process below this one: pid -> (kind, seconds)."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        procs[int(d.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, cmd)
    me = os.getpid()
    out = {me: ("driver", procs[me][1])}
    frontier = [me]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, cpu, cmd) in procs.items():
            if ppid == parent and pid not in out:
                kind = "jvm" if b"java" in cmd.split(b"\0")[0] else "python workers"
                out[pid] = (kind, cpu)
                frontier.append(pid)
    return out


def cpu_delta(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds per kind of process between two process_cpu() snapshots (new processes in full)."""
    out: dict[str, float] = {}
    for pid, (kind, cpu) in after.items():
        out[kind] = out.get(kind, 0.0) + cpu - before.get(pid, (kind, 0.0))[1]
    return {k: round(v, 1) for k, v in sorted(out.items())}


def warm() -> None:
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import mqtool.spark.columns  # noqa: F401
    import mqtool.spark.writer  # noqa: F401


def median_run(fn, repeat: int):
    """(result of the median run, median seconds, every run's seconds)."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fn()
        runs.append((time.perf_counter() - t0, res))
    runs.sort(key=lambda r: r[0])
    dt, res = runs[len(runs) // 2]
    return res, dt, [round(r[0], 2) for r in runs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=1, help="timed runs of each export (median reported)")
    ap.add_argument("--reference", action="store_true", help="also the single-process reference-decoder export")
    ap.add_argument("--jvm", action="store_true", help="also the previous Spark path (JVM writer) on 2 cores")
    ap.add_argument("--cores", default="1,2", help="Spark local[N] runs, comma-separated (default 1,2)")
    ap.add_argument("--quick", action="store_true", help="32 MiB, for a smoke run (< 1 min)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the data (default: a temp dir)")
    args = ap.parse_args()
    try:
        from mqtool.spark.columns import Timer
        from mqtool.spark.export import export_local, run_export
        from mqtool.spark.selection import Selection
        from mqtool.spark.session import spark_session
    except ImportError as exc:
        print(json.dumps({"skipped": f"spark extra not installed: {exc}"}))
        return 0
    mib = 32 if args.quick else args.size_mib
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-bench-spark-", dir=args.dir))
    everything = Selection(include_system=True)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        t0 = time.perf_counter()
        records, file_size, _ = write_store(tmp / "store", mib << 20)
        gen_s = time.perf_counter() - t0
        shutil.rmtree(tmp / "store" / "consumequeue")
        data_mb = sum(f.stat().st_size for f in (tmp / "store" / "commitlog").iterdir()) / 1e6
        split_bytes = (4 << 20) if args.quick else (64 << 20)     # quick: still several splits per core

        def rates(dt):
            return {"seconds": round(dt, 2), "MBps": round(data_mb / dt, 1), "msg_per_s": round(records / dt)}

        warm()
        timers, base_cpu = [], []

        def local(decoder="fast"):
            shutil.rmtree(tmp / "baseline", ignore_errors=True)
            timers.append(Timer())
            cpu0 = sum(os.times()[:2])
            res = export_local(tmp / "store", str(tmp / "baseline"), everything, split_bytes, decoder, timers[-1])
            assert res["messages"] == records, (res["messages"], records)
            base_cpu.append(sum(os.times()[:2]) - cpu0)
            return res
        base_runs = []
        runs_out = {}
        plans = [(int(c), "tasks") for c in args.cores.split(",")] + ([(2, "jvm")] if args.jvm else [])
        for cores, writer in plans:
            t0 = time.perf_counter()
            spark, _log = spark_session(f"local[{cores}]", {"spark.driver.memory": "2g"})
            startup = time.perf_counter() - t0
            sc = spark.sparkContext
            # Workers started, with what a task imports, before timing (as the driver has it imported).
            sc.parallelize(range(cores), cores).foreach(lambda _: warm())

            def export():
                shutil.rmtree(tmp / "out", ignore_errors=True)
                before = process_cpu()
                res = run_export(spark, tmp / "store", str(tmp / "out"), everything, split_bytes=split_bytes,
                                 writer=writer)
                res["cpu_seconds"] = cpu_delta(before, process_cpu())
                assert res["messages"] == records
                return res
            # Rounds of (single process, Spark) back to back: the machine is shared, so each round's
            # ratio compares runs made under the same load; the median round is reported.
            rounds = []
            for _ in range(1 if writer == "jvm" else args.repeat):
                _, t_local, _ = median_run(local, 1)
                base_runs.append(t_local)
                res, dt, _ = median_run(export, 1)
                rounds.append((t_local / dt, dt, t_local, res, load()))
            rounds.sort(key=lambda r: r[0])
            ratio, dt, t_local, res, at_load = rounds[len(rounds) // 2]
            n = res["splits"]
            t0 = time.perf_counter()
            sc.parallelize(range(n), n).mapPartitions(lambda it: iter(())).collect()
            empty = time.perf_counter() - t0
            spark.stop()
            name = f"local[{cores}]" + (" jvm writer" if writer == "jvm" else "")
            runs_out[name] = {**rates(dt), "startup_seconds": round(startup, 2), "splits": n,
                              "per_core_msg_per_s": round(records / dt / cores),
                              "vs_single_process": round(ratio, 2),
                              "rounds": [{"spark_seconds": round(r[1], 2), "single_process_seconds": round(r[2], 2),
                                          "ratio": round(r[0], 2), "load": r[4]} for r in rounds],
                              "stages_seconds": res["timings"], "cpu_seconds": res["cpu_seconds"],
                              "worker_cpu_msg_per_s": round(records / max(res["cpu_seconds"].get("python workers", 0), 1e-9)),
                              "empty_job_same_tasks_seconds": round(empty, 2), "load": at_load}
            shutil.rmtree(tmp / "out", ignore_errors=True)
        t_base = statistics.median(base_runs)
        phases = {k: round(statistics.median(t.seconds.get(k, 0.0) for t in timers), 2) for k in timers[-1].seconds}
        cpu = statistics.median(base_cpu)
        baselines = {"single_process_pyarrow": {**rates(t_base), "runs": [round(t, 2) for t in base_runs],
                                                "phases_seconds": phases, "cpu_seconds": round(cpu, 1),
                                                "cpu_msg_per_s": round(records / cpu)}}
        if args.reference:
            timers = []
            _, dt, _ = median_run(lambda: local("reference"), 1)
            baselines["single_process_reference_decoder"] = {**rates(dt), "phases_seconds": {
                k: round(v, 2) for k, v in timers[-1].seconds.items()}, "load": load()}
        result = {
            "started": started,
            "machine": machine(),
            "data": {"commitlog_mb": round(data_mb, 1), "records": records, "avg_record_bytes": 200,
                     "file_size": file_size, "split_bytes": split_bytes, "generate_seconds": round(gen_s, 2),
                     "mode": "local disk, warm page cache, every record exported, Parquet (snappy) output"},
            "baseline": baselines,
            "spark": runs_out,
        }
        print(json.dumps(result) if args.json else json.dumps(result, indent=2))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
