"""`mqtool spark export -n ...` and `mqtool spark replay`: Spark jobs over a live cluster.

Every option is checked, and the cluster asked what the read covers, before Spark starts, so a
wrong address, topic, glob, ACL key or offsets JSON is one line and no job.
"""
from __future__ import annotations

import os
import re
import signal
import time

from mqtool.cli.errors import UsageError, err_console
from mqtool.cli.output import console, count, emit_json, parse_time

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_LOCAL = re.compile(r"^local\[(\*|\d+)\]$")
TASK_ATTEMPTS = 4          # spark.task.maxFailures' default on a cluster; local mode needs it in the master


def parse_interval(text: str) -> float:
    m = _DURATION.match(text)
    if not m:
        raise UsageError(f"--interval takes a duration like 30s, 1m or 500ms, not {text!r}")
    value = float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    if value <= 0:
        raise UsageError("--interval must be more than 0")
    return value


def with_task_retries(master: str) -> str:
    """local[N] -> local[N,4]: in local mode a failed task is not retried unless the master says so
    (a broker that dies while a task reads fails the task, and its retry reads from the slave)."""
    m = _LOCAL.match(master.strip())
    return f"local[{m.group(1)},{TASK_ATTEMPTS}]" if m else master


def _namesrv(namesrv: str | None) -> str:
    addr = (namesrv or os.environ.get("NAMESRV_ADDR") or "").strip()
    if not addr:
        raise UsageError("a live export needs -n NAMESRV (or NAMESRV_ADDR), or a STORE_ROOT to export offline")
    return addr


def _credentials(access_key, secret_key) -> dict:
    from mqtool.cli.auth import resolve
    found = resolve(access_key, secret_key)
    return {"accessKey": found[0], "secretKey": found[1]} if found else {}


def _preflight(options: dict, writing: bool = False):
    """Parse the options and ask the cluster for the queues they mean: one line on any problem."""
    from mqtool.spark import livecluster
    from mqtool.spark.liveoptions import OptionError, parse_options
    from mqtool.spark.liveplan import check_named
    try:
        opts = parse_options(options, writing=writing)
    except OptionError as exc:
        raise UsageError(str(exc)) from None
    try:
        if writing:
            livecluster.run(_route_check, opts)
            return opts, {}
        states = livecluster.run(livecluster.states, opts)
        check_named(opts.starting, states, "--starting-offsets")
    except livecluster.ClusterError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return opts, states


async def _route_check(client, opts):
    """The sink's topic can be sent to as `mqtool send` finds out: its route, or, for a topic no
    broker has yet, the default topic's (TBW102), which a broker with autoCreateTopicEnable serves."""
    from mqtool.client.producer import Producer
    from mqtool.spark.livecluster import ClusterError
    from mqtool.spark.livesink import SINK_GROUP
    from mqtool_remoting.codes import ResponseCode
    from mqtool_remoting.errors import RemotingCommandError
    producer = Producer(opts.namesrv, opts.group or SINK_GROUP, credentials=opts.credentials())
    try:
        await producer.publish_route(opts.send_topic, refresh=True)
    except RemotingCommandError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        raise ClusterError(f"topic {opts.send_topic} does not exist and no broker creates topics on first send "
                           f"(autoCreateTopicEnable=false): create it first: mqtool topic create "
                           f"-t {opts.send_topic}") from None
    finally:
        await producer.close()


