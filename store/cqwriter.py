"""A writable consume queue: 20-byte units appended in queue-offset order (ConsumeQueue.java)."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .codes import CQ_UNIT_SIZE, INT32_MAX
from .consumequeue import _UNIT, encode_unit, read_units, valid_prefix, valid_prefix_in
from .logscan import last_nonzero_in
from .mappedfile import MappedFileQueue

PRE_BLANK = encode_unit(0, INT32_MAX, 0)
RUN = 64
_RUNS: dict[int, struct.Struct] = {}     # k -> the struct of k units, k <= RUN


class ConsumeQueue:
    def __init__(self, directory: Path, topic: str, queue_id: int, file_size: int):
        self.topic, self.queue_id = topic, queue_id
        self.files = MappedFileQueue(directory, file_size, preallocate=False, hold_fd=False)
        self.max_physic_offset = -1     # offset + size of the last unit
        self.min_logic_offset = 0       # byte position of the first real unit

    def load(self) -> None:
        self.files.load()

    def recover(self) -> int:
        """ConsumeQueue.recover over every file: positions after the last valid unit. Returns bytes dropped."""
        end = None
        for f in self.files.files:
            units = read_units(f.mm)
            n = valid_prefix_in(units, f.data_ranges())     # the holes are not read: a start's cost is the units'
            if n:
                last = units[n - 1]
                self.max_physic_offset = int(last["offset"]) + int(last["size"])
            del units
            if n * CQ_UNIT_SIZE < f.size:
                end = f.start + n * CQ_UNIT_SIZE
                break
        if end is None:
            end = self.files.max_offset
        dropped = 0
        last = self.files.find(end) if end < self.files.max_offset else None
        if last is not None:
            dropped = _nonzero_after(last, end - last.start)
        self.files.truncate(end)
        if last is not None:
            last.zero_from(end - last.start)
        self._correct_min()
        return dropped

    def _correct_min(self, commitlog_min: int = 0) -> None:
        first = self.files.files[0] if self.files.files else None
        if first is None:
            self.min_logic_offset = 0
            return
        units = read_units(first.mm, 0, first.write_pos)
        ok = np.flatnonzero((units["size"] != INT32_MAX) & (units["offset"] >= commitlog_min))
        self.min_logic_offset = first.start + (int(ok[0]) * CQ_UNIT_SIZE if ok.size else first.write_pos)
        del units

    def correct_min_offset(self, commitlog_min: int) -> None:
        self._correct_min(commitlog_min)

    @property
    def max_offset(self) -> int:
        """Next queue offset (getMaxOffsetInQueue)."""
        return self.files.max_offset // CQ_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_UNIT_SIZE

    def put(self, offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """putMessagePositionInfo: False when the unit was already there (re-dispatch)."""
        if offset + size <= self.max_physic_offset:
            return False
        pos = queue_offset * CQ_UNIT_SIZE
        files = self.files.files
        if files:       # the common case: the next unit of the last file
            f = files[-1]
            wp = f.write_pos
            if f.start + wp == pos and wp + CQ_UNIT_SIZE <= f.size:
                _UNIT.pack_into(f.mm, wp, offset, size, tags_code)
                f.write_pos = wp + CQ_UNIT_SIZE
                self.max_physic_offset = offset + size
                return True
        cur = self.files.max_offset
        if pos < cur:
            return False
        if not self.files.files:
            start = pos - pos % self.files.file_size
            f = self.files.last_for_append(start)
            if pos > f.start:
                f.append(PRE_BLANK * ((pos - f.start) // CQ_UNIT_SIZE))
            self.min_logic_offset = pos
            cur = pos
        while cur < pos:   # a gap: keep unit i at byte i*20 with pre-blank units
            self.files.last_for_append().append(PRE_BLANK)
            cur += CQ_UNIT_SIZE
        self.files.last_for_append().append(encode_unit(offset, size, tags_code))
        self.max_physic_offset = offset + size
        return True

    def put_many(self, units: list[tuple[int, int, int, int]]) -> int:
        """put() for (offset, size, tags_code, queue_offset) in order; a run that continues the
        last file is packed with one call. False (nothing written) when they do not: the caller
        then puts them one by one."""
        files = self.files.files
        if files:
            f = files[-1]
            first_offset, first_size, _, first_queue_offset = units[0]
            wp = f.write_pos
            n = len(units)
            if (f.start + wp == first_queue_offset * CQ_UNIT_SIZE and wp + n * CQ_UNIT_SIZE <= f.size
                    and first_offset + first_size > self.max_physic_offset
                    and units[-1][3] - first_queue_offset == n - 1):
                flat = []
                for off, size, code, _ in units:
                    flat += (off, size, code)
                mm, p = f.mm, wp
                for lo in range(0, n, RUN):       # RUN units per pack_into (a bounded set of structs)
                    k = min(RUN, n - lo)
                    fmt = _RUNS.get(k)
                    if fmt is None:
                        fmt = _RUNS[k] = struct.Struct(">" + "qiq" * k)
                    fmt.pack_into(mm, p, *flat[3 * lo:3 * (lo + k)])
                    p += k * CQ_UNIT_SIZE
                f.write_pos = p
                self.max_physic_offset = units[-1][0] + units[-1][1]
                return True
        return False

    def put_packed(self, units, queue_offset: int) -> bool:
        """put_many for packed units (20 bytes each, as stored) from `queue_offset`: one copy when
        they continue the last file, else False (nothing written)."""
        files = self.files.files
        n = len(units) // CQ_UNIT_SIZE
        if files and n:
            f = files[-1]
            wp = f.write_pos
            if f.start + wp == queue_offset * CQ_UNIT_SIZE and wp + n * CQ_UNIT_SIZE <= f.size:
                offset, size, _ = _UNIT.unpack_from(units, 0)
                if offset + size > self.max_physic_offset:
                    f.mm[wp:wp + n * CQ_UNIT_SIZE] = units
                    f.write_pos = wp + n * CQ_UNIT_SIZE
                    offset, size, _ = _UNIT.unpack_from(units, (n - 1) * CQ_UNIT_SIZE)
                    self.max_physic_offset = offset + size
                    return True
        return False

    def units(self, queue_offset: int, max_count: int) -> np.ndarray:
        """Units from `queue_offset` to the end of its file (at most max_count), as a structured array copy."""
        pos = queue_offset * CQ_UNIT_SIZE
        f = self.files.find(pos)
        if f is None:
            return read_units(b"")
        lo = pos - f.start
        hi = min(f.write_pos, lo + max_count * CQ_UNIT_SIZE)
        return read_units(f.mm, lo, hi).copy() if hi > lo else read_units(b"")

    def truncate_from_physic(self, phy_offset: int) -> int:
        """truncateDirtyLogicFiles: drop units pointing at or past `phy_offset`; returns units dropped."""
        dropped = 0
        while self.files.files:
            f = self.files.last
            units = read_units(f.mm, 0, f.write_pos)
            n = valid_prefix(units)
            keep = n
            bad = np.flatnonzero((units["offset"][:n] >= phy_offset) & (units["size"][:n] != INT32_MAX))
            if bad.size:
                keep = int(bad[0])
            dropped += n - keep
            last_keep = units[keep - 1] if keep else None
            del units
            if keep == 0 and f is not self.files.files[0]:
                self.files.files.remove(f)
                f.destroy()
                continue
            f.set_positions(keep * CQ_UNIT_SIZE)
            f.zero_from(keep * CQ_UNIT_SIZE)
            self.max_physic_offset = (int(last_keep["offset"]) + int(last_keep["size"])
                                      if last_keep is not None else -1)
            break
        return dropped

    def flush(self) -> None:
        if self.files.last is not None:
            self.files.last.flush()
        for f in self.files.files[:-1]:
            if f.flushed_pos < f.write_pos:
                f.flush()

    def close(self) -> None:
        self.files.close()


def _nonzero_after(f, pos: int) -> int:
    """Bytes from `pos` up to the last non-zero one of the file (0: none), its holes not read."""
    last = last_nonzero_in(f.mm, f.data_ranges(pos), pos, f.size)
    return last - pos + 1 if last >= 0 else 0
