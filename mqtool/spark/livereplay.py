"""`mqtool spark replay` of a local Parquet file or directory: tasks read their rows with pyarrow
and send them with the sink (`livesink.send_batches`); the JVM never sees a row.

The driver lists the files (those a `_spark_metadata` log lists when there is one, as Spark's own
reader would), cuts their row groups into row ranges of about equal size, one per core, and sums
what the tasks sent. On a local master the driver sends the tasks' rows itself, on a thread per core
(`livelake.local_attempts`): those tasks would run on this machine anyway, a job's first Python
workers cost 2-3 s to start, and the encoding (pyarrow, numpy) and the sends leave the GIL. As
through Spark's writer, a retried task sends its rows again (at-least-once).
"""
from __future__ import annotations

import os

from mqtool.spark.livelake import in_attempts, local_attempts

COLUMNS = ("body", "tags", "keys", "properties")
ROWS_PER_TASK = 65_536         # fewer rows than this: one task
READ_ROWS = 8_192              # rows a task reads (and converts) at a time


def files(path: str) -> list[str]:
    """The Parquet files to replay: the sink log's, or every part file under `path` (hidden and
    `_`-prefixed names skipped, as Spark and pyarrow skip them)."""
    from mqtool.spark.sinklog import SinkLog, local_path
    if os.path.isfile(path):
        return [path]
    log = SinkLog(path)
    if log.latest() >= 0:
        return sorted(local_path(e["path"]) for e in log.all_files())
    found = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        found += [os.path.join(root, n) for n in sorted(names) if not n.startswith(("_", ".")) and
                  n.endswith(".parquet")]
    return found


def plan(paths: list[str], tasks: int) -> tuple[list[list[tuple]], int]:
    """([[(file, row group, first row, rows), ...] per task], total rows): row ranges of about
    total / tasks rows each, in file and row-group order."""
    import pyarrow.parquet as pq
    groups = []
    for p in paths:
        meta = pq.ParquetFile(p).metadata
        groups += [(p, i, meta.row_group(i).num_rows) for i in range(meta.num_row_groups)]
    total = sum(n for _p, _i, n in groups)
    tasks = max(1, min(tasks, -(-total // ROWS_PER_TASK)))
    per_task = -(-total // tasks) if total else 0
    out: list[list[tuple]] = [[]]
    room = per_task
    for p, i, n in groups:
        first = 0
        while first < n:
            if room == 0:
                out.append([])
                room = per_task
            take = min(room, n - first)
            out[-1].append((p, i, first, take))
            first, room = first + take, room - take
    return [t for t in out if t], total


def read(pieces: list[tuple], columns: list[str]):
    """Arrow record batches of a task's row ranges."""
    import pyarrow.parquet as pq
    for path, group, first, rows in pieces:
        table = pq.ParquetFile(path).read_row_group(group, columns=columns).slice(first, rows)
        yield from table.to_batches(max_chunksize=READ_ROWS)


def _send(opts, columns: list[str]):
    def run(items):
        from mqtool.spark.livesink import send_batches
        for pieces in items:
            yield send_batches(opts, read(pieces, columns))
    return run


def _in_driver(opts, columns: list[str], pieces: list[tuple], attempts: int) -> int:
    """One task's rows sent by the driver, attempt by attempt as a local master retries a task."""
    return in_attempts(attempts, lambda _attempt: next(_send(opts, columns)([pieces])))


def replay_files(spark, path: str, opts) -> dict | None:
    """Every row of the local Parquet at `path` sent to the options' topic: {"rows": n}. None when
    its files do not all hold a body column (a partition column, say): Spark's reader then."""
    import pyarrow.parquet as pq
    paths = files(path)
    if not paths:
        return {"rows": 0}
    schemas = [pq.read_schema(p) for p in paths]
    if any("body" not in s.names for s in schemas):
        return None
    columns = [c for c in COLUMNS if all(c in s.names for s in schemas)]
    if any(c not in columns and any(c in s.names for s in schemas) for c in COLUMNS):
        return None                 # a column some files have and some not: Spark's reader merges them
    sc = spark.sparkContext
    tasks, _total = plan(paths, sc.defaultParallelism)
    if not tasks:
        return {"rows": 0}
    attempts = local_attempts(sc.master)
    if attempts:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(min(len(tasks), sc.defaultParallelism)) as pool:
            return {"rows": sum(pool.map(lambda task: _in_driver(opts, columns, task, attempts), tasks))}
    from mqtool.spark.progress import describe
    describe(sc, f"replay: {len(tasks)} tasks")
    sent = sc.parallelize(tasks, len(tasks)).mapPartitions(_send(opts, columns)).collect()
    return {"rows": sum(sent)}
