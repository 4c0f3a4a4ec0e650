"""Read-only access to a whole commitlog: records by global offset, file by file scans."""
from __future__ import annotations

import os
from bisect import bisect_right
from pathlib import Path
from typing import Iterator

from .commitlog import MessageRecord, decode_record
from .errors import FormatError, NotFoundError
from .logscan import FileEnd, RecordIterator, scan_file
from .mappedfiles import MappedFile, ReadOnlyMap, guess_mapped_size, list_mapped_files


class CommitLogReader:
    """The files of one commitlog directory, memory-mapped read-only on demand."""

    def __init__(self, directory: str | os.PathLike, files: list[MappedFile] | None = None,
                 populate: bool = False):
        """`populate`: pre-fault whole files when mapping them (for full scans, not look-ups)."""
        self.directory = Path(directory)
        self.populate = populate
        self.files = files if files is not None else list_mapped_files(self.directory)
        self.file_size = guess_mapped_size(self.files)
        self._starts = [f.start for f in self.files]
        self._maps: dict[Path, ReadOnlyMap] = {}

    @classmethod
    def single_file(cls, path: str | os.PathLike) -> "CommitLogReader":
        p = Path(path)
        if not p.is_file():
            raise NotFoundError("no such file", path=p)
        return cls(p.parent, [MappedFile(p, int(p.name) if p.name.isdigit() else 0, p.stat().st_size)])

    @property
    def min_offset(self) -> int:
        return self.files[0].start if self.files else 0

    def _map(self, f: MappedFile) -> ReadOnlyMap:
        m = self._maps.get(f.path)
        if m is None:
            m = self._maps[f.path] = ReadOnlyMap(f.path, self.populate)
        return m

    def buffer(self, f: MappedFile):
        return self._map(f).buf

    def data_ranges(self, f: MappedFile) -> list[tuple[int, int]]:
        """The parts of a file that hold data (SEEK_DATA / SEEK_HOLE): scans pass them on, so the
        holes of a preallocated file cost nothing."""
        return self._map(f).data_ranges()

    def close(self) -> None:
        for m in self._maps.values():
            m.close()
        self._maps.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def file_at(self, offset: int) -> MappedFile | None:
        i = bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        f = self.files[i]
        return f if offset < f.end else None

    def read(self, offset: int, check_crc: bool = False) -> MessageRecord:
        """The record at a global commitlog offset."""
        f = self.file_at(offset)
        if f is None:
            raise NotFoundError(f"commitlog offset {offset} is outside every file", path=self.directory)
        try:
            return decode_record(self.buffer(f), offset - f.start, check_crc=check_crc)
        except FormatError as exc:
            raise FormatError(exc.message, path=f.path, offset=offset - f.start) from None

    def records(self, from_offset: int = 0, check_crc: bool = False,
                ends: list | None = None) -> Iterator[tuple[int, MessageRecord]]:
        """(global offset, record) for every valid record from `from_offset`, file by file.

        Each file's FileEnd is appended to `ends` as (file, FileEnd) when given.
        """
        for f in self.files:
            if f.end <= from_offset:
                continue
            start = 0
            if from_offset > f.start:
                start = self._align(f, from_offset - f.start)
            it = RecordIterator(self.buffer(f), start, check_crc=check_crc, ranges=self.data_ranges(f))
            for pos, rec in it:
                yield f.start + pos, rec
            if ends is not None:
                ends.append((f, it.end))

    def _align(self, f: MappedFile, pos: int) -> int:
        """First record boundary at or after `pos`, found by walking from the file's start."""
        from .logscan import walk
        positions, _ = walk(self.buffer(f), ranges=self.data_ranges(f))
        i = bisect_right(positions, pos - 1)
        if i > 0 and positions[i - 1] == pos:
            return pos
        return positions[i] if i < len(positions) else f.size

    def scan(self) -> Iterator[tuple[MappedFile, dict, FileEnd]]:
        """Header-only scan: per file, the numpy field table and where the file's data ends."""
        for f in self.files:
            table, end = scan_file(self.buffer(f), ranges=self.data_ranges(f))
            yield f, table, end
