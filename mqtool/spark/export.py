"""`spark export`: commitlog records to Parquet, one row per message.

Two Spark stages: `source.plan` walks each commitlog file's headers (one task per file) into
record-aligned splits, validating every header, counting the rows per topic that the
selection keeps and noting where a file's valid data ends; then one task per split decodes
the selected records vectorised (`columns.fast_batches`) and writes its own Parquet files with
pyarrow, which the driver commits when every task has succeeded (`writer`): Spark schedules,
the JVM never sees a row. `split_batches` (one `decode_record` per record, `reference`) is the
reference decoder the fast one is tested against, and `writer="jvm"` the previous path (mapInArrow into
Spark's Parquet writer). Bodies are written inflated (what a consumer receives); `sys_flag`
keeps the compression bits, and a body whose codec is missing stays as stored.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

from mqtool.spark.columns import Timer, fast_batches
from mqtool.spark.progress import describe
from mqtool.spark.reference import BATCH_ROWS, reference_batches
from mqtool.spark.schema import COLUMNS, SCHEMA_DDL, arrow_schema  # noqa: F401 - export's names for them
from mqtool.spark.selection import Selection, topic_index
from mqtool.spark.source import SPLIT_BYTES, FileScan, Split, local_plan, open_range, plan
from mqtool_store.errors import NotFoundError
from mqtool_store.logscan import header_table, walk

PARTITION_COLUMNS = ("topic", "store_date", "queue_id")
MODES = ("overwrite", "append", "error")
WRITERS = ("tasks", "jvm")


def selected_positions(buf, base: int, split: Split, selection: Selection):
    """Positions (in `buf`) of the split's records that the selection keeps, from headers only."""
    import numpy as np
    positions, _ = walk(buf, split.start - base, split.end - base)
    out = []
    for lo in range(0, len(positions), 1 << 18):
        table, ok = header_table(buf, positions[lo:lo + (1 << 18)], split.end - base)
        table = {k: v[:ok] for k, v in table.items()}
        names, inv = topic_index(buf, table)
        out.append(table["position"][selection.mask(names, inv, table)])
        if ok < len(table["position"]):
            break
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def split_batches(split: Split, selection: Selection, batch_rows: int = BATCH_ROWS):
    """The selected records of one split as pyarrow RecordBatches in COLUMNS order: the reference
    decoder (one `decode_record` per record) that `columns.fast_batches` is held to."""
    with open_range(split.path, split.start, split.end) as (buf, base):
        yield from reference_batches(buf, base, split, selected_positions(buf, base, split, selection), batch_rows)


def summarize(scans: list[FileScan]) -> dict:
    per_topic: dict[str, list[int]] = {}
    for s in scans:
        for t, (n, b) in s.selected.items():
            a = per_topic.setdefault(t, [0, 0])
            a[0] += n
            a[1] += b
    return {"messages": sum(n for n, _ in per_topic.values()), "bytes": sum(b for _, b in per_topic.values()),
            "files": len(scans), "splits": sum(len(s.splits) for s in scans),
            "records_scanned": sum(s.records for s in scans),
            "per_topic": {t: {"rows": n, "bytes": b} for t, (n, b) in sorted(per_topic.items())},
            "corrupt": [s.bad for s in scans if s.bad]}


def output_exists(out: str) -> bool:
    if "://" in out:
        return False      # Spark decides (mode "error" fails there)
    return Path(out).exists()


def run_export(spark, root, out: str, selection: Selection | None = None, partition_by=None, mode: str = "error",
               split_bytes: int = SPLIT_BYTES, writer: str = "tasks") -> dict:
    """Plan, decode and write; returns the summary. Corrupt ranges are reported, intact records written.

    writer "tasks" (the default): tasks decode with `columns.fast_batches` and write Parquet
    themselves, the driver commits (`writer.Job`). "jvm": the previous path, kept to compare
    against: the reference decoder into `mapInArrow` and Spark's own Parquet writer.
    """
    selection = selection or Selection()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    if writer not in WRITERS:
        raise ValueError(f"writer must be one of {WRITERS}")
    t0 = time.perf_counter()
    scans = plan_export(spark, root, selection, split_bytes)
    result = write_export(spark, scans, out, selection, partition_by, mode, writer)
    result["timings"]["plan_seconds"] = round(time.perf_counter() - t0 - result["timings"]["write_seconds"], 3)
    return result


def plan_export(spark, root, selection: Selection, split_bytes: int = SPLIT_BYTES) -> list[FileScan]:
    """The plan stage: every commitlog file's splits and selected rows. Raises when there is nothing."""
    scans = plan(spark, str(root), split_bytes, selection)
    if not scans:
        raise NotFoundError("the store has no commitlog files: nothing to export", path=root)
    if not any(s.records for s in scans) and not any(s.bad for s in scans):
        raise NotFoundError("the store's commitlog holds no messages: nothing to export", path=root)
    return scans


