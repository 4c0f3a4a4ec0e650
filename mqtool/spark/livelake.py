"""The live export's micro-batches into a local Parquet lake, written by the tasks themselves.

The driver plans each micro-batch as the `rocketmq` stream source does (`datasource.StreamReader`:
offsets, read limits, availableNow's target), records its end offsets in the checkpoint, and runs
one Spark stage whose tasks pull their queue ranges (`livereader.read_ranges`) and write the Arrow
batches with pyarrow (`writer.write_task`) into their attempt directories under
`OUT/_temporary/`; the JVM never sees a row. The driver then commits the batch by its id:

1. the lake paths it will create go to `CK/mqtool-pending/N`;
2. the attempts' files move into place;
3. `OUT/_spark_metadata/N` lists them (the commit: Spark's readers see the batch from now on);
4. `CK/commits/N`, then the consumer group's offsets (when a group is given).

A driver killed at any moment leaves batch N either in the log or not. A rerun re-plans an
uncommitted batch from its recorded offsets (the same messages), first deleting the files a
killed attempt had moved (step 1's list); a batch already in the log is only marked committed.
"""
from __future__ import annotations

import os
import re
import shutil
import time
import uuid

from mqtool.spark.sinklog import Checkpoint, SinkLog

STAGING_PREFIX = "mqtool-batch-"
ROWS_PER_FILE = 1 << 20      # a large micro-batch: tasks of up to this many rows, a multiple of the cores
_LOCAL = re.compile(r"^local\[(?:\*|\d+)(?:,\s*(\d+))?\]$|^local$")


def _write_one(fs, staging: str, job: str, opts, parts: list[str], index: int, ranges, attempt: int):
    from mqtool.spark.livereader import read_ranges
    from mqtool.spark.liveplan import QueueRange
    from mqtool.spark.schema import live_arrow_schema
    from mqtool.spark.writer import write_task
    batches = read_ranges(opts, [QueueRange(*r) for r in ranges])
    return write_task(fs, staging, job, index, attempt, batches, live_arrow_schema(), parts)


def _task(fs, staging: str, job: str, opts, parts: list[str]):
    def run(items):
        from pyspark import TaskContext
        attempt = TaskContext.get().attemptNumber()
        for index, ranges in items:
            yield _write_one(fs, staging, job, opts, parts, index, ranges, attempt)
    return run


def local_attempts(master: str) -> int | None:
    """How often a local master runs a failing task (local[N,F]: F; local[N]: once); None for a
    cluster master, whose tasks run on its executors."""
    m = _LOCAL.match(master.strip())
    if not m:
        return None
    return int(m.group(1)) if m.group(1) else 1


def in_attempts(attempts: int, run):
    """run(attempt) as a local master runs a task: tried again on failure, up to its task retries."""
    for attempt in range(attempts):
        try:
            return run(attempt)
        except Exception:
            if attempt + 1 >= attempts:
                raise
    return None


def _in_driver(fs, staging: str, job: str, opts, parts: list[str], ranges, attempts: int) -> list:
    """A batch of one task on a local master, run by the driver itself, as Spark would run it
    (attempt by attempt, up to the master's task retries) but without a Spark job: the task would
    run on this machine anyway, and a job's first Python worker costs 2-3 s to start."""
    return [in_attempts(attempts, lambda attempt: _write_one(fs, staging, job, opts, parts, 0, ranges, attempt))]


def _remove_stale_staging(out: str) -> None:
    tmp = os.path.join(out, "_temporary")
    if os.path.isdir(tmp):
        for name in os.listdir(tmp):
            if name.startswith(STAGING_PREFIX):
                shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
        if not os.listdir(tmp):
            os.rmdir(tmp)


