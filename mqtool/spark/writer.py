"""The export's output: Parquet files written by the tasks themselves, committed by the driver.

Spark only schedules: each task decodes its split (`columns.fast_batches`) and writes Parquet
with pyarrow into its own attempt directory under `OUT/_temporary/JOB/`. The driver commits
when every task has succeeded, moving the files of the attempts Spark reported (one per split)
into place; a failed job, or an attempt Spark did not report (failed, retried, speculative),
leaves nothing in OUT: on a failure the staging directory is removed, OUT too when the job
created it, and an existing OUT is left as it was (overwrite replaces it only at commit).

The layout is Spark's: `part-NNNNN-JOB.cNNN.snappy.parquet` files, hive-style partition
directories with values escaped as Spark escapes them (`%DLQ%g1` -> `topic=%25DLQ%25g1`), the
partition columns left out of the files, `_SUCCESS` on commit.
"""
from __future__ import annotations

import datetime as dt
import uuid

import numpy as np

from mqtool_store.errors import StoreError

ROW_GROUP_ROWS = 1 << 20          # rows buffered per partition directory before a row group is written
BUFFER_BYTES = 64 << 20           # all of a task's buffered rows, before every buffer is written out
MAX_OPEN_FILES = 64               # a task with more partition directories starts new files (c001, ...)
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# ExternalCatalogUtils.charToEscape (non-Windows).
_ESCAPE = set(range(0x01, 0x20)) | {ord(c) for c in "\"#%'*/:=?\\\x7f{[]^"}


class OutputExistsError(StoreError):
    """The output path exists and the mode is `error`."""


def escape_path_name(value: str) -> str:
    """ExternalCatalogUtils.escapePathName: a partition value as a directory name."""
    return "".join(f"%{ord(c):02X}" if ord(c) in _ESCAPE else c for c in value)


def partition_value(value) -> str:
    if value is None or value == "":
        return DEFAULT_PARTITION
    if isinstance(value, dt.date):
        return value.isoformat()
    return escape_path_name(str(value))


def output_fs(out: str):
    """(pyarrow filesystem, path in it) for a local path or a URI."""
    import pyarrow.fs as pafs

    from mqtool.spark.source import _filesystem, is_uri
    if is_uri(out):
        return _filesystem(out)
    import os
    return pafs.LocalFileSystem(), os.path.abspath(out)


def _exists(fs, path: str) -> bool:
    import pyarrow.fs as pafs
    return fs.get_file_info(path).type != pafs.FileType.NotFound


