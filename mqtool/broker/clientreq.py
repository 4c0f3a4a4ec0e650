"""Client-facing requests other than send and pull: heartbeats, offsets, queries, locks."""
from __future__ import annotations

import logging
import time

from mqtool.broker.clients import (CONSUME_FROM, CONSUME_TYPES, MESSAGE_MODELS, ClientChannelInfo, Subscription,
                                   enum_name)
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.headers import (ConsumerGroupHeader, OffsetResponseHeader, QueryConsumerOffsetRequestHeader,
                              QueryMessageRequestHeader, SearchOffsetRequestHeader, TopicQueueRequestHeader,
                              UnregisterClientRequestHeader, UpdateConsumerOffsetRequestHeader,
                              ViewMessageRequestHeader, from_ext_fields, to_ext_fields)
from mqtool_store.codes import RETRY_GROUP_TOPIC_PREFIX
from mqtool_store.commitlog import MESSAGE_MAGIC, MESSAGE_MAGIC_V2

LOCK_MAX_LIVE_MS = 60_000
log = logging.getLogger("mqtool.broker")


def _now() -> int:
    return int(time.time() * 1000)


async def heart_beat(ctrl, conn, cmd):
    data = jsonbody.loads(cmd.body) if cmd.body else {}
    client_id = str(data.get("clientID", ""))
    info = ClientChannelInfo(conn, client_id, cmd.language, cmd.version, _now())
    conn.attrs["client_id"] = client_id
    for c in data.get("consumerDataSet") or []:
        group = c.get("groupName", "")
        sub_cfg = ctrl.groups.find(group)
        if sub_cfg is not None:
            ctrl.topics.create_system(RETRY_GROUP_TOPIC_PREFIX + group, max(sub_cfg.retryQueueNums, 1))
        subs = [Subscription.parse(s.get("topic", ""), s.get("subString"), int(s.get("subVersion") or 0),
                                   s.get("expressionType") or "TAG")
                for s in c.get("subscriptionDataSet") or []]
        changed = ctrl.consumers.register(group, info, enum_name(c.get("consumeType", 1), CONSUME_TYPES),
                                          enum_name(c.get("messageModel", 1), MESSAGE_MODELS),
                                          enum_name(c.get("consumeFromWhere", 0), CONSUME_FROM), subs)
        for note in ctrl.filters.register(group, subs, _now()):      # SQL92 (ConsumerFilterManager)
            log.warning("%s", note)
        if changed and (sub_cfg is None or sub_cfg.notifyConsumerIdsChangedEnable):
            await ctrl.notify_consumer_ids_changed(group)
    for p in data.get("producerDataSet") or []:
        ctrl.producers.register(p.get("groupName", ""), info)
    return cmd.response(ResponseCode.SUCCESS)


async def unregister_client(ctrl, conn, cmd):
    h = from_ext_fields(UnregisterClientRequestHeader, cmd.ext_fields)
    if h.producerGroup:
        ctrl.producers.unregister(h.producerGroup, conn)
    if h.consumerGroup and ctrl.consumers.unregister(h.consumerGroup, conn):
        ctrl.groups_left([h.consumerGroup])
        await ctrl.notify_consumer_ids_changed(h.consumerGroup)
    return cmd.response(ResponseCode.SUCCESS)


async def consumer_list(ctrl, conn, cmd):
    h = from_ext_fields(ConsumerGroupHeader, cmd.ext_fields)
    g = ctrl.consumers.get(h.consumerGroup)
    if g is None or not g.channels:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumerGroup}")
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps({"consumerIdList": g.client_ids()}))


