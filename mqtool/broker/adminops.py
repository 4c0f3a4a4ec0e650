"""The rest of AdminBrokerProcessor (4.9.8) that mqadmin and the dashboard use: who consumes a
topic, consume stats of the whole broker, consume time spans, consume queue units, group offset
cloning, clean-ups, stats data, producer tables, client config checks, correction offsets and
half-message resumption. The requests relayed to online consumers are in clientcalls.py."""
from __future__ import annotations

import asyncio
import json
import logging
import time

from mqtool.broker.filters import compile_filter, is_tag_type, remark_of
from mqtool.broker.offsets import TOPIC_GROUP_SEPARATOR
from mqtool.broker.stats import GROUP_GET_NUMS
from mqtool.common.sql92 import FilterCompileError
from mqtool_remoting import jsonbody
from mqtool_remoting.bodies import (BrokerStatsData, BrokerStatsItem, ConsumeQueueData,
                                    ConsumeStats, ConsumeStatsList, GroupList, MessageQueue, OffsetWrapper,
                                    ProducerInfo, ProducerTableInfo, QueryConsumeQueueResponseBody,
                                    QueryConsumeTimeSpanBody, QueryCorrectionOffsetBody, QueueTimeSpan, TopicList)
from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.headers import (CloneGroupOffsetRequestHeader, GetConsumeStatsInBrokerHeader,
                                     QueryConsumeQueueRequestHeader, QueryConsumeTimeSpanRequestHeader,
                                     QueryCorrectionOffsetHeader, ResumeCheckHalfMessageRequestHeader,
                                     TopicRequestHeader, ViewBrokerStatsDataRequestHeader, from_ext_fields)
from mqtool_store.codes import SCHEDULE_TOPIC, SYSTEM_TOPICS, TRANS_OP_HALF_TOPIC
from mqtool_store.codes import TRANS_HALF_TOPIC as HALF_TOPIC
from mqtool_store.msgid import decode_offset_msg_id

log = logging.getLogger("mqtool.broker")
# TopicValidator.getSystemTopicSet() of 4.9.8 (GET_SYSTEM_TOPIC_LIST_FROM_BROKER answers this fixed set).
LONG_MAX = 2**63 - 1


def mq(ctrl, topic: str, qid: int) -> MessageQueue:
    return MessageQueue(topic, ctrl.config.brokerName, qid)


def ok(cmd, body) -> object:
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(body.to_json()))


def store_time_at(ctrl, topic: str, qid: int, queue_offset: int) -> int:
    """getMessageStoreTimeStamp: the store time of one queue offset, -1 when there is none."""
    cq = ctrl.store.queues.get((topic, qid))
    if cq is None or not cq.min_offset <= queue_offset < cq.max_offset:
        return -1
    units = cq.units(queue_offset, 1)
    rec = ctrl.store.read(int(units["offset"][0])) if len(units) else None
    return rec.store_timestamp if rec else -1


def online_subscribes_elsewhere(ctrl, group: str, topic: str) -> bool:
    """findSubscriptionData == null && findSubscriptionDataCount > 0: the online group reads other topics only."""
    info = ctrl.consumers.get(group)
    return info is not None and bool(info.subscriptions) and topic not in info.subscriptions


# ---------------------------------------------------------------------- who consumes what

async def topic_consume_by_who(ctrl, conn, cmd):
    """QUERY_TOPIC_CONSUME_BY_WHO: online groups subscribed to the topic, and groups with offsets on it."""
    h = from_ext_fields(TopicRequestHeader, cmd.ext_fields)
    groups = {g for g, info in list(ctrl.consumers.groups.items()) if h.topic in info.subscriptions}
    groups |= ctrl.offsets.groups_of_topic(h.topic)
    return ok(cmd, GroupList(sorted(groups)))


def group_consume_stats(ctrl, group: str, topic: str, queues: int) -> ConsumeStats:
    """The group's offsets of the topic and the store's queues are looked up once, not per queue
    (GET_BROKER_CONSUME_STATS does this for every group: 40,000 queues at 5,000 groups)."""
    stats = ConsumeStats()
    committed = ctrl.offsets.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})
    store_queues = ctrl.store.queues         # drained once
    broker = ctrl.config.brokerName
    for q in range(queues):
        consumer = max(committed.get(q, -1), 0)
        last = store_time_at(ctrl, topic, q, consumer - 1) if consumer > 0 else 0
        cq = store_queues.get((topic, q))
        stats.offsetTable[MessageQueue(topic, broker, q)] = OffsetWrapper(
            max(cq.max_offset, 0) if cq is not None else 0, consumer, max(last, 0))
    stats.consumeTps = ctrl.stats.minute_tps(GROUP_GET_NUMS, f"{topic}@{group}")
    return stats


