"""Offline comparison of a master's and a slave's commitlog, for `mqtool ha status`.

HA replication makes the slave's commitlog a byte-for-byte copy of the master's at the same
global offsets (an empty slave starts at the master's last file), so two replicas are compared
file pair by file pair over the range both hold, and the lag is what the master has past the
slave's end.
"""
from __future__ import annotations

import os
from bisect import bisect_right
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from .commitlog import decode_record
from .errors import FormatError, ReplicationError, WrongKindError
from .layout import Kind, StorePaths, detect_kind
from .logscan import FileEnd, scan_file
from .mappedfiles import MappedFile, guess_mapped_size
from .reader import CommitLogReader
from .recovery import RECOVER_LAST_FILES

# Big enough that numpy's per-call cost vanishes, small enough that the bool temporary of the
# first unequal chunk stays cheap.
CHUNK = 4 << 20


@dataclass(frozen=True)
class RecordSummary:
    """The record at or containing an offset on one side; fields are None when it does not decode."""
    offset: int                    # global offset of the record's first byte
    size: int | None
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    store_timestamp: int | None = None
    error: str | None = None       # why it does not decode


@dataclass(frozen=True)
class Difference:
    offset: int                    # global offset of the first byte that differs
    master: RecordSummary | None   # None: that side has no file there
    slave: RecordSummary | None


@dataclass(frozen=True)
class StoreDiff:
    master_dir: str
    slave_dir: str
    mapped_file_size: int | None
    master_min_offset: int
    master_max_offset: int         # end of valid records (where a restarted broker would resume)
    master_end: str                # why the master's valid records end there (logscan FileEnd)
    slave_min_offset: int
    slave_max_offset: int
    slave_end: str
    common_min_offset: int         # [common_min, common_max): the bytes both sides must agree on
    common_max_offset: int
    first_difference: Difference | None
    slave_lacks_bytes: int
    slave_lacks_messages: int
    first_lacking_store_timestamp: int | None  # the master record the slave lacks first: the lag in time
    slave_extra_bytes: int         # valid bytes past the master's end (e.g. a promoted slave)
    files_only_on_master: tuple[str, ...]
    files_only_on_slave: tuple[str, ...]

    @property
    def in_sync(self) -> bool:
        return self.first_difference is None and not self.slave_lacks_bytes and not self.slave_extra_bytes

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        diff = self.first_difference
        d["first_difference"] = None if diff is None else {
            "offset": diff.offset,
            "master": _summary_json(diff.master), "slave": _summary_json(diff.slave)}
        d["files_only_on_master"] = list(self.files_only_on_master)
        d["files_only_on_slave"] = list(self.files_only_on_slave)
        d["in_sync"] = self.in_sync
        return d


def _summary_json(s: RecordSummary | None) -> dict | None:
    return None if s is None else {f.name: getattr(s, f.name) for f in fields(s)}


def commitlog_dir(path: str | os.PathLike) -> Path:
    """The commitlog directory of a store root, or the path itself when it is one."""
    p = Path(path)
    kind = detect_kind(p)
    if kind is Kind.ROOT:
        return StorePaths.of(p).commitlog
    if kind is Kind.COMMITLOG_DIR:
        return p
    raise WrongKindError(f"expected a store root or a commitlog directory, not a {kind.value}", path=p)


