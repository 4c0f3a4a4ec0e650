"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK (SendMessageProcessor)."""
from __future__ import annotations

import functools
import ipaddress
import random
import time

from mqtool.broker.messages import apply_delay, to_half
from mqtool.broker.timerhook import recall_handle
from mqtool_remoting.batch import BatchFormatError, decode_batch, merge_batch_properties
from mqtool.broker.topics import NOT_ALLOWED_SEND_TOPICS, check_topic_name
from mqtool_remoting.codes import RPC_TYPE, VERSION_V3_4_9, VERSION_V4_9_8, RequestCode, ResponseCode, SerializeType
from mqtool_remoting.command import HeaderTemplate, RemotingCommand
from mqtool_remoting.errors import RemotingError
from mqtool_remoting.headers import (ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader, from_ext_fields,
                                     send_header_from_v2, to_ext_fields)
from mqtool_store.codes import (DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, TIMER_TOPIC, TRANSACTION_TYPE_MASK,
                                Perm, Prop, SysFlag, TransactionType)
from mqtool_store import kernel as store_kernel
from mqtool_store.messagestore import Message, PutStatus
from mqtool_store.properties import format_properties, parse_properties

PUT_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: ResponseCode.SYSTEM_ERROR,     # 5.x, remark "in-sync replicas not enough"
    PutStatus.WHEEL_TIMER_MSG_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,       # 5.x timer put hook
    PutStatus.WHEEL_TIMER_FLOW_CONTROL: ResponseCode.SYSTEM_ERROR,
    PutStatus.WHEEL_TIMER_NOT_ENABLE: ResponseCode.SYSTEM_ERROR,
}
PERM_WRITE = int(Perm.PERM_WRITE)     # an int: `int & IntFlag` goes through enum's Python code
SLAVE_REMARK = "message store is slave mode, so putMessage is forbidden"


def peer_host(conn) -> tuple[bytes, int]:
    """The born host of what a connection sends, worked out once per connection."""
    born = conn.attrs.get("born_host")
    if born is None:
        try:
            born = ipaddress.ip_address(conn.peer_host).packed, int(conn.peer_port)
        except ValueError:
            born = b"\x7f\0\0\x01", 0
        conn.attrs["born_host"] = born
    return born


def _reply(cmd, ctrl, code, remark=None, ext=None):
    ext = dict(ext or {})
    ext.setdefault("MSG_REGION", ctrl.config.regionId)
    ext.setdefault("TRACE_ON", "true" if ctrl.config.traceOn else "false")
    return cmd.response(code, remark, ext)


async def send_reply(ctrl, conn, cmd):
    """SEND_REPLY_MESSAGE(_V2) (request-reply): stored like a send, then pushed to the requesting
    producer named by REPLY_TO_CLIENT with PUSH_REPLY_MESSAGE_TO_CLIENT."""
    resp = await send_message(ctrl, conn, cmd)
    if resp.code != ResponseCode.SUCCESS:
        return resp
    h = from_ext_fields(SendMessageRequestHeader, cmd.ext_fields) if cmd.code == RequestCode.SEND_REPLY_MESSAGE \
        else send_header_from_v2(cmd.ext_fields)
    to = parse_properties(h.properties or "").get("REPLY_TO_CLIENT")
    target = ctrl.producers.find_client(to) if to else None
    if target is None:
        return _reply(cmd, ctrl, ResponseCode.SYSTEM_ERROR, f"the producer {to} is not online, the reply is stored")
    push = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, {
        **to_ext_fields(h), "bornHost": conn.peer, "storeHost": ctrl.config.broker_addr,
        "storeTimestamp": int(time.time() * 1000)}, cmd.body, language="JAVA")
    try:
        await target.channel.request(push, 3)
    except RemotingError as exc:
        return _reply(cmd, ctrl, ResponseCode.SYSTEM_ERROR, f"push reply message to {to} failed: {exc}")
    return resp


