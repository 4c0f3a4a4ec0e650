"""The live export's commit records, in Spark's own formats, written by the driver.

- `OUT/_spark_metadata/N`: Spark's file sink log (FileStreamSinkLog, version 1): "v1" then one
  JSON line per file the micro-batch added (its path a percent-escaped file: URI, as Spark's). Every `COMPACT_INTERVAL`th batch is written as
  `N.compact` holding every file so far, as Spark compacts it (a reader looks for those names).
  `spark.read.parquet(OUT)` reads only the files this log lists.
- `CK/offsets/N` and `CK/commits/N`: Spark's checkpoint layout ("v1", metadata, the source's
  offsets JSON; "v1", {"nextBatchWatermarkMs":0}), so a checkpoint Spark's own file sink wrote
  is continued where its last committed batch ended.
- `CK/mqtool-pending/N`: the lake paths batch N is moving into place, written before the first
  move; a rerun of batch N deletes them first (files of a killed batch that no log lists).

Every record is written to a temporary name and renamed, so a record is whole or absent.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from urllib.parse import unquote

VERSION = "v1"
COMPACT_INTERVAL = 10        # spark.sql.streaming.fileSink.log.compactInterval's default
BLOCK_SIZE = 32 << 20        # what Spark records for a local file


def local_path(uri: str) -> str:
    """A log entry's path as a local file name. Entries are URIs, percent-escaped (Spark reads them
    with java.net.URI: a raw `%25` in a partition directory's name, or a space, would not do);
    logs this export wrote before held the plain path after file://, which is kept when it exists."""
    path = uri.removeprefix("file://").removeprefix("file:")
    return path if "%" not in path or os.path.exists(path) else unquote(path)


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{os.path.dirname(path)}/.{os.path.basename(path)}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _ids(folder: str) -> dict[int, str]:
    """Batch id -> file name of a log folder (N or N.compact)."""
    out = {}
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            head = name.split(".")[0]
            if head.isdigit() and name in (head, f"{head}.compact"):
                out[int(head)] = name
    return out


class SinkLog:
    """`OUT/_spark_metadata`, as Spark's FileStreamSinkLog reads and writes it."""

    def __init__(self, out: str):
        self.dir = os.path.join(os.path.abspath(out), "_spark_metadata")

    def latest(self) -> int:
        ids = _ids(self.dir)
        return max(ids) if ids else -1

    def interval(self) -> int:
        compact = sorted(i for i, n in _ids(self.dir).items() if n.endswith(".compact"))
        return compact[0] + 1 if compact else COMPACT_INTERVAL

    def entries(self, batch_id: int) -> list[dict]:
        name = _ids(self.dir).get(batch_id)
        if name is None:
            return []
        with open(os.path.join(self.dir, name)) as f:
            lines = f.read().splitlines()
        return [json.loads(ln) for ln in lines[1:] if ln.strip()]

    def all_files(self) -> list[dict]:
        """Every file the log lists (what a reader honouring it sees)."""
        latest = self.latest()
        if latest < 0:
            return []
        every = self.interval()
        first = max(0, (latest + 1) // every * every - 1)     # the latest compaction, or batch 0
        seen = []
        for i in range(first, latest + 1):
            seen += self.entries(i)
        return [e for e in seen if e.get("action", "add") == "add"]

    def add(self, batch_id: int, paths: list[str]) -> None:
        entries = []
        for p in paths:
            st = os.stat(p)
            entries.append({"path": Path(os.path.abspath(p)).as_uri(), "size": st.st_size, "isDir": False,
                            "modificationTime": int(st.st_mtime * 1000), "blockReplication": 1,
                            "blockSize": BLOCK_SIZE, "action": "add"})
        every = self.interval()
        name = str(batch_id)
        if (batch_id + 1) % every == 0:           # a compaction batch: everything so far
            entries = self.all_files() + entries
            name += ".compact"
        _write(os.path.join(self.dir, name), "\n".join([VERSION, *(json.dumps(e) for e in entries)]))


class Checkpoint:
    """`CK/offsets`, `CK/commits` (Spark's layout) and `CK/mqtool-pending`."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)

    def _file(self, kind: str, batch_id: int) -> str:
        return os.path.join(self.path, kind, str(batch_id))

    def last_commit(self) -> int:
        ids = _ids(os.path.join(self.path, "commits"))
        return max(ids) if ids else -1

    def offsets(self, batch_id: int) -> dict | None:
        try:
            with open(self._file("offsets", batch_id)) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return None
        return json.loads(lines[2]) if len(lines) > 2 and lines[2] != "-" else {}

    def write_offsets(self, batch_id: int, end: dict) -> None:
        if not os.path.exists(os.path.join(self.path, "metadata")):
            import uuid
            _write(os.path.join(self.path, "metadata"), json.dumps({"id": str(uuid.uuid4())}))
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": int(time.time() * 1000), "conf": {}}
        _write(self._file("offsets", batch_id), "\n".join([VERSION, json.dumps(meta), json.dumps(end)]))

    def write_commit(self, batch_id: int) -> None:
        _write(self._file("commits", batch_id), "\n".join([VERSION, json.dumps({"nextBatchWatermarkMs": 0})]))

    def pending(self, batch_id: int) -> list[str]:
        try:
            with open(self._file("mqtool-pending", batch_id)) as f:
                return json.load(f)
        except FileNotFoundError:
            return []

    def write_pending(self, batch_id: int, paths: list[str]) -> None:
        _write(self._file("mqtool-pending", batch_id), json.dumps(paths))

    def clear_pending(self, batch_id: int) -> None:
        try:
            os.remove(self._file("mqtool-pending", batch_id))
        except FileNotFoundError:
            pass
