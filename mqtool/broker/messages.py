"""Turning send requests into store messages: properties, batches, delay and transaction rewrites."""
from __future__ import annotations

import struct

from mqtool_store.codes import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANSACTION_TYPE_MASK, Prop, TransactionType
from mqtool_store.messagestore import Message
from mqtool_store.properties import format_properties, parse_properties

_BATCH_HEAD = struct.Struct(">iiiii")   # total, magic, crc, flag, body length


class BatchFormatError(ValueError):
    pass


def decode_batch(body: bytes) -> list[tuple[int, bytes, str]]:
    """MessageDecoder.decodeMessages of a batch body: (flag, body, properties text) per message."""
    out, p = [], 0
    while p < len(body):
        if p + _BATCH_HEAD.size > len(body):
            raise BatchFormatError("batch body is cut off")
        total, _magic, _crc, flag, blen = _BATCH_HEAD.unpack_from(body, p)
        q = p + _BATCH_HEAD.size
        if blen < 0 or q + blen + 2 > len(body) or total < 22 or p + total > len(body):
            raise BatchFormatError(f"bad batch entry at {p}")
        data = body[q:q + blen]
        q += blen
        plen = struct.unpack_from(">h", body, q)[0]
        q += 2
        props = body[q:q + plen].decode("utf-8", "replace")
        out.append((flag, data, props))
        p += total
    return out


def encode_batch(messages: list[tuple[int, bytes, str]]) -> bytes:
    parts = []
    for flag, data, props in messages:
        praw = props.encode()
        total = 20 + len(data) + 2 + len(praw)
        parts.append(_BATCH_HEAD.pack(total, 0, 0, flag, len(data)) + data + struct.pack(">h", len(praw)) + praw)
    return b"".join(parts)


def merge_batch_properties(inner: str, outer: str) -> str:
    """Batch inner properties, then one 0x02 (unless already there), then the batch-level ones."""
    if inner and outer and not inner.endswith("\x02"):
        return inner + "\x02" + outer
    return inner + outer


def with_property(text: str, key: str, value: str) -> str:
    props = parse_properties(text)
    props[key] = value
    return format_properties(props)


def apply_delay(msg: Message, max_level: int) -> Message:
    """CommitLog.asyncPutMessage: a DELAY > 0 message goes to SCHEDULE_TOPIC_XXXX queue level-1."""
    tx = msg.sys_flag & TRANSACTION_TYPE_MASK
    if tx not in (TransactionType.TRANSACTION_NOT_TYPE, TransactionType.TRANSACTION_COMMIT_TYPE):
        return msg
    props = parse_properties(msg.properties_text) if msg.properties_text is not None else dict(msg.properties)
    try:
        level = int(props.get(Prop.DELAY, "0"))
    except ValueError:
        level = 0
    if level <= 0:
        return msg
    level = min(level, max_level)
    props[Prop.DELAY] = str(level)
    props[Prop.REAL_TOPIC] = msg.topic
    props[Prop.REAL_QID] = str(msg.queue_id)
    msg.topic, msg.queue_id = SCHEDULE_TOPIC, level - 1
    msg.properties, msg.properties_text = props, format_properties(props)
    return msg


def to_half(msg: Message) -> Message:
    """TransactionalMessageBridge.parseHalfMessageInner: park the message in the half topic."""
    props = parse_properties(msg.properties_text) if msg.properties_text is not None else dict(msg.properties)
    props[Prop.REAL_TOPIC] = msg.topic
    props[Prop.REAL_QID] = str(msg.queue_id)
    msg.sys_flag = msg.sys_flag & ~TRANSACTION_TYPE_MASK
    msg.topic, msg.queue_id = TRANS_HALF_TOPIC, 0
    msg.properties, msg.properties_text = props, format_properties(props)
    return msg
