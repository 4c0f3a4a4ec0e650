"""Message trace records (RocketMQ 4.9.8's msgTrace), as text: TraceDataEncoder's exact format, no I/O.

A trace message's body is records concatenated. A record is the type name, then its fields, each
before a CONTENT_SPLITOR (U+0001), the record ended by a FIELD_SPLITOR (U+0002). Values are Java's
string conversions: None is `null`, booleans `true`/`false`, times epoch ms. Fields, type name
first (../shared/spec/trace.md §2):

    Pub (14)            timestamp region group topic msgId tags keys storeHost bodyLength costTime
                        msgType offsetMsgId success
    SubBefore (8)       timestamp region group requestId msgId retryTimes keys
    SubAfter (9)        requestId msgId costTime success keys contextCode timestamp group
                        (7 on the CLOUD channel: no timestamp or group, and no FIELD_SPLITOR: a 4.9.8 defect)
    EndTransaction (13) timestamp region group topic msgId tags keys storeHost msgType transactionId
                        state fromTransactionCheck

`encode` writes what 4.9.8's encoder writes, defects included (an empty last field, the CLOUD
SubAfter). `decode` reads what every 4.x encoder wrote: `strict=True` fails where Java's decoder
throws (one bad record loses the whole body); the default skips a bad record alone, pads a
record whose empty last field vanished, and cuts a CLOUD SubAfter from the record run into it.
"""
from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from mqtool.common.plural import count

CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
DEFAULT_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"       # TopicValidator.RMQ_SYS_TRACE_TOPIC
DEFAULT_REGION = "DefaultRegion"                  # MixAll.DEFAULT_TRACE_REGION_ID
MAX_MESSAGE_SIZE = 128000                         # the trace producer's maxMessageSize
FLUSH_AT = MAX_MESSAGE_SIZE - 10000               # a batch is sent when its text reaches this length


