"""The timer store's files as the broker writes them: the timerlog queue, the wheel, the checkpoint.

Formats are in timerlog.py. Everything is a shared map, so what a put wrote is in the page cache
at once (a kill -9 loses none of it); `flush` makes it durable, the checkpoint last.
"""
from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

from .codes import TIMER_BLANK_SIZE, TIMER_CHECK_FILE_SIZE, TIMER_SLOT_SIZE, TIMER_UNIT_SIZE
from .errors import FormatError
from .mappedfile import MappedFileQueue
from .timerlog import (BLANK, BLANK_MAGIC, EMPTY_SLOT, SLOT, WHEEL_FILE_SIZE, WHEEL_SLOTS, Slot, TimerCheck,
                       TimerUnit, decode_check, decode_unit, slot_index)

UNITS_DTYPE = np.dtype([("size", ">i4"), ("prev", ">i8"), ("magic", ">i4"), ("write", ">i8"), ("delay", ">i4"),
                        ("offset_py", ">i8"), ("size_py", ">i4"), ("hash", ">i4"), ("reserved", ">i8")])
SLOT_DTYPE = np.dtype([("time", ">i8"), ("first", ">i8"), ("last", ">i8"), ("num", ">i4"), ("magic", ">i4")])


class TimerLog:
    """timerlog/: a MappedFileQueue of 52-byte units (TimerLog.append)."""

    def __init__(self, directory: Path, file_size: int):
        self.files = MappedFileQueue(directory, file_size, preallocate=False)
        self.file_size = file_size
        self.files.load()

    def append(self, unit: bytes) -> int:
        """The unit's timerlog offset. A file with no room for a unit and a blank is closed by a blank."""
        f = self.files.last_for_append()
        if f.free < TIMER_UNIT_SIZE + TIMER_BLANK_SIZE:
            f.append(BLANK.pack(f.free, 0, BLANK_MAGIC))
            f.write_pos = f.size
            f = self.files.last_for_append()
        return f.start + f.append(unit)

    def read(self, pos: int) -> TimerUnit | None:
        f = self.files.find(pos)
        if f is None or pos - f.start + TIMER_UNIT_SIZE > f.write_pos:
            return None
        return decode_unit(f.mm, pos - f.start)

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    def flush(self) -> None:
        last = self.files.last
        if last is not None:
            last.flush()

    def scan(self, start: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(offsets, units as UNITS_DTYPE, end) from the unit at or before `start` to the first bad
        or zero unit (TimerMessageStore.recover's first pass, a file at a time in numpy); a blank
        moves on to the next file."""
        positions, units, end = [], [], start
        for f in self.files.files:
            if f.end <= start:
                continue
            p0 = max(start, f.start) - f.start
            p0 -= p0 % TIMER_UNIT_SIZE
            arr = np.frombuffer(f.mm, UNITS_DTYPE, count=(f.size - p0) // TIMER_UNIT_SIZE, offset=p0)
            bad = np.flatnonzero((arr["size"] != TIMER_UNIT_SIZE) | ((arr["magic"] | 0xF) != 0xF))
            k = int(bad[0]) if len(bad) else len(arr)
            positions.append(f.start + p0 + np.arange(k, dtype=np.int64) * TIMER_UNIT_SIZE)
            units.append(arr[:k].copy())
            del arr
            at = p0 + k * TIMER_UNIT_SIZE
            end = f.start + at
            if f.size - at >= BLANK.size and BLANK.unpack_from(f.mm, at)[2] == BLANK_MAGIC:
                end = f.end
                continue
            if at + TIMER_UNIT_SIZE <= f.size:
                break
        if not units:
            return np.zeros(0, np.int64), np.zeros(0, UNITS_DTYPE), end
        return np.concatenate(positions), np.concatenate(units), end

    def truncate(self, end: int) -> None:
        """Dirty units after `end` dropped: zeroed in its file, later files removed."""
        self.files.truncate(end)
        f = self.files.find(end)
        if f is not None:
            f.zero_from(end - f.start)

    def delete_expired(self, commitlog_min: int) -> int:
        """deleteExpiredFileByOffsetForTimerLog: files before the last whose last unit points below
        the commit log's first offset (their records are gone) removed; how many."""
        gone = 0
        while len(self.files.files) > 1:
            f = self.files.files[0]
            units = np.frombuffer(f.mm, UNITS_DTYPE, count=f.size // TIMER_UNIT_SIZE)
            valid = np.flatnonzero(units["size"] == TIMER_UNIT_SIZE)
            last_py = int(units["offset_py"][valid[-1]]) if len(valid) else -1
            del units
            if last_py >= commitlog_min:
                break
            self.files.files.pop(0).destroy()
            gone += 1
        return gone

    def close(self) -> None:
        self.files.close()


class TimerWheel:
    """timerwheel: 1209600 slots of 32 bytes in one shared map (TimerWheel)."""

    def __init__(self, path: Path, precision: int):
        self.path = Path(path)
        self.precision = precision
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                os.ftruncate(fd, WHEEL_FILE_SIZE)
            elif size != WHEEL_FILE_SIZE:
                raise FormatError(f"Timer wheel length:{size} != expected:{WHEEL_FILE_SIZE}", path=self.path)
            self.mm = mmap.mmap(fd, WHEEL_FILE_SIZE, access=mmap.ACCESS_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd              # held for fdatasync, which runs without the GIL (mmap.flush holds it)
        self.slots = np.frombuffer(self.mm, SLOT_DTYPE)

    def get(self, time_ms: int) -> Slot:
        p = self.precision
        stored, first, last, num, magic = SLOT.unpack_from(self.mm, (time_ms // p) % WHEEL_SLOTS * TIMER_SLOT_SIZE)
        if stored != time_ms // p:
            return EMPTY_SLOT
        return Slot(stored * p, first, last, num, magic)

    def put(self, time_ms: int, first: int, last: int, num: int, magic: int = 0) -> None:
        SLOT.pack_into(self.mm, slot_index(time_ms, self.precision) * TIMER_SLOT_SIZE,
                       time_ms // self.precision, first, last, num, magic)

    def next_used(self, lo_ms: int, hi_ms: int) -> int:
        """The first time in [lo_ms, hi_ms) whose slot holds something, else hi_ms (a skip over
        empty slots in one numpy pass: a read pointer days behind costs no loop per slot)."""
        p = self.precision
        lo, hi = lo_ms // p, hi_ms // p
        if hi - lo > WHEEL_SLOTS:
            lo = hi - WHEEL_SLOTS
        idx = np.arange(lo, hi, dtype=np.int64)
        times = self.slots["time"][idx % WHEEL_SLOTS]
        hit = np.flatnonzero(times == idx)
        return int(idx[hit[0]]) * p if len(hit) else hi_ms

    def pending(self, from_ms: int) -> tuple[int, int]:
        """(sum of num over valid slots at or after `from_ms`, the first such slot's time or -1):
        TimerWheel.getAllNum's count, and the next due time."""
        base = from_ms // self.precision
        times = self.slots["time"]
        valid = times >= base          # a slot of a past time is stale (a zero slot reads as time 0)
        if not valid.any():
            return 0, -1
        return int(self.slots["num"][valid].sum()), int(times[valid].min()) * self.precision

    def flush(self) -> None:
        os.fdatasync(self.fd)

    def close(self) -> None:
        del self.slots
        self.mm.close()
        os.close(self.fd)


class TimerCheckFile:
    """config/timercheck: one mapped page (TimerCheckpoint)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < TIMER_CHECK_FILE_SIZE:
                os.ftruncate(fd, TIMER_CHECK_FILE_SIZE)
            self.mm = mmap.mmap(fd, TIMER_CHECK_FILE_SIZE, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)

    def read(self) -> TimerCheck:
        return decode_check(self.mm[:56], self.path)

    def write(self, check: TimerCheck) -> None:
        self.mm[:56] = check.encode()

    def flush(self) -> None:
        self.mm.flush()

    def close(self) -> None:
        self.mm.close()
