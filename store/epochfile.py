"""The epoch file of controller mode (5.3.0 EpochFileCache + CheckpointFile; controller.md §7).

Text, UTF-8, `\\n` line ends, at `storePathEpochFile` (default `{storePathRootDir}/epochFileCheckpoint`)
with a backup beside it (`.bak`):

    <number of entries>
    <crc32 of the entry lines (with their \\n), & 0x7FFFFFFF, decimal>   (0: not checked)
    <epoch>-<startOffset>
    ...

Each entry says from which commit log offset a master epoch's data begins; an entry ends where the
next begins, the last one is open. Writing copies the current file to `.bak` and rewrites the file;
an empty list is never written. Reading falls back to `.bak` when the file is missing, empty, or its
count or CRC do not match.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

OPEN_END = 2 ** 63 - 1          # Long.MAX_VALUE: the last entry's end


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start: int
    end: int = OPEN_END


def entry_text(entries: list[EpochEntry]) -> str:
    return "".join(f"{e.epoch}-{e.start}\n" for e in entries)


def encode(entries: list[EpochEntry]) -> str:
    body = entry_text(entries)
    return f"{len(entries)}\n{zlib.crc32(body.encode()) & 0x7FFFFFFF}\n{body}"


def decode(text: str) -> list[tuple[int, int]] | None:
    """(epoch, start) pairs, or None when the text is not a whole, intact epoch file."""
    lines = text.split("\n")
    try:
        count, crc = int(lines[0]), int(lines[1])
        rows = lines[2:2 + count]
        if len(rows) != count or any(not r for r in rows):
            return None
        if crc and zlib.crc32("".join(r + "\n" for r in rows).encode()) & 0x7FFFFFFF != crc:
            return None
        pairs = []
        for r in rows:
            epoch, _, start = r.partition("-")
            pairs.append((int(epoch), int(start)))
        return pairs
    except (ValueError, IndexError):
        return None


def with_ends(pairs) -> list[EpochEntry]:
    pairs = list(pairs)
    return [EpochEntry(e, s, pairs[i + 1][1] if i + 1 < len(pairs) else OPEN_END) for i, (e, s) in enumerate(pairs)]


def find_consistent_point(local: list[EpochEntry], local_max: int, remote: list[EpochEntry], remote_max: int) -> int:
    """findConsistentPoint: the newest epoch both sides began at the same offset, and the smaller
    of the two ends (the last entry of each side ends at that side's max offset); -1 when none."""
    def ends(entries, top):
        return {e.epoch: (e.start, top if e.end == OPEN_END else e.end) for e in entries}
    theirs = ends(remote, remote_max)
    for epoch, (start, end) in sorted(ends(local, local_max).items(), reverse=True):
        other = theirs.get(epoch)
        if other is not None and other[0] == start:
            return min(end, other[1])
    return -1


class EpochFile:
    """The entries in memory (ascending epoch) and their file; every change rewrites the file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.backup = self.path.with_name(self.path.name + ".bak")
        self.entries: list[EpochEntry] = []

    def load(self) -> "EpochFile":
        for p in (self.path, self.backup):
            try:
                text = p.read_text(encoding="utf-8")
            except (FileNotFoundError, UnicodeDecodeError):
                continue
            pairs = decode(text) if text else None
            if pairs is not None:
                self.entries = with_ends(pairs)
                return self
        self.entries = []
        return self

    def _write(self) -> None:
        if not self.entries:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self.backup.write_bytes(self.path.read_bytes())
        with open(self.path, "w", encoding="utf-8", newline="\n") as f:
            f.write(encode(self.entries))
            f.flush()
            os.fsync(f.fileno())

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else -1

    @property
    def last(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    def append(self, epoch: int, start: int) -> bool:
        """appendEntry: refused (False) unless both the epoch and the start offset grow."""
        last = self.last
        if last is not None and (last.epoch >= epoch or last.start >= start):
            return False
        self.entries = with_ends([(e.epoch, e.start) for e in self.entries] + [(epoch, start)])
        self._write()
        return True

    def truncate_suffix_by_epoch(self, epoch: int) -> None:
        self._keep(lambda e: e.epoch < epoch)

    def truncate_suffix_by_offset(self, offset: int) -> None:
        self._keep(lambda e: e.start < offset)

    def truncate_prefix_by_offset(self, offset: int) -> None:
        self._keep(lambda e: e.end > offset)

    def _keep(self, keep) -> None:
        kept = [(e.epoch, e.start) for e in self.entries if keep(e)]
        if len(kept) != len(self.entries):
            self.entries = with_ends(kept)
            self._write()

    def find_by_offset(self, offset: int) -> EpochEntry | None:
        for e in self.entries:
            if e.start <= offset < e.end:
                return e
        return None

    def next_entry(self, epoch: int) -> EpochEntry | None:
        return next((e for e in self.entries if e.epoch > epoch), None)
