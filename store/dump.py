"""Rows for `store dump`: every kind of store file as dicts, filtered, streamed.

Each producer yields dicts with a "kind" key; stop notes (where and why a file's data ended
early) are yielded as {"kind": "stop", ...} rows so a caller can print them in order.
"""
from __future__ import annotations

import base64
import time

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .checkpoint import decode_checkpoint, implausible_fields
from .codes import TRANSACTION_TYPE_MASK, CompressionType, SysFlag, TransactionType, named
from .commitlog import MessageRecord
from .compression import compression_type, decompress
from .configfiles import load_config
from .consumequeue import QueueDir, list_queues, queue_files, read_units, valid_prefix
from .errors import CompressionUnavailable, FormatError, StoreError
from .indexfile import IndexFile
from .layout import Kind, StorePaths
from .mappedfiles import MappedFile, ReadOnlyMap
from .poprecords import REVIVE_TOPIC_PREFIX, AckMsg, CheckPoint, decode_revive_body
from .query import index_files
from .reader import CommitLogReader
from . import timerfiles


@dataclass
class Filters:
    topic: str | None = None
    queue: int | None = None
    key: str | None = None
    tag: str | None = None
    from_offset: int | None = None
    to_offset: int | None = None      # exclusive
    since: int | None = None
    until: int | None = None          # inclusive
    limit: int | None = None

    def record_matches(self, offset: int, rec: MessageRecord) -> bool:
        if self.topic is not None and rec.topic != self.topic:
            return False
        if self.queue is not None and rec.queue_id != self.queue:
            return False
        if self.tag is not None and rec.tags != self.tag:
            return False
        if self.key is not None and self.key not in rec.keys and rec.uniq_key != self.key:
            return False
        if self.since is not None and rec.store_timestamp < self.since:
            return False
        if self.until is not None and rec.store_timestamp > self.until:
            return False
        return True


def render_body(body: bytes | None, mode: str, cap: int | None) -> tuple[str | None, bool]:
    """(rendered body, truncated?) for --body text|hex|base64|none with a byte cap: the one
    rendering of a message body, for dumps and for the CLI."""
    if body is None or mode == "none":
        return None, False
    truncated = cap is not None and cap >= 0 and len(body) > cap
    part = body[:cap] if truncated else body
    if mode == "hex":
        return part.hex(), truncated
    if mode == "base64":
        return base64.b64encode(part).decode(), truncated
    return part.decode("utf-8", "replace"), truncated


def record_row(offset: int, rec: MessageRecord, file: str | None = None) -> dict:
    """A record as plain data; `body` is the inflated body when it was compressed."""
    body, note = rec.body, None
    try:
        kind = compression_type(rec.sys_flag)
        if kind is not None:
            body = decompress(rec.body, rec.sys_flag)
    except (CompressionUnavailable, FormatError) as exc:
        body, note, kind = None, exc.message, None
    flags = sys_flag_names(rec.sys_flag)
    return {
        "kind": "message", "file": file, "commitlog_offset": offset, "store_size": rec.total_size,
        "magic": named_value(rec.magic_name), "topic": rec.topic, "queue_id": rec.queue_id,
        "queue_offset": rec.queue_offset, "physical_offset": rec.physical_offset,
        "flag": rec.flag, "sys_flag": rec.sys_flag, "sys_flags": flags,
        "transaction": transaction_name(rec.sys_flag),
        "compression": kind.name if isinstance(kind, CompressionType) else None,
        "born_timestamp": rec.born_timestamp, "born_host": rec.born_host,
        "store_timestamp": rec.store_timestamp, "store_host": rec.store_host,
        "reconsume_times": rec.reconsume_times,
        "prepared_transaction_offset": rec.prepared_transaction_offset,
        "body_crc": rec.body_crc, "crc_ok": rec.crc_ok, "stored_body_len": len(rec.body),
        "body_len": len(body) if body is not None else None,
        "tags": rec.tags, "keys": rec.keys, "uniq_key": rec.uniq_key, "msg_id": rec.msg_id,
        "properties": rec.properties, "body_bytes": body, "body_note": note,
    }


