"""SendMessage (SendMessageActivity + ProducerProcessor.sendMessage in Local mode): each gRPC message
checked, turned into a 4.x SEND_MESSAGE request and handed to the broker's own send handler on its loop,
so a gRPC send is stored, counted, delayed and parked (transactions) exactly as a remoting one."""
from __future__ import annotations

import itertools
import time

from mqtool.proxy import local
from mqtool.proxy.codes import MESSAGE_TYPE_ATTR, Code, Encoding, MessageType
from mqtool.proxy.context import ProxyError
from mqtool.proxy.descriptors import pb
from mqtool.proxy.route import validate_topic
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_store.codes import Prop, SysFlag
from mqtool_store.properties import format_properties

# MessageConst.STRING_HASH_SET at 5.3.3: keys a gRPC client may not set as user properties
SYSTEM_PROPERTY_KEYS = frozenset("""
    TRACE_ON MSG_REGION KEYS TAGS WAIT DELAY RETRY_TOPIC REAL_TOPIC REAL_QID TRAN_MSG PGROUP MIN_OFFSET MAX_OFFSET
    BUYER_ID ORIGIN_MESSAGE_ID TRANSFER_FLAG CORRECTION_FLAG MQ2_FLAG RECONSUME_TIME UNIQ_KEY MAX_RECONSUME_TIMES
    CONSUME_START_TIME POP_CK POP_CK_OFFSET 1ST_POP_TIME TRAN_PREPARED_QUEUE_OFFSET DUP_INFO EXTEND_UNIQ_INFO
    INSTANCE_ID CORRELATION_ID REPLY_TO_CLIENT TTL ARRIVE_TIME PUSH_REPLY_TIME CLUSTER MSG_TYPE
    INNER_MULTI_QUEUE_OFFSET TIMER_DELAY_MS TIMER_DELAY_SEC TIMER_DELIVER_MS TIMER_ENQUEUE_MS TIMER_DEQUEUE_MS
    TIMER_ROLL_TIMES TIMER_OUT_MS TIMER_DEL_UNIQKEY TIMER_DEL_MS TIMER_DELAY_LEVEL __BORNHOST BORN_TIMESTAMP
    DLQ_ORIGIN_TOPIC DLQ_ORIGIN_MESSAGE_ID __CRC32#
""".split())
SHARDING_KEY = "__SHARDINGKEY"
TRACE_CONTEXT = "TRACE_CONTEXT"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
DELAY_PROPERTIES = ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
MAX_USER_PROPERTIES = 128              # userPropertyMaxNum
MAX_USER_PROPERTY_BYTES = 16 * 1024    # maxUserPropertySize
MAX_MESSAGE_GROUP_BYTES = 64           # maxMessageGroupSize: a group of 64 bytes is refused
MAX_DELAY_MS = 24 * 3600 * 1000        # maxDelayTimeMills
MAX_TRANSACTION_RECOVERY_S = 3600      # maxTransactionRecoverySecond
TIMESTAMP_SECONDS = (-62135596800, 253402300799)     # protobuf Timestamps: years 1 to 9999
DEFAULT_TOPIC_QUEUE_NUMS = 4
PUT_STATUS_CODES = {ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
                    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
                    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE}
_round_robin = itertools.count()


def java_hash(text: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def consistent_hash(h: int, buckets: int) -> int:
    """Guava's Hashing.consistentHash(long, int) (SendMessageQueueSelector's FIFO queue choice)."""
    state, candidate = h & 0xFFFFFFFFFFFFFFFF, 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        gap = ((state >> 33) + 1) / 2 ** 31
        following = int((candidate + 1) / gap)
        if 0 <= following < buckets:
            candidate = following
        else:
            return candidate


def message_type_of(props: dict[str, str]) -> str:
    """TopicMessageType.parseFromMessageProperty."""
    if props.get(Prop.TRAN_MSG) == "true":
        return "TRANSACTION"
    if any(k in props for k in DELAY_PROPERTIES):
        return "DELAY"
    if SHARDING_KEY in props:
        return "FIFO"
    return "NORMAL"


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)


def delay_level(levels_ms: dict[int, int], deliver_ms: int, now_ms: int) -> int:
    """ProxyConfig.computeDelayLevel: the first level (by delay) longer than the wait, else the longest."""
    ordered = sorted(levels_ms.items(), key=lambda e: e[1])
    wait = deliver_ms - now_ms
    for level, ms in ordered:
        if ms > wait:
            return level
    return ordered[-1][0]


