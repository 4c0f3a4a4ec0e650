"""POP's strings (5.x ExtraInfoUtil, KeyBuilder, ReceiptHandle; shared/spec/rocketmq5.md 2.3, 2.4, 3.12).

A POP answer describes its messages in three header strings (`startOffsetInfo`, `msgOffsetInfo`,
`orderCountInfo`: entries joined by ';', fields by one space); the client builds each message's
`POP_CK` ExtraInfo from them and echoes it in ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME. Parsing
is positional and strict, as Java's (a field that is not a number, a missing field, a duplicate
key: ValueError). Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass

SEP = " "                       # MessageConst.KEY_SEPARATOR
RETRY_PREFIX = "%RETRY%"        # MixAll.RETRY_GROUP_TOPIC_PREFIX
NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2 = "0", "1", "2"
POP_ORDER_REVIVE_QUEUE = 999    # KeyBuilder.POP_ORDER_REVIVE_QUEUE: the reviveQid of an orderly pop
QUEUE_OFFSET = "qo"


# ---------------------------------------------------------------- retry topics (KeyBuilder)

def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """buildPopRetryTopic: `%RETRY%<group>_<topic>` (V1, 5.3.3's default) or `%RETRY%<group>+<topic>` (V2)."""
    return f"{RETRY_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def normal_topic(retry_topic: str, group: str) -> str:
    """parseNormalTopic: the topic a POP retry topic of `group` is for (the name itself otherwise)."""
    if retry_topic.startswith(RETRY_PREFIX + group) and len(retry_topic) > len(RETRY_PREFIX) + len(group) + 1:
        return retry_topic[len(RETRY_PREFIX) + len(group) + 1:]
    return retry_topic


def topic_type(topic: str) -> str:
    """The topic type field: "0" normal, "1" retry V1, "2" retry V2 (`%RETRY%` with a '+')."""
    if not topic.startswith(RETRY_PREFIX):
        return NORMAL_TOPIC
    return RETRY_TOPIC_V2 if "+" in topic else RETRY_TOPIC


def real_topic(kind: str, topic: str, group: str) -> str:
    """getRealTopic: the topic an ack must name, from the ExtraInfo's type and the normal topic."""
    if kind == RETRY_TOPIC:
        return pop_retry_topic(topic, group)
    if kind == RETRY_TOPIC_V2:
        return pop_retry_topic(topic, group, v2=True)
    return topic


# ---------------------------------------------------------------- ExtraInfo (POP_CK)

@dataclass(frozen=True)
class ExtraInfo:
    ck_offset: int          # the checkpoint's start offset (startOffsetInfo of the message's queue)
    pop_time: int
    invisible_time: int
    revive_qid: int
    kind: str               # topic type: NORMAL_TOPIC, RETRY_TOPIC or RETRY_TOPIC_V2
    broker_name: str
    queue_id: int
    queue_offset: int | None = None       # absent in the 7-field form

    @property
    def order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    def text(self) -> str:
        """buildExtraInfo."""
        head = (f"{self.ck_offset}{SEP}{self.pop_time}{SEP}{self.invisible_time}{SEP}{self.revive_qid}{SEP}"
                f"{self.kind}{SEP}{self.broker_name}{SEP}{self.queue_id}")
        return head if self.queue_offset is None else f"{head}{SEP}{self.queue_offset}"


def build_extra_info(ck_offset: int, pop_time: int, invisible_time: int, revive_qid: int, topic: str,
                     broker_name: str, queue_id: int, queue_offset: int | None = None) -> str:
    return ExtraInfo(ck_offset, pop_time, invisible_time, revive_qid, topic_type(topic), broker_name, queue_id,
                     queue_offset).text()


def _long(text: str) -> int:
    """Long.parseLong: ASCII digits with an optional sign, nothing else (int() would take '1_0', ' 1')."""
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        raise ValueError(f"not a number: {text!r}")
    return int(text)


def parse_extra_info(text: str) -> ExtraInfo:
    """The 7- or 8-field ExtraInfo (a 9th or 10th field, the proxy's commit-log offset, is left to
    parse_receipt_handle). ValueError on fewer fields or a field that is not a number."""
    if text is None:
        raise ValueError("split extraInfo is null")
    f = text.split(SEP)
    if len(f) < 7:
        raise ValueError(f"extraInfo has {len(f)} fields, needs 7 or more: {text!r}")
    return ExtraInfo(_long(f[0]), _long(f[1]), _long(f[2]), _long(f[3]), f[4], f[5], _long(f[6]),
                     _long(f[7]) if len(f) > 7 else None)


# ---------------------------------------------------------------- receipt handles (the proxy's, 3.12)

@dataclass(frozen=True)
class ReceiptHandle:
    extra: ExtraInfo                 # the 8-field form
    commit_log_offset: int = -1      # index 8; -1 when absent

    def text(self) -> str:
        return f"{self.extra.text()}{SEP}{self.commit_log_offset}"

    @property
    def next_visible_time(self) -> int:
        return self.extra.pop_time + self.extra.invisible_time


def parse_receipt_handle(text: str) -> ReceiptHandle:
    """ReceiptHandle.decode: 8 or more fields, index 8 the commit-log offset (else -1)."""
    f = text.split(SEP)
    if len(f) < 8:
        raise ValueError(f"receipt handle has {len(f)} fields, needs 8 or more: {text!r}")
    return ReceiptHandle(parse_extra_info(SEP.join(f[:8])), _long(f[8]) if len(f) > 8 else -1)


# ---------------------------------------------------------------- the POP answer's header strings

def _kind(retry: bool | str) -> str:
    if isinstance(retry, str):
        return retry
    return RETRY_TOPIC if retry else NORMAL_TOPIC


def start_offset_entry(retry: bool | str, queue_id: int, start_offset: int) -> str:
    return f"{_kind(retry)}{SEP}{queue_id}{SEP}{start_offset}"


def msg_offset_entry(retry: bool | str, queue_id: int, offsets: list[int]) -> str:
    return f"{_kind(retry)}{SEP}{queue_id}{SEP}{','.join(str(o) for o in offsets)}"


def queue_offset_key(queue_id: int, queue_offset: int) -> str:
    return f"{QUEUE_OFFSET}{queue_id}%{queue_offset}"


def order_count_entry(retry: bool | str, queue_id: int, count: int, queue_offset: int | None = None) -> str:
    """buildQueueOffsetOrderCountInfo (with a queue offset) or buildQueueIdOrderCountInfo."""
    middle = queue_id if queue_offset is None else queue_offset_key(queue_id, queue_offset)
    return f"{_kind(retry)}{SEP}{middle}{SEP}{count}"


def join(entries: list[str]) -> str | None:
    return ";".join(entries) if entries else None


def _entries(text: str | None, what: str):
    if not text:
        return
    keys = set()
    for one in text.split(";"):
        f = one.split(SEP)
        if len(f) != 3:
            raise ValueError(f"parse {what} error, {text}")
        key = f"{f[0]}@{f[1]}"
        if key in keys:
            raise ValueError(f"parse {what} error, duplicate, {text}")
        keys.add(key)
        yield key, f[2]


def parse_start_offset_info(text: str | None) -> dict[str, int]:
    return {k: _long(v) for k, v in _entries(text, "startOffsetInfo")}


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]]:
    return {k: [_long(o) for o in v.split(",")] for k, v in _entries(text, "msgOffsetInfo")}


def parse_order_count_info(text: str | None) -> dict[str, int]:
    return {k: _long(v) for k, v in _entries(text, "orderCountInfo")}


def start_offset_key(topic: str, queue_id: int) -> str:
    """getStartOffsetInfoMapKey: `<t>@<queueId>` for a message's topic."""
    return f"{topic_type(topic)}@{queue_id}"


def queue_offset_map_key(topic: str, queue_id: int, queue_offset: int) -> str:
    return f"{topic_type(topic)}@{queue_offset_key(queue_id, queue_offset)}"
