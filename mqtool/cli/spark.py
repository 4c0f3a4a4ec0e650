"""`mqtool spark ...`: PySpark jobs over a store directory."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from mqtool.cli.errors import EXIT_PROBLEMS, UsageError, err_console
from mqtool.cli.output import console, emit_json, parse_time, table
from store.errors import StoreError

app = typer.Typer(help="Spark jobs: export topics to Parquet.", no_args_is_help=True)
MODES = {"overwrite": "overwrite", "append": "append", "error": "errorifexists"}


def _follow(spark, stop: threading.Event) -> None:
    """A progress bar over the job's tasks, from Spark's status tracker."""
    tracker = spark.sparkContext.statusTracker()
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True) as bar:
        task = bar.add_task("spark tasks", total=None)
        while not stop.wait(0.3):
            total = done = 0
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info:
                    total += info.numTasks
                    done += info.numCompletedTasks
            if total:
                bar.update(task, total=total, completed=done)


def _run_job(master: str, conf: dict[str, str], job):
    """Start Spark, follow its tasks with a progress bar, run `job(spark)`, stop Spark.
    Java-side failures become one line that points at the log file."""
    from mqtool.spark.session import spark_session
    t0 = time.perf_counter()
    spark, log_file = spark_session(master, conf)
    stop = threading.Event()
    follower = threading.Thread(target=_follow, args=(spark, stop), daemon=True)
    follower.start()
    try:
        result = job(spark)
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - Java errors become one line; details are in the log
        raise UsageError(f"the Spark job failed: {str(exc).splitlines()[0][:300]} (full log: {log_file})") from None
    finally:
        stop.set()
        follower.join(2)
        spark.stop()
    result["seconds"] = round(time.perf_counter() - t0, 2)
    result["spark_log"] = str(log_file)
    return result


def _conf(pairs: list[str] | None) -> dict[str, str]:
    out = {}
    for c in pairs or []:
        k, sep, v = c.partition("=")
        if not sep:
            raise UsageError(f"--conf must be k=v, not {c!r}")
        out[k] = v
    return out


@app.command()
def export(
    store_root: Annotated[Path, typer.Argument(help="The store root (storePathRootDir).")],
    out: Annotated[str, typer.Option("--out", "-o", help="Parquet output directory.")],
    topic: Annotated[Optional[list[str]], typer.Option("--topic", "-t", help="Topic or glob, repeatable.")] = None,
    since: Annotated[Optional[str], typer.Option("--since")] = None,
    until: Annotated[Optional[str], typer.Option("--until")] = None,
    include_system_topics: Annotated[bool, typer.Option("--include-system-topics")] = False,
    partition_by: Annotated[Optional[str], typer.Option("--partition-by", help="e.g. topic,store_date")] = None,
    mode: Annotated[Optional[str], typer.Option("--mode", help="overwrite, append or error")] = None,
    skip_corrupt: Annotated[bool, typer.Option("--skip-corrupt")] = False,
    master: Annotated[str, typer.Option("--master")] = "local[*]",
    conf: Annotated[Optional[list[str]], typer.Option("--conf", help="k=v, passed to Spark.")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Export the store's messages to Parquet, one row per message."""
    from mqtool.spark.export import plan_splits, run_export
    if mode is not None and mode not in MODES:
        raise UsageError("--mode must be overwrite, append or error")
    out_path = Path(out)
    if "://" not in out and out_path.exists() and mode is None:
        raise UsageError(f"{out} exists: pass --mode overwrite|append|error")
    parts = [p.strip() for p in partition_by.split(",")] if partition_by else None
    for p in parts or []:
        if p not in ("topic", "store_date", "queue_id"):
            raise UsageError(f"--partition-by takes topic, store_date or queue_id, not {p!r}")
    extra = _conf(conf)
    splits = plan_splits(store_root)
    if not splits:
        raise UsageError(f"{store_root}: the store has no commitlog files")
    result = _run_job(master, extra, lambda spark: run_export(
        spark, str(store_root), out, topic, parse_time(since), parse_time(until), include_system_topics, parts,
        MODES[mode or "error"], skip_corrupt))
    for c in result["corrupt"]:
        err_console.print(f"mqtool: corrupt data in {c['file']} from {c['position']}: {c['detail']} "
                          f"({c['invalid_bytes']} invalid bytes)", markup=False)
    if json_out:
        emit_json(result)
    elif result["written"]:
        t = table("topic", "rows", title="Exported")
        for k, v in result["per_topic"].items():
            t.add_row(k, str(v))
        console.print(t)
        console.print(f"{result['messages']} messages, {result['bytes']} bytes from {result['files']} commitlog "
                      f"files in {result['seconds']} s -> {out}")
    if not result["written"]:
        err_console.print("mqtool: nothing written; pass --skip-corrupt to export the intact records", markup=False)
        raise typer.Exit(EXIT_PROBLEMS)


@app.command("rebuild-index")
def rebuild_index(
    store_root: Annotated[Path, typer.Argument(help="The store root (storePathRootDir).")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="New store root (default: beside the store).")] = None,
    in_place: Annotated[bool, typer.Option("--in-place", help="Replace the store's own consume queues and index.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm --in-place.")] = False,
    mapped_file_size_consume_queue: Annotated[int, typer.Option("--mapped-file-size-consume-queue")] = 6_000_000,
    max_hash_slot_num: Annotated[int, typer.Option("--max-hash-slot-num")] = 5_000_000,
    max_index_num: Annotated[int, typer.Option("--max-index-num")] = 20_000_000,
    message_delay_level: Annotated[str, typer.Option("--message-delay-level")] = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
    master: Annotated[str, typer.Option("--master")] = "local[*]",
    conf: Annotated[Optional[list[str]], typer.Option("--conf", help="k=v, passed to Spark.")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Rebuild every consume queue and the index files from the commitlog."""
    from mqtool.spark.rebuild import run_rebuild
    if in_place and not yes:
        raise UsageError("--in-place rewrites the store's consume queues and index: add --yes (broker stopped)")
    if in_place and out:
        raise UsageError("give --out or --in-place, not both")
    result = _run_job(master, _conf(conf), lambda spark: run_rebuild(
        spark, store_root, out, in_place, mapped_file_size_consume_queue, max_hash_slot_num, max_index_num,
        message_delay_level))
    if json_out:
        emit_json(result)
    else:
        console.print(f"{result['units']} consume queue units in {result['queues']} queues and "
                      f"{result['index_keys']} index keys written to {result['out']} in {result['seconds']} s")
