"""The `rocketmq` Spark source and sink against a live local broker, beside same-run baselines.

    python benchmarks/spark_live.py [--messages 2000000] [--stream-seconds 30] [--rate 2000] [--quick] [--json]
        [--lake-only | --small-only | --replay-only | --stream-only]

One broker (ASYNC_FLUSH, embedded name server), `local[2]`:
- lake: the CLI as a user runs it, end to end (process start, Spark start included): the live
  export into Parquet (`mqtool spark export -n NS -t T -o LAKE --checkpoint CK --available-now`)
  against the offline export of the same broker's store (`mqtool spark export STORE -o OUT -t T`),
  seconds and their ratio (offline / live: 1.0 is as fast);
- small job: `mqtool spark export -n NS -t Small -o LAKE --checkpoint CK --available-now` of
  --small-messages messages (a new checkpoint each run), end to end, against a bare
  `SparkSession.builder.master("local[2]").getOrCreate()` + `stop()` in a new process, run by run
  interleaved (--small-runs of them), and against mqtool's own session (`spark_session`: no UI,
  Spark's log to a file) started and stopped the same way: seconds, and the export's seconds over
  each (with --before-tree, that checkout's export too);
- batch read: N messages of 128 B read with spark.read.format("rocketmq") into Spark's noop sink
  (the read alone) and into Parquet (Spark's writer), against the offline `spark export` of the
  same broker's store in the same session (rows/s ratios; each side warmed by one whole run first);
- replay: the export's rows sent back with the sink (`livejobs.replay`) in a new Spark session,
  twice (the first job pays for the Python workers' start; the session's own start is not
  counted), against `mqtool send --batch 64` of as many 128 B messages to the same broker,
  measured right before it (msg/s ratios);
- streaming: a processing-time trigger of 1 s into Parquet while a producer sends at --rate msg/s;
  each row's latency is its batch's commit (the mtime of its `_spark_metadata` entry) minus its
  store timestamp: p50 and p99; and the same through the CLI's `spark export -n ... --interval 1s`
  (the lake path), its first batch (one message, sent to wait for Spark's start) not counted.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokerproc import REPO, broker_process, die_with_parent, tree_env  # noqa: E402


def drain(proc) -> None:
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()


def send_cli(ns: str, topic: str, n: int) -> float:
    out = subprocess.run([sys.executable, "-m", "mqtool", "send", "-n", ns, "-t", topic, "--count", str(n), "--batch",
                          "64", "--size", "128"], cwd=REPO, capture_output=True, text=True, timeout=900, check=True)
    return float(re.search(r"Send TPS: ([\d.]+)", out.stdout).group(1))


async def paced_sends(ns: str, topic: str, rate: int, seconds: float) -> int:
    from mqtool.client.producer import OutMessage, Producer
    p = Producer(ns, "PID_BENCH_STREAM")
    sent, t0 = 0, time.monotonic()
    try:
        while time.monotonic() - t0 < seconds:
            due = int((time.monotonic() - t0) * rate)
            if sent < due:
                burst = min(due - sent, 200)
                await asyncio.gather(*(p.send(OutMessage(topic, b"s" * 128)) for _ in range(burst)))
                sent += burst
            else:
                await asyncio.sleep(0.005)
    finally:
        await p.close()
    return sent


async def send_one(ns: str, topic: str) -> None:
    from mqtool.client.producer import OutMessage, Producer
    p = Producer(ns, "PID_BENCH_STREAM")
    try:
        await p.send(OutMessage(topic, b"s" * 128))
    finally:
        await p.close()


def stream_latency(spark, ns: str, topic: str, rate: int, seconds: float, tmp: Path) -> dict:
    from mqtool.spark import register
    register(spark)
    out, ck = tmp / "stream-out", tmp / "stream-ck"
    df = spark.readStream.format("rocketmq").option("namesrv", ns).option("topics", topic).option(
        "startingOffsets", "latest").load()
    q = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))
         .trigger(processingTime="1 second").start())
    # The first (empty) batch: "latest" is resolved then, so a message sent before it would be
    # skipped (a fixed 3 s wait was too short on a loaded machine). JVM warm-up; not measured.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not q.recentProgress:
        time.sleep(0.2)
    if not q.recentProgress:
        raise SystemExit("the streaming query made no first batch in 120 s")
    # One message first, and its batch not counted: a new session's first rows also pay for the
    # Python workers' start and Spark's first Parquet write (seconds; the p99 of a cold run).
    asyncio.run(send_one(ns, topic))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(p["numInputRows"] for p in q.recentProgress):
        time.sleep(0.2)
    if not any(p["numInputRows"] for p in q.recentProgress):
        raise SystemExit("the streaming query read no row of the first message in 120 s")
    first = max(p["batchId"] for p in q.recentProgress if p["numInputRows"]) + 1
    sent = asyncio.run(paced_sends(ns, topic, rate, seconds))
    deadline = time.monotonic() + 60                  # until the query has committed every message sent
    while time.monotonic() < deadline and sum(p["numInputRows"] for p in q.recentProgress) < sent + 1:
        time.sleep(0.2)
    time.sleep(1.0)                                   # the sink's commit of that batch
    q.stop()
    return {"sent": sent, **_latencies(out, first)[0], "rate": rate, "seconds": seconds}


def _latencies(out: Path, skip_batches: int = 0) -> tuple[dict, int]:
    """p50 / p99 of (commit time - store time) over the lake's rows, and how many rows."""
    import pyarrow.parquet as pq

    from mqtool.spark.sinklog import local_path
    lat, seen = [], set()
    entries = [e for e in (out / "_spark_metadata").iterdir() if e.name.split(".")[0].isdigit()]
    # Batch N's entry is "N", or "N.compact" every 10th batch (all files so far): a file's commit time
    # is the mtime of the first entry that lists it.
    for entry in sorted(entries, key=lambda e: int(e.name.split(".")[0])):
        committed_ms = entry.stat().st_mtime * 1000
        for line in entry.read_text().splitlines()[1:]:
            path = json.loads(line)["path"]
            if path in seen:
                continue
            seen.add(path)
            if int(entry.name.split(".")[0]) < skip_batches:
                continue
            ts = pq.read_table(local_path(path), columns=["store_timestamp"]).column(0).to_pylist()
            lat += [committed_ms - t for t in ts]
    lat.sort()
    pick = lambda p: round(lat[min(len(lat) - 1, int(p * len(lat)))] / 1000, 2) if lat else None  # noqa: E731
    return {"rows": len(lat), "p50_s": pick(0.50), "p99_s": pick(0.99)}, len(lat)


