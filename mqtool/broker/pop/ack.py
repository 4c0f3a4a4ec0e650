"""ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME (5.x AckMessageProcessor,
ChangeInvisibleTimeProcessor; rocketmq5.md 2.2, 2.7, 2.10)."""
from __future__ import annotations

import base64

from mqtool_remoting import extrainfo as ei
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    from_ext_fields,
    to_ext_fields,
)
from mqtool_store.poprecords import AckMsg, CheckPoint

from mqtool.broker.pop.orderinfo import NOT_IN_BATCH
from mqtool.broker.pop.service import now_ms

SLAVE_REMARK = "the broker is a slave: POP acks go to the master"


def _check(ctrl, cmd, topic: str, queue_id: int, offset: int, change: bool):
    """The topic, queue and offset checks; None when they pass."""
    topic_cfg = ctrl.topics.get(topic)
    if topic_cfg is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! "
                            "https://rocketmq.apache.org/docs/bestPractice/06FAQ")
    if queue_id < 0 or queue_id >= topic_cfg.readQueueNums:
        return cmd.response(ResponseCode.MESSAGE_ILLEGAL, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                            f"topicConfig.readQueueNums:[{topic_cfg.readQueueNums}] consumer:[{ctrl.config.brokerIP1}]")
    lo, hi = ctrl.store.min_offset(topic, queue_id), ctrl.store.max_offset(topic, queue_id)
    if offset < lo or offset > hi or (change and offset >= hi):
        return cmd.response(ResponseCode.NO_MESSAGE, f"request offset[{offset}] not in queue offset range[{lo}-{hi}], "
                            f"topic:[{topic}] consumer:[{ctrl.config.brokerIP1}]"
                            if change else f"offset is illegal, key:{topic}@{queue_id}, old:{lo}, commit:{offset}, "
                            f"next:{hi}, {ctrl.config.brokerIP1}")
    return None


def _extra(cmd, text: str):
    try:
        extra = ei.parse_extra_info(text)
    except ValueError as exc:
        return None, cmd.response(ResponseCode.MESSAGE_ILLEGAL, f"extraInfo is illegal: {exc}")
    return extra, None


def _checked(ctrl, cmd, h, change: bool):
    """What an ACK and a CHANGE_INVISIBLE of one message check first: (its ExtraInfo, None), or
    (None, the refusal): a slave, the topic, queue and offset (`_check`), the ExtraInfo string."""
    if ctrl.is_slave:
        return None, cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_REMARK)
    refused = _check(ctrl, cmd, h.topic, h.queueId, h.offset, change)
    if refused is not None:
        return None, refused
    return _extra(cmd, h.extraInfo)


async def ack_message(ctrl, conn, cmd):
    h = from_ext_fields(AckMessageRequestHeader, cmd.ext_fields)
    extra, refused = _checked(ctrl, cmd, h, False)
    if refused is not None:
        return refused
    if extra.order:
        return _ack_orderly(ctrl, cmd, h.topic, h.consumerGroup, h.queueId, h.offset, extra.pop_time,
                            extra.invisible_time)
    ack = AckMsg(h.offset, extra.ck_offset, h.consumerGroup, h.topic, h.queueId, extra.pop_time, extra.broker_name)
    if not await ctrl.pop.append_ack(ack, extra.revive_qid % ctrl.pop.revive_queue_num):
        return cmd.response(ResponseCode.SYSTEM_ERROR, "append the ack to the revive topic failed")
    return cmd.response(ResponseCode.SUCCESS)


def _ack_orderly(ctrl, cmd, topic, group, queue_id, offset, pop_time, invisible_time):
    """ackOrderly: the offset's bit; the group's offset becomes the batch's first un-acked one."""
    committed = ctrl.offsets.query(group, topic, queue_id)
    if offset < committed:
        return cmd.response(ResponseCode.SUCCESS)
    pop = ctrl.pop
    nxt = pop.order.commit_and_next(topic, group, queue_id, offset, pop_time)
    if nxt == NOT_IN_BATCH:
        return cmd.response(ResponseCode.MESSAGE_ILLEGAL, f"offset is illegal, key:{topic}@{group}@{queue_id}, "
                            f"old:{committed}, commit:{offset}, next:{nxt}, {ctrl.config.brokerIP1}")
    if nxt > -1:
        ctrl.offsets.commit(group, topic, queue_id, nxt)
        if not pop.order.check_block(None, topic, group, queue_id, invisible_time):
            pop.polling.notify(topic, queue_id, group=group)
    return cmd.response(ResponseCode.SUCCESS)


