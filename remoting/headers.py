"""Typed request/response headers, declared not coded (common/.../protocol/header/**.java, 4.9.8).

A header is a frozen dataclass whose field names are Java's (so they match the extFields keys and
can be grepped against the Java source). A field without a default is @CFNotNull. Types follow Java:
`int` is Integer (32-bit), `Long` is Long (64-bit), `bool` is Boolean/boolean, `float` is Double.
`to_ext_fields` / `from_ext_fields` (remoting.extfields) convert any of them.
"""
from __future__ import annotations

from dataclasses import dataclass

from mqtool_remoting.codes import PullSysFlag
from mqtool_remoting.errors import HeaderError
from mqtool_remoting.extfields import Long, from_ext_fields, to_ext_fields  # noqa: F401 - re-exported for callers


# ---------------------------------------------------------------- send

@dataclass(frozen=True)
class SendMessageRequestHeader:
    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: Long
    flag: int
    properties: str | None = None
    reconsumeTimes: int | None = None
    unitMode: bool | None = None
    batch: bool | None = None
    maxReconsumeTimes: int | None = None
    bname: str | None = None


# SendMessageRequestHeaderV2 (codes 310, 320, 325): the same fields under one-letter names.
V2_FIELDS = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
             "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
             "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "bname"}
_V2_BACK = {v: k for k, v in V2_FIELDS.items()}


def send_header_from_v2(ext: dict[str, str]) -> SendMessageRequestHeader:
    """Parse a V2 header; HeaderError names the Java V1 field (and its letter)."""
    try:
        return from_ext_fields(SendMessageRequestHeader, ext, _V2_BACK)
    except HeaderError as exc:
        raise HeaderError(f"{exc} (V2 letter {_letters_in(str(exc))})") from None


def _letters_in(message: str) -> str:
    return ",".join(letter for name, letter in _V2_BACK.items() if f"'{name}'" in message) or "?"


def send_header_to_v2(h: SendMessageRequestHeader) -> dict[str, str]:
    return {_V2_BACK[k]: v for k, v in to_ext_fields(h).items()}


@dataclass(frozen=True)
class SendMessageResponseHeader:
    msgId: str
    queueId: int
    queueOffset: Long
    transactionId: str | None = None
    recallHandle: str | None = None      # 5.x: a timer message's handle for RECALL_MESSAGE


@dataclass(frozen=True)
class RecallMessageRequestHeader:
    """5.x RECALL_MESSAGE (370)."""
    topic: str
    recallHandle: str
    producerGroup: str | None = None
    brokerName: str | None = None


@dataclass(frozen=True)
class RecallMessageResponseHeader:
    msgId: str


# ---------------------------------------------------------------- pull

@dataclass(frozen=True)
class PullMessageRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    queueOffset: Long
    maxMsgNums: int
    sysFlag: int
    commitOffset: Long
    suspendTimeoutMillis: Long
    subVersion: Long
    subscription: str | None = None
    expressionType: str | None = None
    bname: str | None = None


@dataclass(frozen=True)
class PullMessageResponseHeader:
    suggestWhichBrokerId: Long
    nextBeginOffset: Long
    minOffset: Long
    maxOffset: Long


PULL_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
PULL_SUSPEND = int(PullSysFlag.SUSPEND)
PULL_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)
PULL_CLASS_FILTER = int(PullSysFlag.CLASS_FILTER)


# ---------------------------------------------------------------- offsets, query, view

@dataclass(frozen=True)
class QueryConsumerOffsetRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    bname: str | None = None


@dataclass(frozen=True)
class UpdateConsumerOffsetRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    commitOffset: Long
    bname: str | None = None


@dataclass(frozen=True)
class TopicQueueRequestHeader:
    """GetMaxOffset / GetMinOffset / GetEarliestMsgStoretime request headers (same fields)."""
    topic: str
    queueId: int
    bname: str | None = None


GetMaxOffsetRequestHeader = GetMinOffsetRequestHeader = GetEarliestMsgStoretimeRequestHeader = TopicQueueRequestHeader


@dataclass(frozen=True)
class SearchOffsetRequestHeader:
    topic: str
    queueId: int
    timestamp: Long
    bname: str | None = None


@dataclass(frozen=True)
class OffsetResponseHeader:
    """GetMaxOffset / GetMinOffset / SearchOffset / QueryConsumerOffset response headers."""
    offset: Long


@dataclass(frozen=True)
class TimestampResponseHeader:
    """GetEarliestMsgStoretimeResponseHeader."""
    timestamp: Long


@dataclass(frozen=True)
class QueryMessageRequestHeader:
    topic: str
    key: str
    maxNum: int
    beginTimestamp: Long
    endTimestamp: Long


UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"   # extra extField of QUERY_MESSAGE, not a header field


@dataclass(frozen=True)
class QueryMessageResponseHeader:
    indexLastUpdateTimestamp: Long
    indexLastUpdatePhyoffset: Long


@dataclass(frozen=True)
class ViewMessageRequestHeader:
    offset: Long


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


GetConsumerListByGroupRequestHeader = NotifyConsumerIdsChangedRequestHeader = ConsumerGroupHeader
GetConsumerConnectionListRequestHeader = ConsumerGroupHeader


@dataclass(frozen=True)
class ConsumerSendMsgBackRequestHeader:
    offset: Long
    group: str
    delayLevel: int
    originMsgId: str | None = None
    originTopic: str | None = None
    unitMode: bool | None = None
    maxReconsumeTimes: int | None = None
    bname: str | None = None


@dataclass(frozen=True)
class EndTransactionRequestHeader:
    producerGroup: str
    tranStateTableOffset: Long
    commitLogOffset: Long
    commitOrRollback: int
    msgId: str
    fromTransactionCheck: bool | None = None
    transactionId: str | None = None
    bname: str | None = None


@dataclass(frozen=True)
class CheckTransactionStateRequestHeader:
    tranStateTableOffset: Long
    commitLogOffset: Long
    msgId: str | None = None
    transactionId: str | None = None
    offsetMsgId: str | None = None
    bname: str | None = None


@dataclass(frozen=True)
class ResetOffsetRequestHeader:
    topic: str
    group: str
    timestamp: Long
    isForce: bool


@dataclass(frozen=True)
class GetConsumerRunningInfoRequestHeader:
    consumerGroup: str
    clientId: str
    jstackEnable: bool | None = None


@dataclass(frozen=True)
class ConsumeMessageDirectlyResultRequestHeader:
    consumerGroup: str
    clientId: str | None = None
    msgId: str | None = None
    brokerName: str | None = None


# ---------------------------------------------------------------- topics, groups, admin (broker)

@dataclass(frozen=True)
class CreateTopicRequestHeader:
    topic: str
    defaultTopic: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicFilterType: str
    topicSysFlag: int | None = None
    order: bool | None = None      # @CFNotNull in Java but unused, and the C++ admin call omits it
    attributes: str | None = None  # 5.x: "+message.type=FIFO" (topicattrs.py)


@dataclass(frozen=True)
class TopicRequestHeader:
    """DeleteTopic / GetTopicStatsInfo / QueryTopicConsumeByWho request headers."""
    topic: str


DeleteTopicRequestHeader = GetTopicStatsInfoRequestHeader = QueryTopicConsumeByWhoRequestHeader = TopicRequestHeader


@dataclass(frozen=True)
class GetTopicConfigRequestHeader:
    """5.x GET_TOPIC_CONFIG (351): `lo` asks for the static topic's queue mapping too (mqtool has none)."""
    topic: str
    lo: bool | None = None


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
    """GetProducerConnectionListRequestHeader."""
    producerGroup: str


@dataclass(frozen=True)
class GetBrokerConfigResponseHeader:
    version: str


@dataclass(frozen=True)
class GetConsumeStatsInBrokerHeader:
    isOrder: bool


@dataclass(frozen=True)
class QueryConsumeQueueRequestHeader:
    topic: str
    queueId: int
    index: Long
    count: int
    consumerGroup: str | None = None


@dataclass(frozen=True)
class QueryConsumeTimeSpanRequestHeader:
    topic: str
    group: str


@dataclass(frozen=True)
class ViewBrokerStatsDataRequestHeader:
    statsName: str
    statsKey: str


@dataclass(frozen=True)
class CloneGroupOffsetRequestHeader:
    srcGroup: str
    destGroup: str
    topic: str | None = None
    offline: bool | None = None


@dataclass(frozen=True)
class ResumeCheckHalfMessageRequestHeader:
    msgId: str | None = None


