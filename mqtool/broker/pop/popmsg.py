"""POP_MESSAGE and PEEK_MESSAGE (5.x PopMessageProcessor, PeekMessageProcessor; rocketmq5.md 2.3, 2.5, 2.11)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from mqtool_remoting import extrainfo as ei
from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.headers import (
    PeekMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    from_ext_fields,
    to_ext_fields,
)
from mqtool_store.codes import Perm
from mqtool_store.commitlog import decode_record, encode_record
from mqtool_store.messagestore import GetStatus
from mqtool_store.poprecords import CheckPoint
from mqtool_store.properties import format_properties

from mqtool.broker.filters import FilterData, compile_filter, is_tag_type, record_filter
from mqtool.broker.pop.polling import polling_key
from mqtool.broker.pop.service import now_ms
from mqtool.common.sql92 import FilterCompileError
from mqtool.common.subscription import Subscription

MAX_POP_NUMS = 32
TIMEOUT_TOO_MUCH_MS = 500       # PopMessageRequestHeader.isTimeoutTooMuch
POP_CK = "POP_CK"
PERM_READ = int(Perm.PERM_READ)
CORRECTED = (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY, GetStatus.OFFSET_FOUND_NULL)
SKIPPED = (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING)


@dataclass
class Batch:
    """What one POP gathers over its queues."""
    group: str
    max_nums: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    order: bool
    attempt_id: str | None
    max_times: int = 16                 # the group's retryMaxTimes
    messages: list[bytes] = field(default_factory=list)
    start_info: list[str] = field(default_factory=list)
    msg_info: list[str] = field(default_factory=list)
    order_info: list[str] = field(default_factory=list)
    rest: int = 0


def _check(ctrl, cmd, topic: str, queue_id: int, group: str, ip: str, what: str = "pop"):
    """The checks a POP, a PEEK and a NOTIFICATION share: (topic config, group config) or an answer."""
    if not ctrl.config.brokerPermission & PERM_READ:
        return cmd.response(ResponseCode.NO_PERMISSION, f"the broker[{ip}] {what} message is forbidden")
    topic_cfg = ctrl.topics.get(topic)
    if topic_cfg is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! "
                            "https://rocketmq.apache.org/docs/bestPractice/06FAQ")
    if not topic_cfg.perm & PERM_READ:
        return cmd.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
    if queue_id >= topic_cfg.readQueueNums:
        return cmd.response(ResponseCode.INVALID_PARAMETER, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                            f"topicConfig.readQueueNums:[{topic_cfg.readQueueNums}] consumer:[{ctrl.config.brokerIP1}]")
    group_cfg = ctrl.groups.find(group)
    if group_cfg is None:
        return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist, "
                            "https://rocketmq.apache.org/docs/bestPractice/06FAQ")
    if not group_cfg.consumeEnable:
        return cmd.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
    return topic_cfg, group_cfg


def _filters(ctrl, h):
    """(matches on the tags code, accept on the record) of the POP's expression, or a remark."""
    if not h.exp:
        return None, None, None
    kind = h.expType or "TAG"
    if is_tag_type(kind):
        sub = Subscription.parse(h.topic, h.exp, 0, "TAG")
        return (None if sub.sub_string == "*" else sub.matches), None, None
    if not ctrl.config.enablePropertyFilter:
        return None, None, f"The broker does not support consumer to filter message by {kind}"
    try:
        compiled = compile_filter(kind, h.exp)
    except FilterCompileError:
        return None, None, "parse the consumer's subscription failed"
    data = FilterData(h.consumerGroup, h.topic, h.exp, kind, 0, 0, compiled=compiled)
    return None, record_filter(ctrl.filters, False, h.consumerGroup, h.topic, kind, data), None