async def query_consumer_offset(ctrl, conn, cmd):
    h = from_ext_fields(QueryConsumerOffsetRequestHeader, cmd.ext_fields)
    offset = ctrl.offsets.query(h.consumerGroup, h.topic, h.queueId)
    if offset >= 0:
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": offset})
    # A new group starts at 0 while the queue's first message is still in memory (a young queue),
    # else the client decides (CONSUME_FROM_LAST_OFFSET: the end), as ConsumerManageProcessor does.
    if ctrl.store.min_offset(h.topic, h.queueId) <= 0 and not ctrl.store.in_disk(h.topic, h.queueId, 0):
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": 0})
    return cmd.response(ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")


async def update_consumer_offset(ctrl, conn, cmd):
    h = from_ext_fields(UpdateConsumerOffsetRequestHeader, cmd.ext_fields)
    ctrl.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
    return cmd.response(ResponseCode.SUCCESS)


async def get_max_offset(ctrl, conn, cmd):
    h = from_ext_fields(TopicQueueRequestHeader, cmd.ext_fields)
    return cmd.response(ResponseCode.SUCCESS, None, to_ext_fields(OffsetResponseHeader(
        ctrl.store.max_offset(h.topic, h.queueId))))


async def get_min_offset(ctrl, conn, cmd):
    h = from_ext_fields(TopicQueueRequestHeader, cmd.ext_fields)
    return cmd.response(ResponseCode.SUCCESS, None, {"offset": ctrl.store.min_offset(h.topic, h.queueId)})


async def search_offset(ctrl, conn, cmd):
    h = from_ext_fields(SearchOffsetRequestHeader, cmd.ext_fields)
    return cmd.response(ResponseCode.SUCCESS, None, {"offset": ctrl.store.offset_by_time(h.topic, h.queueId,
                                                                                          h.timestamp)})


async def earliest_time(ctrl, conn, cmd):
    h = from_ext_fields(TopicQueueRequestHeader, cmd.ext_fields)
    return cmd.response(ResponseCode.SUCCESS, None, {"timestamp": ctrl.store.earliest_time(h.topic, h.queueId)})


async def query_message(ctrl, conn, cmd):
    h = from_ext_fields(QueryMessageRequestHeader, cmd.ext_fields)
    max_num = h.maxNum
    if cmd.ext_fields.get("_UNIQUE_KEY_QUERY", "false").lower() == "true":
        max_num = ctrl.store.cfg.defaultQueryMaxNum
    records, last_ts, last_phy = ctrl.store.query(h.topic, h.key, max_num, h.beginTimestamp, h.endTimestamp)
    ext = {"indexLastUpdateTimestamp": last_ts, "indexLastUpdatePhyoffset": last_phy}
    if not records:
        return cmd.response(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", ext)
    return cmd.response(ResponseCode.SUCCESS, None, ext, b"".join(records))


async def view_message(ctrl, conn, cmd):
    h = from_ext_fields(ViewMessageRequestHeader, cmd.ext_fields)
    store = ctrl.store
    data = store.read_bytes(h.offset)
    if data is None or len(data) < 8 or int.from_bytes(data[4:8], "big", signed=True) not in (MESSAGE_MAGIC,
                                                                                               MESSAGE_MAGIC_V2):
        # An offset inside the records but inside one of them (Java sends whatever bytes lie there): say so
        inside = store.commitlog_min_offset <= h.offset < store.commitlog_max_offset
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"no record starts at commitlog offset {h.offset}" if inside
                            else f"can not find message by the offset, {h.offset}")
    return cmd.response(ResponseCode.SUCCESS, None, None, data)


def _mq_key(mq: dict) -> tuple:
    return (mq.get("topic"), mq.get("brokerName"), int(mq.get("queueId", 0)))


async def lock_batch(ctrl, conn, cmd):
    """RebalanceLockManager.tryLockBatch: a queue is locked by one client of a group for 60 s."""
    req = jsonbody.loads(cmd.body)
    group, client = req.get("consumerGroup", ""), req.get("clientId", "")
    table = ctrl.locks.setdefault(group, {})
    now = _now()
    ok = []
    for mq in req.get("mqSet") or []:
        key = _mq_key(mq)
        holder = table.get(key)
        if holder is None or holder[0] == client or now - holder[1] > LOCK_MAX_LIVE_MS:
            table[key] = (client, now)
            ok.append(mq)
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps({"lockOKMQSet": ok}))


async def unlock_batch(ctrl, conn, cmd):
    req = jsonbody.loads(cmd.body)
    table = ctrl.locks.get(req.get("consumerGroup", ""), {})
    for mq in req.get("mqSet") or []:
        key = _mq_key(mq)
        if table.get(key, ("",))[0] == req.get("clientId"):
            del table[key]
    return cmd.response(ResponseCode.SUCCESS)


def notify_ids_changed_request(group: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True,
                                   language="JAVA")