def stream_latency_cli(ns: str, topic: str, rate: int, seconds: float, tmp: Path, tree: dict | None = None,
                       name: str = "stream-cli") -> dict:
    """The same through the CLI: `mqtool spark export -n NS -t T -o LAKE --checkpoint CK --interval 1s`
    (the lake path: the driver commits each micro-batch by id). One message first, to wait for
    Spark's start; its batch is not counted."""
    import signal
    out, ck = tmp / f"{name}-out", tmp / f"{name}-ck"
    proc = subprocess.Popen([sys.executable, "-m", "mqtool", "spark", "export", "-n", ns, "-t", topic, "-o", str(out),
                             "--checkpoint", str(ck), "--interval", "1s", "--master", "local[2]"],
                            cwd=tree["dir"] if tree else REPO, env=tree["env"] if tree else None,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent())
    try:
        asyncio.run(send_one(ns, topic))
        first = 0
        while True:                                   # the first batch: Spark has started
            line = proc.stderr.readline()
            if not line:
                raise SystemExit("the export ended before its first batch")
            if line.startswith("batch "):
                first = int(line.split()[1].rstrip(":")) + 1
                break
        drain(proc)
        sent = asyncio.run(paced_sends(ns, topic, rate, seconds))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            import pyarrow.parquet as pq

            from mqtool.spark.sinklog import SinkLog, local_path
            files = SinkLog(str(out)).all_files()
            if sum(pq.read_metadata(local_path(f["path"])).num_rows for f in files) >= sent + 1:
                break
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)               # stops after the current micro-batch
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return {"sent": sent, **_latencies(out, first)[0], "rate": rate, "seconds": seconds}