class TraceType(str, enum.Enum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MsgType(enum.IntEnum):
    """MessageType, written as its ordinal."""
    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """A SubAfter's contextCode."""
    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


TRANSACTION_STATES = ("COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW")    # LocalTransactionState names
_TYPES = {t.value: t for t in TraceType}


class TraceDecodeError(ValueError):
    """A record Java's decoder throws on (strict decoding)."""


@dataclass
class TraceRecord:
    """One record: a TraceContext with its one TraceBean, flattened. Strings may be None (`null`)."""
    type: TraceType
    msg_id: str | None = ""
    timestamp: int = 0
    region_id: str | None = ""
    group: str | None = ""
    request_id: str | None = ""
    topic: str | None = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str | None = ""
    body_length: int = 0
    cost_time: int = 0
    msg_type: int = MsgType.Normal_Msg
    offset_msg_id: str | None = ""
    success: bool = True
    retry_times: int = 0
    context_code: int = 0
    transaction_id: str | None = None
    transaction_state: str = "UNKNOW"
    from_transaction_check: bool = False
    client_host: str | None = None       # Pub's 15th field (older writers); never written by 4.9.8
    cloud: bool = False                  # a SubAfter of the CLOUD channel: 7 fields, no timestamp or group
    timestamp_known: bool = True         # False: a decoded SubAfter without a timestamp (Java: the decode time)

    def to_json(self) -> dict:
        out = {"type": self.type.value}
        for name in _JSON_FIELDS[self.type]:
            value = getattr(self, name)
            if name == "msg_type":
                value = MsgType(value).name if value in MsgType._value2member_map_ else value
            elif name == "context_code":
                value = ConsumeReturnType(value).name if value in ConsumeReturnType._value2member_map_ else value
            out[name] = value
        return out


_JSON_FIELDS = {
    TraceType.Pub: ("timestamp", "region_id", "group", "topic", "msg_id", "tags", "keys", "store_host", "body_length",
                    "cost_time", "msg_type", "offset_msg_id", "success"),
    TraceType.SubBefore: ("timestamp", "region_id", "group", "request_id", "msg_id", "retry_times", "keys"),
    TraceType.SubAfter: ("request_id", "msg_id", "cost_time", "success", "keys", "context_code", "timestamp", "group"),
    TraceType.EndTransaction: ("timestamp", "region_id", "group", "topic", "msg_id", "tags", "keys", "store_host",
                               "msg_type", "transaction_id", "transaction_state", "from_transaction_check"),
}


def _text(v) -> str:
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    return v if isinstance(v, str) else "%d" % v


def fields_of(r: TraceRecord) -> list:
    """The record's values in the order 4.9.8 writes them, type name first."""
    t = r.type
    if t is TraceType.Pub:
        return [t.value, r.timestamp, r.region_id, r.group, r.topic, r.msg_id, r.tags, r.keys, r.store_host,
                r.body_length, r.cost_time, r.msg_type, r.offset_msg_id, r.success]
    if t is TraceType.SubBefore:
        return [t.value, r.timestamp, r.region_id, r.group, r.request_id, r.msg_id, r.retry_times, r.keys]
    if t is TraceType.SubAfter:
        head = [t.value, r.request_id, r.msg_id, r.cost_time, r.success, r.keys, r.context_code]
        return head if r.cloud else head + [r.timestamp, r.group]
    return [t.value, r.timestamp, r.region_id, r.group, r.topic, r.msg_id, r.tags, r.keys, r.store_host,
            r.msg_type, r.transaction_id, r.transaction_state, r.from_transaction_check]


def encode(record: TraceRecord) -> str:
    """encoderFromContextBean for one record (a SubBefore/SubAfter context of n messages is n records)."""
    text = CONTENT_SPLITOR.join(map(_text, fields_of(record)))
    if record.cloud and record.type is TraceType.SubAfter:
        return text + CONTENT_SPLITOR            # 4.9.8 ends a CLOUD SubAfter so, with no FIELD_SPLITOR
    return text + FIELD_SPLITOR


def keys_of(record: TraceRecord) -> set[str]:
    """What the record adds to its trace message's KEYS: its msgId and each of its keys."""
    out = {record.msg_id if record.msg_id is not None else "null"}
    if record.keys:
        out.update(k for k in record.keys.split(" ") if k)
    return out


def _java_split(text: str, sep: str) -> list[str]:
    """String.split: trailing empty strings removed (a non-empty input keeps at least one)."""
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _long(s: str) -> int:
    """Long.parseLong / Integer.parseInt: an optional sign and ASCII digits, nothing else."""
    body = s[1:] if s[:1] in "+-" else s
    if not body or not body.isascii() or not body.isdigit():
        raise TraceDecodeError(f"not a number: {s!r}")
    return int(s)


def _bool(s: str) -> bool:
    return s.lower() == "true"           # Boolean.parseBoolean: anything else is false


def _msg_type(s: str) -> int:
    n = _long(s)
    if not 0 <= n < len(MsgType):
        raise TraceDecodeError(f"no message type {n}")
    return n


_MIN_FIELDS = {TraceType.Pub: 12, TraceType.SubBefore: 8, TraceType.SubAfter: 6, TraceType.EndTransaction: 13}


def _record(line: list[str], now_ms: int) -> TraceRecord:
    t = _TYPES[line[0]]
    if len(line) < _MIN_FIELDS[t]:
        raise TraceDecodeError(f"{t.value} record of {count(len(line), 'field')} (at least {_MIN_FIELDS[t]})")
    if t is TraceType.Pub:
        r = TraceRecord(t, timestamp=_long(line[1]), region_id=line[2], group=line[3], topic=line[4], msg_id=line[5],
                        tags=line[6], keys=line[7], store_host=line[8], body_length=_long(line[9]),
                        cost_time=_long(line[10]), msg_type=_msg_type(line[11]))
        if len(line) == 13:
            r.success = _bool(line[12])
        elif len(line) >= 14:
            r.offset_msg_id, r.success = line[12], _bool(line[13])
        if len(line) >= 15:
            r.client_host = line[14]
        return r
    if t is TraceType.SubBefore:
        return TraceRecord(t, timestamp=_long(line[1]), region_id=line[2], group=line[3], request_id=line[4],
                           msg_id=line[5], retry_times=_long(line[6]), keys=line[7])
    if t is TraceType.SubAfter:
        r = TraceRecord(t, request_id=line[1], msg_id=line[2], cost_time=_long(line[3]), success=_bool(line[4]),
                        keys=line[5], region_id="", timestamp=now_ms, timestamp_known=False)
        if len(line) >= 7:
            r.context_code = _long(line[6])
        if len(line) >= 9:
            r.timestamp, r.group, r.timestamp_known = _long(line[7]), line[8], True
        return r
    if line[11] not in TRANSACTION_STATES:
        raise TraceDecodeError(f"no transaction state {line[11]!r}")
    return TraceRecord(t, timestamp=_long(line[1]), region_id=line[2], group=line[3], topic=line[4], msg_id=line[5],
                       tags=line[6], keys=line[7], store_host=line[8], msg_type=_msg_type(line[9]),
                       transaction_id=line[10], transaction_state=line[11], from_transaction_check=_bool(line[12]))


@dataclass
class Decoded:
    records: list[TraceRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)     # one line per record skipped (tolerant decoding)


def decode(text: str, now_ms: int | None = None, strict: bool = False) -> Decoded:
    """decoderFromTraceDataString. Unknown record types are skipped, as Java skips them."""
    out = Decoded()
    if not text:
        return out
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    for raw in _java_split(text, FIELD_SPLITOR):
        line = _java_split(raw, CONTENT_SPLITOR)
        if line[0] not in _TYPES:
            continue
        pieces = [line] if strict else _cut_cloud_sub_after(line)
        for piece in pieces:
            t = _TYPES.get(piece[0])
            if t is None:
                continue
            if not strict and t in (TraceType.SubBefore, TraceType.EndTransaction):
                piece = piece + [""] * (_MIN_FIELDS[t] - len(piece))    # an empty last field Java's split lost
            try:
                rec = _record(piece, now_ms)
            except TraceDecodeError as exc:
                if strict:
                    raise
                out.errors.append(f"{t.value} record skipped: {exc}")
                continue
            out.records.append(rec)
    return out


def _cut_cloud_sub_after(line: list[str]) -> list[list[str]]:
    """A CLOUD SubAfter (7 fields and no FIELD_SPLITOR) runs into the record after it: cut there."""
    if line[0] == TraceType.SubAfter.value and len(line) > 7 and line[7] in _TYPES:
        return [line[:7], *_cut_cloud_sub_after(line[7:])]
    return [line]
