"""Walking commitlog files: where records are, where and why a file's valid data ends.

Two speeds over the same bytes:
  * `walk` + `header_table`: the record starts (found by a vectorised magic-code search, checked
    against the TOTALSIZE hops; `walk_loop` is the plain loop it must agree with), then numpy
    gathers every fixed field of many records at once (the header-only scan: `HeaderScan`
    chunk by chunk, or its chunks over a thread pool with `HeaderScan.map`; `scan_file` for a
    whole file);
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


def last_nonzero_in(buf, ranges: list[tuple[int, int]], start: int, end: int) -> int:
    """last_nonzero over the parts of [start, end) in `ranges` (a file's data ranges: the rest
    reads as zeros), or -1."""
    for lo, hi in reversed(ranges):
        lo, hi = max(lo, start), min(hi, end)
        if lo < hi:
            found = last_nonzero(buf, lo, hi)
            if found >= 0:
                return found
    return -1


def _last_nonzero(buf, start: int, end: int, ranges) -> int:
    return last_nonzero(buf, start, end) if ranges is None else last_nonzero_in(buf, ranges, start, end)


def classify_end(buf, pos: int, end: int, detail: str = "", ranges=None) -> FileEnd:
    """Why a walk stopped at `pos`: clean end (full, blank, zeros) or corruption. `ranges`: the
    file's data ranges (ReadOnlyMap.data_ranges), when known: the holes between them read as
    zeros and are not scanned."""
    if pos >= end:
        return FileEnd(pos, "full")
    if pos + 8 <= end:
        size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
        if magic == BLANK_MAGIC and 8 <= size <= end - pos:
            return FileEnd(pos, "blank")
    tail = _last_nonzero(buf, pos, end, ranges)
    if tail < 0:
        return FileEnd(pos, "unwritten")
    return FileEnd(pos, "corrupt", detail or "bad record", tail - pos + 1)


def walk(buf, start: int = 0, end: int | None = None, ranges=None) -> tuple[list[int], FileEnd]:
    """Positions of consecutive records from `start`, hopping TOTALSIZE to TOTALSIZE.

    Only sizes are checked here; `header_table` checks every magic code and every size against
    its length fields (vectorised) and cuts the list at the first bad one. The FileEnd is where
    the hops stopped. Same answer as `walk_loop`, found with numpy (`walk_array`).
    """
    positions, file_end = walk_array(buf, start, end, ranges=ranges)
    return positions.tolist(), file_end


def walk_loop(buf, start: int = 0, end: int | None = None) -> tuple[list[int], FileEnd]:
    """The reference walk: one Python hop per record. `walk_array` must give the same answer."""
    if end is None:
        end = len(buf)
    positions, pos = _hop(buf, start, end)
    return positions, classify_end(buf, pos, end)


def _hop(buf, pos: int, end: int) -> tuple[list[int], int]:
    """Hop from `pos` while sizes fit: (positions, where the hops stopped)."""
    unpack = _SIZE.unpack_from
    positions: list[int] = []
    append = positions.append
    limit = end - MSG_FIXED_SIZE_V4
    while pos <= limit:
        size = unpack(buf, pos)[0]
        if size < MSG_FIXED_SIZE_V4 or size > end - pos:
            break
        append(pos)
        pos += size
    return positions, pos


# 4.x records carry MESSAGE_MAGIC at +4; a byte search for it finds every record start at C speed.
_MAGIC_BYTES = struct.pack(">i", MESSAGE_MAGIC)
_SEARCH_CHUNK = 4 << 20


def _magic_spans(start: int, limit: int, ranges) -> list[tuple[int, int]]:
    """The [lo, hi) spans of record starts p in [start, limit] to search, in _SEARCH_CHUNK pieces:
    all of them, or (given the file's data ranges) those whose magic code p+4..p+7 lies in data;
    a magic code has no zero byte, so none lies in a hole."""
    spans = [(start, limit + 1)] if ranges is None else [
        (max(start, lo - 4), min(limit + 1, hi - 7)) for lo, hi in ranges]
    return [(lo, min(b, lo + _SEARCH_CHUNK)) for a, b in spans for lo in range(a, b, _SEARCH_CHUNK)]


def _find_magic(arr: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Every p in [lo, hi) with MESSAGE_MAGIC at p+4."""
    b0, b1, b2, b3 = _MAGIC_BYTES
    idx = np.flatnonzero(arr[lo + 4:hi + 4] == b0)
    idx += lo
    return idx[(arr[idx + 5] == b1) & (arr[idx + 6] == b2) & (arr[idx + 7] == b3)]


def _magic_candidates(arr: np.ndarray, start: int, limit: int, pool=None, ranges=None) -> np.ndarray:
    """Every p in [start, limit] with MESSAGE_MAGIC at p+4 (true record starts and any look-alikes);
    the search's chunks on a thread `pool`'s threads when given; only the data `ranges` when given."""
    spans = _magic_spans(start, limit, ranges)
    search = lambda span: _find_magic(arr, *span)  # noqa: E731
    out = list(pool.map(search, spans) if pool else map(search, spans))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def walk_array(buf, start: int = 0, end: int | None = None, pool=None,
               ranges=None) -> tuple[np.ndarray, FileEnd]:
    """`walk_loop`'s answer as an int64 array, found mostly without a Python loop.

    Record starts are searched for by their magic code; wherever the hop chain (p + TOTALSIZE)
    runs through those candidates it is checked in one vector comparison. A hop that lands off
    the candidates (a V2 magic code, a damaged record) continues with the Python loop, and a
    look-alike inside a body is skipped because no hop lands on it, so the answer is always
    the loop's. With a thread `pool` the magic search runs on its threads. With the file's data
    `ranges` the holes are neither searched nor scanned for stray bytes: a 1 GiB file holding a
    few records costs those records.
    """
    if end is None:
        end = len(buf)
    limit = end - MSG_FIXED_SIZE_V4
    if start > limit:
        return np.zeros(0, np.int64), classify_end(buf, start, end, ranges=ranges)
    arr = np.frombuffer(buf, dtype=np.uint8)
    cand = _magic_candidates(arr, start, limit, pool, ranges)
    sizes = _every_offset(buf, "S4")[cand].view(">i4").astype(np.int64) if cand.size else cand
    nxt = cand + sizes
    size_ok = (sizes >= MSG_FIXED_SIZE_V4) & (sizes <= end - cand)
    chained = np.zeros(len(cand), dtype=bool)
    chained[:-1] = nxt[:-1] == cand[1:]
    breaks = np.flatnonzero(~(size_ok & chained))
    segments = []
    pos = start
    while True:
        i = int(np.searchsorted(cand, pos))
        if i >= len(cand) or cand[i] != pos:
            rest, pos = _hop(buf, pos, end)
            segments.append(np.array(rest, dtype=np.int64))
            break
        b = int(breaks[np.searchsorted(breaks, i)])  # the last candidate is always a break
        if not size_ok[b]:
            segments.append(cand[i:b])
            pos = int(cand[b])
            break
        segments.append(cand[i:b + 1])
        pos = int(nxt[b])
    positions = np.concatenate(segments) if len(segments) > 1 else segments[0]
    return positions, classify_end(buf, pos, end, ranges=ranges)


_SIZE = struct.Struct(">i")
# The fixed part of a record whose hosts are both IPv4 ("_" fields are not reported).
_FIXED_V4_DTYPE = np.dtype([
    ("total_size", ">i4"), ("magic", ">i4"), ("body_crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
    ("queue_offset", ">i8"), ("physical_offset", ">i8"), ("sys_flag", ">i4"), ("born_timestamp", ">i8"),
    ("_born_ip", "V4"), ("_born_port", ">i4"), ("store_timestamp", ">i8"), ("_store_ip", "V4"),
    ("_store_port", ">i4"), ("reconsume_times", ">i4"), ("prepared_transaction_offset", ">i8"),
    ("body_len", ">i4"),
])
assert _FIXED_V4_DTYPE.itemsize == 88
# Fields the checks below compute with, converted to native int64 once.
_ARITHMETIC_FIELDS = ("total_size", "magic", "sys_flag", "body_len")

# Fields after the born host move by 12 bytes per IPv6 host: (name, v4 offset, type, hosts before it).
_SHIFTED_FIELDS = [
    ("store_timestamp", 56, ">i8", 1), ("reconsume_times", 72, ">i4", 2),
    ("prepared_transaction_offset", 76, ">i8", 2), ("body_len", 84, ">i4", 2),
]


def _every_offset(buf, dtype) -> np.ndarray:
    """A view of `buf` with one (unaligned) item starting at every byte offset.

    Indexing it with record positions gathers a field of every record in one numpy call.
    """
    dt = np.dtype(dtype)
    count = max(len(buf) - dt.itemsize + 1, 0)
    return np.ndarray(shape=(count,), dtype=dt, buffer=buf if count else bytes(dt.itemsize), strides=(1,))


def _read(buf, positions: np.ndarray, dtype) -> np.ndarray:
    # Gathering raw bytes items and viewing them afterwards is several times faster than
    # gathering unaligned big-endian ints (or void items), which numpy copies one by one.
    dt = np.dtype(dtype)
    return _every_offset(buf, f"S{dt.itemsize}")[positions].view(dt).astype(np.int64)


def header_table(buf, positions: list[int] | np.ndarray, end: int | None = None):
    """Every fixed field of the records at `positions`, as a dict of int64 arrays.

    Also checks each magic code, and each TOTALSIZE against calMsgLength of its length
    fields; returns (table, n_valid): records from index n_valid on are not trusted.
    """
    if end is None:
        end = len(buf)
    pos = np.asarray(positions, dtype=np.int64)
    n = len(pos)
    t = {"position": pos}
    fits = n and int(pos.max()) + 88 <= len(buf)
    # One 88-byte copy per record, gathered as bytes items (structured or void gathers are
    # several times slower), then viewed as the fields.
    rows = _every_offset(buf, "S88")[pos].view(_FIXED_V4_DTYPE) if fits else np.zeros(n, _FIXED_V4_DTYPE)
    for name in _FIXED_V4_DTYPE.names:
        if not name.startswith("_"):
            # Big-endian views: numpy reads them as ints; converting them all costs a pass each.
            t[name] = rows[name]
    for name in _ARITHMETIC_FIELDS:
        t[name] = t[name].astype(np.int64)
    sys_flag = t["sys_flag"]
    if (sys_flag & (BORN_V6 | STORE_V6)).any():
        shift = np.where(sys_flag & BORN_V6, 12, 0)
        shift2 = shift + np.where(sys_flag & STORE_V6, 12, 0)
        safe = lambda p: np.minimum(p, len(buf) - 8)  # noqa: E731 - bad records are cut below
        for name, off, dt, hosts in _SHIFTED_FIELDS:
            t[name] = _read(buf, safe(pos + off + (shift if hosts == 1 else shift2)), dt)
    else:
        shift2 = 0
    body_pos = pos + 88 + shift2
    rec_end = pos + t["total_size"]
    body_len = t["body_len"]
    v2 = t["magic"] == MESSAGE_MAGIC_V2
    topic_len_pos = body_pos + np.maximum(body_len, 0)
    ok = (body_len >= 0) & (topic_len_pos + 2 <= rec_end)
    safe_tlp = np.where(ok, topic_len_pos, pos)
    topic_len = _read(buf, safe_tlp, ">i1")
    if v2.any():
        topic_len = np.where(v2, _read(buf, safe_tlp, ">i2"), topic_len)
    topic_pos = topic_len_pos + 1 + v2
    props_len_pos = topic_pos + np.maximum(topic_len, 0)
    ok &= (topic_len >= 0) & (props_len_pos + 2 <= rec_end)
    props_len = _read(buf, np.where(ok, props_len_pos, pos), ">i2")
    expected = MSG_FIXED_SIZE_V4 + body_len + topic_len + props_len + shift2 + v2
    ok &= (props_len >= 0) & (expected == t["total_size"])
    ok &= (t["magic"] == MESSAGE_MAGIC) | v2
    t.update(body_pos=body_pos, topic_pos=topic_pos, topic_len=topic_len,
             props_pos=props_len_pos + 2, props_len=props_len)
    bad = np.flatnonzero(~ok)
    n_valid = int(bad[0]) if bad.size else len(pos)
    return t, n_valid


_TABLE_CHUNK = 1 << 16   # records per header_table call: its arrays stay in cache, memory flat


class HeaderScan:
    """Header-only scan of one file, chunk by chunk: iterating yields header tables of
    consecutive valid records (at most _TABLE_CHUNK each); `.end` is then where the valid
    records end and why. `ranges`: the file's data ranges, when known (see walk_array)."""

    def __init__(self, buf, end: int | None = None, chunk: int | None = None, ranges=None):
        self.buf = buf
        self.limit = len(buf) if end is None else end
        self.chunk = chunk or _TABLE_CHUNK
        self.ranges = ranges
        self.end: FileEnd | None = None

    def __iter__(self):
        return self.map(None)

    def map(self, fn, pool=None):
        """`fn(table)` for each table iterating would yield, in order (the tables themselves when
        `fn` is None). With a thread `pool` the magic search, the chunks' tables and `fn` run on
        its threads, every chunk at once: keep `fn`'s answers small. `.end` is set at the end."""
        buf, end = self.buf, self.limit
        positions, file_end = walk_array(buf, 0, end, pool, self.ranges)
        parts = [positions[lo:lo + self.chunk] for lo in range(0, len(positions), self.chunk)]

        def one(part):
            table, n_valid = header_table(buf, part, end)
            if n_valid < len(part):
                cut = {k: v[:n_valid] for k, v in table.items()}
                return n_valid, int(table["magic"][n_valid]), (cut if fn is None else fn(cut)) if n_valid else None
            return n_valid, 0, table if fn is None else fn(table)

        for part, (n_valid, magic, out) in zip(parts, pool.map(one, parts) if pool else map(one, parts)):
            if n_valid < len(part):
                if n_valid:
                    yield out
                file_end = _bad_record_end(buf, int(part[n_valid]), magic, end, self.ranges)
                break
            yield out
        self.end = file_end


def _bad_record_end(buf, stop: int, magic: int, end: int, ranges=None) -> FileEnd:
    """Where a file ends when the header checks refuse the record at `stop`."""
    file_end = classify_end(buf, stop, end, ranges=ranges)
    if magic in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2):
        try:
            decode_record(buf, stop, end)
            detail = "record size does not match its fields"
        except FormatError as exc:
            detail = exc.message
        file_end = FileEnd(stop, "corrupt", detail, max(1, _last_nonzero(buf, stop, end, ranges) - stop + 1))
    return file_end


def scan_file(buf, end: int | None = None, ranges=None):
    """Header-only scan of one file: (table, FileEnd), the table cut at the first bad record."""
    scan = HeaderScan(buf, end, ranges=ranges)
    tables = list(scan)
    if not tables:
        table = {k: v[:0] for k, v in header_table(buf, np.zeros(0, np.int64), end)[0].items()}
    elif len(tables) == 1:
        table = tables[0]
    else:
        table = {k: np.concatenate([t[k] for t in tables]) for k in tables[0]}
    return table, scan.end


class RecordIterator:
    """Full decode of consecutive records of one file; `.end` is set when iteration finishes."""

    def __init__(self, buf, start: int = 0, end: int | None = None, check_crc: bool = False, ranges=None):
        self.buf = buf
        self.start = start
        self.limit = len(buf) if end is None else end
        self.check_crc = check_crc
        self.ranges = ranges
        self.end: FileEnd | None = None

    def __iter__(self) -> Iterator[tuple[int, MessageRecord]]:
        buf, pos, limit, check_crc = self.buf, self.start, self.limit, self.check_crc
        detail = ""
        while pos + 8 <= limit:
            try:
                rec = decode_record(buf, pos, limit, check_crc)
            except FormatError as exc:
                detail = exc.message
                break
            yield pos, rec
            pos += rec.total_size
        self.end = decode_end(buf, pos, limit, detail, self.ranges)


def decode_end(buf, pos: int, limit: int, detail: str = "", ranges=None) -> FileEnd:
    """Where and why a record-by-record decode that stopped at `pos` ended (`detail`: the
    FormatError message of the record it could not decode, if any)."""
    end = classify_end(buf, pos, limit, ranges=ranges)
    if detail and pos + 8 <= limit and _SIZE_MAGIC.unpack_from(buf, pos)[1] in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2):
        end = FileEnd(pos, "corrupt", detail, max(1, _last_nonzero(buf, pos, limit, ranges) - pos + 1))
    elif end.reason == "corrupt":
        end = FileEnd(pos, "corrupt", detail or end.detail, end.invalid_bytes)
    return end