async def broker_consume_stats(ctrl, conn, cmd):
    """GET_BROKER_CONSUME_STATS (mqadmin brokerConsumeStats): every subscription group, even one
    without offsets, with the stats of each topic it has offsets on."""
    h = from_ext_fields(GetConsumeStatsInBrokerHeader, cmd.ext_fields)
    body = ConsumeStatsList(brokerAddr=ctrl.config.broker_addr)
    for group in sorted(ctrl.groups.table):
        per_topic = []
        for topic in sorted(ctrl.offsets.topics_of_group(group)):
            cfg = ctrl.topics.get(topic)
            if cfg is None or (h.isOrder and not cfg.order) or online_subscribes_elsewhere(ctrl, group, topic):
                continue
            stats = group_consume_stats(ctrl, group, topic, cfg.writeQueueNums)
            body.totalDiff += stats.total_diff()
            per_topic.append(stats)
        body.consumeStatsList.append({group: per_topic})
    return cmd.response(ResponseCode.SUCCESS, None, None, consume_stats_list_body(body))


def consume_stats_list_body(body: ConsumeStatsList) -> bytes:
    """jsonbody.dumps(body.to_json()) by string formatting: at 5,000 groups the general encoder
    (MessageQueue keys written as JSON objects) took seconds of the broker's loop for each
    `mqtool top` sample (tests hold the two equal). Each broker name and topic is quoted once, not
    once per queue (two thirds of the time at 5,000 groups)."""
    quoted: dict[str, str] = {}

    def quote(text: str) -> str:
        out = quoted.get(text)
        if out is None:
            out = quoted[text] = json.dumps(text, ensure_ascii=False)
        return out

    def stats_text(stats) -> str:
        rows = ",".join(
            f'{{"brokerName":{quote(q.brokerName)},"queueId":{q.queueId},'
            f'"topic":{quote(q.topic)}}}:{{"brokerOffset":{w.brokerOffset},'
            f'"consumerOffset":{w.consumerOffset},"lastTimestamp":{w.lastTimestamp}}}'
            for q, w in stats.offsetTable.items())
        return f'{{"consumeTps":{json.dumps(float(stats.consumeTps))},"offsetTable":{{{rows}}}}}'
    entries = ",".join("{" + ",".join(f'{json.dumps(g, ensure_ascii=False)}:[{",".join(map(stats_text, per))}]'
                                      for g, per in entry.items()) + "}" for entry in body.consumeStatsList)
    head = f'"brokerAddr":{json.dumps(body.brokerAddr, ensure_ascii=False)},' if body.brokerAddr is not None else ""
    return f'{{{head}"consumeStatsList":[{entries}],"totalDiff":{body.totalDiff}}}'.encode()


async def consume_time_span(ctrl, conn, cmd):
    """QUERY_CONSUME_TIME_SPAN: per queue the store times of the first and last message and of the
    group's position; delayTime = now - the store time of the next message to consume."""
    h = from_ext_fields(QueryConsumeTimeSpanRequestHeader, cmd.ext_fields)
    cfg = ctrl.topics.get(h.topic)
    if cfg is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
    body = QueryConsumeTimeSpanBody()
    for q in range(cfg.writeQueueNums):
        span = QueueTimeSpan(mq(ctrl, h.topic, q), minTimeStamp=ctrl.store.earliest_time(h.topic, q))
        top = ctrl.store.max_offset(h.topic, q)
        span.maxTimeStamp = store_time_at(ctrl, h.topic, q, top - 1)
        consumer = ctrl.offsets.query(h.group, h.topic, q)
        span.consumeTimeStamp = store_time_at(ctrl, h.topic, q, consumer - 1) if consumer > 0 else span.minTimeStamp
        if consumer < top:
            span.delayTime = int(time.time() * 1000) - store_time_at(ctrl, h.topic, q, consumer)
        body.consumeTimeSpanSet.append(span)
    return ok(cmd, body)