def bitset_offsets(text: str, start: int) -> list[int]:
    """java.util.BitSet.valueOf(base64 bytes): bit i (little-endian bytes) acks offset start + i."""
    data = base64.b64decode(text)
    return [start + i * 8 + b for i, byte in enumerate(data) for b in range(8) if byte >> b & 1]


async def batch_ack_message(ctrl, conn, cmd):
    if ctrl.is_slave:
        return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_REMARK)
    body = jsonbody.loads(cmd.body) if cmd.body else {}
    acks = body.get("acks") or []
    if not acks:
        return cmd.response(ResponseCode.NO_MESSAGE, "ack list is empty")
    broker_name = body.get("brokerName") or ctrl.config.brokerName
    for one in acks:
        group, revive_qid = one["c"], int(one["rq"])
        topic = ei.real_topic(str(one.get("r", "0")), one["t"], group)
        queue_id, start, pop_time = int(one["q"]), int(one["so"]), int(one["pt"])
        if ctrl.topics.get(topic) is None:
            continue
        lo, hi = ctrl.store.min_offset(topic, queue_id), ctrl.store.max_offset(topic, queue_id)
        offsets = [o for o in bitset_offsets(one.get("b") or "", start) if lo <= o <= hi]
        if not offsets:
            continue
        if revive_qid == ei.POP_ORDER_REVIVE_QUEUE:
            for off in offsets:
                _ack_orderly(ctrl, cmd, topic, group, queue_id, off, pop_time, int(one.get("it", 0)))
            continue
        ack = AckMsg(-1, start, group, topic, queue_id, pop_time, broker_name, offsets)
        if not await ctrl.pop.append_ack(ack, revive_qid % ctrl.pop.revive_queue_num):
            return cmd.response(ResponseCode.SYSTEM_ERROR, "append the ack to the revive topic failed")
    return cmd.response(ResponseCode.SUCCESS)


async def change_invisible_time(ctrl, conn, cmd):
    h = from_ext_fields(ChangeInvisibleTimeRequestHeader, cmd.ext_fields)
    extra, refused = _checked(ctrl, cmd, h, True)
    if refused is not None:
        return refused
    now = now_ms()
    pop = ctrl.pop
    if extra.order:
        pop.order.update_next_visible(h.topic, h.consumerGroup, h.queueId, h.offset, extra.pop_time,
                                      now + h.invisibleTime)
        ext = to_ext_fields(ChangeInvisibleTimeResponseHeader(extra.pop_time, now + h.invisibleTime - extra.pop_time,
                                                              extra.revive_qid))
        return cmd.response(ResponseCode.SUCCESS, None, ext)
    qid = extra.revive_qid % pop.revive_queue_num
    ck = CheckPoint(h.offset, now, h.invisibleTime, 1, h.queueId, h.topic, h.consumerGroup, ctrl.config.brokerName,
                    [0])
    if not await pop.append_ck(ck, qid):
        return cmd.response(ResponseCode.SYSTEM_ERROR, "append the checkpoint to the revive topic failed")
    old = AckMsg(h.offset, extra.ck_offset, h.consumerGroup, h.topic, h.queueId, extra.pop_time, extra.broker_name)
    if not await pop.append_ack(old, qid):
        return cmd.response(ResponseCode.SYSTEM_ERROR, "append the ack to the revive topic failed")
    ext = to_ext_fields(ChangeInvisibleTimeResponseHeader(now, h.invisibleTime, extra.revive_qid))
    return cmd.response(ResponseCode.SUCCESS, None, ext)
