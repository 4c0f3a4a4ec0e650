"""Writable mapped files and their queue (MappedFile / MappedFileQueue): fixed size, named by offset.

A new file is created at full size (sparse, zero-filled) and memory-mapped read-write;
appends copy into the map, `flush` msyncs the dirty range. The next file is pre-allocated
in the background, as the Java broker's AllocateMappedFileService does.
"""
from __future__ import annotations

import mmap
import os
import threading
from pathlib import Path

from .errors import FormatError
from .kernel import kernel
from .mappedfiles import data_ranges, list_mapped_files, offset_to_file_name

PAGE = mmap.PAGESIZE
CREATING_SUFFIX = ".creating"
NOTHING_IN_FLIGHT = 1 << 62
_ZEROS = bytes(4 << 20)


class MappedFile:
    """One file of a mapped-file directory, mapped whole. With hold_fd=False (consume queues: many
    small files) the file's descriptor is closed once mapped: the map keeps one of its own, so the
    file costs one descriptor, as a 4.9.8 MappedFile does, not two; flushes then msync the map."""

    def __init__(self, path: Path, start: int, size: int, create: bool = False, hold_fd: bool = True):
        self.path = Path(path)
        self.start = start
        self.size = size
        if create and not self.path.exists():
            # Sized under a temporary name, then renamed: a crash never leaves a short file
            # under a mapped-file name (which neither RocketMQ nor mqtool would load).
            tmp = self.path.with_name(self.path.name + CREATING_SUFFIX)
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.ftruncate(fd, size)
            os.rename(tmp, self.path)
            self.fd = fd
        else:
            self.fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        actual = os.fstat(self.fd).st_size
        if create and actual < size:
            os.ftruncate(self.fd, size)
        elif actual != size:
            os.close(self.fd)
            raise FormatError(f"file size {actual} differs from the mapped file size {size} "
                              "(RocketMQ refuses to load it: length not matched)", path=self.path)
        try:
            self.mm = mmap.mmap(self.fd, size, access=mmap.ACCESS_WRITE)
        except BaseException:
            os.close(self.fd)
            raise
        if not hold_fd:
            os.close(self.fd)
            self.fd = None
        self.write_pos = 0 if create else size
        self.flushed_pos = self.write_pos
        self.store_timestamp = 0   # of the last message appended (commitlog only)
        # Pre-writing zeros ahead of the write position (see prewrite): bytes below warm_to are
        # in the page cache; a chunk from warm_lo is being written now, so no append may go past
        # warm_lo until warm_lock is free again.
        self.warm_to = self.write_pos
        self.warm_lo = NOTHING_IN_FLIGHT
        self.warm_lock = threading.Lock()

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def free(self) -> int:
        return self.size - self.write_pos

    def append(self, data: bytes) -> int:
        """Copy `data` at the write position; returns the position it went to."""
        pos = self.write_pos
        if pos + len(data) > self.warm_lo:
            self.wait_prewrite(pos + len(data))
        self.mm[pos:pos + len(data)] = data
        self.write_pos = pos + len(data)
        return pos

    def prewrite(self, lo: int, hi: int) -> None:
        """Make [lo, hi) present, which holds zeros already (nothing was appended there), with
        the GIL released, so the appends that follow copy into present pages instead of taking a
        page fault (and a block allocation) every 4 KiB of a fresh sparse file, with the GIL
        held. With the store kernel: madvise(MADV_POPULATE_WRITE) on the map (kernel.populate);
        without it, or on a Linux before 5.14, zeros written over the range with write(2). The
        bytes do not change. The caller has set warm_lo = lo and holds warm_lock.

        Populating cost the broker 0.85-0.88x the CPU a batched 1 KiB message of writing zeros,
        at 1.08-1.14x the msg/s: the appends then find their pages mapped, and the flush thread
        spent 0.10 against 0.47-0.49 µs a message (benchmarks/RESULTS.md, 2026-11-28)."""
        p = lo
        try:
            if kernel is not None and kernel.populate(self.mm, lo, hi):
                p = hi
            while p < hi:
                p += os.pwrite(self.fd, memoryview(_ZEROS)[:min(hi - p, len(_ZEROS))], p)
        except (OSError, ValueError, TypeError):
            pass                      # the file was closed meanwhile (shutdown, retention: no map, fd None): no harm
        self.warm_to = max(self.warm_to, p)

    def wait_prewrite(self, end: int) -> None:
        """Before an append that reaches `end`: wait for a chunk of zeros being written there."""
        if end > self.warm_lo:
            with self.warm_lock:
                pass

    def write_at(self, pos: int, data: bytes) -> None:
        self.mm[pos:pos + len(data)] = data

    def flush(self) -> int:
        """Make what was written since the last flush durable; returns the new flushed position."""
        return self.sync(self.write_pos)

    def sync(self, target: int) -> int:
        """Make the bytes below `target` durable (datasync)."""
        if target > self.flushed_pos:
            self.datasync()
            self.flushed_pos = max(self.flushed_pos, target)
        return self.flushed_pos

    def datasync(self) -> None:
        """Write back the pages the map dirtied. fdatasync does what msync(MS_SYNC) does on Linux,
        but CPython releases the GIL around it and not around mmap.flush, which held the broker's
        event loop for each consume queue's write-back (a file without a descriptor of its own
        opens one for it)."""
        if self.fd is not None:
            os.fdatasync(self.fd)
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:     # deleted meanwhile (retention, a destroyed queue): the map's own write-back
            self.mm.flush()
            return
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def dirty_pages(self) -> int:
        return (self.write_pos - self.flushed_pos + PAGE - 1) // PAGE

    def set_positions(self, pos: int) -> None:
        self.write_pos = self.flushed_pos = pos

    def data_ranges(self, start: int = 0) -> list[tuple[int, int]]:
        """mappedfiles.data_ranges of this file from `start` (through a descriptor of its own
        when the file holds none)."""
        if self.fd is not None:
            return data_ranges(self.fd, start, self.size)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return data_ranges(fd, start, self.size)
        finally:
            os.close(fd)

    def zero_from(self, pos: int) -> None:
        """Clear bytes after `pos` that are not zero already (a torn tail), then flush them: every
        data range of the file from there (holes read as zeros), past a hole too."""
        step = 1 << 20
        for lo, hi in self.data_ranges(pos):
            p = lo
            while p < hi:
                q = min(hi, p + step)
                chunk = self.mm[p:q]
                if chunk.count(0) != len(chunk):
                    self.mm[p:q] = bytes(q - p)
                    self.mm.flush(p // PAGE * PAGE, q - p // PAGE * PAGE)
                p = q

    def close(self) -> None:
        try:
            self.mm.close()
        finally:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class MappedFileQueue:
    """The files of one directory; the last one takes appends."""

    def __init__(self, directory: Path, file_size: int, preallocate: bool = True, hold_fd: bool = True):
        self.dir = Path(directory)
        self.file_size = file_size
        self.preallocate = preallocate
        self.hold_fd = hold_fd
        self.files: list[MappedFile] = []
        self._next: MappedFile | None = None
        self._alloc_lock = threading.Lock()

    def load(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.dir.glob("*" + CREATING_SUFFIX):
            leftover.unlink(missing_ok=True)         # a creation a crash interrupted
        found = list_mapped_files(self.dir)
        if found and found[-1].size != self.file_size and _all_zero(found[-1].path):
            found[-1].path.unlink()                  # an empty last file from an older, non-atomic creation
            found = found[:-1]
        for f in found:
            self.files.append(MappedFile(f.path, f.start, self.file_size, hold_fd=self.hold_fd))

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    @property
    def min_offset(self) -> int:
        return self.files[0].start if self.files else 0

    @property
    def max_offset(self) -> int:
        last = self.last
        return last.start + last.write_pos if last else 0

    @property
    def flushed_offset(self) -> int:
        last = self.last
        return last.start + last.flushed_pos if last else 0

    def last_for_append(self, start_if_empty: int = 0) -> MappedFile:
        last = self.last
        if last is None or last.free == 0:
            start = last.end if last else start_if_empty - start_if_empty % self.file_size
            self.files.append(self._take(start))
            if self.preallocate:
                threading.Thread(target=self._prepare, args=(start + self.file_size,), daemon=True).start()
        return self.files[-1]

    def _take(self, start: int) -> MappedFile:
        with self._alloc_lock:
            nxt = self._next
            if nxt is not None and nxt.start == start:
                self._next = None
                return nxt
        return MappedFile(self.dir / offset_to_file_name(start), start, self.file_size, create=True,
                          hold_fd=self.hold_fd)

    def _prepare(self, start: int) -> None:
        with self._alloc_lock:
            if self._next is None:
                try:
                    self._next = MappedFile(self.dir / offset_to_file_name(start), start, self.file_size, create=True,
                                            hold_fd=self.hold_fd)
                except OSError:
                    self._next = None

    def find(self, offset: int) -> MappedFile | None:
        for f in reversed(self.files):
            if f.start <= offset < f.end:
                return f
        return None

    def truncate(self, offset: int) -> list[Path]:
        """truncateDirtyFiles: positions of the file holding `offset` set to it; later files destroyed."""
        removed = []
        for f in list(self.files):
            if f.start > offset:
                removed.append(f.path)
                self.files.remove(f)
                f.destroy()
            elif f.start <= offset < f.end:
                f.set_positions(offset - f.start)
        return removed

    def discard_prepared(self) -> None:
        """Remove the pre-allocated next file, as the broker's shutdown does."""
        with self._alloc_lock:
            if self._next is not None:
                self._next.destroy()
                self._next = None

    def close(self) -> None:
        self.discard_prepared()
        for f in self.files:
            f.close()


def _all_zero(path: Path) -> bool:
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            if chunk.count(0) != len(chunk):
                return False
    return True