TIMER_TOPIC = "rmq_sys_wheel_timer"        # 5.x TimerMessageStore.TIMER_TOPIC


def pop_row(row: dict) -> dict | None:
    """A record row of a 5.x revive topic (rmq_sys_REVIVE_LOG_<cluster>) as its POP checkpoint or ack
    (store/poprecords.py), long names; None for any other record. A 5.x broker writes them as timer
    messages: one still in `rmq_sys_wheel_timer` (REAL_TOPIC the revive topic) is decoded too."""
    topic, queue, offset, wheel = row["topic"], row["queue_id"], row["queue_offset"], False
    if topic == TIMER_TOPIC:               # 5.x: a checkpoint or ack still in the timer wheel, not yet due
        props = row["properties"]
        topic, wheel = props.get("REAL_TOPIC", ""), True
        queue = int(props["REAL_QID"]) if props.get("REAL_QID", "").isdigit() else -1
        offset = None
    if not topic.startswith(REVIVE_TOPIC_PREFIX):
        return None
    item = decode_revive_body(row["tags"], row["body_bytes"] or b"")
    base = {"commitlog_offset": row["commitlog_offset"], "revive_topic": topic, "revive_queue": queue,
            "revive_offset": offset, "in_timer_wheel": wheel, "store_timestamp": row["store_timestamp"],
            "uniq_key": row["uniq_key"]}
    if isinstance(item, CheckPoint):
        return {"kind": "pop_checkpoint", **base, "topic": item.t, "group": item.c, "queue_id": item.q,
                "start_offset": item.so, "offsets": [item.offset(i) for i in range(item.n)], "pop_timestamp": item.pt,
                "invisible_time": item.it, "revive_timestamp": item.revive_time, "ack_bits": item.bm,
                "broker_name": item.bn, "reput_times": int(item.rp or 0)}
    if isinstance(item, AckMsg):
        return {"kind": "pop_ack" if item.aol is None else "pop_batch_ack", **base, "topic": item.t, "group": item.c,
                "queue_id": item.q, "start_offset": item.so, "offsets": item.offsets, "pop_timestamp": item.pt,
                "broker_name": item.bn}
    return {"kind": "pop_unknown", **base, "tags": row["tags"]}


def sys_flag_names(sys_flag: int) -> list[str]:
    return [f.name for f in SysFlag if f & sys_flag and f.name and not f.name.startswith("TRANSACTION")]


def transaction_name(sys_flag: int):
    return named_value(named(TransactionType, sys_flag & TRANSACTION_TYPE_MASK))


def named_value(v):
    return v.name if hasattr(v, "name") else v


def dump_commitlog(reader: CommitLogReader, f: Filters) -> Iterator[dict]:
    count = 0
    ends: list = []
    start = f.from_offset or 0
    for offset, rec in reader.records(start, ends=ends):
        while ends:
            yield _stop_row(*ends.pop(0))
        if f.to_offset is not None and offset >= f.to_offset:
            return
        if not f.record_matches(offset, rec):
            continue
        yield record_row(offset, rec, _file_of(reader, offset))
        count += 1
        if f.limit is not None and count >= f.limit:
            return
    for mf, end in ends:
        yield _stop_row(mf, end)


def _file_of(reader: CommitLogReader, offset: int) -> str | None:
    mf = reader.file_at(offset)
    return mf.path.name if mf else None


def _stop_row(mf: MappedFile, end) -> dict:
    return {"kind": "stop", "file": str(mf.path), "position": end.position, "reason": end.reason,
            "detail": end.detail, "invalid_bytes": end.invalid_bytes, "clean": end.clean}


