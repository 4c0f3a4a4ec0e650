"""NOTIFICATION and POLLING_INFO (5.x NotificationProcessor, PollingInfoProcessor; rocketmq5.md 2.2, 2.11)."""
from __future__ import annotations

import random

from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.headers import (
    NotificationRequestHeader,
    NotificationResponseHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    from_ext_fields,
    to_ext_fields,
)

from mqtool.broker.pop.polling import polling_key
from mqtool.broker.pop.popmsg import _check
from mqtool.broker.pop.service import now_ms


def _has_msg(ctrl, topic: str, group: str, queue_id: int, order: bool, attempt_id, nums: int) -> bool:
    """A queue (or any queue) of the topic, or of the group's retry topic, has something to pop."""
    pop = ctrl.pop
    store = ctrl.store

    def ready(t: str, q: int) -> bool:
        offset = ctrl.offsets.query(group, t, q)
        if offset < 0:
            offset = pop.init_offset(t, q, 1)
        if order and pop.order.check_block(attempt_id, t, group, q, 0):
            return False
        return store.max_offset(t, q) > offset

    retry_cfg = None if order else pop.retry_config(topic, group)
    retry_first = random.randrange(100) < ctrl.config.popFromRetryProbability
    retry = retry_cfg is not None and any(ready(retry_cfg.topicName, q) for q in range(retry_cfg.readQueueNums))
    if retry_first and retry:
        return True
    queues = range(nums) if queue_id < 0 else (queue_id,)
    return any(ready(topic, q) for q in queues) or retry


async def notification(ctrl, conn, cmd):
    h = from_ext_fields(NotificationRequestHeader, cmd.ext_fields)
    checked = _check(ctrl, cmd, h.topic, h.queueId, h.consumerGroup, ctrl.config.brokerIP1, "pop")
    if not isinstance(checked, tuple):
        return checked
    topic_cfg, _ = checked
    pop = ctrl.pop
    key = polling_key(h.topic, h.consumerGroup, h.queueId)
    deadline = (h.bornTime or now_ms()) + h.pollTime
    full = False
    while True:
        has = _has_msg(ctrl, h.topic, h.consumerGroup, h.queueId, bool(h.order), h.attemptId, topic_cfg.readQueueNums)
        remaining = deadline - now_ms()
        if has or h.pollTime <= 0 or remaining <= 0 or not ctrl.running:
            break
        if not pop.polling.can_wait(key):
            full = True
            break
        await pop.polling.wait([h.topic, pop.retry_topic(h.topic, h.consumerGroup)], h.consumerGroup, h.queueId,
                               key, remaining / 1000)
    return cmd.response(ResponseCode.SUCCESS, None, to_ext_fields(NotificationResponseHeader(has, full)))


async def polling_info(ctrl, conn, cmd):
    h = from_ext_fields(PollingInfoRequestHeader, cmd.ext_fields)
    checked = _check(ctrl, cmd, h.topic, h.queueId, h.consumerGroup, ctrl.config.brokerIP1, "pop")
    if not isinstance(checked, tuple):
        return checked
    num = ctrl.pop.polling.counts.get(polling_key(h.topic, h.consumerGroup, h.queueId), 0)
    return cmd.response(ResponseCode.SUCCESS, None, to_ext_fields(PollingInfoResponseHeader(num)))