async def send_message(ctrl, conn, cmd):
    if cmd.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_REPLY_MESSAGE):
        h = from_ext_fields(SendMessageRequestHeader, cmd.ext_fields)
    else:
        h = send_header_from_v2(cmd.ext_fields)
    if not ctrl.writeable:
        return _reply(cmd, ctrl, ResponseCode.SERVICE_NOT_AVAILABLE, "the broker is not writeable")
    if ctrl.is_slave:
        return _reply(cmd, ctrl, ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_REMARK)
    problem = check_topic_name(h.topic)
    if problem:
        return _reply(cmd, ctrl, ResponseCode.SYSTEM_ERROR, problem)
    topic_cfg = ctrl.topics.get(h.topic)
    if topic_cfg is not None and topic_cfg.order and not ctrl.config.brokerPermission & PERM_WRITE:
        # msgCheck: only an ordered topic is refused here; the others' routes already say the
        # broker is not writeable (register_all registers every topic with brokerPermission)
        return _reply(cmd, ctrl, ResponseCode.NO_PERMISSION, f"the broker[{ctrl.config.brokerIP1}] sending message is forbidden")
    if h.topic in NOT_ALLOWED_SEND_TOPICS:
        return _reply(cmd, ctrl, ResponseCode.NO_PERMISSION, f"Sending message to topic[{h.topic}] is forbidden.")
    if topic_cfg is None:
        sys_flag = 0
        if h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            topic_cfg = ctrl.topics.create_system(h.topic, 1)
        else:
            topic_cfg = ctrl.topics.create_in_send(h.topic, h.defaultTopic, h.defaultTopicQueueNums, sys_flag)
        if topic_cfg is None:
            return _reply(cmd, ctrl, ResponseCode.TOPIC_NOT_EXIST,
                          f"topic[{h.topic}] not exist, apply first please!")
    if not topic_cfg.perm & PERM_WRITE:
        return _reply(cmd, ctrl, ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] sending message is forbidden")
    queue_id = h.queueId
    nums = max(topic_cfg.readQueueNums, topic_cfg.writeQueueNums)
    if queue_id >= nums:
        return _reply(cmd, ctrl, ResponseCode.SYSTEM_ERROR,
                      f"request queueId[{queue_id}] is illegal, topic: {h.topic} queue nums {nums}")
    if queue_id < 0:
        queue_id = int(random.random() * (topic_cfg.writeQueueNums or 1))   # as fastsend picks
    sys_flag = h.sysFlag
    if topic_cfg.topicFilterType == "MULTI_TAG":
        sys_flag |= SysFlag.MULTI_TAGS_FLAG
    born = peer_host(conn)
    if h.batch or cmd.code == RequestCode.SEND_BATCH_MESSAGE:
        return await _send_batch(ctrl, cmd, h, queue_id, sys_flag, born)
    props = parse_properties(h.properties or "")
    topic = h.topic
    reconsume = h.reconsumeTimes or 0
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):        # handleRetryAndDLQ
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
        sub = ctrl.groups.find(group)
        if sub is None:
            return _reply(cmd, ctrl, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
        max_times = sub.retryMaxTimes
        if h.maxReconsumeTimes is not None and cmd.version >= VERSION_V3_4_9:
            max_times = h.maxReconsumeTimes
        if reconsume >= max_times:
            topic = DLQ_GROUP_TOPIC_PREFIX + group
            ctrl.topics.create_system(topic, 1, int(Perm.PERM_WRITE | Perm.PERM_READ))
            queue_id = 0
            props[Prop.DELAY] = "0"                         # setDelayTimeLevel(0): never delayed
    props.pop(Prop.WAIT, None) if props.get(Prop.WAIT) == "true" else None
    props[Prop.CLUSTER] = ctrl.config.brokerClusterName
    msg = Message(topic, queue_id, cmd.body, props, format_properties(props), h.flag, sys_flag,
                  h.bornTimestamp, born, reconsume)
    if props.get(Prop.TRAN_MSG) == "true":
        if ctrl.config.rejectTransactionMessage:
            return _reply(cmd, ctrl, ResponseCode.NO_PERMISSION, "the broker rejects transaction messages")
        msg = to_half(msg)
    else:
        msg = apply_delay(msg, len(ctrl.store.levels))
    result = await ctrl.put(msg)
    resp = _put_response(cmd, ctrl, result, queue_id)
    if result.ok and msg.topic == TIMER_TOPIC and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        attach_recall_handle(resp, ctrl, msg)
    return resp


def attach_recall_handle(resp, ctrl, msg) -> None:
    """SendMessageProcessor.attachRecallHandle: a timer message's send answer names its recall handle."""
    props = msg.properties
    resp.ext_fields["recallHandle"] = recall_handle(props[Prop.REAL_TOPIC], ctrl.config.brokerName,
                                                    int(props[Prop.TIMER_OUT_MS]), props.get(Prop.UNIQ_KEY, ""))
    resp.header_json = None          # (the SEND_OK template has no such field)


async def _send_batch(ctrl, cmd, h, queue_id, sys_flag, born):
    outer = h.properties or ""
    delay = parse_properties(outer).get(Prop.DELAY, "0") if "DELAY\x01" in outer else "0"
    if (delay.strip().lstrip("-").isdigit() and int(delay) > 0) or (sys_flag & TRANSACTION_TYPE_MASK):
        # CommitLog.asyncPutMessages: a delay level above 0 or a transaction flag is refused
        return _reply(cmd, ctrl, ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be delayed or transactional")
    cluster = f"{Prop.CLUSTER}\x01{ctrl.config.brokerClusterName}"
    outer_all = merge_batch_properties(outer, cluster) if cluster not in outer else outer
    try:
        entries = batch_entries(cmd.body, outer_all)
    except BatchFormatError as exc:
        return _reply(cmd, ctrl, ResponseCode.MESSAGE_ILLEGAL, str(exc))
    if not entries:
        return _reply(cmd, ctrl, ResponseCode.MESSAGE_ILLEGAL, "empty batch")
    topic, born_ts, reconsume = h.topic, h.bornTimestamp, h.reconsumeTimes or 0
    msgs = [Message(topic, queue_id, body, props, text, flag, sys_flag, born_ts, born, reconsume)
            for flag, body, text, props in entries]
    result = await ctrl.put(msgs)
    return _put_response(cmd, ctrl, result, queue_id)


def batch_entries(body: bytes, outer_all: str) -> list[tuple[int, bytes, str, dict]]:
    """A batch body's entries as (flag, body, properties text, properties): each entry's own
    properties, then the batch-level ones (`outer_all`, merge_batch_properties), parsed. The store
    kernel reads a well-formed body in one pass; else decode_batch, which raises BatchFormatError."""
    kernel = store_kernel.kernel
    if kernel is not None:
        entries = kernel.batch_entries(body, outer_all)
        if entries is not None:
            return entries
    out = []
    for flag, data, inner in decode_batch(body):     # merge_batch_properties, inline (a call per message costs)
        text = inner + "\x02" + outer_all if inner and outer_all and inner[-1] != "\x02" else inner + outer_all
        out.append((flag, data, text, parse_properties(text)))
    return out


def _put_response(cmd, ctrl, result, queue_id):
    code = PUT_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
    if not result.ok:
        return _reply(cmd, ctrl, code, result.remark or result.status.value)
    # What _reply builds, without its copies and coercions: the answer to every stored send,
    # its JSON header filled into a template (SEND_OK is by far the most frequent answer).
    msg_id, queue, offset = ",".join(result.msg_ids), str(queue_id), str(result.queue_offset)
    region, trace_on = ctrl.config.regionId, "true" if ctrl.config.traceOn else "false"
    ext = {"msgId": msg_id, "queueId": queue, "queueOffset": offset, "MSG_REGION": region, "TRACE_ON": trace_on}
    resp = RemotingCommand(int(code), cmd.opaque, RPC_TYPE, None, ext, b"", "JAVA", VERSION_V4_9_8,
                           cmd.serialize_type)
    template = _send_ok(region, trace_on) if cmd.serialize_type == SerializeType.JSON else None
    if code == ResponseCode.SUCCESS and template is not None:
        resp.header_json = template.fill(cmd.opaque, msg_id, queue, offset)
    return resp


@functools.lru_cache(maxsize=8)
def _send_ok(region: str, trace_on: str) -> HeaderTemplate | None:
    """SEND_OK's header with the message id, queue and offset left open, for the broker's regionId
    and traceOn (both may change at run time)."""
    return HeaderTemplate.make(RemotingCommand(
        ResponseCode.SUCCESS, 0, RPC_TYPE, None, {"msgId": "\0m\0", "queueId": "\0q\0", "queueOffset": "\0o\0",
                                                  "MSG_REGION": region, "TRACE_ON": trace_on}),
        {"msgId": "\0m\0", "queueId": "\0q\0", "queueOffset": "\0o\0"})


async def send_back(ctrl, conn, cmd):
    """CONSUMER_SEND_MSG_BACK: to %RETRY%group with a growing delay, or to %DLQ%group."""
    h = from_ext_fields(ConsumerSendMsgBackRequestHeader, cmd.ext_fields)
    if ctrl.is_slave:
        return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_REMARK)
    sub = ctrl.groups.find(h.group)
    if sub is None:
        return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {h.group}")
    if not ctrl.config.brokerPermission & PERM_WRITE:
        return cmd.response(ResponseCode.NO_PERMISSION, f"the broker[{ctrl.config.brokerIP1}] sending message is forbidden")
    if sub.retryQueueNums <= 0:
        return cmd.response(ResponseCode.SUCCESS)
    retry_topic = RETRY_GROUP_TOPIC_PREFIX + h.group
    cfg = ctrl.topics.create_system(retry_topic, sub.retryQueueNums)
    if not cfg.perm & PERM_WRITE:
        return cmd.response(ResponseCode.NO_PERMISSION, f"the topic[{retry_topic}] sending message is forbidden")
    orig = ctrl.store.read(h.offset)
    if orig is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
    props = dict(orig.properties)
    props.setdefault(Prop.RETRY_TOPIC, orig.topic)
    max_times = sub.retryMaxTimes
    if h.maxReconsumeTimes is not None and cmd.version >= VERSION_V3_4_9:
        max_times = h.maxReconsumeTimes
    topic, queue_id = retry_topic, random.randrange(cfg.writeQueueNums or 1)
    if orig.reconsume_times >= max_times or h.delayLevel < 0:
        topic, queue_id = DLQ_GROUP_TOPIC_PREFIX + h.group, 0
        ctrl.topics.create_system(topic, 1, int(Perm.PERM_WRITE | Perm.PERM_READ))
        props[Prop.DELAY] = "0"
    else:
        props[Prop.DELAY] = str(h.delayLevel or 3 + orig.reconsume_times)
    props[Prop.WAIT] = "false"
    if not props.get(Prop.ORIGIN_MESSAGE_ID):
        props[Prop.ORIGIN_MESSAGE_ID] = h.originMsgId or orig.msg_id
    msg = Message(topic, queue_id, orig.body, props, format_properties(props), orig.flag, orig.sys_flag,
                  orig.born_timestamp, (orig.born_ip, orig.born_port), orig.reconsume_times + 1)
    msg = apply_delay(msg, len(ctrl.store.levels))
    result = await ctrl.put(msg)
    if not result.ok:
        return cmd.response(PUT_CODES.get(result.status, ResponseCode.SYSTEM_ERROR), result.remark)
    return cmd.response(ResponseCode.SUCCESS)


def is_tx_prepared(sys_flag: int) -> bool:
    return sys_flag & TRANSACTION_TYPE_MASK == TransactionType.TRANSACTION_PREPARED_TYPE