def cli_seconds(*args, tree: dict | None = None) -> float:
    """Wall time of one `mqtool spark export ...` run, as a user runs it (`tree`: another checkout's,
    {"dir": checkout, "env": brokerproc.tree_env(...)})."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mqtool", "spark", "export", *map(str, args), "--master", "local[2]"],
                   cwd=tree["dir"] if tree else REPO, env=tree["env"] if tree else None, capture_output=True,
                   text=True, timeout=1800, check=True)
    return time.perf_counter() - t0


BARE_SESSION = ("from pyspark.sql import SparkSession; "
                "SparkSession.builder.master('local[2]').getOrCreate().stop()")
# mqtool's own session (`spark_session`: log to a file, no UI, the master the export uses), started and stopped
MQTOOL_SESSION = ("from mqtool.spark.session import spark_session; "
                  "spark_session('local[2,4]')[0].stop()")


def small_job(ns: str, tmp: Path, messages: int, runs: int, before: dict | None = None,
              baselines: bool = True) -> dict:
    """A small availableNow export end to end against a bare Spark session's start and stop, run by
    run interleaved (and `before`'s export of the same, when given). Without `baselines` (--quick)
    only the exports run: two fewer Spark starts a run."""
    subprocess.run([sys.executable, "-m", "mqtool", "send", "-n", ns, "-t", "Small", "--count", str(messages),
                    "--batch", "64", "--size", "128"], cwd=REPO, capture_output=True, timeout=300, check=True)
    out = []
    for i in range(runs):
        run = {}
        if baselines:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", BARE_SESSION], capture_output=True, timeout=600, check=True)
            run["bare_session_s"] = round(time.perf_counter() - t0, 2)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", MQTOOL_SESSION], cwd=REPO, capture_output=True, timeout=600,
                           check=True)
            run["mqtool_session_s"] = round(time.perf_counter() - t0, 2)
        for side, tree in (("export", None), ("before", before)):
            if side == "export" or tree:
                run[f"{side}_s"] = round(cli_seconds("-n", ns, "-t", "Small", "-o", tmp / f"small-{side}-{i}",
                                                     "--checkpoint", tmp / f"small-ck-{side}-{i}", "--available-now",
                                                     tree=tree), 2)
                if baselines:
                    run[f"{side}_extra_s"] = round(run[f"{side}_s"] - run["bare_session_s"], 2)
                    run[f"{side}_over_mqtool_session_s"] = round(run[f"{side}_s"] - run["mqtool_session_s"], 2)
        out.append(run)
    if not baselines:
        return {"messages": messages, "runs": out}
    median = lambda k: sorted(r[k] for r in out)[len(out) // 2]  # noqa: E731
    result = {"messages": messages, "runs": out, "median_extra_s": median("export_extra_s"),
              "median_over_mqtool_session_s": median("export_over_mqtool_session_s")}
    if before:
        result["before_median_extra_s"] = median("before_extra_s")
        result["before_median_over_mqtool_session_s"] = median("before_over_mqtool_session_s")
    return result


REPLAY = """import json, sys, time
from mqtool.spark.session import spark_session
from mqtool.spark.livejobs import replay
spark, _log = spark_session("local[2]")
try:
    runs = []
    for _ in range(2):
        t0 = time.perf_counter()
        r = replay(spark, sys.argv[1], {"namesrv": sys.argv[2], "topic": "Replay"})
        runs.append({"rows": r["rows"], "seconds": time.perf_counter() - t0})
    print(json.dumps(runs))
finally:
    spark.stop()
"""


def replay_figure(ns: str, src: Path, n: int, before: dict | None = None, session=None) -> dict:
    """Replay of `src` with the sink in a new Spark session (its start not counted), twice (the
    first pays for the session's first Python workers), against `send --batch 64` of n messages
    just before it; then the same with `before`'s code, when given. With `session` (--quick), once
    in that session instead."""
    if session is not None:
        from mqtool.spark.livejobs import replay
        send = send_cli(ns, "Bench2", n)
        t0 = time.perf_counter()
        rows = replay(session, str(src), {"namesrv": ns, "topic": "Replay"})["rows"]
        rate = rows / (time.perf_counter() - t0)
        return {"rows": rows, "send_batch_msg_s": send, "first_replay_msg_s": round(rate),
                "first_replay_ratio": round(rate / send, 3)}
    result = {}
    for side, tree in (("after", None), ("before", before)):
        if side == "before" and not tree:
            continue
        send = send_cli(ns, "Bench2", n)
        proc = subprocess.run([sys.executable, "-c", REPLAY, str(src), ns], cwd=tree["dir"] if tree else REPO,
                              env=tree["env"] if tree else None, capture_output=True, text=True, timeout=1800,
                              check=True)
        first, second = json.loads(proc.stdout.strip().splitlines()[-1])
        rates = [r["rows"] / r["seconds"] for r in (first, second)]
        result[side] = {"rows": first["rows"], "send_batch_msg_s": send,
                        "first_replay_msg_s": round(rates[0]), "first_replay_ratio": round(rates[0] / send, 3),
                        "second_replay_msg_s": round(rates[1]), "second_replay_ratio": round(rates[1] / send, 3)}
    return result if before else result["after"]


def lake(ns: str, store: Path, topic: str, tmp: Path) -> dict:
    """Live export into Parquet against the offline export of the same messages, both end to end."""
    live_s = cli_seconds("-n", ns, "-t", topic, "-o", tmp / "lake", "--checkpoint", tmp / "lake-ck", "--available-now")
    offline_s = cli_seconds(store, "-o", tmp / "lake-offline", "-t", topic)
    return {"live_export_s": round(live_s, 2), "offline_export_s": round(offline_s, 2),
            "live_export_ratio": round(offline_s / live_s, 3)}


def stream_cli_figures(result: dict, namesrv: str, a, tmp: Path, before) -> None:
    """The CLI export's streaming latency, and the before tree's in the same run when given."""
    result["stream_cli"] = stream_latency_cli(namesrv, "Stream2", a.rate, a.stream_seconds, tmp)
    if before:
        result["stream_cli_before"] = stream_latency_cli(namesrv, "Stream3", a.rate, a.stream_seconds, tmp, before,
                                                         "stream-cli-before")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2_000_000)
    ap.add_argument("--stream-seconds", type=float, default=30.0)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="a smoke run, well inside the tests' timeout on a loaded "
                    "machine: 5,000 messages, 2 s of streaming, no warm-up runs, one Spark start instead of "
                    "fourteen (the replay once in the benchmark's session; the end-to-end CLI exports, each a Spark "
                    "start of its own, only in full runs and --*-only runs: tests/spark runs the CLI export)")
    ap.add_argument("--lake-only", action="store_true", help="only the live/offline export to Parquet, end to end")
    ap.add_argument("--small-only", action="store_true", help="only the small availableNow export against a bare "
                    "Spark session")
    ap.add_argument("--replay-only", action="store_true", help="only replay against send --batch (after an offline "
                    "export of the messages, not measured)")
    ap.add_argument("--stream-only", action="store_true", help="only the streaming latency at --rate msg/s")
    ap.add_argument("--small-messages", type=int, default=3000)
    ap.add_argument("--small-runs", type=int, default=3)
    ap.add_argument("--before-tree", type=Path, help="another checkout: the small-job and replay figures of its "
                    "code too, in the same run")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.messages, a.stream_seconds, a.small_messages, a.small_runs = 5_000, 2.0, 500, 1
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print(json.dumps({"skipped": "pyspark is not installed"}))
        return 0
    from mqtool.spark.export import run_export
    from mqtool.spark.session import spark_session
    from mqtool.spark import register
    result: dict = {"messages": a.messages, "size": 128, "master": "local[2]", "flush": "ASYNC_FLUSH"}
    with broker_process() as b, tempfile.TemporaryDirectory(prefix="mqtool-spark-live-") as tmpd:
        drain(b.proc)
        tmp = Path(tmpd)
        before = {"dir": a.before_tree, "env": tree_env(a.before_tree, tmp)} if a.before_tree else None
        for t in ("Bench", "Bench2", "Replay", "Stream", "Stream2", "Stream3", "Small"):
            b.create_topic(t, 8)

        def done() -> int:
            print(json.dumps(result) if a.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
            return 0
        if a.small_only:
            result.pop("messages")
            result["small"] = small_job(b.namesrv, tmp, a.small_messages, a.small_runs, before, not a.quick)
            return done()
        if a.stream_only:
            result.pop("messages")
            spark, _log = spark_session("local[2]", log_dir=tmp / "log")
            try:
                result["stream"] = stream_latency(spark, b.namesrv, "Stream", a.rate, a.stream_seconds, tmp)
            finally:
                spark.stop()
            stream_cli_figures(result, b.namesrv, a, tmp, before)
            return done()
        result["send_batch_msg_s"] = send_cli(b.namesrv, "Bench", a.messages)
        if a.replay_only:
            spark, _log = spark_session("local[2]", log_dir=tmp / "log")
            try:
                run_export(spark, b.tmp / "store", str(tmp / "offline"))
            finally:
                spark.stop()
            result["replay"] = replay_figure(b.namesrv, tmp / "offline", a.messages, before)
            return done()
        if not a.quick:
            result["lake"] = lake(b.namesrv, b.tmp / "store", "Bench", tmp)
        if a.lake_only:
            return done()
        spark, _log = spark_session("local[2]", log_dir=tmp / "log")
        register(spark)
        try:
            def live():
                return spark.read.format("rocketmq").option("namesrv", b.namesrv).option("topics", "Bench").load()
            # Both sides warmed alike, by one whole run each: the JVM compiles its Arrow intake on the
            # live side's first run (a one-row warm-up left ~2 s of it in the measured read).
            if not a.quick:
                live().write.format("noop").mode("overwrite").save()
                run_export(spark, b.tmp / "store", str(tmp / "warm"), writer="tasks")
            t0 = time.perf_counter()
            live().write.format("noop").mode("overwrite").save()         # the read alone
            read_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            live().write.parquet(str(tmp / "live"))                      # read, then Spark's Parquet writer
            live_s = time.perf_counter() - t0
            live_rows = spark.read.parquet(str(tmp / "live")).count()
            t0 = time.perf_counter()
            off = run_export(spark, b.tmp / "store", str(tmp / "offline"))
            offline_s = time.perf_counter() - t0
            result.update(live_read_rows=live_rows, live_read_rows_s=round(live_rows / read_s),
                          live_read_to_parquet_rows_s=round(live_rows / live_s),
                          offline_export_rows=off["messages"], offline_export_rows_s=round(off["messages"] / offline_s))
            result["live_read_ratio"] = round(result["live_read_rows_s"] / result["offline_export_rows_s"], 3)
            result["live_read_to_parquet_ratio"] = round(
                result["live_read_to_parquet_rows_s"] / result["offline_export_rows_s"], 3)
            result["replay"] = replay_figure(b.namesrv, tmp / "offline", a.messages, before,
                                             session=spark if a.quick else None)
            result["stream"] = stream_latency(spark, b.namesrv, "Stream", a.rate, a.stream_seconds, tmp)
        finally:
            spark.stop()
        if not a.quick:
            stream_cli_figures(result, b.namesrv, a, tmp, before)
        # Last: its messages would be in the offline export's store above.
        if not a.quick:
            result["small"] = small_job(b.namesrv, tmp, a.small_messages, a.small_runs, before)
    result["baseline"] = {"offline_export_rows_s": result["offline_export_rows_s"],
                          "send_batch_msg_s": result["send_batch_msg_s"]}
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
