"""`mqtool spark ...`: PySpark jobs over a store directory (pip install 'mqtool[spark]')."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.auth import AccessKeyOpt, SecretKeyOpt
from mqtool.cli.errors import EXIT_PROBLEMS, EXIT_USAGE, UsageError, err_console, register_lazy
from mqtool.cli.output import console, count, emit_json, parse_time, table

app = typer.Typer(help="Spark jobs: export stores and live clusters to Parquet, replay, rebuild consume queues and index.",
                  no_args_is_help=True)


register_lazy("mqtool.spark.session", "SparkUnavailable", EXIT_USAGE)

Master = Annotated[str, typer.Option("--master", help="local[*], local[N] or spark://HOST:PORT.")]
Conf = Annotated[Optional[list[str]], typer.Option("--conf", help="k=v, passed to Spark (repeatable).")]
Json = Annotated[bool, typer.Option("--json", help="The summary as one JSON object.")]
SkipCorrupt = Annotated[bool, typer.Option("--skip-corrupt", help="Exit 0 even when corrupt ranges were skipped.")]
SplitMiB = Annotated[int, typer.Option("--split-mib", help="Target split size within large files (MiB).",
                                       hidden=True, min=1)]


def _conf(items: list[str] | None) -> dict[str, str]:
    out = {}
    for c in items or []:
        k, sep, v = c.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"--conf takes k=v, not {c!r}")
        out[k.strip()] = v
    return out


def _run(master: str, conf: dict[str, str], job):
    """Start Spark, run job(spark) under a progress bar, stop Spark. Returns (result, log file)."""
    from mqtool.spark.progress import StageProgress
    from mqtool.spark.session import job_errors, spark_session
    spark, log_file = spark_session(master, conf)
    try:
        with job_errors(log_file):
            if err_console.is_terminal:
                with StageProgress(spark, err_console, transient=True):
                    result = job(spark)
            else:
                result = job(spark)
    finally:
        spark.stop()
    return result, log_file


def _report_corrupt(result: dict, skip: bool) -> bool:
    for c in result["corrupt"]:
        err_console.print(f"mqtool: corrupt data in {c['file']} from position {c['position']} (commitlog offset "
                          f"{c['offset']}): {c['detail']}; {count(c['invalid_bytes'], 'byte')} skipped", markup=False)
    if result["corrupt"] and not skip:
        err_console.print("mqtool: the intact records were processed; the ranges above were not "
                          "(--skip-corrupt to exit 0)", markup=False)
        return True
    return False


@app.command()
def export(
    store_root: Annotated[Optional[str], typer.Argument(
        help="Store root (storePathRootDir): a path or a URI. Leave out with -n to export a live cluster.")] = None,
    out: Annotated[str, typer.Option("--out", "-o", help="Parquet output directory (a path or a URI).")] = "",
    topic: Annotated[Optional[list[str]], typer.Option("--topic", "-t", help="Topic or glob (repeatable).")] = None,
    since: Annotated[Optional[str], typer.Option(
        "--since", help="Store time from (epoch ms or ISO; live: where each queue's first run starts).")] = None,
    until: Annotated[Optional[str], typer.Option("--until", help="Store time until (epoch ms or ISO).")] = None,
    queue_offsets: Annotated[Optional[str], typer.Option(
        "--queue-offsets", help='JSON (or @file): {"TOPIC": {"QUEUE_ID" or "*": [FROM, TO]}}, TO exclusive.')] = None,
    include_system_topics: Annotated[bool, typer.Option(
        "--include-system-topics", help="Also %RETRY%, %DLQ%, SCHEDULE_TOPIC_XXXX, RMQ_SYS_* ...")] = False,
    partition_by: Annotated[Optional[str], typer.Option(
        "--partition-by", help="Comma-separated: topic, store_date, queue_id (live: also broker_name).")] = None,
    mode: Annotated[Optional[str], typer.Option(
        "--mode", help="overwrite, append or error (the default; fails when OUT exists).")] = None,
    namesrv: Annotated[Optional[str], typer.Option(
        "-n", "--namesrv-addr", help="Live export: name servers, ';'-separated (NAMESRV_ADDR if no STORE_ROOT is given).",
        rich_help_panel="Live cluster")] = None,
    checkpoint: Annotated[Optional[str], typer.Option(
        "--checkpoint", help="Live export: Spark's checkpoint directory (what was exported so far).",
        rich_help_panel="Live cluster")] = None,
    available_now: Annotated[bool, typer.Option(
        "--available-now", help="Live export: export what is there now, then stop (the default).",
        rich_help_panel="Live cluster")] = False,
    interval: Annotated[Optional[str], typer.Option(
        "--interval", help="Live export: keep running, one micro-batch every INTERVAL (30s, 1m, 500ms) until Ctrl-C.",
        rich_help_panel="Live cluster")] = None,
    max_per_trigger: Annotated[Optional[int], typer.Option(
        "--max-messages-per-trigger", min=1, help="Live export: at most N messages per micro-batch.",
        rich_help_panel="Live cluster")] = None,
    tags: Annotated[Optional[str], typer.Option(
        "--tags", help="Live export: a tag expression filtered on the broker (TagA || TagB).",
        rich_help_panel="Live cluster")] = None,
    consumer_group: Annotated[Optional[str], typer.Option(
        "--consumer-group", "-g", help="Live export: also commit the exported offsets for this group.",
        rich_help_panel="Live cluster")] = None,
    starting_offsets: Annotated[Optional[str], typer.Option(
        "--starting-offsets", help='Live export, first run: earliest (default), latest or {"TOPIC": {"BROKER:QUEUE": N}}.',
        rich_help_panel="Live cluster")] = None,
    skip_corrupt: SkipCorrupt = False,
    master: Master = "local[*]",
    conf: Conf = None,
    split_mib: SplitMiB = 64,
    json_out: Json = False,
    access_key: AccessKeyOpt = None,
    secret_key: SecretKeyOpt = None,
) -> None:
    """Export messages to Parquet, one row per message (bodies inflated): a store directory, or a
    live cluster (-n) incrementally and exactly once (--checkpoint)."""
    if not out:
        raise UsageError("--out/-o is required (the Parquet output directory)")
    if store_root is None:
        from mqtool.cli.sparklive import live_export
        return live_export(out=out, topics=topic or [], namesrv=namesrv, checkpoint=checkpoint, interval=interval,
                           available_now=available_now, max_per_trigger=max_per_trigger, tags=tags,
                           group=consumer_group, starting=starting_offsets, since=since, until=until,
                           queue_offsets=queue_offsets, include_system=include_system_topics,
                           partition_by=partition_by, mode=mode, master=master, conf=_conf(conf),
                           json_out=json_out, access_key=access_key, secret_key=secret_key)
    live_only = {"-n": namesrv, "--checkpoint": checkpoint, "--interval": interval, "--tags": tags,
                 "--consumer-group": consumer_group, "--starting-offsets": starting_offsets,
                 "--max-messages-per-trigger": max_per_trigger, "--available-now": available_now or None}
    given = [k for k, v in live_only.items() if v is not None]
    if given:
        raise UsageError(f"{given[0]} is for a live export: leave out STORE_ROOT to export the cluster at -n")
    from mqtool.spark.export import MODES, PARTITION_COLUMNS, output_exists, run_export
    from mqtool.spark.selection import Selection, parse_queue_offsets
    from mqtool.spark.source import list_commitlog
    from mqtool.spark.session import require_pyspark
    if mode is not None and mode not in MODES:
        raise UsageError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    parts = [p.strip() for p in partition_by.split(",") if p.strip()] if partition_by else []
    for p in parts:
        if p not in PARTITION_COLUMNS:
            raise UsageError(f"--partition-by takes {', '.join(PARTITION_COLUMNS)}, not {p!r}")
    try:
        offsets = parse_queue_offsets(queue_offsets) if queue_offsets else None
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    selection = Selection(tuple(topic or ()), parse_time(since), parse_time(until), include_system_topics, offsets)
    if output_exists(out) and mode in (None, "error"):
        raise UsageError(f"{out} exists: pass --mode overwrite or --mode append" if mode is None
                         else f"{out} exists (--mode error)")
    extra = _conf(conf)
    if "://" in store_root:
        require_pyspark()                    # URIs are listed with pyarrow's filesystems
    list_commitlog(store_root)               # a path that is no store fails before Spark starts
    require_pyspark()
    t0 = time.perf_counter()
    result, log_file = _run(master, extra, lambda spark: run_export(
        spark, store_root, out, selection, parts, mode or "error", split_mib << 20))
    result.update(seconds=round(time.perf_counter() - t0, 2), spark_log=str(log_file))
    if json_out:
        emit_json(result)
    else:
        t = table("topic", "rows", "bytes", title="Exported")
        for name, v in result["per_topic"].items():
            t.add_row(name, str(v["rows"]), str(v["bytes"]))
        console.print(t)
        rate = result["bytes"] / 1e6 / result["seconds"] if result["seconds"] else 0.0
        console.print(f"{count(result['messages'], 'message')}, {count(result['bytes'], 'byte')} from "
                      f"{count(result['files'], 'commitlog file')} ({count(result['splits'], 'split')}) in "
                      f"{result['seconds']} s ({rate:.1f} MB/s)", markup=False)
        console.print(f"Parquet: {result['out']}", markup=False)
        err_console.print(f"Spark log: {log_file}", markup=False)
    if _report_corrupt(result, skip_corrupt):
        raise typer.Exit(EXIT_PROBLEMS)


@app.command("rebuild-index")
def rebuild_index(
    store_root: Annotated[Path, typer.Argument(help="The store root (storePathRootDir).")],
    out: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="New store root to write (default: STORE-rebuilt-TIME beside the store).")] = None,
    in_place: Annotated[bool, typer.Option(
        "--in-place", help="Replace the store's own consume queues and index (old ones kept aside).")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm --in-place (the broker must be stopped).")] = False,
    config: Annotated[Optional[Path], typer.Option("-c", "--config", help="broker.conf to read store sizes from.")] = None,
    mapped_file_size_consume_queue: Annotated[Optional[int], typer.Option(
        "--mapped-file-size-consume-queue", min=20, help="Consume queue file size (default 6000000).")] = None,
    max_hash_slot_num: Annotated[Optional[int], typer.Option("--max-hash-slot-num", min=1, help="Default 5000000.")] = None,
    max_index_num: Annotated[Optional[int], typer.Option("--max-index-num", min=1, help="Default 20000000.")] = None,
    message_delay_level: Annotated[Optional[str], typer.Option(
        "--message-delay-level", help="The broker's messageDelayLevel (tagsCode of SCHEDULE_TOPIC_XXXX).")] = None,
    copy_commitlog: Annotated[bool, typer.Option(
        "--copy-commitlog", help="Copy the commitlog into --out instead of hard-linking it.")] = False,
    skip_corrupt: SkipCorrupt = False,
    master: Master = "local[*]",
    conf: Conf = None,
    split_mib: SplitMiB = 64,
    json_out: Json = False,
) -> None:
    """Rebuild every consume queue and the index files from the commitlog."""
    from mqtool.cli.recover import broker_conf_settings
    from mqtool.cli.storesizes import choose_sizes, sizes_line
    from mqtool.spark.rebuild import check_in_place, check_output, run_rebuild
    from mqtool.spark.session import require_pyspark
    from mqtool.spark.source import list_commitlog
    from mqtool_store.delaylevels import parse_delay_levels
    from mqtool_store.errors import StoreError
    from mqtool_store.storeconfig import MessageStoreConfig, apply_store_properties
    if in_place and not yes:
        raise UsageError("--in-place rewrites the store's consume queues and index: add --yes (broker stopped)")
    if in_place and out:
        raise UsageError("give --out or --in-place, not both")
    if in_place and copy_commitlog:
        raise UsageError("--copy-commitlog applies to a rebuild into --out (in place the commitlog stays as it is)")
    cfg = MessageStoreConfig()
    list_commitlog(str(store_root))
    try:
        broker_conf = broker_conf_settings(config)
        apply_store_properties(cfg, broker_conf)
        sizes, sizes_from = choose_sizes(store_root, {
            "mappedFileSizeConsumeQueue": mapped_file_size_consume_queue, "maxHashSlotNum": max_hash_slot_num,
            "maxIndexNum": max_index_num}, config, broker_conf)
        apply_store_properties(cfg, sizes)
        if message_delay_level is not None:
            apply_store_properties(cfg, {"messageDelayLevel": message_delay_level})
        parse_delay_levels(cfg.messageDelayLevel)
    except (ValueError, StoreError) as exc:
        raise UsageError(str(exc)) from None
    if cfg.maxHashSlotNum <= 0 or cfg.maxIndexNum <= 0 or cfg.mappedFileSizeConsumeQueue <= 0:
        raise UsageError("sizes must be positive")
    extra = _conf(conf)
    if in_place:
        check_in_place(store_root)
    elif out is not None:
        check_output(store_root, out)
    require_pyspark()
    if not json_out:
        err_console.print(f"sizes: {sizes_line(sizes, sizes_from)}", markup=False)
    t0 = time.perf_counter()
    result, log_file = _run(master, extra, lambda spark: run_rebuild(
        spark, store_root, out, in_place, cfg.mappedFileSizeConsumeQueue, cfg.maxHashSlotNum, cfg.maxIndexNum,
        cfg.messageDelayLevel, split_mib << 20, copy_commitlog))
    result.update(seconds=round(time.perf_counter() - t0, 2), spark_log=str(log_file),
                  mapped_file_size_consume_queue=cfg.mappedFileSizeConsumeQueue,
                  max_hash_slot_num=cfg.maxHashSlotNum, max_index_num=cfg.maxIndexNum, sizes_from=sizes_from)
    if json_out:
        emit_json(result)
    else:
        console.print(f"{count(result['units'], 'consume queue unit')} in {count(result['queues'], 'queue')}, "
                      f"{count(result['index_keys'], 'index key')} in {count(result['index_files'], 'index file')}, "
                      f"from {count(result['records'], 'record')} in {result['seconds']} s", markup=False)
        console.print(f"Store root: {result['out']}", markup=False)
        if not in_place and not copy_commitlog:
            err_console.print("note: its commitlog files are hard links to the original's "
                              "(--copy-commitlog for independent copies)", markup=False)
        err_console.print(f"Spark log: {log_file}", markup=False)
    if _report_corrupt(result, skip_corrupt):
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def replay(
    parquet: Annotated[str, typer.Argument(help="Parquet file or directory (an export, or any with a body column).")],
    topic: Annotated[str, typer.Option("--topic", "-t", help="The topic to send the rows to.")],
    namesrv: Annotated[Optional[str], typer.Option(
        "-n", "--namesrv-addr", help="Name servers, ';'-separated (or NAMESRV_ADDR).")] = None,
    batch: Annotated[int, typer.Option("--batch", min=1, max=1024, help="Messages per SEND_BATCH_MESSAGE.")] = 256,
    master: Master = "local[*]",
    conf: Conf = None,
    json_out: Json = False,
    access_key: AccessKeyOpt = None,
    secret_key: SecretKeyOpt = None,
) -> None:
    """Send the rows of a Parquet export back into a topic: body, keys, tags and properties kept."""
    from mqtool.cli.sparklive import live_replay
    live_replay(parquet, topic, namesrv, batch, master, _conf(conf), json_out, access_key, secret_key)