async def query_consume_queue(ctrl, conn, cmd):
    """QUERY_CONSUME_QUEUE (mqadmin queryCq): raw units of one queue from `index`."""
    h = from_ext_fields(QueryConsumeQueueRequestHeader, cmd.ext_fields)
    cq = ctrl.store.queues.get((h.topic, h.queueId))
    if cq is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{h.queueId}@{h.topic} is not exist!")
    body = QueryConsumeQueueResponseBody(cq.max_offset, cq.min_offset)
    if h.consumerGroup is not None:
        sub = ctrl.consumers.subscription(h.consumerGroup, h.topic)
        if sub is None:
            body.filterData = f"{h.consumerGroup}@{h.topic} is not online!"
        else:
            body.subscriptionData = sub.to_json()
            data = None if is_tag_type(sub.expression_type) else ctrl.filters.get(h.topic, h.consumerGroup)
            body.filterData = jsonbody.dumps(data.to_json()).decode() if data else "null"   # JSON.toJSONString
    if not cq.min_offset <= h.index < cq.max_offset:
        return cmd.response(ResponseCode.SUCCESS, f"Index {h.index} of {h.queueId}@{h.topic} is not exist!")
    units = cq.units(h.index, max(h.count, 0))
    cols = [units[k].tolist() for k in ("offset", "size", "tags_code")] if len(units) else [[], [], []]
    body.queueData = [ConsumeQueueData(off, size, code) for off, size, code in zip(*cols)]
    return ok(cmd, body)


async def clone_group_offset(ctrl, conn, cmd):
    """CLONE_GROUP_OFFSET: copy srcGroup's offsets to destGroup (what an online srcGroup subscribes to, unless offline)."""
    h = from_ext_fields(CloneGroupOffsetRequestHeader, cmd.ext_fields)
    topics = [h.topic] if h.topic and h.topic.strip() else sorted(ctrl.offsets.topics_of_group(h.srcGroup))
    for topic in topics:
        if ctrl.topics.get(topic) is None:
            log.warning("[cloneGroupOffset], topic config not exist, %s", topic)
            continue
        if not h.offline and online_subscribes_elsewhere(ctrl, h.srcGroup, topic):
            continue
        for qid, off in dict(ctrl.offsets.table.get(f"{topic}@{h.srcGroup}", {})).items():
            ctrl.offsets.commit(h.destGroup, topic, qid, off)
    return cmd.response(ResponseCode.SUCCESS)


async def query_correction_offset(ctrl, conn, cmd):
    """QUERY_CORRECTION_OFFSET: per queue the lowest offset of any group but the filtered ones;
    Long.MAX_VALUE where compareGroup is behind it. (Java's queryMinOffsetInAllGroup also deletes
    the filtered groups' offsets from its table while looking: not copied.)"""
    h = from_ext_fields(QueryCorrectionOffsetHeader, cmd.ext_fields)
    skip = {g for g in (h.filterGroups or "").split(",") if g}
    low: dict[int, int] = {}
    for key, queues in list(ctrl.offsets.table.items()):
        topic, _, group = key.partition("@")
        if topic != h.topic or group in skip:
            continue
        for qid, off in queues.items():
            if off >= ctrl.store.min_offset(h.topic, qid):
                low[qid] = min(off, low.get(qid, off))
    for qid, off in ctrl.offsets.table.get(f"{h.topic}@{h.compareGroup}", {}).items():
        if qid in low:
            low[qid] = LONG_MAX if low[qid] > off else low[qid]
    body = QueryCorrectionOffsetBody(low)
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(body.to_json(), bare_int_keys=True))


# ---------------------------------------------------------------------- clean-ups and stats

async def clean_expired_consume_queue(ctrl, conn, cmd):
    log.warning("invoke cleanExpiredConsumeQueue start.")
    await asyncio.get_running_loop().run_in_executor(None, ctrl.store.clean_expired_queues)
    return cmd.response(ResponseCode.SUCCESS)


async def clean_unused_topic(ctrl, conn, cmd):
    """CLEAN_UNUSED_TOPIC: consume queues of topics the broker no longer has."""
    log.warning("invoke cleanUnusedTopic start.")
    destroy_unused_queues(ctrl)
    return cmd.response(ResponseCode.SUCCESS)