async def pop_message(ctrl, conn, cmd):
    h = from_ext_fields(PopMessageRequestHeader, cmd.ext_fields)
    start = now_ms()
    born = h.bornTime or start
    ip = ctrl.config.brokerIP1
    if start - born - h.pollTime > TIMEOUT_TOO_MUCH_MS:
        return cmd.response(ResponseCode.POLLING_TIMEOUT, f"the broker[{ip}] pop message is timeout too much")
    if not ctrl.config.brokerPermission & PERM_READ:
        return cmd.response(ResponseCode.NO_PERMISSION, f"the broker[{ip}] pop message is forbidden")
    if h.maxMsgNums > MAX_POP_NUMS:
        return cmd.response(ResponseCode.INVALID_PARAMETER, f"the broker[{ip}] pop message's num is greater than 32")
    if not getattr(ctrl.store_config, "timerWheelEnable", True):
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"the broker[{ip}] pop message is forbidden because timerWheelEnable is false")
    checked = _check(ctrl, cmd, h.topic, h.queueId, h.consumerGroup, ip)
    if not isinstance(checked, tuple):
        return checked
    topic_cfg, group_cfg = checked
    matches, accept, problem = _filters(ctrl, h)
    if problem is not None:
        code = ResponseCode.SUBSCRIPTION_PARSE_FAILED if "parse" in problem else ResponseCode.SYSTEM_ERROR
        return cmd.response(code, problem)
    pop = ctrl.pop
    order = bool(h.order)
    revive_qid = ei.POP_ORDER_REVIVE_QUEUE if order else pop.next_revive_qid()
    key = polling_key(h.topic, h.consumerGroup, h.queueId)
    retry = pop.retry_topic(h.topic, h.consumerGroup)
    deadline = born + h.pollTime
    while True:
        batch = Batch(h.consumerGroup, h.maxMsgNums, now_ms(), h.invisibleTime, revive_qid, order, h.attemptId,
                      group_cfg.retryMaxTimes)
        await _gather(ctrl, h, topic_cfg, batch, matches, accept)
        if batch.messages:
            if batch.rest > 0:
                pop.polling.notify(h.topic, h.queueId, group=h.consumerGroup)
            break
        remaining = deadline - now_ms()
        if h.pollTime <= 0 or remaining <= 0 or not ctrl.running:
            code = ResponseCode.POLLING_TIMEOUT
            break
        if not pop.polling.can_wait(key):
            code = ResponseCode.POLLING_FULL
            break
        await pop.polling.wait([h.topic, retry], h.consumerGroup, h.queueId, key, remaining / 1000)
    found = bool(batch.messages)
    ext = to_ext_fields(PopMessageResponseHeader(
        batch.pop_time, h.invisibleTime, revive_qid, batch.rest, ";".join(batch.start_info),
        ";".join(batch.msg_info), ";".join(batch.order_info) if order else None))
    body = b"".join(batch.messages)
    ctrl.stats.got(h.consumerGroup, h.topic, len(batch.messages), len(body))
    if found:
        return cmd.response(ResponseCode.SUCCESS, GetStatus.FOUND.value, ext, body)
    return cmd.response(code, GetStatus.NO_MESSAGE_IN_QUEUE.value, ext)


async def _gather(ctrl, h, topic_cfg, batch: Batch, matches, accept) -> None:
    """The retry topic first one time in five (popFromRetryProbability), then the topic's queues
    (all of them from a random one for queueId -1), then the retry topic if the batch is not full."""
    pop = ctrl.pop
    random_q = random.randrange(100)
    retry_first = random_q < ctrl.config.popFromRetryProbability
    retry_cfg = None if batch.order else pop.retry_config(h.topic, h.consumerGroup)
    if retry_first and retry_cfg is not None:
        await _pop_topic(ctrl, h, retry_cfg, True, batch, matches, accept, random_q)
    if h.queueId < 0:
        await _pop_topic(ctrl, h, topic_cfg, False, batch, matches, accept, random_q)
    else:
        await _pop_queue(ctrl, h, h.topic, h.queueId, False, batch, matches, accept)
    if not retry_first and retry_cfg is not None and len(batch.messages) < batch.max_nums:
        await _pop_topic(ctrl, h, retry_cfg, True, batch, matches, accept, random_q)


async def _pop_topic(ctrl, h, cfg, retry: bool, batch: Batch, matches, accept, random_q: int) -> None:
    nums = cfg.readQueueNums
    for i in range(nums):
        await _pop_queue(ctrl, h, cfg.topicName, (i + random_q) % nums, retry, batch, matches, accept)


async def _pop_queue(ctrl, h, topic: str, queue_id: int, retry: bool, batch: Batch, matches, accept) -> None:
    """popMsgFromQueue: under the queue's lock (a locked queue is only counted in restNum)."""
    pop, store, group = ctrl.pop, ctrl.store, batch.group
    lock_key = f"{topic}@{group}@{queue_id}"
    offset = pop.pop_offset(topic, group, queue_id, h.initMode)
    if lock_key in pop.locks:
        batch.rest += store.max_offset(topic, queue_id) - offset
        return
    pop.locks.add(lock_key)
    try:
        if batch.order and pop.order.check_block(batch.attempt_id, topic, group, queue_id, batch.invisible_time):
            batch.rest += store.max_offset(topic, queue_id) - offset
            return
        if len(batch.messages) >= batch.max_nums:
            batch.rest += store.max_offset(topic, queue_id) - offset
            return
        result = store.get(topic, queue_id, offset, batch.max_nums - len(batch.messages), matches, accept)
        if result.status in CORRECTED:            # the offset was wrong: commit the right one and read again
            offset = result.next_begin_offset
            ctrl.offsets.commit(group, topic, queue_id, offset)
            result = store.get(topic, queue_id, offset, batch.max_nums - len(batch.messages), matches, accept)
        batch.rest += result.max_offset - result.next_begin_offset
        if result.status is GetStatus.FOUND and result.messages:
            await _found(ctrl, topic, queue_id, retry, offset, result, batch)
        elif result.status in SKIPPED and result.next_begin_offset > offset and not ctrl.is_slave:
            ctrl.offsets.commit(group, topic, queue_id, result.next_begin_offset)   # 5.3.3's mock checkpoint
    finally:
        pop.locks.discard(lock_key)


