"""Consume queue files: 20-byte units pointing into the commitlog (ConsumeQueue.java).

    off  size  field
      0     8  commitLogOffset
      8     4  size            record TOTALSIZE
     12     8  tagsCode        TAGS.hashCode(), or delivery time for SCHEDULE_TOPIC_XXXX

Path: consumequeue/<topic>/<queueId>/<20-digit start byte offset>. Unit i (the queue offset)
lives at byte i*20 of the queue. A unit is valid iff offset >= 0 and size > 0; zeros end it.
`fillPreBlank` units are (0, 0x7FFFFFFF, 0).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .codes import CQ_UNIT_SIZE, INT32_MAX
from .errors import NotFoundError
from .lazyschema import on_first_use
from .mappedfiles import MappedFile, list_mapped_files


def _schemas() -> dict:
    from construct import Int32sb, Int64sb, Struct
    return {"CqUnitSchema": Struct(
        "offset" / Int64sb,
        "size" / Int32sb,
        "tags_code" / Int64sb,
    )}


__getattr__ = on_first_use(globals(), _schemas, "CqUnitSchema")

CQ_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert CQ_DTYPE.itemsize == CQ_UNIT_SIZE
PRE_BLANK_SIZE = INT32_MAX
_UNIT = struct.Struct(">qiq")


def read_units(buf, start: int = 0, end: int | None = None) -> np.ndarray:
    """The units of buf[start:end] as a structured array (zero-copy over an mmap)."""
    if end is None:
        end = len(buf)
    count = (end - start) // CQ_UNIT_SIZE
    if count <= 0:
        return np.zeros(0, dtype=CQ_DTYPE)
    return np.frombuffer(buf, dtype=CQ_DTYPE, count=count, offset=start)


def valid_prefix(units: np.ndarray) -> int:
    """Number of leading valid units (ConsumeQueue.recover's rule)."""
    bad = np.flatnonzero((units["offset"] < 0) | (units["size"] <= 0))
    return int(bad[0]) if bad.size else len(units)


def valid_prefix_in(units: np.ndarray, ranges: list[tuple[int, int]]) -> int:
    """valid_prefix of a file's units given its data ranges: past the first hole the units read as
    zeros, which are not valid, so only the units up to it (and the one it cuts) are looked at."""
    hole = ranges[0][1] if ranges and ranges[0][0] == 0 else 0
    return valid_prefix(units[:hole // CQ_UNIT_SIZE + 1])


def encode_unit(offset: int, size: int, tags_code: int) -> bytes:
    return _UNIT.pack(offset, size, tags_code)


@dataclass(frozen=True)
class QueueDir:
    topic: str
    queue_id: int
    path: Path


def list_queues(consumequeue_dir: str | os.PathLike) -> list[QueueDir]:
    """Every consumequeue/<topic>/<queueId> dir whose queue name is an integer."""
    root = Path(consumequeue_dir)
    if not root.is_dir():
        raise NotFoundError("not a consumequeue directory", path=root)
    queues = []
    for topic_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for qdir in topic_dir.iterdir():
            if qdir.is_dir() and qdir.name.lstrip("-").isdigit():
                queues.append(QueueDir(topic_dir.name, int(qdir.name), qdir))
    queues.sort(key=lambda q: (q.topic, q.queue_id))
    return queues


def queue_files(queue: QueueDir) -> list[MappedFile]:
    return list_mapped_files(queue.path)
