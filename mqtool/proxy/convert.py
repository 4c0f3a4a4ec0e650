"""A stored message as a gRPC `Message` (GrpcConverter.buildMessage, rocketmq5.md 3.11): for
ReceiveMessage, and for the half message of an orphaned-transaction recovery."""
from __future__ import annotations

import hashlib
import time

from mqtool.proxy.codes import Encoding, MessageType
from mqtool.proxy.descriptors import pb
from mqtool.proxy.send import SHARDING_KEY, SYSTEM_PROPERTY_KEYS, TRACE_CONTEXT
from mqtool_store.codes import Prop

MD5 = 2                                   # DigestType.MD5
BORN_HOST = "__BORNHOST"
TIMER_DELIVER_MS, TIMER_DELAY_SEC = "TIMER_DELIVER_MS", "TIMER_DELAY_SEC"


TRANSACTION_BITS, COMMITTED = 0xC, 0x8        # sysFlag's transaction type, TRANSACTION_COMMIT_TYPE


def message_type(props: dict[str, str], sys_flag: int = 0) -> MessageType:
    """GrpcConverter.buildMessageType (TIMER_DELAY_MS alone is NORMAL there). A committed transaction
    message keeps TRAN_MSG in its stored properties, as 4.9.8's EndTransactionProcessor writes it (5.3.3
    drops it): its commit flag makes it the NORMAL (or DELAY, FIFO) message a 5.x consumer sees."""
    if props.get(Prop.TRAN_MSG) == "true" and sys_flag & TRANSACTION_BITS != COMMITTED:
        return MessageType.TRANSACTION
    if Prop.DELAY in props or TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props:
        return MessageType.DELAY
    if SHARDING_KEY in props:
        return MessageType.FIFO
    return MessageType.NORMAL


def delivery_ms(props: dict[str, str], now_ms: int) -> int | None:
    """TIMER_DELAY_SEC counts from now at each delivery; else TIMER_DELIVER_MS."""
    try:
        if TIMER_DELAY_SEC in props:
            return now_ms + int(props[TIMER_DELAY_SEC]) * 1000
        if TIMER_DELIVER_MS in props:
            return int(props[TIMER_DELIVER_MS])
    except ValueError:
        return None
    return None


def to_message(record, topic: str, *, kind: MessageType | None = None, receipt_handle: str | None = None,
               reconsume_times: int | None = None):
    props = record.properties
    sp = pb.SystemProperties(message_id=props.get(Prop.UNIQ_KEY) or record.msg_id,
                             message_type=int(kind if kind is not None else message_type(props, record.sys_flag)),
                             born_host=props.get(BORN_HOST) or record.born_host, store_host=record.store_host,
                             queue_id=record.queue_id)
    sp.body_digest.type = MD5
    sp.body_digest.checksum = hashlib.md5(record.body).hexdigest().upper()
    sp.body_encoding = int(Encoding.GZIP if record.sys_flag & 1 else Encoding.IDENTITY)
    sp.born_timestamp.FromMilliseconds(record.born_timestamp)
    sp.store_timestamp.FromMilliseconds(record.store_timestamp)
    sp.queue_offset = record.queue_offset
    sp.delivery_attempt = (record.reconsume_times if reconsume_times is None else reconsume_times) + 1
    if Prop.TAGS in props:
        sp.tag = props[Prop.TAGS]
    if props.get(Prop.KEYS):
        sp.keys.extend(props[Prop.KEYS].split(" "))
    if SHARDING_KEY in props:
        sp.message_group = props[SHARDING_KEY]
    if TRACE_CONTEXT in props:
        sp.trace_context = props[TRACE_CONTEXT]
    due = delivery_ms(props, int(time.time() * 1000))
    if due is not None:
        sp.delivery_timestamp.FromMilliseconds(due)
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_KEYS}
    return pb.Message(topic=pb.Resource(name=topic), user_properties=user, system_properties=sp, body=record.body)