def live_export(*, out, topics, namesrv, checkpoint, interval, available_now, max_per_trigger, tags, group,
                starting, since, until, queue_offsets, include_system, partition_by, mode, master, conf, json_out,
                access_key, secret_key) -> None:
    from mqtool.spark.livejobs import LIVE_PARTITION_COLUMNS, commit_group, stream_export
    for flag, value in (("--until", until), ("--queue-offsets", queue_offsets), ("--mode", mode)):
        if value is not None:
            raise UsageError(f"{flag} is for an offline export (STORE_ROOT); a live export appends what is new "
                             "since its checkpoint")
    if not checkpoint:
        raise UsageError("a live export needs --checkpoint DIR: it records what was exported (exactly once)")
    if interval and available_now:
        raise UsageError("give --interval or --available-now, not both")
    if not topics:
        raise UsageError("a live export needs --topic/-t (names or globs)")
    every = parse_interval(interval) if interval else None
    parts = [p.strip() for p in partition_by.split(",") if p.strip()] if partition_by else []
    for p in parts:
        if p not in LIVE_PARTITION_COLUMNS:
            raise UsageError(f"--partition-by takes {', '.join(LIVE_PARTITION_COLUMNS)}, not {p!r}")
    options = {"namesrv": _namesrv(namesrv), "topics": ",".join(topics),
               "includeSystemTopics": str(include_system).lower(), **_credentials(access_key, secret_key)}
    if max_per_trigger:
        options["maxMessagesPerTrigger"] = str(max_per_trigger)
    if tags:
        options["tags"] = tags
    if group:
        options["consumerGroup"] = group
    if starting:
        options["startingOffsets"] = starting
    if since:
        options["startingTimestamp"] = str(parse_time(since))
    _opts, states = _preflight(options)
    from mqtool.spark.session import job_errors, require_pyspark, spark_session
    require_pyspark()
    stop = {"now": False}

    def on_sigint(signum, frame):
        if stop["now"]:
            raise KeyboardInterrupt
        stop["now"] = True
        err_console.print("mqtool: stopping after the current micro-batch (Ctrl-C again to abort)", markup=False)

    def on_batch(p):
        if json_out:
            return
        took = p.get("durationMs", {}).get("triggerExecution", 0) / 1000
        err_console.print(f"batch {p['batchId']}: {count(p['numInputRows'], 'message')} in {took:.1f} s", markup=False)

    t0 = time.perf_counter()
    spark, log_file = spark_session(with_task_retries(master), conf)
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        with job_errors(log_file):
            result = stream_export(spark, options, out, checkpoint, parts, every, on_batch, lambda: stop["now"])
        committed = commit_group(options, result["offsets"]) if group else 0
    finally:
        signal.signal(signal.SIGINT, previous)
        spark.stop()
    result.update(seconds=round(time.perf_counter() - t0, 2), spark_log=str(log_file), queues=len(states),
                  group_offsets_committed=committed)
    if json_out:
        emit_json(result)
        return
    console.print(f"{count(result['rows'], 'message')} in {count(result['batches'], 'micro-batch')} from "
                  f"{count(len(states), 'queue')} in {result['seconds']} s", markup=False)
    console.print(f"Parquet: {out} (read it with Spark, which honours its _spark_metadata log)", markup=False)
    console.print(f"Checkpoint: {checkpoint} (run the same command again to export what is new)", markup=False)
    err_console.print(f"Spark log: {log_file}", markup=False)


def _parquet_columns(path: str) -> list[str]:
    import pyarrow.dataset as ds
    try:
        found = ds.dataset(path, format="parquet", partitioning="hive",
                           exclude_invalid_files=True, ignore_prefixes=["_", "."])
    except (OSError, ValueError) as exc:          # pyarrow's ArrowInvalid is a ValueError
        raise UsageError(f"{path}: not Parquet that can be read ({str(exc).splitlines()[0]})") from None
    if not found.files:                           # each file that is not Parquet was left out
        one_file = "://" not in path and os.path.isfile(path)
        raise UsageError(f"{path}: not a Parquet file" if one_file else f"{path}: no Parquet files in it")
    return found.schema.names


def live_replay(parquet, topic, namesrv, batch, master, conf, json_out, access_key, secret_key) -> None:
    from mqtool.spark.livejobs import replay
    from mqtool.spark.session import job_errors, require_pyspark, spark_session
    require_pyspark()
    if "://" not in parquet and not os.path.exists(parquet):
        raise UsageError(f"{parquet}: no such file or directory")
    cols = _parquet_columns(parquet)
    if "body" not in cols:
        raise UsageError(f"{parquet} has no body column (its columns: {', '.join(cols) or 'none'}); "
                         "replay sends body, keys, tags and properties")
    options = {"namesrv": _namesrv(namesrv), "topic": topic, "sendBatchSize": str(batch),
               **_credentials(access_key, secret_key)}
    _preflight(options, writing=True)
    t0 = time.perf_counter()
    spark, log_file = spark_session(master, conf)
    try:
        with job_errors(log_file):
            result = replay(spark, parquet, options)
    finally:
        spark.stop()
    result.update(topic=topic, seconds=round(time.perf_counter() - t0, 2), spark_log=str(log_file))
    if json_out:
        emit_json(result)
        return
    rate = result["rows"] / result["seconds"] if result["seconds"] else 0.0
    console.print(f"{count(result['rows'], 'message')} sent to {topic} in {result['seconds']} s ({rate:.0f} msg/s)",
                  markup=False)
    err_console.print(f"Spark log: {log_file}", markup=False)

