"""Finding messages offline: by key through the index files, by msgId (an offset id read directly, a
unique key through the index), by commitlog offset."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from .codes import DEFAULT_MAX_MSGS_NUM_BATCH
from .commitlog import MessageRecord
from .errors import FormatError, NotFoundError, StoreError
from .indexfile import IndexFile
from .layout import StorePaths, is_index_file_name
from .mappedfiles import ReadOnlyMap
from .msgid import offset_id_fields
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
        return record_at(reader, offset)


def record_at(reader: CommitLogReader, offset: int) -> MessageRecord:
    """The record that starts at `offset`; an offset inside a record (or past the records) is
    said as such, not as the bytes found there."""
    try:
        return reader.read(offset)
    except FormatError:
        raise FormatError(f"no record starts at commitlog offset {offset}", path=reader.directory) from None


@dataclass
class MsgIdResult:
    records: list[tuple[int, MessageRecord]]
    kind: str                       # "offset id" | "unique key"
    host: str | None = None         # the store host an offset id names
    notes: list[str] = field(default_factory=list)


class TopicNeeded(StoreError):
    """A unique key given without the topic its index entries are filed under."""


def query_by_msg_id(root, msg_id: str, topic: str | None = None,
                    max_num: int = DEFAULT_MAX_MSGS_NUM_BATCH) -> MsgIdResult:
    """mqadmin queryMsgById over a store: an offset id is read at its offset (this store is read,
    whatever host the id names); any other id is a unique key (UNIQ_KEY), looked up through the
    index files under `topic`, as MQAdminImpl.queryMessageByUniqKey does. An offset id that finds
    no record there is tried as a unique key too when a topic is given (as mqadmin falls back)."""
    fields = offset_id_fields(msg_id)
    failed = None
    if fields is not None:
        ip, port, offset = fields
        try:
            rec = query_by_offset(root, offset)
            return MsgIdResult([(offset, rec)], "offset id", f"{ip}:{port}")
        except (FormatError, NotFoundError) as exc:
            if topic is None:     # other clients' unique keys (the C++ client's) can look like offset ids
                raise type(exc)(f"{exc.message}; if {msg_id} is a unique key (UNIQ_KEY), give --topic to find it "
                                "through the index", path=exc.path) from None
            failed = exc
    elif topic is None:
        raise TopicNeeded(f"message id {msg_id} is not an offset id; as a unique key (UNIQ_KEY) it is found "
                          "through the index under its topic: give --topic")
    res = query_by_key(root, topic, msg_id.strip(), max_num=max_num)
    found = [(off, rec) for off, rec in res.records if rec.uniq_key == msg_id.strip()]
    if not found and failed is not None:
        raise failed
    notes = [f"skipped damaged index data: {d}" for d in res.damaged]
    return MsgIdResult(found, "unique key", None, notes)