def _tasks(reader, start: dict, end: dict, cores: int) -> list:
    """The batch's queue ranges in tasks: a small batch as the source packs it (`datasource.
    ROWS_PER_TASK` a task); a large one in a multiple of `cores` tasks (no round of tasks with
    idle cores at the end), each of up to ROWS_PER_FILE rows: every task writes one file."""
    from mqtool.spark.datasource import ROWS_PER_TASK
    from mqtool.spark.liveplan import QueueRange, pack
    pieces = [QueueRange(*r) for p in reader.partitions(start, end) for r in p.value]
    total = sum(p.size for p in pieces)
    per_task = ROWS_PER_TASK
    if total > ROWS_PER_TASK:
        n = max(cores, 1) * -(-total // (max(cores, 1) * ROWS_PER_FILE))
        per_task = max(-(-total // n), 1)
    return pack(pieces, reader.opts.min_partitions, per_task)


def _write_batch(spark, reader, batch_id: int, start: dict, end: dict, out: str, parts: list[str]):
    """One micro-batch's files, staged: [(attempt directory, [[relative path, rows], ...]), ...]."""
    import pyarrow.fs as pafs

    from mqtool.spark.progress import describe
    groups = _tasks(reader, start, end, spark.sparkContext.defaultParallelism)
    if not groups:
        return [], None
    fs = pafs.LocalFileSystem()
    job = f"{STAGING_PREFIX}{batch_id}-{uuid.uuid4().hex[:12]}"
    staging = os.path.join(out, "_temporary", job)
    fs.create_dir(staging, recursive=True)
    describe(spark.sparkContext, f"export: micro-batch {batch_id}, {len(groups)} tasks")
    items = [(i, [(r.topic, r.broker, r.queue_id, r.start, r.end) for r in g]) for i, g in enumerate(groups)]
    attempts = local_attempts(spark.sparkContext.master)
    try:
        if len(items) == 1 and attempts:
            results = _in_driver(fs, staging, job, reader.opts, parts, items[0][1], attempts)
        else:
            results = spark.sparkContext.parallelize(items, len(items)).mapPartitions(
                _task(fs, staging, job, reader.opts, parts)).collect()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return results, staging


def _commit(log: SinkLog, ck: Checkpoint, batch_id: int, out: str, results, staging) -> int:
    moves, rows = [], 0
    for root, written in results:
        for rel, n in written:
            moves.append((os.path.join(root, rel), os.path.join(out, rel)))
            rows += n
    ck.write_pending(batch_id, [dst for _src, dst in moves])
    for src, dst in moves:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.replace(src, dst)
    log.add(batch_id, [dst for _src, dst in moves])
    ck.write_commit(batch_id)
    if staging:
        shutil.rmtree(staging, ignore_errors=True)
    tmp = os.path.join(out, "_temporary")
    if os.path.isdir(tmp) and not os.listdir(tmp):
        os.rmdir(tmp)
    return rows


def _discard(paths: list[str]) -> None:
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass


def _reached(target: dict | None, end: dict) -> bool:
    from mqtool.spark.liveoptions import offsets_from_json
    if target is None:
        return False
    got = offsets_from_json(end)
    return all(got.get(q, 0) >= t for q, t in target.items())


def lake_export(spark, options: dict, out: str, checkpoint: str, partition_by: list[str],
                interval_s: float | None, on_batch=None, stopping=lambda: False) -> dict:
    """`livejobs.stream_export` into a local directory (see the module's text)."""
    from mqtool.spark.datasource import StreamReader
    from mqtool.spark.liveoptions import parse_options
    out = os.path.abspath(out)
    reader = StreamReader(parse_options(options))
    log, ck = SinkLog(out), Checkpoint(checkpoint)
    os.makedirs(out, exist_ok=True)
    _remove_stale_staging(out)
    if interval_s is None:
        reader.prepareForTriggerAvailableNow()
    limit = reader.getDefaultReadLimit()
    rows = batches = 0
    last_end = None
    while True:
        t0 = time.perf_counter()
        batch_id = ck.last_commit() + 1
        planned = ck.offsets(batch_id)
        previous = ck.offsets(batch_id - 1) if batch_id > 0 else None
        start = previous if previous is not None else reader.initialOffset()
        if planned is not None and log.latest() >= batch_id:     # in the lake; only its commit record is missing
            ck.write_commit(batch_id)
            ck.clear_pending(batch_id)
            continue
        end = planned if planned is not None else reader.latestOffset(start, limit)
        if end != start or planned is not None:
            if planned is None:
                ck.write_offsets(batch_id, end)
            _discard(ck.pending(batch_id))          # a killed attempt's files that no log lists
            results, staging = _write_batch(spark, reader, batch_id, start, end, out, partition_by)
            t1 = time.perf_counter()
            n = _commit(log, ck, batch_id, out, results, staging)
            reader.commit(end)
            ck.clear_pending(batch_id)
            rows, batches, last_end = rows + n, batches + 1, end
            if on_batch:
                took = round((time.perf_counter() - t0) * 1000)
                on_batch({"batchId": batch_id, "numInputRows": n, "sources": [{"endOffset": end}],
                          "durationMs": {"triggerExecution": took, "addBatch": round((t1 - t0) * 1000)}})
            if interval_s is None:
                if _reached(reader.target, end):
                    break                           # availableNow's target is in: no need to ask again
                continue
        elif interval_s is None:
            break
        due = t0 + interval_s                       # a processing-time trigger: every interval_s
        while not stopping() and time.perf_counter() < due:
            time.sleep(min(0.05, max(0.0, due - time.perf_counter())))
        if stopping():
            break
    if last_end is None and ck.last_commit() >= 0:
        last_end = ck.offsets(ck.last_commit())
    return {"rows": rows, "batches": batches, "out": out, "checkpoint": checkpoint, "offsets": last_end or {}}