def dump_consume_queues(queues: list[QueueDir], f: Filters, files: list[MappedFile] | None = None) -> Iterator[dict]:
    count = 0
    for q in queues:
        if f.topic is not None and q.topic != f.topic:
            continue
        if f.queue is not None and q.queue_id != f.queue:
            continue
        for mf in files if files is not None else queue_files(q):
            with ReadOnlyMap(mf.path) as m:
                units = read_units(m.buf)
                n = valid_prefix(units)
                rows = list(zip(units["offset"][:n].tolist(), units["size"][:n].tolist(),
                                units["tags_code"][:n].tolist()))
                tail_nonzero = bool(units[n:]["size"].any() or units[n:]["offset"].any())
                del units
            base = mf.start // 20
            for i, (off, size, tags) in enumerate(rows):
                qoff = base + i
                if f.from_offset is not None and qoff < f.from_offset:
                    continue
                if f.to_offset is not None and qoff >= f.to_offset:
                    break
                yield {"kind": "cq_unit", "topic": q.topic, "queue_id": q.queue_id, "queue_offset": qoff,
                       "commitlog_offset": off, "size": size, "tags_code": tags,
                       "pre_blank": off == 0 and size == 0x7FFFFFFF}
                count += 1
                if f.limit is not None and count >= f.limit:
                    return
            if tail_nonzero:
                yield {"kind": "stop", "file": str(mf.path), "position": n * 20, "reason": "corrupt",
                       "detail": "invalid unit followed by more data", "clean": False,
                       "invalid_bytes": None}


def dump_index(path: Path, f: Filters) -> Iterator[dict]:
    with ReadOnlyMap(path) as m:
        idx = IndexFile(m.buf, path)
        h = idx.header
        yield {"kind": "index_header", "file": str(path), "max_hash_slot_num": idx.slot_num,
               "max_index_num": idx.index_num, **vars(h)}
        if f.key is not None:
            if f.topic is None:
                raise StoreError("--key on an index file needs --topic (index keys are topic#key)")
            wanted = set(idx.select_offsets(f"{f.topic}#{f.key}", f.since or 0, f.until or 2**63 - 1))
        else:
            wanted = None
        entries = idx.entries()
        count = 0
        for n, (kh, off, diff, prev) in enumerate(zip(entries["key_hash"].tolist(), entries["phy_offset"].tolist(),
                                                      entries["time_diff"].tolist(),
                                                      entries["prev_index"].tolist()), start=1):
            if wanted is not None and off not in wanted:
                continue
            if f.from_offset is not None and off < f.from_offset:
                continue
            if f.to_offset is not None and off >= f.to_offset:
                continue
            yield {"kind": "index_entry", "file": str(path), "entry": n, "key_hash": kh,
                   "commitlog_offset": off, "time_diff": diff, "store_time": h.begin_timestamp + diff * 1000,
                   "prev_index": prev}
            count += 1
            if f.limit is not None and count >= f.limit:
                break
        del entries


def dump_checkpoint(path: Path) -> Iterator[dict]:
    with ReadOnlyMap(path) as m:
        cp = decode_checkpoint(m.buf, path)
    yield {"kind": "checkpoint", "file": str(path), **vars(cp), "min_timestamp": cp.min_timestamp,
           "min_timestamp_index": cp.min_timestamp_index}
    bad = implausible_fields(cp, int(time.time() * 1000))
    if bad:
        yield {"kind": "stop", "file": str(path), "position": bad[0][0], "reason": "corrupt",
               "detail": "not a checkpoint a broker wrote: " + "; ".join(why for _, why in bad),
               "clean": False, "invalid_bytes": None}


def dump_config(path: Path) -> Iterator[dict]:
    loaded = load_config(path, fallback_to_bak=False)
    yield {"kind": "config", "file": str(loaded.path), "data": loaded.data}


COMMITLOG_KINDS = (Kind.ROOT, Kind.COMMITLOG_DIR, Kind.COMMITLOG_FILE)

