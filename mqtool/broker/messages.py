"""Turning send requests into store messages: properties, batches, delay and transaction rewrites."""
from __future__ import annotations

from mqtool_store.codes import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANSACTION_TYPE_MASK, Prop, TransactionType
from mqtool_store.messagestore import Message
from mqtool_store.properties import format_properties, parse_properties

def with_property(text: str, key: str, value: str) -> str:
    props = parse_properties(text)
    props[key] = value
    return format_properties(props)


def apply_delay(msg: Message, max_level: int) -> Message:
    """CommitLog.asyncPutMessage: a DELAY > 0 message goes to SCHEDULE_TOPIC_XXXX queue level-1."""
    tx = msg.sys_flag & TRANSACTION_TYPE_MASK
    if tx not in (TransactionType.TRANSACTION_NOT_TYPE, TransactionType.TRANSACTION_COMMIT_TYPE):
        return msg
    if msg.properties_text is not None and f"{Prop.DELAY}\x01" not in msg.properties_text:
        return msg                   # no DELAY property: nothing to parse (the common case)
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