async def _found(ctrl, topic: str, queue_id: int, retry: bool, offset: int, result, batch: Batch) -> None:
    pop = ctrl.pop
    offsets = [int.from_bytes(m[20:28], "big", signed=True) for m in result.messages]   # QUEUEOFFSET
    kind = ei.topic_type(topic)
    messages = result.messages
    if batch.order:
        counts, least = pop.order.update(batch.attempt_id, topic, batch.group, queue_id, batch.pop_time,
                                         batch.invisible_time, offsets)
        ctrl.offsets.commit(batch.group, topic, queue_id, offset)     # the offset moves on ack only
        if any(c > batch.max_times for c in counts.values()):
            messages, offsets = await _orderly_dead_letters(ctrl, topic, queue_id, messages, offsets, counts, batch)
            if not offsets:
                return
        batch.order_info += [ei.order_count_entry(kind, queue_id, c, o) for o, c in counts.items() if o in offsets]
        batch.order_info.append(ei.order_count_entry(kind, queue_id, least))
    else:
        ck = CheckPoint(offset, batch.pop_time, batch.invisible_time, len(offsets), queue_id, topic, batch.group,
                        ctrl.config.brokerName, [o - offset for o in offsets])
        if not await pop.append_ck(ck, batch.revive_qid):
            return                          # not stored: nothing is handed out, the offset stays
        ctrl.offsets.commit(batch.group, topic, queue_id, result.next_begin_offset)
    batch.start_info.append(ei.start_offset_entry(kind, queue_id, offset))
    batch.msg_info.append(ei.msg_offset_entry(kind, queue_id, offsets))
    if retry and not ctrl.config.popResponseReturnActualRetryTopic:
        batch.messages += [_as_normal(m, offset, batch, ctrl.config.brokerName) for m in messages]
    else:
        batch.messages += messages


async def _orderly_dead_letters(ctrl, topic, queue_id, messages, offsets, counts, batch):
    """Orderly messages delivered retryMaxTimes + 1 times go to %DLQ%<group> and count as acked (the
    queue moves on); the rest of the batch is handed out."""
    pop, group = ctrl.pop, batch.group
    keep, kept = [], []
    for data, off in zip(messages, offsets):
        count = counts.get(off, 0)
        if count <= batch.max_times:
            keep.append(data)
            kept.append(off)
            continue
        put = await ctrl.put(pop.dlq_message(decode_record(data), group, topic, count))
        if not put.ok:
            keep.append(data)
            kept.append(off)
            continue
        nxt = pop.order.commit_and_next(topic, group, queue_id, off, batch.pop_time)
        if nxt > -1:
            ctrl.offsets.commit(group, topic, queue_id, nxt)
    return keep, kept


def _as_normal(data: bytes, ck_offset: int, batch: Batch, broker_name: str) -> bytes:
    """A message of the POP retry topic as 5.3.3 answers it: its topic the normal one, POP_CK set."""
    rec = decode_record(data)
    props = dict(rec.properties)
    props.setdefault(POP_CK, ei.build_extra_info(ck_offset, batch.pop_time, batch.invisible_time, batch.revive_qid,
                                                 rec.topic, broker_name, rec.queue_id, rec.queue_offset))
    rec.topic = ei.normal_topic(rec.topic, batch.group)
    rec.properties_text = format_properties(props)
    rec.properties = props
    return encode_record(rec)


async def peek_message(ctrl, conn, cmd):
    """PEEK_MESSAGE: what a POP would get, without a checkpoint or an offset move."""
    h = from_ext_fields(PeekMessageRequestHeader, cmd.ext_fields)
    checked = _check(ctrl, cmd, h.topic, h.queueId, h.consumerGroup, ctrl.config.brokerIP1, "peek")
    if not isinstance(checked, tuple):
        return checked
    topic_cfg, _ = checked
    if h.maxMsgNums > MAX_POP_NUMS:
        return cmd.response(ResponseCode.INVALID_PARAMETER,
                            f"the broker[{ctrl.config.brokerIP1}] peek message's num is greater than 32")
    store, messages, rest = ctrl.store, [], 0
    nums = topic_cfg.readQueueNums
    start = random.randrange(100)
    queues = [(i + start) % nums for i in range(nums)] if h.queueId < 0 else [h.queueId]
    for q in queues:
        offset = ctrl.offsets.query(h.consumerGroup, h.topic, q)
        if offset < 0:
            offset = store.min_offset(h.topic, q)
        left = h.maxMsgNums - len(messages)
        if left <= 0:
            rest += store.max_offset(h.topic, q) - offset
            continue
        result = store.get(h.topic, q, offset, left)
        if result.status is GetStatus.FOUND:
            messages += result.messages
        rest += result.max_offset - result.next_begin_offset
    ext = to_ext_fields(PopMessageResponseHeader(now_ms(), 0, 0, max(rest, 0)))
    if messages:
        return cmd.response(ResponseCode.SUCCESS, GetStatus.FOUND.value, ext, b"".join(messages))
    return cmd.response(ResponseCode.PULL_NOT_FOUND, GetStatus.NO_MESSAGE_IN_QUEUE.value, ext)