class _Side:
    """One replica: its reader, and header scans of its files done at most once."""

    def __init__(self, reader: CommitLogReader):
        self.reader = reader
        self.files = {f.start: f for f in self.reader.files}
        self._scans: dict[int, tuple[dict, FileEnd]] = {}
        self.min = self.reader.min_offset
        self.max, self.end = self._valid_end()

    def scan(self, f: MappedFile) -> tuple[dict, FileEnd]:
        if f.start not in self._scans:
            self._scans[f.start] = scan_file(self.reader.buffer(f), ranges=self.reader.data_ranges(f))
        return self._scans[f.start]

    def array(self, f: MappedFile) -> np.ndarray:
        buf = self.reader.buffer(f)
        return np.frombuffer(buf, np.uint8) if len(buf) else np.zeros(0, np.uint8)

    def _valid_end(self) -> tuple[int, str]:
        """Where valid records end, the way normal recovery finds it (from the last 3 files).

        A blank record counts as data to the file's end: the master's HA writer sends the
        blank's bytes too, and a running broker's max offset includes them.
        """
        files = self.reader.files
        if not files:
            return 0, "no files"
        first = max(0, len(files) - RECOVER_LAST_FILES)
        end = files[first].start
        for f in files[first:]:
            if f.start != end:
                return end, f"gap: {f.path.name} does not start at {end}"
            fe = self.scan(f)[1]
            if fe.reason in ("blank", "full"):
                end = f.end
                continue
            return f.start + fe.position, fe.reason + (f": {fe.detail}" if fe.detail else "")
        return end, "full"

    def summary(self, record_start: int) -> RecordSummary | None:
        f = self.reader.file_at(record_start)
        if f is None:
            return None
        buf = self.reader.buffer(f)
        pos = record_start - f.start
        try:
            rec = decode_record(buf, pos)
        except FormatError as exc:
            size = int.from_bytes(buf[pos:pos + 4], "big", signed=True) if pos + 4 <= len(buf) else None
            return RecordSummary(record_start, size, error=exc.message)
        return RecordSummary(record_start, rec.total_size, rec.topic, rec.queue_id, rec.queue_offset,
                             rec.store_timestamp)

    def record_start(self, offset: int) -> int | None:
        """Start of the record containing `offset`, or where this file's records end if past them."""
        f = self.reader.file_at(offset)
        if f is None:
            return None
        table, fe = self.scan(f)
        starts = table["position"].tolist() + [fe.position]
        i = bisect_right(starts, offset - f.start) - 1
        return f.start + starts[max(i, 0)]

    def count_from(self, offset: int) -> tuple[int, int | None]:
        """Valid records starting at or after `offset`, and the store timestamp of the first."""
        count, first_ts = 0, None
        for f in self.reader.files:
            if f.end <= offset or f.start >= self.max:
                continue
            table, _ = self.scan(f)
            pos = table["position"] + f.start
            sel = np.flatnonzero((pos >= offset) & (pos < self.max))
            count += len(sel)
            if first_ts is None and len(sel):
                first_ts = int(table["store_timestamp"][sel[0]])
        return count, first_ts


def first_unequal(x: np.ndarray, y: np.ndarray, lo: int, hi: int, chunk: int = CHUNK) -> int | None:
    """First index in [lo, hi) where x and y differ (a missing byte differs), or None."""
    n = min(hi, len(x), len(y))
    for i in range(lo, n, chunk):
        j = min(i + chunk, n)
        if not np.array_equal(x[i:j], y[i:j]):
            return i + int(np.flatnonzero(x[i:j] != y[i:j])[0])
    return max(n, lo) if n < hi else None


def _first_difference(m: _Side, s: _Side, lo: int, hi: int, chunk: int) -> int | None:
    for start in sorted(m.files.keys() | s.files.keys()):
        mf, sf = m.files.get(start), s.files.get(start)
        a, b = max(lo, start), min(hi, start + max(f.size for f in (mf, sf) if f))
        if a >= b:
            continue
        if mf is None or sf is None:
            return a
        pos = first_unequal(m.array(mf), s.array(sf), a - start, b - start, chunk)
        if pos is not None:
            return start + pos
    return None


def compare_commitlogs(master_root: str | os.PathLike, slave_root: str | os.PathLike, *,
                       chunk_size: int = CHUNK) -> StoreDiff:
    """Compare two replicas of one commitlog; each path is a store root or a commitlog dir.

    Raises ReplicationError when the two were written with different mappedFileSizeCommitLog
    (their files cannot line up), and the store's NotFoundError/WrongKindError for bad paths.
    """
    with CommitLogReader(commitlog_dir(master_root)) as mr, CommitLogReader(commitlog_dir(slave_root)) as sr:
        m_size, s_size = guess_mapped_size(mr.files), guess_mapped_size(sr.files)
        if m_size is not None and s_size is not None and m_size != s_size:
            raise ReplicationError(f"mappedFileSizeCommitLog differs: master {m_size}, slave {s_size} "
                                   f"(master {mr.directory})", path=sr.directory)
        m, s = _Side(mr), _Side(sr)
        lo = max(m.min, s.min)
        hi = max(lo, min(m.max, s.max))
        diff = None
        at = _first_difference(m, s, lo, hi, chunk_size)
        if at is not None:
            # Bytes before `at` agree, so both sides have their record boundaries in the same places.
            start = (m if mr.file_at(at) else s).record_start(at)
            diff = Difference(at, m.summary(start), s.summary(start))
        lacks, first_ts = m.count_from(s.max) if s.max < m.max else (0, None)
        m_names = {f.path.name for f in mr.files}
        s_names = {f.path.name for f in sr.files}
        # A file at or past a side's end holds no valid record (a running broker pre-allocates the
        # next one): it is not reported as that side's own.
        m_data = {f.path.name for f in mr.files if f.start < max(m.max, 1)}
        s_data = {f.path.name for f in sr.files if f.start < max(s.max, 1)}
        return StoreDiff(
            str(mr.directory), str(sr.directory), m_size or s_size,
            m.min, m.max, m.end, s.min, s.max, s.end, lo, hi, diff,
            max(0, m.max - s.max), lacks, first_ts, max(0, s.max - m.max),
            tuple(sorted(m_data - s_names)), tuple(sorted(s_data - m_names)))