@dataclass(frozen=True)
class GetConsumerStatusRequestHeader:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (admin -> broker) and GET_CONSUMER_STATUS_FROM_CLIENT."""
    topic: str
    group: str
    clientAddr: str | None = None


@dataclass(frozen=True)
class QueryCorrectionOffsetHeader:
    compareGroup: str
    topic: str
    filterGroups: str | None = None       # comma-separated

# ---------------------------------------------------------------- name server

@dataclass(frozen=True)
class GetRouteInfoRequestHeader:
    topic: str
    acceptStandardJsonOnly: bool | None = None


@dataclass(frozen=True)
class RegisterBrokerRequestHeader:
    brokerName: str
    brokerAddr: str
    clusterName: str
    haServerAddr: str
    brokerId: Long
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
    brokerId: Long


@dataclass(frozen=True)
class QueryDataVersionRequestHeader:
    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: Long


@dataclass(frozen=True)
class QueryDataVersionResponseHeader:
    changed: bool


@dataclass(frozen=True)
class KVConfigRequestHeader:
    """Put/Get/Delete KV config and GetKVListByNamespace request headers.

    Java declares key (and value, for put) @CFNotNull; the handlers check them, with Java's remarks.
    """
    namespace: str
    key: str | None = None
    value: str | None = None


PutKVConfigRequestHeader = GetKVConfigRequestHeader = DeleteKVConfigRequestHeader = KVConfigRequestHeader
GetKVListByNamespaceRequestHeader = KVConfigRequestHeader


@dataclass(frozen=True)
class GetKVConfigResponseHeader:
    value: str | None = None


@dataclass(frozen=True)
class BrokerNameHeader:
    """Wipe/Add write perm request headers."""
    brokerName: str


WipeWritePermOfBrokerRequestHeader = AddWritePermOfBrokerRequestHeader = BrokerNameHeader


@dataclass(frozen=True)
class WipeWritePermOfBrokerResponseHeader:
    wipeTopicCount: int


@dataclass(frozen=True)
class AddWritePermOfBrokerResponseHeader:
    addTopicCount: int


@dataclass(frozen=True)
class ClusterHeader:
    """GetTopicsByClusterRequestHeader."""
    cluster: str


GetTopicsByClusterRequestHeader = ClusterHeader


@dataclass(frozen=True)
class DeleteTopicFromNamesrvRequestHeader:
    topic: str
    clusterName: str | None = None


# ---------------------------------------------------------------- plain ACL (codes 50-53)

@dataclass(frozen=True)
class PlainAccessConfigHeader:
    """UPDATE_AND_CREATE_ACL_CONFIG (50); the perms are comma lists, `admin` is always sent."""
    accessKey: str
    secretKey: str | None = None
    whiteRemoteAddress: str | None = None
    admin: bool = False
    defaultTopicPerm: str | None = None
    defaultGroupPerm: str | None = None
    topicPerms: str | None = None
    groupPerms: str | None = None


@dataclass(frozen=True)
class DeleteAccessConfigRequestHeader:
    accessKey: str


@dataclass(frozen=True)
class GetBrokerAclConfigResponseHeader:
    """GET_BROKER_CLUSTER_ACL_INFO (52): `version` is the default file's (deprecated)."""
    version: str
    allAclFileVersion: str | None = None
    brokerName: str | None = None
    brokerAddr: str | None = None
    clusterName: str | None = None


@dataclass(frozen=True)
class UpdateGlobalWhiteAddrsConfigRequestHeader:
    globalWhiteAddrs: str
    aclFileFullPath: str | None = None


# ---------------------------------------------------------------- 5.x POP (rocketmq5.md 2.2)

@dataclass(frozen=True)
class PopMessageRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int                  # -1: every queue of the topic on this broker
    maxMsgNums: int
    invisibleTime: Long
    pollTime: Long
    bornTime: Long
    initMode: int                 # ConsumeInitMode: 0 MIN, 1 MAX
    expType: str | None = None
    exp: str | None = None
    order: bool | None = None
    attemptId: str | None = None


@dataclass(frozen=True)
class PopMessageResponseHeader:
    popTime: Long
    invisibleTime: Long
    reviveQid: int
    restNum: Long
    startOffsetInfo: str | None = None
    msgOffsetInfo: str | None = None
    orderCountInfo: str | None = None


@dataclass(frozen=True)
class AckMessageRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    extraInfo: str
    offset: Long


@dataclass(frozen=True)
class ChangeInvisibleTimeRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    extraInfo: str
    offset: Long
    invisibleTime: Long


@dataclass(frozen=True)
class ChangeInvisibleTimeResponseHeader:
    popTime: Long
    invisibleTime: Long
    reviveQid: int


@dataclass(frozen=True)
class PeekMessageRequestHeader:
    topic: str
    queueId: int
    maxMsgNums: int
    consumerGroup: str


@dataclass(frozen=True)
class NotificationRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    pollTime: Long
    bornTime: Long
    order: bool | None = None
    attemptId: str | None = None


@dataclass(frozen=True)
class NotificationResponseHeader:
    hasMsg: bool
    pollingFull: bool | None = None


@dataclass(frozen=True)
class PollingInfoRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int


@dataclass(frozen=True)
class PollingInfoResponseHeader:
    pollingNum: int