class TaskFiles:
    """One task attempt's Parquet files under its attempt directory, one or more per partition."""

    def __init__(self, fs, root: str, schema, stem: str, partition_by: list[str]):
        self.fs, self.root, self.stem, self.partition_by = fs, root, stem, list(partition_by)
        self.file_schema = schema
        for name in self.partition_by:
            self.file_schema = self.file_schema.remove(self.file_schema.get_field_index(name))
        self.buffers: dict[str, list] = {}
        self.buffered = 0
        self.writers: dict[str, object] = {}
        self.generation = 0
        self.files: list[list] = []           # [relative path, rows]
        self.current: dict[str, list] = {}    # partition directory -> its open file's entry in files
        self.dirs: set[str] = {""}

    def add(self, batch) -> None:
        if not batch.num_rows:
            return
        if not self.partition_by:
            self._buffer("", batch)
            return
        import pyarrow as pa
        import pyarrow.compute as pc
        keys = []
        for name in self.partition_by:
            col = batch.column(name)
            if pa.types.is_string(col.type):
                keys.append(pc.dictionary_encode(col).indices.to_numpy(zero_copy_only=False))
            elif pa.types.is_date32(col.type):
                keys.append(col.cast(pa.int32()).to_numpy(zero_copy_only=False))
            else:
                keys.append(col.to_numpy(zero_copy_only=False))
        order = np.lexsort(keys[::-1])
        stacked = np.stack([k[order] for k in keys], axis=1)
        edges = np.flatnonzero((stacked[1:] != stacked[:-1]).any(axis=1)) + 1
        starts = np.r_[0, edges]
        ends = np.r_[edges, len(order)]
        table = batch.drop_columns(self.partition_by)
        for a, b in zip(starts.tolist(), ends.tolist()):
            first = int(order[a])
            rel = "/".join(f"{name}={partition_value(batch.column(name)[first].as_py())}"
                           for name in self.partition_by)
            rows = np.sort(order[a:b])          # commitlog order within a file
            self._buffer(rel, table.take(pa.array(rows)))

    def _buffer(self, rel: str, batch) -> None:
        if not self.partition_by and batch.schema != self.file_schema:
            batch = batch.select(self.file_schema.names)
        self.buffers.setdefault(rel, []).append(batch)
        self.buffered += batch.nbytes
        if sum(b.num_rows for b in self.buffers[rel]) >= ROW_GROUP_ROWS:
            self._flush(rel)
        if self.buffered >= BUFFER_BYTES:
            for key in list(self.buffers):
                self._flush(key)

    def _flush(self, rel: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        batches = self.buffers.pop(rel, [])
        if not batches:
            return
        self.buffered -= sum(b.nbytes for b in batches)
        writer = self.writers.get(rel)
        if writer is None:
            if len(self.writers) >= MAX_OPEN_FILES:
                self._close_writers()
                self.generation += 1
            self._make_dirs(rel)
            path = f"{rel}/" if rel else ""
            path += f"part-{self.stem}.c{self.generation:03d}.snappy.parquet"
            writer = pq.ParquetWriter(f"{self.root}/{path}", self.file_schema, filesystem=self.fs,
                                      compression="snappy")
            self.writers[rel] = writer
            self.files.append([path, 0])
            self.current[rel] = self.files[-1]
        table = pa.Table.from_batches(batches, schema=self.file_schema)
        writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self.current[rel][1] += table.num_rows

    def _make_dirs(self, rel: str) -> None:
        """Partition directories one level at a time, never the attempt directory itself: an
        attempt whose directory the driver removed (the job failed) cannot recreate it."""
        parts = rel.split("/") if rel else []
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub not in self.dirs:
                if not _exists(self.fs, f"{self.root}/{'/'.join(parts[:i - 1])}".rstrip("/")):
                    raise StoreError("the job's staging directory is gone (the job failed or was cancelled)")
                self.fs.create_dir(f"{self.root}/{sub}", recursive=False)
                self.dirs.add(sub)

    def _close_writers(self) -> None:
        for w in self.writers.values():
            w.close()
        self.writers.clear()

    def close(self) -> list[list]:
        for key in list(self.buffers):
            self._flush(key)
        self._close_writers()
        return self.files


def write_task(fs, staging: str, job: str, index: int, attempt: int, batches, schema, partition_by, timer=None):
    """Write one split's batches into `staging/attempt-INDEX-ATTEMPT`; returns what the driver
    commits: (attempt directory, [[relative path, rows], ...]). A failing attempt removes its
    directory before the error goes to Spark."""
    root = f"{staging}/attempt-{index:05d}-{attempt}"
    fs.create_dir(root, recursive=False)       # fails when the staging directory is gone
    files = TaskFiles(fs, root, schema, f"{index:05d}-{job}", partition_by)
    try:
        for batch in batches:
            files.add(batch)
            if timer:
                timer.lap("parquet")
        written = files.close()
        if timer:
            timer.lap("parquet")
        return root, written
    except BaseException:
        try:
            files._close_writers()
        except Exception:  # noqa: BLE001 - the original error is the one to report
            pass
        fs.delete_dir(root)
        raise


class Job:
    """The driver's side: staging directory, mode checks, commit and abort."""

    def __init__(self, out: str, mode: str):
        self.fs, self.path = output_fs(out)
        self.out, self.mode = out, mode
        self.job = uuid.uuid4().hex[:16]
        self.existed = _exists(self.fs, self.path)
        if self.existed and mode == "error":
            raise OutputExistsError(f"path {out} already exists (mode error: pass overwrite or append)")
        self.temporary = f"{self.path}/_temporary"
        self.staging = f"{self.temporary}/{self.job}"

    def start(self) -> None:
        self.fs.create_dir(self.staging, recursive=True)

    def commit(self, results, schema, partition_by) -> dict:
        """Move the reported attempts' files into place (replacing OUT's data for overwrite)."""
        import pyarrow.fs as pafs
        import pyarrow.parquet as pq
        fs = self.fs
        if self.mode == "overwrite" and self.existed:
            for info in fs.get_file_info(pafs.FileSelector(self.path)):
                if info.path.rstrip("/") != self.temporary:
                    (fs.delete_dir if info.type == pafs.FileType.Directory else fs.delete_file)(info.path)
        made = set()
        files = rows = 0
        for root, written in results:
            for rel, n in written:
                parent = rel.rpartition("/")[0]
                if parent and parent not in made:
                    fs.create_dir(f"{self.path}/{parent}", recursive=True)
                    made.add(parent)
                fs.move(f"{root}/{rel}", f"{self.path}/{rel}")
                files += 1
                rows += n
        if not files and not partition_by:          # Spark writes the schema even with no rows
            with pq.ParquetWriter(f"{self.path}/part-00000-{self.job}.c000.snappy.parquet", schema,
                                  filesystem=fs, compression="snappy"):
                pass
            files = 1
        fs.open_output_stream(f"{self.path}/_SUCCESS").close()
        self._remove_staging()
        return {"files": files, "rows_written": rows}

    def abort(self) -> None:
        """After a failure: no staging left, and no OUT unless it existed before."""
        self._remove_staging()
        if not self.existed and _exists(self.fs, self.path):
            import pyarrow.fs as pafs
            if not self.fs.get_file_info(pafs.FileSelector(self.path)):
                self.fs.delete_dir(self.path)

    def _remove_staging(self) -> None:
        import pyarrow.fs as pafs
        if _exists(self.fs, self.staging):
            self.fs.delete_dir(self.staging)
        if _exists(self.fs, self.temporary) and not self.fs.get_file_info(pafs.FileSelector(self.temporary)):
            self.fs.delete_dir(self.temporary)