# The filters each kind's dump applies (an index dump takes --topic, --since and --until along
# with --key only: they select through the key's hash chain).
_APPLIES = {
    Kind.CONSUMEQUEUE_DIR: ("topic", "queue", "from_offset", "to_offset", "limit"),
    Kind.CONSUMEQUEUE_FILE: ("from_offset", "to_offset", "limit"),
    Kind.INDEX_DIR: ("key", "from_offset", "to_offset", "limit"),
    Kind.INDEX_FILE: ("key", "from_offset", "to_offset", "limit"),
    Kind.TIMERLOG: ("limit",),
    Kind.TIMERWHEEL: ("limit",),
}
_WITH_KEY = ("topic", "since", "until")


def unused_filters(kind: Kind, f: Filters) -> list[str]:
    """The filters given in `f` that a dump of `kind` would not apply, by field name."""
    if kind in COMMITLOG_KINDS:
        return []
    applies = _APPLIES.get(kind, ())
    if kind in (Kind.INDEX_DIR, Kind.INDEX_FILE) and f.key is not None:
        applies += _WITH_KEY
    return [name for name, value in vars(f).items() if value is not None and name not in applies]


def commitlog_reader(path: Path, kind: Kind) -> CommitLogReader:
    """The commitlog a path of one of COMMITLOG_KINDS names."""
    if kind is Kind.ROOT:
        return CommitLogReader(StorePaths.of(path).commitlog)
    if kind is Kind.COMMITLOG_DIR:
        return CommitLogReader(path)
    return CommitLogReader.single_file(path)


def dump_path(path: Path, kind: Kind, f: Filters) -> Iterator[dict]:
    """Every row of one path of a detected (or forced) kind."""
    if kind in COMMITLOG_KINDS:
        with commitlog_reader(path, kind) as reader:
            yield from dump_commitlog(reader, f)
    elif kind is Kind.CONSUMEQUEUE_DIR:
        if path.parent.parent.name == "consumequeue" and path.name.lstrip("-").isdigit():
            queues = [QueueDir(path.parent.name, int(path.name), path)]
        elif path.parent.name == "consumequeue":
            queues = [q for q in list_queues(path.parent) if q.topic == path.name]
        else:
            queues = list_queues(path)
        yield from dump_consume_queues(queues, f)
    elif kind is Kind.CONSUMEQUEUE_FILE:
        qdir = path.parent
        topic = qdir.parent.name
        qid = int(qdir.name) if qdir.name.lstrip("-").isdigit() else 0
        start = int(path.name) if path.name.isdigit() else 0
        mf = MappedFile(path, start, path.stat().st_size)
        yield from dump_consume_queues([QueueDir(topic, qid, qdir)], Filters(
            from_offset=f.from_offset, to_offset=f.to_offset, limit=f.limit), [mf])
    elif kind is Kind.INDEX_FILE:
        yield from dump_index(path, f)
    elif kind is Kind.INDEX_DIR:
        for p in index_files(path.parent):
            yield from dump_index(p, f)
    elif kind is Kind.CHECKPOINT:
        yield from dump_checkpoint(path)
    elif kind is Kind.TIMERLOG:
        if path.is_dir():
            yield from timerfiles.dump_timerlog(path, f.limit)
        else:
            yield from (r for r in timerfiles.dump_timerlog(path.parent) if r["file"] == str(path))
    elif kind is Kind.TIMERWHEEL:
        yield from timerfiles.dump_timerwheel(path, f.limit)
    elif kind is Kind.TIMERCHECK:
        yield from timerfiles.dump_timercheck(path)
    elif kind is Kind.CONFIG:
        yield from dump_config(path)
    elif kind in (Kind.ABORT, Kind.LOCK):
        yield {"kind": kind.value, "file": str(path), "size": path.stat().st_size,
               "meaning": "broker running or stopped abnormally (abnormal recovery on next start)"
               if kind is Kind.ABORT else "single-instance lock file; its presence alone means nothing"}