def build_properties(ctrl, msg, topic: str, peer_host: str, now_ms: int) -> tuple[dict[str, str], int]:
    """buildMessageProperty: the stored properties of one gRPC message and its sysFlag; ProxyError for
    what 5.3.3 refuses."""
    sp = msg.system_properties
    if not msg.body:
        raise ProxyError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if len(msg.body) > ctrl.config.maxMessageSize:
        raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {ctrl.config.maxMessageSize}")
    user = dict(msg.user_properties)
    if len(user) > MAX_USER_PROPERTIES:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {MAX_USER_PROPERTIES}")
    size = 0
    for key, value in user.items():
        if key in SYSTEM_PROPERTY_KEYS:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if _has_control(key) or _has_control(value):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"the key or value of property {key!r} contains "
                             "control characters")
        size += len(key.encode()) + len(value.encode())
    props = dict(user)
    if sp.HasField("tag"):
        if not sp.tag.strip() or "|" in sp.tag or _has_control(sp.tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, f"tag {sp.tag!r} is blank or contains '|' or control characters")
        props[Prop.TAGS] = sp.tag
        size += len(sp.tag.encode())
    for key in sp.keys:
        if not key.strip() or _has_control(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, f"key {key!r} is blank or contains control characters")
        size += len(key.encode())
    if sp.keys:
        props[Prop.KEYS] = " ".join(sp.keys)
    if size > MAX_USER_PROPERTY_BYTES:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"the total size of user properties, tag and keys "
                         f"exceeds {MAX_USER_PROPERTY_BYTES} bytes")
    if not sp.message_id.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be blank")
    props[Prop.UNIQ_KEY] = sp.message_id
    sys_flag = 0
    if sp.message_type == MessageType.TRANSACTION:
        props[Prop.TRAN_MSG] = "true"
        sys_flag |= SysFlag.TRANSACTION_PREPARED_TYPE
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sp.orphaned_transaction_recovery_duration.seconds
            if seconds > MAX_TRANSACTION_RECOVERY_S:
                raise ProxyError(Code.BAD_REQUEST, "the max time of transaction recovery duration is too large, "
                                 f"max is {MAX_TRANSACTION_RECOVERY_S}s")
            props[Prop.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    if sp.HasField("delivery_timestamp"):
        ts = sp.delivery_timestamp
        if not TIMESTAMP_SECONDS[0] <= ts.seconds <= TIMESTAMP_SECONDS[1] or not 0 <= ts.nanos < 10 ** 9:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"Timestamp is not valid: seconds {ts.seconds}")
        deliver_ms = ts.seconds * 1000 + ts.nanos // 1_000_000
        if deliver_ms - now_ms > MAX_DELAY_MS:
            raise ProxyError(Code.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is {MAX_DELAY_MS}")
        if (ctrl.config.useDelayLevel or not timer_enabled(ctrl)) and deliver_ms > now_ms:   # a past time: at once
            props[Prop.DELAY] = str(delay_level(ctrl.store.levels, deliver_ms, now_ms))
        props[TIMER_DELIVER_MS] = str(deliver_ms)
    if sp.HasField("delivery_attempt"):
        props[Prop.RECONSUME_TIME] = str(sp.delivery_attempt)
    props[Prop.PGROUP] = topic
    if sp.HasField("message_group"):
        group = sp.message_group
        if not group.strip() or len(group.encode()) >= MAX_MESSAGE_GROUP_BYTES or _has_control(group):
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, f"message group {group!r} is blank, too long (max "
                             f"{MAX_MESSAGE_GROUP_BYTES - 1} bytes) or contains control characters")
        props[SHARDING_KEY] = group
    if sp.HasField("trace_context"):
        props[TRACE_CONTEXT] = sp.trace_context
    props[BORN_HOST] = sp.born_host or peer_host
    if sp.HasField("born_timestamp"):
        props[BORN_TIMESTAMP] = str(sp.born_timestamp.ToMilliseconds())
    if sp.body_encoding == Encoding.GZIP:
        sys_flag |= SysFlag.COMPRESSED_FLAG
    return props, sys_flag


def timer_enabled(ctrl) -> bool:
    """Whether the store delivers TIMER_DELIVER_MS itself (5.x timerWheelEnable); without it (or with
    useDelayLevel) a gRPC delay message also gets the 4.x delay level nearest above its time."""
    return bool(getattr(ctrl.store_config, "timerWheelEnable", False))


