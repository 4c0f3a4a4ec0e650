"""Where the jobs' bytes come from, and how a store is cut into record-aligned splits.

A store root is a local path (files are memory-mapped) or a URI pyarrow can open
(`file://`, `hdfs://`, `s3://` (`s3a://` is read as `s3://`), `gs://`, ...: the range a task
needs is read into memory). Planning runs one task per commitlog file: a header-only walk
(`store.logscan.walk` + `header_table`) finds record boundaries, validates every header, and
cuts the file into [start, end) ranges of about `split_bytes` that begin on a record boundary
and end where the file's valid records end, so decode tasks never meet a bad record.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mqtool.spark.progress import describe

from mqtool_store.commitlog import MESSAGE_MAGIC, MESSAGE_MAGIC_V2, decode_record
from mqtool_store.errors import FormatError, NotFoundError, WrongKindError
from mqtool_store.layout import is_store_root
from mqtool_store.logscan import FileEnd, classify_end, header_table, last_nonzero, walk
from mqtool_store.mappedfiles import ReadOnlyMap, is_mapped_file_name, list_mapped_files

SPLIT_BYTES = 64 * 1024 * 1024
HEADER_CHUNK = 1 << 18      # records per header_table call: bounds a task's memory


@dataclass(frozen=True)
class LogFile:
    path: str        # local path or URI
    start: int       # fileFromOffset (from the 20-digit name)
    size: int


@dataclass(frozen=True)
class Split:
    path: str
    file_start: int
    start: int       # position in the file, on a record boundary
    end: int         # exclusive, the end of the split's last record


@dataclass
class FileScan:
    """What the planner learned about one file."""
    file: LogFile
    splits: list[Split]
    records: int                      # valid records in the file
    bad: dict | None = None           # {"file", "position", "offset", "detail", "invalid_bytes"}
    selected: dict[str, list[int]] = field(default_factory=dict)   # topic -> [rows, bytes]


def is_uri(path: str) -> bool:
    return "://" in str(path)


def _filesystem(uri: str):
    import pyarrow.fs as pafs
    for old in ("s3a://", "s3n://"):
        if uri.startswith(old):
            uri = "s3://" + uri[len(old):]
    try:
        return pafs.FileSystem.from_uri(uri)
    except Exception as exc:  # noqa: BLE001 - each filesystem raises its own kind
        raise NotFoundError(f"cannot open {uri}: {exc}") from None


def list_commitlog(root: str) -> list[LogFile]:
    """The commitlog files of a store root, in offset order. Raises for a path that is no store."""
    if not is_uri(root):
        p = Path(root)
        if not p.exists():
            raise NotFoundError("no such store", path=p)
        if not is_store_root(p):
            raise WrongKindError("not a store root (no commitlog, consumequeue or checkpoint inside)", path=p)
        cl = p / "commitlog"
        return [LogFile(str(f.path), f.start, f.size) for f in list_mapped_files(cl)] if cl.is_dir() else []
    import pyarrow.fs as pafs
    fs, base = _filesystem(root)
    base = base.rstrip("/")
    info = fs.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        raise NotFoundError("no such store", path=root)
    cl = fs.get_file_info(base + "/commitlog")
    if cl.type != pafs.FileType.Directory:
        raise WrongKindError("not a store root (no commitlog directory inside)", path=root)
    prefix = root.rstrip("/") + "/commitlog/"
    files = [LogFile(prefix + i.base_name, int(i.base_name), i.size)
             for i in fs.get_file_info(pafs.FileSelector(base + "/commitlog"))
             if i.type == pafs.FileType.File and is_mapped_file_name(i.base_name)]
    return sorted(files, key=lambda f: f.start)


@contextmanager
def open_range(path: str, start: int, end: int):
    """(buf, base): a buffer holding bytes [start, end) of the file at buf[start - base:]."""
    if is_uri(path):
        fs, p = _filesystem(path)
        with fs.open_input_file(p) as f:
            yield f.read_at(end - start, start), start
        return
    with ReadOnlyMap(path) as m:
        yield m.buf, 0


def scan_log_file(f: LogFile, split_bytes: int = SPLIT_BYTES, selection=None) -> FileScan:
    """Header-only pass over one file: record-aligned splits, where and why valid data ends,
    and (with a selection) the rows and bytes per topic an export of it will write."""
    with open_range(f.path, 0, f.size) as (buf, _):
        positions, file_end = walk(buf, 0, f.size)
        pos = np.asarray(positions, dtype=np.int64)
        del positions
        n_valid = len(pos)
        selected: dict[str, list[int]] = {}
        for lo in range(0, len(pos), HEADER_CHUNK):
            table, ok = header_table(buf, pos[lo:lo + HEADER_CHUNK], f.size)
            if selection is not None:
                cut = {k: v[:ok] for k, v in table.items()}
                selection.count(buf, cut, selected)
            if ok < len(table["position"]):
                n_valid = lo + ok
                file_end = _bad_record_end(buf, int(pos[n_valid]), f.size)
                break
        valid_end = int(pos[n_valid - 1]) + _size_at(buf, int(pos[n_valid - 1])) if n_valid else 0
        cuts = [0]
        if n_valid:
            step = np.searchsorted(pos[:n_valid], np.arange(split_bytes, valid_end, split_bytes))
            cuts += sorted({int(pos[i]) for i in step if 0 < i < n_valid} - {0})
        bounds = cuts + [valid_end]
        splits = [Split(f.path, f.start, a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    bad = None
    if file_end.reason == "corrupt":
        bad = {"file": f.path, "position": file_end.position, "offset": f.start + file_end.position,
               "detail": file_end.detail or "bad record", "invalid_bytes": file_end.invalid_bytes}
    return FileScan(f, splits, n_valid, bad, selected)


def _size_at(buf, pos: int) -> int:
    return int.from_bytes(bytes(buf[pos:pos + 4]), "big", signed=True)


def _bad_record_end(buf, stop: int, end: int) -> FileEnd:
    """scan_file's verdict on a record whose header fields disagree with its size."""
    fe = classify_end(buf, stop, end)
    magic = int.from_bytes(bytes(buf[stop + 4:stop + 8]), "big", signed=True)
    if magic in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2):
        try:
            decode_record(buf, stop, end)
            detail = "record size does not match its fields"
        except FormatError as exc:
            detail = exc.message
        return FileEnd(stop, "corrupt", detail, max(1, last_nonzero(buf, stop, end) - stop + 1))
    return fe


def plan(spark, root: str, split_bytes: int = SPLIT_BYTES, selection=None) -> list[FileScan]:
    """Scan every commitlog file of `root` in parallel (one task per file)."""
    files = list_commitlog(str(root))
    if not files:
        return []
    sc = spark.sparkContext
    describe(sc, f"plan: walk {len(files)} commitlog files")
    return sc.parallelize(files, len(files)).map(lambda f: scan_log_file(f, split_bytes, selection)).collect()


def local_plan(root: str, split_bytes: int = SPLIT_BYTES, selection=None) -> list[FileScan]:
    """The same plan without Spark (the single-process baseline, tests)."""
    return [scan_log_file(f, split_bytes, selection) for f in list_commitlog(str(root))]

