"""Directories of fixed-size files named by their 20-digit start offset (MappedFileQueue).

Read-only access: files are memory-mapped with ACCESS_READ, so nothing here can write.
"""
from __future__ import annotations

import errno
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

from .codes import MAPPED_FILE_NAME_DIGITS
from .errors import FormatError, NotFoundError


def offset_to_file_name(offset: int) -> str:
    """UtilAll.offset2FileName."""
    return f"{offset:0{MAPPED_FILE_NAME_DIGITS}d}"


def is_mapped_file_name(name: str) -> bool:
    return len(name) == MAPPED_FILE_NAME_DIGITS and name.isdigit()


@dataclass(frozen=True)
class MappedFile:
    path: Path
    start: int     # fileFromOffset
    size: int      # bytes on disk

    @property
    def end(self) -> int:
        return self.start + self.size


def list_mapped_files(directory: str | os.PathLike) -> list[MappedFile]:
    """The files of a mapped-file directory in ascending offset order (other names ignored)."""
    d = Path(directory)
    if not d.is_dir():
        raise NotFoundError("not a directory", path=d)
    files = []
    for entry in os.scandir(d):
        if entry.is_file() and is_mapped_file_name(entry.name):
            files.append(MappedFile(Path(entry.path), int(entry.name), entry.stat().st_size))
    files.sort(key=lambda f: f.start)
    return files


def check_sizes(files: list[MappedFile], expected: int | None) -> list[str]:
    """Problems a Java broker would refuse to load with ("length not matched")."""
    problems = []
    if expected is None and files:
        expected = files[0].size
    for f in files:
        if f.size != expected:
            problems.append(f"{f.path}: size {f.size} differs from the mapped file size {expected}")
    for a, b in zip(files, files[1:]):
        if a.start + expected != b.start:
            problems.append(f"{b.path}: expected to start at {a.start + expected} after {a.path.name}")
    return problems


def written_end(fd: int, size: int, start: int = 0) -> int:
    """Where the first hole at or after `start` begins (SEEK_HOLE), or `size`: every byte from
    there on reads as zero. A mapped file is written from its start on, so no record reaches past
    it; a scan of a 1 GiB file holding 50 MB stops there, not at its end."""
    if start >= size:
        return size
    try:
        return min(size, max(start, os.lseek(fd, start, os.SEEK_HOLE)))
    except (OSError, AttributeError):      # no SEEK_HOLE here: the whole file may hold data
        return size


def data_ranges(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The parts of [start, end) the file holds data for (SEEK_DATA / SEEK_HOLE); the rest are
    holes, which read as zeros. Scans that look for non-zero bytes need read only these: a consume
    queue file of 5.7 MiB holding a few units is one 4 KiB range. All of it where the file system
    cannot say."""
    out, pos = [], start
    try:
        while pos < end:
            lo = os.lseek(fd, pos, os.SEEK_DATA)
            if lo >= end:
                break
            hi = min(end, os.lseek(fd, lo, os.SEEK_HOLE))
            out.append((lo, hi))
            pos = hi
    except OSError as exc:
        if exc.errno != errno.ENXIO:         # ENXIO: no data from pos on
            return [(start, end)] if start < end else []
    except AttributeError:                   # no SEEK_DATA here
        return [(start, end)] if start < end else []
    return out


_MADV_POPULATE_READ = 22      # Linux 5.14+; mmap has no name for it before Python 3.13


def _populate(buf: mmap.mmap, ranges: list[tuple[int, int]]) -> None:
    """Pre-fault the pages of `ranges` only."""
    for lo, hi in ranges:
        lo -= lo % mmap.PAGESIZE
        try:
            buf.madvise(_MADV_POPULATE_READ, lo, hi - lo)
        except OSError:                         # an older kernel: read ahead at least
            buf.madvise(mmap.MADV_WILLNEED, lo, hi - lo)


class ReadOnlyMap:
    """A read-only mmap of a whole file; empty files map to b"". Use as a context manager."""

    def __init__(self, path: str | os.PathLike, populate: bool = False):
        """`populate` pre-faults the pages that hold data (MAP_POPULATE for a file without holes):
        faster for whole-file scans. The holes of a sparse file (a fresh 1 GiB commit log holding a
        few records) are left alone: faulting them in cost seconds of system time for nothing."""
        self.path = Path(path)
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            raise NotFoundError("no such file", path=self.path) from None
        except IsADirectoryError:
            raise FormatError("is a directory, not a file", path=self.path) from None
        except PermissionError:
            raise NotFoundError("permission denied", path=self.path) from None
        size = os.fstat(self._fd).st_size
        self._ranges = data_ranges(self._fd, 0, size) if populate else None
        whole = populate and self._ranges == [(0, size)]
        flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if whole else 0)
        self.buf = mmap.mmap(self._fd, size, flags=flags, prot=mmap.PROT_READ) if size else b""
        if populate and not whole and size:
            _populate(self.buf, self._ranges)

    def __len__(self) -> int:
        return len(self.buf)

    def written_end(self, start: int = 0) -> int:
        return written_end(self._fd, len(self.buf), start)

    def data_ranges(self, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
        if start == 0 and end is None:
            if self._ranges is None:
                self._ranges = data_ranges(self._fd, 0, len(self.buf))
            return self._ranges
        return data_ranges(self._fd, start, len(self.buf) if end is None else end)

    def close(self) -> None:
        if isinstance(self.buf, mmap.mmap):
            try:
                self.buf.close()
            except BufferError:
                pass  # numpy views still use it; the map closes when they are collected
        self.buf = b""
        os.close(self._fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def guess_mapped_size(files: list[MappedFile]) -> int | None:
    """The mapped file size a directory was written with: the common size of its files."""
    if not files:
        return None
    sizes = [f.size for f in files]
    return max(set(sizes), key=sizes.count)
