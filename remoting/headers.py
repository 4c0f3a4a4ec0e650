"""Typed request/response headers, declared not coded (common/.../protocol/header/*.java).

Field names are Java's, so logs and JSON can be grepped against the Java source. A field
without a default is required (@CFNotNull). One generic pair turns any header into extFields
and back, with Java's coercions: ints parsed, booleans true only for "true" (any case).
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass

from remoting.errors import HeaderError


def to_ext_fields(header) -> dict[str, str]:
    out = {}
    for f in dataclasses.fields(header):
        v = getattr(header, f.name)
        if v is None:
            continue
        out[f.name] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


_HINTS: dict[type, dict[str, object]] = {}


def _hints(cls) -> dict[str, object]:
    h = _HINTS.get(cls)
    if h is None:
        h = _HINTS[cls] = typing.get_type_hints(cls)
    return h


def from_ext_fields(cls, ext: dict[str, str]):
    """Build header `cls` from extFields; HeaderError names the missing or bad field."""
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        raw = ext.get(f.name)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if raw is None or (raw == "" and hints[f.name] not in (str, str | None)):
            if required:
                raise HeaderError(f"the request header misses required field {f.name!r}")
            continue
        kwargs[f.name] = _coerce(f.name, raw, hints[f.name])
    return cls(**kwargs)


def _coerce(name: str, raw: str, hint):
    base = hint
    if typing.get_origin(hint) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        base = next(a for a in typing.get_args(hint) if a is not type(None))
    if base is bool:
        return str(raw).strip().lower() == "true"
    if base is int:
        try:
            return int(str(raw).strip())
        except ValueError:
            raise HeaderError(f"field {name!r} must be a number, not {raw!r}") from None
    return str(raw)


# ---------------------------------------------------------------- send

@dataclass(frozen=True)
class SendMessageRequestHeader:
    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: int
    flag: int
    properties: str | None = None
    reconsumeTimes: int | None = None
    unitMode: bool | None = None
    batch: bool | None = None
    maxReconsumeTimes: int | None = None


# SendMessageRequestHeaderV2: one-letter names for the same fields, in this order.
V2_FIELDS = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
             "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
             "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch"}


def send_header_from_v2(ext: dict[str, str]) -> SendMessageRequestHeader:
    return from_ext_fields(SendMessageRequestHeader, {V2_FIELDS.get(k, k): v for k, v in ext.items()})


def send_header_to_v2(h: SendMessageRequestHeader) -> dict[str, str]:
    back = {v: k for k, v in V2_FIELDS.items()}
    return {back.get(k, k): v for k, v in to_ext_fields(h).items()}


@dataclass(frozen=True)
class SendMessageResponseHeader:
    msgId: str
    queueId: int
    queueOffset: int
    transactionId: str | None = None


# ---------------------------------------------------------------- pull

@dataclass(frozen=True)
class PullMessageRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    queueOffset: int
    maxMsgNums: int
    sysFlag: int
    commitOffset: int
    suspendTimeoutMillis: int
    subVersion: int
    subscription: str | None = None
    expressionType: str | None = None


@dataclass(frozen=True)
class PullMessageResponseHeader:
    suggestWhichBrokerId: int
    nextBeginOffset: int
    minOffset: int
    maxOffset: int


PULL_COMMIT_OFFSET = 0x1
PULL_SUSPEND = 0x2
PULL_SUBSCRIPTION = 0x4
PULL_CLASS_FILTER = 0x8


# ---------------------------------------------------------------- offsets, query, view

@dataclass(frozen=True)
class QueryConsumerOffsetRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int


@dataclass(frozen=True)
class UpdateConsumerOffsetRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    commitOffset: int


@dataclass(frozen=True)
class TopicQueueRequestHeader:
    """GetMaxOffset / GetMinOffset / GetEarliestMsgStoretime request headers."""
    topic: str
    queueId: int


@dataclass(frozen=True)
class SearchOffsetRequestHeader:
    topic: str
    queueId: int
    timestamp: int


@dataclass(frozen=True)
class OffsetResponseHeader:
    offset: int


@dataclass(frozen=True)
class TimestampResponseHeader:
    timestamp: int


@dataclass(frozen=True)
class QueryMessageRequestHeader:
    topic: str
    key: str
    maxNum: int
    beginTimestamp: int
    endTimestamp: int


@dataclass(frozen=True)
class QueryMessageResponseHeader:
    indexLastUpdateTimestamp: int
    indexLastUpdatePhyoffset: int


@dataclass(frozen=True)
class ViewMessageRequestHeader:
    offset: int


# ---------------------------------------------------------------- clients

@dataclass(frozen=True)
class UnregisterClientRequestHeader:
    clientID: str
    producerGroup: str | None = None
    consumerGroup: str | None = None


@dataclass(frozen=True)
class ConsumerGroupHeader:
    """GetConsumerListByGroup / NotifyConsumerIdsChanged / GetConsumerConnectionList request headers."""
    consumerGroup: str


@dataclass(frozen=True)
class ConsumerSendMsgBackRequestHeader:
    offset: int
    group: str
    delayLevel: int
    originMsgId: str | None = None
    originTopic: str | None = None
    unitMode: bool | None = None
    maxReconsumeTimes: int | None = None


@dataclass(frozen=True)
class EndTransactionRequestHeader:
    producerGroup: str
    tranStateTableOffset: int
    commitLogOffset: int
    commitOrRollback: int
    msgId: str
    fromTransactionCheck: bool | None = None
    transactionId: str | None = None


@dataclass(frozen=True)
class CheckTransactionStateRequestHeader:
    tranStateTableOffset: int
    commitLogOffset: int
    msgId: str | None = None
    transactionId: str | None = None
    offsetMsgId: str | None = None


# ---------------------------------------------------------------- topics, groups, admin

@dataclass(frozen=True)
class CreateTopicRequestHeader:
    topic: str
    defaultTopic: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicFilterType: str
    topicSysFlag: int | None = None
    order: bool | None = None


@dataclass(frozen=True)
class TopicRequestHeader:
    """DeleteTopic / GetTopicStatsInfo / GetRouteInfo request headers."""
    topic: str


@dataclass(frozen=True)
class GetRouteInfoRequestHeader:
    topic: str
    acceptStandardJsonOnly: bool | None = None


@dataclass(frozen=True)
class DeleteSubscriptionGroupRequestHeader:
    groupName: str
    removeOffset: bool | None = None


@dataclass(frozen=True)
class GetConsumeStatsRequestHeader:
    consumerGroup: str
    topic: str | None = None


@dataclass(frozen=True)
class ProducerGroupHeader:
    producerGroup: str


# ---------------------------------------------------------------- name server

@dataclass(frozen=True)
class RegisterBrokerRequestHeader:
    brokerName: str
    brokerAddr: str
    clusterName: str
    haServerAddr: str
    brokerId: int
    compressed: bool | None = None
    bodyCrc32: int | None = None


@dataclass(frozen=True)
class RegisterBrokerResponseHeader:
    haServerAddr: str | None = None
    masterAddr: str | None = None


@dataclass(frozen=True)
class UnRegisterBrokerRequestHeader:
    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: int


@dataclass(frozen=True)
class KVConfigRequestHeader:
    """Put/Get/Delete KV config request headers (value only for put)."""
    namespace: str
    key: str | None = None
    value: str | None = None


@dataclass(frozen=True)
class BrokerNameHeader:
    """Wipe/add write perm request headers."""
    brokerName: str


@dataclass(frozen=True)
class ClusterHeader:
    cluster: str


@dataclass(frozen=True)
class DeleteTopicFromNamesrvRequestHeader:
    topic: str
    clusterName: str | None = None
