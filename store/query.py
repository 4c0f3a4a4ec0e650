"""Finding messages offline: by key through the index files, by offset msgId, by commitlog offset."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from .codes import DEFAULT_MAX_MSGS_NUM_BATCH
from .commitlog import MessageRecord
from .errors import StoreError
from .indexfile import IndexFile
from .layout import StorePaths, is_index_file_name
from .mappedfiles import ReadOnlyMap
from .msgid import decode_offset_msg_id
from .reader import CommitLogReader


@dataclass
class KeyQueryResult:
    records: list[tuple[int, MessageRecord]] = field(default_factory=list)
    candidates: int = 0        # offsets the index gave (hash matches)
    collisions: int = 0        # candidates whose record did not carry the key
    capped: bool = False       # stopped at max_num
    index_files: int = 0
    damaged: list[str] = field(default_factory=list)   # index files (or hits) skipped, with why


def index_files(root: Path) -> list[Path]:
    d = StorePaths.of(root).index
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_file() and is_index_file_name(p.name))


def query_by_key(root, topic: str, key: str, begin: int = 0, end: int = 2**63 - 1,
                 max_num: int = DEFAULT_MAX_MSGS_NUM_BATCH, commitlog: CommitLogReader | None = None,
                 geometry: tuple[int, int] | None = None) -> KeyQueryResult:
    """IndexService.queryOffset (newest file first), then each record re-checked for the key."""
    paths = StorePaths.of(root)
    result = KeyQueryResult()
    full_key = f"{topic}#{key}"
    offsets: list[int] = []
    files = index_files(paths.root)
    for path in reversed(files):
        try:
            with ReadOnlyMap(path) as m:
                idx = IndexFile(m.buf, path, *(geometry or (None, None)))
                h = idx.header
                result.index_files += 1
                if begin <= h.end_timestamp and h.begin_timestamp <= end:
                    offsets.extend(idx.select_offsets(full_key, begin, end, max_num + 1 - len(offsets)))
        except (StoreError, OSError, ValueError, struct.error) as exc:
            result.damaged.append(f"{path.name}: {exc}")     # one bad file does not hide the others
            continue
        if h.begin_timestamp < begin or len(offsets) > max_num:
            break
    offsets = sorted(set(offsets))
    result.candidates = len(offsets)
    if len(offsets) > max_num:
        result.capped = True
        offsets = offsets[-max_num:]
    own = commitlog is None
    reader = commitlog or CommitLogReader(paths.commitlog)
    try:
        for off in offsets:
            try:
                rec = reader.read(off)
            except StoreError as exc:
                result.damaged.append(f"index hit at commitlog offset {off}: {exc}")
                continue
            if rec.topic == topic and (key in rec.keys or rec.uniq_key == key):
                result.records.append((off, rec))
            else:
                result.collisions += 1
    finally:
        if own:
            reader.close()
    return result


def query_by_offset(root, offset: int) -> MessageRecord:
    with CommitLogReader(StorePaths.of(root).commitlog) as reader:
        return reader.read(offset)


def query_by_msg_id(root, msg_id: str) -> tuple[MessageRecord, str]:
    """-> (record, store host of the id). The host is reported; this store is read regardless."""
    ip, port, offset = decode_offset_msg_id(msg_id)
    return query_by_offset(root, offset), f"{ip}:{port}"