def check_type(ctrl, topic: str, props: dict[str, str]) -> None:
    """DefaultTopicMessageTypeValidator (enableTopicMessageTypeCheck): the type the properties say
    against the topic's `message.type`."""
    if not ctrl.config.enableTopicMessageTypeCheck:
        return
    cfg = ctrl.topics.get(topic)
    expected = "UNSPECIFIED" if cfg is None else (cfg.attributes or {}).get(MESSAGE_TYPE_ATTR, "NORMAL")
    if expected == "MIXED":
        return
    actual = message_type_of(props)
    if expected != actual:
        raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, f"TopicMessageType validate failed, the expected "
                         f"type is {expected}, but actual type is {actual}")


def choose_queue(ctrl, topic: str, props: dict[str, str]) -> int:
    """A FIFO message's group picks its queue by Guava's consistent hash over the write queues; others
    go round-robin (the client's queue choice only names the broker)."""
    cfg = ctrl.topics.get(topic)
    n = cfg.writeQueueNums if cfg is not None and cfg.writeQueueNums > 0 else 1
    group = props.get(SHARDING_KEY)
    if group is not None:
        return consistent_hash(java_hash(group), n)
    return next(_round_robin) % n


async def send_one(proxy, client, ctx, topic: str, msg, now_ms: int):
    ctrl = proxy.ctrl
    props, sys_flag = build_properties(ctrl, msg, topic, ctx.peer_host, now_ms)
    check_type(ctrl, topic, props)
    born = msg.system_properties.born_timestamp.ToMilliseconds() \
        if msg.system_properties.HasField("born_timestamp") else now_ms
    reconsume = msg.system_properties.delivery_attempt if msg.system_properties.HasField("delivery_attempt") else 0
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, {
        "producerGroup": topic, "topic": topic, "defaultTopic": "TBW102",
        "defaultTopicQueueNums": DEFAULT_TOPIC_QUEUE_NUMS, "queueId": choose_queue(ctrl, topic, props),
        "sysFlag": sys_flag, "bornTimestamp": born, "flag": 0, "properties": format_properties(props),
        "reconsumeTimes": reconsume, "unitMode": False, "batch": False}, msg.body, language=client.language)
    resp = await local.call(ctrl, client.channel, cmd)
    uniq = props[Prop.UNIQ_KEY]
    if resp.code == ResponseCode.SUCCESS:
        ext = resp.ext_fields or {}
        offset = int(ext.get("queueOffset", 0))
        if props.get(Prop.TRAN_MSG) == "true":
            proxy.transactions.add(topic, uniq, offset, commit_log_offset(ext.get("msgId", "")))
        return pb.SendResultEntry(status=pb.Status(code=Code.OK, message="OK"), message_id=uniq,
                                  transaction_id=uniq, offset=offset, recall_handle=ext.get("recallHandle") or "")
    if resp.code in PUT_STATUS_CODES:
        return pb.SendResultEntry(status=pb.Status(code=PUT_STATUS_CODES[resp.code], message=resp.remark or ""))
    raise local.status_error(resp)


def commit_log_offset(offset_msg_id: str) -> int:
    """The commit log offset in a 4.x offset msgId (store host 8 or 20 bytes, then the offset: 16 hex)."""
    first = offset_msg_id.split(",")[0]
    try:
        return int(first[-16:], 16)
    except ValueError:
        return -1


async def send_message(proxy, client, ctx, request):
    if not request.messages:
        raise ProxyError(Code.MESSAGE_CORRUPTED, "no message to send")
    topic = request.messages[0].topic.name
    validate_topic(topic)
    if any(m.topic.name != topic for m in request.messages):
        raise ProxyError(Code.MESSAGE_CORRUPTED, "topic in message is not same")
    if proxy.ctrl.topics.get(topic) is None:      # Local mode's queue view is the local topic config
        raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic not exist, topic: {topic}")
    now_ms = int(time.time() * 1000)
    entries = []
    for msg in request.messages:
        entries.append(await send_one(proxy, client, ctx, topic, msg, now_ms))
    codes = {e.status.code for e in entries}
    top = pb.Status(code=codes.pop(), message=entries[0].status.message) if len(codes) == 1 \
        else pb.Status(code=Code.MULTIPLE_RESULTS, message="send message failed")
    return pb.SendMessageResponse(status=top, entries=entries)