def write_export(spark, scans: list[FileScan], out: str, selection: Selection, partition_by=None,
                 mode: str = "error", writer: str = "tasks") -> dict:
    """The write stage of a plan: one task per split. A split whose file changed since the plan
    fails its task, and the job with it (nothing is committed)."""
    result = summarize(scans)
    splits = [sp for s in scans for sp in s.splits]
    t0 = time.perf_counter()
    describe(spark.sparkContext, f"export: decode {len(splits)} splits, write Parquet")
    if writer == "jvm":
        _write_jvm(spark, splits, selection, out, partition_by, mode)
        timings = {}
    else:
        timings = _write_tasks(spark, splits, selection, out, partition_by, mode)
    result.update(out=str(out), mode=mode, partition_by=list(partition_by or []),
                  timings={"write_seconds": round(time.perf_counter() - t0, 3), **timings})
    return result


def _write_tasks(spark, splits: list[Split], selection: Selection, out: str, partition_by, mode: str) -> dict:
    """Each task decodes one split and writes its files; the driver commits them (writer.Job)."""
    from mqtool.spark.writer import Job, write_task
    job = Job(str(out), mode)
    fs, staging, job_id, schema, parts = job.fs, job.staging, job.job, arrow_schema(), list(partition_by or [])

    def task(items):
        from pyspark import TaskContext
        attempt = TaskContext.get().attemptNumber()
        for index, split in items:
            timer = Timer()
            root, files = write_task(fs, staging, job_id, index, attempt, fast_batches(split, selection, timer=timer),
                                     schema, parts, timer)
            yield root, files, timer.seconds
    job.start()
    try:
        t0 = time.perf_counter()
        # One split per partition, so every task decodes one split.
        results = spark.sparkContext.parallelize(list(enumerate(splits)), max(1, len(splits))).mapPartitions(
            task).collect()
        t1 = time.perf_counter()
    except BaseException:
        job.abort()
        raise
    done = job.commit([r[:2] for r in results], schema, parts)
    phases: dict[str, float] = {}
    for *_, seconds in results:
        for k, v in seconds.items():
            phases[k] = phases.get(k, 0.0) + v
    return {"tasks_seconds": round(t1 - t0, 3), "commit_seconds": round(time.perf_counter() - t1, 3),
            "files": done["files"], "task_phases_seconds": {k: round(v, 2) for k, v in phases.items()}}


def _write_jvm(spark, splits: list[Split], selection: Selection, out: str, partition_by, mode: str) -> None:
    def decode(batches):
        for b in batches:
            for row in b.to_pylist():
                yield from split_batches(Split(**row), selection)
    sc = spark.sparkContext
    rows = [(s.path, s.file_start, s.start, s.end) for s in splits]
    # One split per partition, so every task decodes one split (a DataFrame repartition would not promise it).
    split_df = spark.createDataFrame(sc.parallelize(rows, max(1, len(rows))),
                                     "path string, file_start bigint, start bigint, end bigint")
    with warnings.catch_warnings():     # pyspark warns about pandas versions; mapInArrow does not use pandas
        warnings.simplefilter("ignore", FutureWarning)
        df = split_df.mapInArrow(decode, SCHEMA_DDL) if rows else spark.createDataFrame([], SCHEMA_DDL)
    writer = df.write.mode("errorifexists" if mode == "error" else mode)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(str(out))


def export_local(root, out: str, selection: Selection | None = None, split_bytes: int = SPLIT_BYTES,
                 decoder: str = "fast", timer=None) -> dict:
    """Single process, no Spark: the same plan, decoder and Parquet writer as a task of `run_export`
    (`columns.fast_batches` into `writer.TaskFiles`), every split in turn into one file in the
    directory `out` (the benchmark's baseline). decoder "reference": `split_batches` instead."""
    from mqtool.spark.writer import TaskFiles, output_fs
    selection = selection or Selection()
    timer = timer or Timer()
    scans = local_plan(str(root), split_bytes, selection)
    timer.lap("plan")
    fs, path = output_fs(out)
    fs.create_dir(path, recursive=True)
    files = TaskFiles(fs, path, arrow_schema(), "00000-local", [])
    for s in scans:
        for sp in s.splits:
            batches = fast_batches(sp, selection, timer=timer) if decoder == "fast" else split_batches(sp, selection)
            for batch in batches:
                if decoder != "fast":
                    timer.lap("reference decode")
                files.add(batch)
                timer.lap("parquet")
    files.close()
    timer.lap("parquet")
    return summarize(scans)
