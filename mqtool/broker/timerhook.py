"""The timer put hook (HookUtils.handleScheduleMessage's timer half, 5.3.3): a message due later goes
to rmq_sys_wheel_timer queue 0 with TIMER_OUT_MS, REAL_TOPIC and REAL_QID (spec rocketmq5.md §1.3)."""
from __future__ import annotations

import base64
import re

from mqtool_store.codes import TIMER_TOPIC, TRANS_HALF_TOPIC, TRANSACTION_TYPE_MASK, Prop, TransactionType
from mqtool_store.messagestore import Message, PutResult, PutStatus
from mqtool_store.properties import format_properties, parse_properties

TIMER_PROPS = (Prop.TIMER_DELIVER_MS, Prop.TIMER_DELAY_SEC, Prop.TIMER_DELAY_MS)
_JAVA_LONG = re.compile(r"[+-]?[0-9]+\Z")       # Long.parseLong: no spaces, no underscores
_TIMED_TX = (TransactionType.TRANSACTION_NOT_TYPE, TransactionType.TRANSACTION_COMMIT_TYPE)
NOT_ENABLE_REMARK = "accurate timer message is not enabled, timerWheelEnable is false"


def java_long(text: str) -> int:
    if not _JAVA_LONG.match(text):
        raise ValueError(text)
    value = int(text)
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(text)
    return value


def may_be_timer(msg: Message) -> bool:
    """A cheap test before the hook: the message names a timer property."""
    text = msg.properties_text
    if text is not None:
        return "TIMER_" in text
    return any(k in msg.properties for k in TIMER_PROPS)


def round_due(deliver_ms: int, precision: int) -> int:
    """The slot time T of a due time D: D - P when D is a multiple of P, else D floored to P."""
    return deliver_ms - precision if deliver_ms % precision == 0 else deliver_ms // precision * precision


def timer_hook(msg: Message, now_ms: int, enabled: bool, precision: int, max_delay_s: int,
               is_reject=None) -> PutResult | None:
    """Rewrite `msg` in place as Java's put hook does; a PutResult for a refusal, else None."""
    if msg.topic in (TIMER_TOPIC, TRANS_HALF_TOPIC) or (msg.sys_flag & TRANSACTION_TYPE_MASK) not in _TIMED_TX:
        return None
    # (a Message's dict and text say the same where both are set: the dict spares a parse)
    props = dict(msg.properties) if msg.properties or msg.properties_text is None else \
        parse_properties(msg.properties_text)
    if not any(k in props for k in TIMER_PROPS):
        return None
    try:
        level = int(props.get(Prop.DELAY, "0"))
    except ValueError:
        level = 0
    if level > 0:                    # checkIfTimerMessage: a delay-level message drops its timer properties
        for k in TIMER_PROPS:
            props.pop(k, None)
        _set(msg, props)
        return None
    if Prop.TIMER_OUT_MS in props:
        return None
    if not enabled:
        return PutResult(PutStatus.WHEEL_TIMER_NOT_ENABLE, remark=NOT_ENABLE_REMARK)
    try:
        if Prop.TIMER_DELAY_SEC in props:
            deliver = now_ms + java_long(props[Prop.TIMER_DELAY_SEC]) * 1000
        elif Prop.TIMER_DELAY_MS in props:
            deliver = now_ms + java_long(props[Prop.TIMER_DELAY_MS])
        else:
            deliver = java_long(props[Prop.TIMER_DELIVER_MS])
    except ValueError:
        return PutResult(PutStatus.WHEEL_TIMER_MSG_ILLEGAL, remark="timer message illegal: a timer property is "
                         "not a number")
    if deliver > now_ms:
        if deliver - now_ms > max_delay_s * 1000:
            return PutResult(PutStatus.WHEEL_TIMER_MSG_ILLEGAL, remark=(
                f"timer message illegal, the delay time should not be bigger than the max delay "
                f"{max_delay_s * 1000}ms; or if set del msg, the delay time should be bigger than the current time"))
        slot = round_due(deliver, precision)
        if is_reject is not None and is_reject(slot):
            return PutResult(PutStatus.WHEEL_TIMER_FLOW_CONTROL, remark="timer message is under flow control, "
                             "max num limit is timerCongestNumEachSlot")
        props[Prop.TIMER_OUT_MS] = str(slot)
        props[Prop.REAL_TOPIC] = msg.topic
        props[Prop.REAL_QID] = str(msg.queue_id)
        msg.topic, msg.queue_id = TIMER_TOPIC, 0
        _set(msg, props)
    elif Prop.TIMER_DEL_UNIQKEY in props:
        return PutResult(PutStatus.WHEEL_TIMER_MSG_ILLEGAL, remark="timer message illegal: a recall for a time passed")
    return None


def _set(msg: Message, props: dict) -> None:
    msg.properties, msg.properties_text = props, format_properties(props)


def recall_handle(real_topic: str, broker_name: str, timer_out_ms: int, uniq: str) -> str:
    """RecallMessageHandle.HandleV1.buildHandle: base64url (padded) of 'v1 topic broker T+1 id'."""
    text = f"v1 {real_topic} {broker_name} {timer_out_ms + 1} {uniq}"
    return base64.urlsafe_b64encode(text.encode()).decode()


def parse_recall_handle(handle: str) -> tuple[str, str, int, str] | None:
    """(topic, broker name, timestamp, message id) of a v1 handle, or None where it is invalid."""
    try:
        parts = base64.urlsafe_b64decode(handle.encode()).decode().split(" ")
        if len(parts) < 5 or parts[0] != "v1":
            return None
        return parts[1], parts[2], int(parts[3]), parts[4]
    except (ValueError, UnicodeError):
        return None
