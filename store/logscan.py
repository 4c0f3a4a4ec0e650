"""Walking commitlog files: where records are, where and why a file's valid data ends.

Two speeds over the same bytes:
  * `walk` + `header_table`: a tight loop that hops TOTALSIZE to TOTALSIZE, then numpy gathers
    every fixed field of every record at once (the header-only scan);
  * `iter_records`: full decode of each record (body, topic, properties) with `decode_record`.
Both stop at the same place for the same reason; tests hold them to it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .codes import MSG_FIXED_SIZE_V4
from .commitlog import (BLANK_MAGIC, BORN_V6, MESSAGE_MAGIC, MESSAGE_MAGIC_V2, STORE_V6,
                        MessageRecord, decode_record)
from .errors import FormatError

_SIZE_MAGIC = struct.Struct(">ii")


@dataclass(frozen=True)
class FileEnd:
    """Where the valid records of one file end (the write position) and why."""
    position: int          # offset within the file
    reason: str            # "full" | "blank" | "unwritten" | "corrupt"
    detail: str = ""
    invalid_bytes: int = 0  # non-zero bytes from `position` to the last non-zero byte

    @property
    def clean(self) -> bool:
        return self.reason != "corrupt"


def last_nonzero(buf, start: int, end: int, chunk: int = 1 << 20) -> int:
    """Index of the last non-zero byte in buf[start:end], or -1. Scans backwards in chunks."""
    arr = np.frombuffer(buf, dtype=np.uint8) if len(buf) else np.zeros(0, np.uint8)
    hi = end
    while hi > start:
        lo = max(start, hi - chunk)
        nz = np.flatnonzero(arr[lo:hi])
        if nz.size:
            return lo + int(nz[-1])
        hi = lo
    return -1


def classify_end(buf, pos: int, end: int, detail: str = "") -> FileEnd:
    """Why a walk stopped at `pos`: clean end (full, blank, zeros) or corruption."""
    if pos >= end:
        return FileEnd(pos, "full")
    if pos + 8 <= end:
        size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
        if magic == BLANK_MAGIC and 8 <= size <= end - pos:
            return FileEnd(pos, "blank")
    tail = last_nonzero(buf, pos, end)
    if tail < 0:
        return FileEnd(pos, "unwritten")
    return FileEnd(pos, "corrupt", detail or "bad record", tail - pos + 1)


def walk(buf, start: int = 0, end: int | None = None) -> tuple[list[int], FileEnd]:
    """Positions of consecutive message records from `start`, and where/why they end.

    Checks magic and bounds while hopping; `header_table` then checks each record's size
    against its length fields (vectorised) and may cut the list shorter.
    """
    if end is None:
        end = len(buf)
    unpack = _SIZE_MAGIC.unpack_from
    positions: list[int] = []
    append = positions.append
    pos = start
    limit = end - MSG_FIXED_SIZE_V4
    try:
        while pos <= limit:
            size, magic = unpack(buf, pos)
            if (magic == MESSAGE_MAGIC or magic == MESSAGE_MAGIC_V2) and MSG_FIXED_SIZE_V4 <= size <= end - pos:
                append(pos)
                pos += size
            else:
                break
    except struct.error:  # pragma: no cover - guarded by limit
        pass
    return positions, classify_end(buf, pos, end)


# Fields at fixed offsets from the record start, for every host kind.
_FIXED_FIELDS = [
    ("total_size", 0, ">i4"), ("magic", 4, ">i4"), ("body_crc", 8, ">i4"), ("queue_id", 12, ">i4"),
    ("flag", 16, ">i4"), ("queue_offset", 20, ">i8"), ("physical_offset", 28, ">i8"),
    ("sys_flag", 36, ">i4"), ("born_timestamp", 40, ">i8"),
]
# Fields after the born host: offsets assume IPv4 hosts; shifted by 12 per IPv6 host.
_SHIFTED_FIELDS = [
    ("store_timestamp", 56, ">i8", 1), ("reconsume_times", 72, ">i4", 2),
    ("prepared_transaction_offset", 76, ">i8", 2), ("body_len", 84, ">i4", 2),
]


class _Gatherer:
    """Reads big-endian ints at arbitrary byte positions of a buffer, vectorised.

    numpy views need aligned starts, so the buffer is viewed once per byte shift and each
    position reads from the view whose shift matches it.
    """

    def __init__(self, buf):
        self.arr = np.frombuffer(buf, dtype=np.uint8) if len(buf) else np.zeros(0, np.uint8)
        self._views: dict[tuple[str, int], np.ndarray] = {}

    def _view(self, dtype: str, shift: int) -> np.ndarray:
        key = (dtype, shift)
        view = self._views.get(key)
        if view is None:
            width = np.dtype(dtype).itemsize
            usable = (len(self.arr) - shift) // width * width
            view = self.arr[shift:shift + usable].view(dtype)
            self._views[key] = view
        return view

    def read(self, positions: np.ndarray, dtype: str) -> np.ndarray:
        width = np.dtype(dtype).itemsize
        out = np.empty(len(positions), dtype=np.int64)
        residues = positions % width
        for shift in np.unique(residues):
            sel = residues == shift
            out[sel] = self._view(dtype, int(shift))[(positions[sel] - shift) // width]
        return out

    def read_u8(self, positions: np.ndarray) -> np.ndarray:
        return self.arr[positions].astype(np.int64)


def header_table(buf, positions: list[int] | np.ndarray, end: int | None = None):
    """Every fixed field of the records at `positions`, as a dict of int64 arrays.

    Also checks each TOTALSIZE against calMsgLength of its length fields; returns
    (table, n_valid): records from index n_valid on are not trusted (the first has a size
    mismatch or a field that runs out of bounds).
    """
    if end is None:
        end = len(buf)
    pos = np.asarray(positions, dtype=np.int64)
    g = _Gatherer(buf)
    t = {"position": pos}
    for name, off, dt in _FIXED_FIELDS:
        t[name] = g.read(pos + off, dt)
    shift = np.where(t["sys_flag"] & BORN_V6, 12, 0)
    shift2 = shift + np.where(t["sys_flag"] & STORE_V6, 12, 0)
    for name, off, dt, which in _SHIFTED_FIELDS:
        t[name] = g.read(pos + off + (shift if which == 1 else shift2), dt)
    body_pos = pos + 88 + shift2
    rec_end = pos + t["total_size"]
    body_len = t["body_len"]
    v2 = t["magic"] == MESSAGE_MAGIC_V2
    topic_len_pos = body_pos + np.maximum(body_len, 0)
    ok = (body_len >= 0) & (topic_len_pos + 2 <= rec_end)
    safe_tlp = np.where(ok, topic_len_pos, pos)
    len8 = g.read_u8(safe_tlp)
    topic_len = np.where(v2, g.read(safe_tlp, ">i2"), np.where(len8 > 127, len8 - 256, len8))
    topic_pos = topic_len_pos + 1 + v2
    props_len_pos = topic_pos + np.maximum(topic_len, 0)
    ok &= (topic_len >= 0) & (props_len_pos + 2 <= rec_end)
    props_len = g.read(np.where(ok, props_len_pos, pos), ">i2")
    expected = MSG_FIXED_SIZE_V4 + body_len + topic_len + props_len + shift2 + v2
    ok &= (props_len >= 0) & (expected == t["total_size"])
    t.update(body_pos=body_pos, topic_pos=topic_pos, topic_len=topic_len,
             props_pos=props_len_pos + 2, props_len=props_len)
    bad = np.flatnonzero(~ok)
    n_valid = int(bad[0]) if bad.size else len(pos)
    return t, n_valid


def scan_file(buf, end: int | None = None):
    """Header-only scan of one file: (table, FileEnd), the table cut at the first bad record."""
    if end is None:
        end = len(buf)
    positions, file_end = walk(buf, 0, end)
    table, n_valid = header_table(buf, positions, end)
    if n_valid < len(positions):
        table = {k: v[:n_valid] for k, v in table.items()}
        stop = positions[n_valid]
        try:
            decode_record(buf, stop, end)
            detail = "record size does not match its fields"
        except FormatError as exc:
            detail = exc.message
        file_end = classify_end(buf, stop, end, detail)
        if file_end.reason != "corrupt":
            file_end = FileEnd(stop, "corrupt", detail, max(1, last_nonzero(buf, stop, end) - stop + 1))
    return table, file_end


class RecordIterator:
    """Full decode of consecutive records of one file; `.end` is set when iteration finishes."""

    def __init__(self, buf, start: int = 0, end: int | None = None, check_crc: bool = False):
        self.buf = buf
        self.start = start
        self.limit = len(buf) if end is None else end
        self.check_crc = check_crc
        self.end: FileEnd | None = None

    def __iter__(self) -> Iterator[tuple[int, MessageRecord]]:
        buf, pos, limit = self.buf, self.start, self.limit
        unpack = _SIZE_MAGIC.unpack_from
        detail = ""
        while pos + 8 <= limit:
            size, magic = unpack(buf, pos)
            if magic != MESSAGE_MAGIC and magic != MESSAGE_MAGIC_V2:
                break
            try:
                rec = decode_record(buf, pos, limit, self.check_crc)
            except FormatError as exc:
                detail = exc.message
                break
            yield pos, rec
            pos += size
        end = classify_end(buf, pos, limit, detail)
        if detail and end.reason != "corrupt":
            end = FileEnd(pos, "corrupt", detail, max(1, last_nonzero(buf, pos, limit) - pos + 1))
        self.end = end
