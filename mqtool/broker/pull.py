"""PULL_MESSAGE with long polling (PullMessageProcessor, PullRequestHoldService)."""
from __future__ import annotations

import asyncio

from mqtool.broker.filters import FilterData, compile_filter, is_tag_type, record_filter
from mqtool.common.sql92 import FilterCompileError
from mqtool.common.subscription import Subscription
from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.headers import (PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND, PullMessageRequestHeader,
                              from_ext_fields)
from mqtool_store.codes import Perm
from mqtool_store.messagestore import GetStatus

MASTER_ID = 0
PERM_READ = int(Perm.PERM_READ)      # an int: `int & IntFlag` goes through enum's Python code
STATUS_CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
}


def _code(result, request_offset: int) -> int:
    if result.status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if request_offset != 0 else ResponseCode.PULL_NOT_FOUND
    return STATUS_CODES[result.status]


async def pull_message(ctrl, conn, cmd):
    h = from_ext_fields(PullMessageRequestHeader, cmd.ext_fields)
    if not ctrl.config.brokerPermission & PERM_READ:
        return cmd.response(ResponseCode.NO_PERMISSION, f"the broker[{ctrl.config.brokerIP1}] pulling message is forbidden")
    sub_cfg = ctrl.groups.find(h.consumerGroup)
    if sub_cfg is None:
        return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                            f"subscription group [{h.consumerGroup}] does not exist")
    if not sub_cfg.consumeEnable:
        return cmd.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumerGroup}")
    topic_cfg = ctrl.topics.get(h.topic)
    if topic_cfg is None and ctrl.is_slave:
        topic_cfg = _replicated_topic(ctrl, h.topic)
    if topic_cfg is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!")
    if not topic_cfg.perm & Perm.PERM_READ:
        return cmd.response(ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden")
    if h.queueId < 0 or h.queueId >= topic_cfg.readQueueNums:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"queueId[{h.queueId}] is illegal, topic:[{h.topic}] topicConfig.readQueueNums:"
                            f"[{topic_cfg.readQueueNums}]")
    filter_data = None
    if h.sysFlag & PULL_SUBSCRIPTION:
        if not is_tag_type(h.expressionType) and not h.subscription:     # FilterAPI.build refuses it
            return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        sub = Subscription.parse(h.topic, h.subscription, h.subVersion, h.expressionType or "TAG")
        if not is_tag_type(h.expressionType):
            filter_data = _request_filter(h)    # compiled for this pull; one that does not compile filters nothing
    else:                   # the subscription the group's heartbeats registered (PullMessageProcessor)
        group = ctrl.consumers.get(h.consumerGroup)
        if group is None:
            return cmd.response(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist")
        if not sub_cfg.consumeBroadcastEnable and group.message_model == "BROADCASTING":
            return cmd.response(ResponseCode.NO_PERMISSION,
                                f"the consumer group[{h.consumerGroup}] can not consume by broadcast way")
        sub = group.subscriptions.get(h.topic)
        if sub is None:
            return cmd.response(ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist")
        if sub.sub_version < (h.subVersion or 0):
            return cmd.response(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        if not is_tag_type(sub.expression_type):
            filter_data = ctrl.filters.get(h.topic, h.consumerGroup)
            if filter_data is None:
                return cmd.response(ResponseCode.FILTER_DATA_NOT_EXIST,
                                    "The broker's consumer filter data is not exist!Your expression may be wrong!")
            if filter_data.clientVersion < (h.subVersion or 0):
                return cmd.response(ResponseCode.FILTER_DATA_NOT_LATEST,
                                    "the consumer's consumer filter data not latest")
    if not is_tag_type(sub.expression_type) and not ctrl.config.enablePropertyFilter:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"The broker does not support consumer to filter message by {sub.expression_type}")
    accept = record_filter(ctrl.filters, ctrl.config.filterSupportRetry, h.consumerGroup, h.topic,
                           sub.expression_type, filter_data)
    if accept is not None and accept.retry:
        matches = None                          # ExpressionForRetryMessageFilter: no tag test on a retry topic
    elif not is_tag_type(sub.expression_type) or sub.sub_string == "*":
        matches = None
    else:
        matches = sub.matches
    max_nums = max(1, min(h.maxMsgNums, ctrl.store.cfg.maxTransferCountOnMessageInMemory))
    result = ctrl.store.get(h.topic, h.queueId, h.queueOffset, max_nums, matches, accept)
    code = _code(result, h.queueOffset)
    if code == ResponseCode.PULL_NOT_FOUND and h.sysFlag & PULL_SUSPEND:
        timeout_ms = h.suspendTimeoutMillis if ctrl.config.longPollingEnable else ctrl.config.shortPollingTimeMills
        loop = asyncio.get_running_loop()
        deadline, wait_from = loop.time() + max(timeout_ms, 0) / 1000, h.queueOffset
        while True:
            woken = await ctrl.pull_holds.wait(h.topic, h.queueId, wait_from, max(deadline - loop.time(), 0),
                                               matches)
            result = ctrl.store.get(h.topic, h.queueId, h.queueOffset, max_nums, matches, accept)  # arrived or timed out
            code = _code(result, h.queueOffset)
            # An SQL92 pull stays held while what arrived does not match (PullRequestHoldService tests
            # each arrival against the filter), as long as all of it was scanned
            if (not woken or accept is None or result.status != GetStatus.NO_MATCHED_MESSAGE
                    or loop.time() >= deadline or result.next_begin_offset < result.max_offset):
                break
            wait_from = result.next_begin_offset
    if h.sysFlag & PULL_COMMIT_OFFSET and h.commitOffset >= 0 and not ctrl.is_slave:
        ctrl.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
    suggest = _suggest_broker(ctrl, sub_cfg, result)
    if code == ResponseCode.PULL_OFFSET_MOVED and ctrl.is_slave and not ctrl.store_config.offsetCheckInSlave:
        code, suggest = ResponseCode.PULL_RETRY_IMMEDIATELY, sub_cfg.brokerId   # a slave never moves offsets
    ext = {"suggestWhichBrokerId": suggest, "nextBeginOffset": result.next_begin_offset,
           "minOffset": result.min_offset, "maxOffset": result.max_offset}
    body = b"".join(result.messages) if code == ResponseCode.SUCCESS else b""
    ctrl.stats.got(h.consumerGroup, h.topic, len(result.messages) if body else 0, len(body))
    return cmd.response(code, None if code == ResponseCode.SUCCESS else result.status.value, ext, body)


def _request_filter(h) -> FilterData | None:
    """ConsumerFilterManager.build for a pull that carries its expression: a compile error is
    logged by 4.9.8 and the pull goes on with no filter, so every message is delivered."""
    try:
        compiled = compile_filter(h.expressionType, h.subscription)
    except FilterCompileError:
        return None
    return FilterData(h.consumerGroup, h.topic, h.subscription, h.expressionType, 0, h.subVersion or 0,
                      compiled=compiled)


def _suggest_broker(ctrl, sub_cfg, result) -> int:
    """PullMessageProcessor: with slaveReadEnable a reader far behind the head (more than
    accessMessageInMemoryMaxRatio of RAM) is sent to whichBrokerWhenConsumeSlowly; else the master."""
    if not ctrl.config.slaveReadEnable:
        return MASTER_ID
    return sub_cfg.whichBrokerWhenConsumeSlowly if result.suggest_slave else sub_cfg.brokerId


def _replicated_topic(ctrl, topic: str):
    """A topic the master created after the slave's last metadata copy (every 10 s) but whose
    messages are already replicated: readable from its consume queues, so a consumer that turns
    to the slave because the master is gone still finds it."""
    queues = [q for t, q in ctrl.store.queues if t == topic]
    if not queues:
        return None
    from mqtool.broker.topics import TopicConfig
    nums = max(queues) + 1
    cfg = ctrl.topics.table.setdefault(topic, TopicConfig(topic, nums, nums))
    return cfg