def destroy_unused_queues(ctrl) -> None:
    """DefaultMessageStore.cleanUnusedTopic: the consume queues of every topic without a config, but
    the schedule, op-half and LMQ queues, which have none (the commit log keeps the records). The
    half topic is kept too: Java gives it a config at its first transaction check, this broker never
    does, and its queue holds the transactions not yet committed or rolled back."""
    for topic in sorted(ctrl.store.topics() - set(ctrl.topics.table)):
        if topic not in (SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC, HALF_TOPIC) and not topic.startswith("%LMQ%"):
            ctrl.store.destroy_queues(topic)


async def delete_expired_commitlog(ctrl, conn, cmd):
    """DELETE_EXPIRED_COMMITLOG (executeDeleteFilesManually): run retention now, whatever deleteWhen says."""
    from mqtool_store.retention import delete_expired
    log.warning("invoke deleteExpiredCommitLog start.")
    await asyncio.get_running_loop().run_in_executor(None, lambda: delete_expired(ctrl.store, force=True))
    return cmd.response(ResponseCode.SUCCESS)


async def view_broker_stats(ctrl, conn, cmd):
    h = from_ext_fields(ViewBrokerStatsDataRequestHeader, cmd.ext_fields)
    data = ctrl.stats.key_stats(h.statsName, h.statsKey)
    if data is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"The stats <{h.statsName}> <{h.statsKey}> not exist")
    items = {k: BrokerStatsItem(v["sum"], v["tps"], v["avgpt"]) for k, v in data.items()}
    return ok(cmd, BrokerStatsData(items["statsMinute"], items["statsHour"], items["statsDay"]))


async def system_topics(ctrl, conn, cmd):
    """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: TopicValidator's fixed set, no broker address."""
    return ok(cmd, TopicList(sorted(SYSTEM_TOPICS)))


async def all_producer_info(ctrl, conn, cmd):
    """GET_ALL_PRODUCER_INFO: remoteIP is Netty's remoteAddress().toString(), "/ip:port"."""
    table = ProducerTableInfo({group: [ProducerInfo(c.client_id, f"/{c.channel.peer}", c.language, c.version,
                                                    c.last_update) for c in list(chans.values())]
                               for group, chans in sorted(ctrl.producers.groups.items())})
    return ok(cmd, table)


async def check_client_config(ctrl, conn, cmd):
    """CHECK_CLIENT_CONFIG (ClientManageProcessor.checkClientConfig): a TAG subscription is fine;
    any other type needs enablePropertyFilter and an expression that compiles (code 23 with the
    compile error as remark)."""
    body = jsonbody.loads(cmd.body) if cmd.body else None
    sub = body.get("subscriptionData") if isinstance(body, dict) else None
    if not isinstance(sub, dict):
        return cmd.response(ResponseCode.SUCCESS)
    expression_type = sub.get("expressionType")
    if is_tag_type(expression_type):
        return cmd.response(ResponseCode.SUCCESS)
    if not ctrl.config.enablePropertyFilter:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"The broker does not support consumer to filter message by {expression_type}")
    try:
        compile_filter(expression_type, sub.get("subString"))
    except FilterCompileError as exc:
        log.warning("CHECK_CLIENT_CONFIG from %s, group %s: %r does not compile: %s", conn.peer, body.get("group"),
                    sub.get("subString"), exc)
        return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, remark_of(exc))
    return cmd.response(ResponseCode.SUCCESS)


async def resume_check_half_message(ctrl, conn, cmd):
    """RESUME_CHECK_HALF_MESSAGE: put the half message back on queue 0 of the half topic with its check count 0."""
    from mqtool_store.codes import Prop
    from mqtool_store.messagestore import Message
    from mqtool_store.properties import format_properties
    h = from_ext_fields(ResumeCheckHalfMessageRequestHeader, cmd.ext_fields)
    try:
        _ip, _port, offset = decode_offset_msg_id(h.msgId or "")
        rec = ctrl.store.read(offset)
    except Exception:  # noqa: BLE001 - a bad id is answered as Java does
        rec = None
    if rec is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC.")
    props = dict(rec.properties)
    props[Prop.TRANSACTION_CHECK_TIMES] = "0"
    msg = Message(HALF_TOPIC, 0, rec.body, props, format_properties(props), rec.flag, rec.sys_flag,
                  rec.born_timestamp, (rec.born_ip, rec.born_port), rec.reconsume_times,
                  rec.prepared_transaction_offset)
    result = await ctrl.put(msg)
    if not result.ok:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
    return cmd.response(ResponseCode.SUCCESS)
