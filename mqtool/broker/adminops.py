"""The rest of AdminBrokerProcessor (4.9.8) that mqadmin and the dashboard use: who consumes a
topic, consume stats of the whole broker, consume queue units, group offset cloning, clean-ups,
stats data, producer tables, client checks, and the requests relayed to online consumers
(reset offsets, consumer status, running info, consume a message directly)."""
from __future__ import annotations

import asyncio

from mqtool.broker.topics import NOT_ALLOWED_SEND_TOPICS
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingError
from mqtool_remoting.headers import (CloneGroupOffsetRequestHeader, ConsumeMessageDirectlyResultRequestHeader,
                                     GetConsumeStatsInBrokerHeader, GetConsumerRunningInfoRequestHeader,
                                     QueryConsumeQueueRequestHeader, QueryConsumeTimeSpanRequestHeader,
                                     ResetOffsetRequestHeader, TopicRequestHeader, ViewBrokerStatsDataRequestHeader,
                                     from_ext_fields)
from mqtool_remoting.jsonbody import ObjectKey
from mqtool_store.msgid import decode_offset_msg_id

CLIENT_CALL_TIMEOUT_S = 5.0


def _mq(ctrl, topic: str, qid: int) -> ObjectKey:
    return ObjectKey(sorted({"brokerName": ctrl.config.brokerName, "queueId": qid, "topic": topic}.items()))


def _ok(cmd, body) -> RemotingCommand:
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(body))


def _store_time_at(ctrl, topic: str, qid: int, queue_offset: int) -> int:
    cq = ctrl.store.queues.get((topic, qid))
    if cq is None or not cq.min_offset <= queue_offset < cq.max_offset:
        return 0
    units = cq.units(queue_offset, 1)
    rec = ctrl.store.read(int(units["offset"][0])) if len(units) else None
    return rec.store_timestamp if rec else 0


# ---------------------------------------------------------------------- who consumes what

async def topic_consume_by_who(ctrl, conn, cmd):
    """QUERY_TOPIC_CONSUME_BY_WHO: online groups subscribed to the topic, and groups with offsets on it."""
    h = from_ext_fields(TopicRequestHeader, cmd.ext_fields)
    groups = {g for g, info in ctrl.consumers.groups.items() if h.topic in info.subscriptions}
    groups |= ctrl.offsets.groups_of_topic(h.topic)
    return _ok(cmd, {"groupList": sorted(groups)})


def _consume_stats(ctrl, group: str, topic: str) -> dict | None:
    cfg = ctrl.topics.get(topic)
    if cfg is None:
        return None
    table, diff = {}, 0
    for q in range(cfg.writeQueueNums):
        broker = ctrl.store.max_offset(topic, q)
        consumer = max(ctrl.offsets.query(group, topic, q), 0)
        last = _store_time_at(ctrl, topic, q, consumer - 1) if consumer > 0 else 0
        table[_mq(ctrl, topic, q)] = {"brokerOffset": broker, "consumerOffset": consumer, "lastTimestamp": last}
        diff += broker - consumer
    return {"consumeTps": 0.0, "offsetTable": table}, diff


async def broker_consume_stats(ctrl, conn, cmd):
    """GET_BROKER_CONSUME_STATS (mqadmin brokerConsumeStats): every group's stats per topic."""
    h = from_ext_fields(GetConsumeStatsInBrokerHeader, cmd.ext_fields)
    out, total = [], 0
    for group in sorted(ctrl.groups.table):
        per_topic = []
        for topic in sorted(ctrl.offsets.topics_of_group(group)):
            cfg = ctrl.topics.get(topic)
            if cfg is None or (h.isOrder and not cfg.order):
                continue
            info = ctrl.consumers.get(group)
            if info is not None and info.subscriptions and topic not in info.subscriptions:
                continue                      # an online group that no longer subscribes to it
            stats = _consume_stats(ctrl, group, topic)
            if stats is not None:
                per_topic.append(stats[0])
                total += stats[1]
        if per_topic:
            out.append({group: per_topic})
    return _ok(cmd, {"brokerAddr": ctrl.config.broker_addr, "consumeStatsList": out, "totalDiff": total})


async def consume_time_span(ctrl, conn, cmd):
    """QUERY_CONSUME_TIME_SPAN: per queue, the store times of its first and last message and of the group's position."""
    h = from_ext_fields(QueryConsumeTimeSpanRequestHeader, cmd.ext_fields)
    cfg = ctrl.topics.get(h.topic)
    if cfg is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
    spans = []
    for q in range(cfg.writeQueueNums):
        lo, hi = ctrl.store.min_offset(h.topic, q), ctrl.store.max_offset(h.topic, q)
        consumer = ctrl.offsets.query(h.group, h.topic, q)
        newest = _store_time_at(ctrl, h.topic, q, hi - 1)
        at = _store_time_at(ctrl, h.topic, q, consumer) if consumer >= 0 else 0
        spans.append({"consumeTimeStamp": at, "delayTime": max(0, newest - at) if at else 0,
                      "maxTimeStamp": newest, "messageQueue": _mq(ctrl, h.topic, q).as_dict(),
                      "minTimeStamp": _store_time_at(ctrl, h.topic, q, lo)})
    return _ok(cmd, {"consumeTimeSpanSet": spans})


async def query_consume_queue(ctrl, conn, cmd):
    """QUERY_CONSUME_QUEUE (mqadmin queryCq): raw units of one queue."""
    h = from_ext_fields(QueryConsumeQueueRequestHeader, cmd.ext_fields)
    cq = ctrl.store.queues.get((h.topic, h.queueId))
    if cq is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{h.topic}:{h.queueId} is not exist!")
    body = {"maxQueueIndex": cq.max_offset, "minQueueIndex": cq.min_offset, "queueData": []}
    if h.consumerGroup:
        sub = ctrl.consumers.subscription(h.consumerGroup, h.topic)
        if sub is not None:
            body["subscriptionData"] = sub.to_json()
    units = cq.units(h.index, max(h.count, 0)) if cq.min_offset <= h.index < cq.max_offset else []
    for off, size, code in zip(*(units[k].tolist() for k in ("offset", "size", "tags_code"))) if len(units) else ():
        body["queueData"].append({"bitMap": None, "eval": False, "extendDataJson": None, "msg": None,
                                  "physicOffset": off, "physicSize": size, "tagsCode": code})
    return _ok(cmd, body)


async def clone_group_offset(ctrl, conn, cmd):
    h = from_ext_fields(CloneGroupOffsetRequestHeader, cmd.ext_fields)
    topics = [h.topic] if h.topic else sorted(ctrl.offsets.topics_of_group(h.srcGroup))
    for topic in topics:
        if ctrl.topics.get(topic) is None:
            continue
        if not h.offline and ctrl.consumers.subscription(h.srcGroup, topic) is None:
            continue                           # Java clones only what the online group subscribes to
        src = ctrl.offsets.table.get(f"{topic}@{h.srcGroup}", {})
        for qid, off in dict(src).items():
            ctrl.offsets.commit(h.destGroup, topic, qid, off)
    return cmd.response(ResponseCode.SUCCESS)


# ---------------------------------------------------------------------- clean-ups and stats

async def clean_expired_consume_queue(ctrl, conn, cmd):
    ctrl.store.clean_expired_queues()
    return cmd.response(ResponseCode.SUCCESS)


async def clean_unused_topic(ctrl, conn, cmd):
    for topic in sorted(ctrl.store.topics() - set(ctrl.topics.table)):
        ctrl.store.destroy_queues(topic)
    return cmd.response(ResponseCode.SUCCESS)


async def delete_expired_files(ctrl, conn, cmd):
    """TRIGGER_DELETE_FILES / DELETE_EXPIRED_COMMITLOG: run retention now, whatever the hour (deleteWhen)."""
    from mqtool_store.retention import delete_expired
    await asyncio.get_running_loop().run_in_executor(None, lambda: delete_expired(ctrl.store, force=True))
    return cmd.response(ResponseCode.SUCCESS)


async def view_broker_stats(ctrl, conn, cmd):
    h = from_ext_fields(ViewBrokerStatsDataRequestHeader, cmd.ext_fields)
    data = ctrl.stats.key_stats(h.statsName, h.statsKey)
    if data is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"The stats <{h.statsName}> <{h.statsKey}> not exist")
    return _ok(cmd, data)


async def system_topics(ctrl, conn, cmd):
    names = {t for t in ctrl.topics.table if t in NOT_ALLOWED_SEND_TOPICS or t.startswith(("%RETRY%", "%DLQ%", "rmq_sys_"))}
    names |= {ctrl.config.brokerClusterName, ctrl.config.brokerName, "TBW102", "SELF_TEST_TOPIC", "BenchmarkTest"}
    return _ok(cmd, {"brokerAddr": ctrl.config.broker_addr, "topicList": sorted(n for n in names if n in ctrl.topics.table)})


async def all_producer_info(ctrl, conn, cmd):
    data = {group: [{"clientId": c.client_id, "language": c.language, "lastUpdateTimestamp": c.last_update,
                     "remoteIP": c.channel.peer, "version": c.version} for c in chans.values()]
            for group, chans in sorted(ctrl.producers.groups.items())}
    return _ok(cmd, {"data": data})


async def check_client_config(ctrl, conn, cmd):
    """CHECK_CLIENT_CONFIG: TAG subscriptions are fine; SQL92 needs enablePropertyFilter, which this broker lacks."""
    body = jsonbody.loads(cmd.body) if cmd.body else {}
    sub = body.get("subscriptionData") or {}
    kind = (sub.get("expressionType") or "TAG").upper()
    if kind != "TAG":
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            "The broker does not support consumer to filter message by SQL92")
    return cmd.response(ResponseCode.SUCCESS)


# ---------------------------------------------------------------------- relayed to consumers

async def _call_client(ctrl, group: str, client_id: str | None, request: RemotingCommand, cmd):
    info = ctrl.consumers.get(group)
    chans = [c for c in (info.channels.values() if info else []) if client_id in (None, c.client_id)]
    if not chans:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
    try:
        resp = await chans[0].channel.request(request, CLIENT_CALL_TIMEOUT_S)
    except RemotingError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> failed: {exc}")
    return cmd.response(resp.code, resp.remark, None, resp.body)


async def consumer_running_info(ctrl, conn, cmd):
    h = from_ext_fields(GetConsumerRunningInfoRequestHeader, cmd.ext_fields)
    req = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, cmd.ext_fields, language="JAVA")
    return await _call_client(ctrl, h.consumerGroup, h.clientId, req, cmd)


async def consume_message_directly(ctrl, conn, cmd):
    h = from_ext_fields(ConsumeMessageDirectlyResultRequestHeader, cmd.ext_fields)
    try:
        _ip, _port, offset = decode_offset_msg_id(h.msgId or "")
    except Exception:  # noqa: BLE001 - not an offset message id
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad message id {h.msgId!r}")
    data = ctrl.store.read_bytes(offset)
    if data is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"no message at offset {offset}")
    req = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, cmd.ext_fields, bytes(data), language="JAVA")
    return await _call_client(ctrl, h.consumerGroup, h.clientId, req, cmd)


async def reset_offset(ctrl, conn, cmd):
    """INVOKE_BROKER_TO_RESET_OFFSET (Broker2Client.resetOffset): each queue's offset at the time
    (-1: the end), pushed to every online consumer of the group with RESET_CONSUMER_CLIENT_OFFSET."""
    h = from_ext_fields(ResetOffsetRequestHeader, cmd.ext_fields)
    cfg = ctrl.topics.get(h.topic)
    if cfg is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"[reset-offset] topic config not exist, {h.topic}")
    table = {}
    for q in range(cfg.writeQueueNums):
        committed = ctrl.offsets.query(h.group, h.topic, q)
        if committed == -1:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{h.group}> not exist")
        at = ctrl.store.max_offset(h.topic, q) if h.timestamp == -1 else ctrl.store.offset_by_time(h.topic, q, h.timestamp)
        table[_mq(ctrl, h.topic, q)] = at if h.isForce or at < committed else committed
    info = ctrl.consumers.get(h.group)
    if info is None or not info.channels:
        return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, f"Consumer not online, so can not reset offset, "
                                                               f"Group: {h.group} Topic: {h.topic} Timestamp: {h.timestamp}")
    body = jsonbody.dumps({"offsetTable": table})
    for c in list(info.channels.values()):
        push = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                                       {"topic": h.topic, "group": h.group, "timestamp": h.timestamp,
                                        "isForce": h.isForce}, body, oneway=True, language="JAVA")
        try:
            await c.channel.oneway(push)
        except (RemotingError, OSError):
            pass
    return cmd.response(ResponseCode.SUCCESS, None, None, body)


async def consumer_status(ctrl, conn, cmd):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GET_CONSUMER_STATUS_FROM_CLIENT to each online consumer."""
    topic, group = cmd.ext_fields.get("topic", ""), cmd.ext_fields.get("group", "")
    client_addr = cmd.ext_fields.get("clientAddr")
    info = ctrl.consumers.get(group)
    if info is None or not info.channels:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{group}]")
    table = {}
    for c in list(info.channels.values()):
        if client_addr and client_addr not in (c.channel.peer, c.client_id):
            continue
        req = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
                                      {"topic": topic, "group": group}, language="JAVA")
        try:
            resp = await c.channel.request(req, CLIENT_CALL_TIMEOUT_S)
        except RemotingError:
            continue
        if resp.code == ResponseCode.SUCCESS and resp.body:
            table[c.client_id] = jsonbody.loads(resp.body).get("messageQueueTable", {})
    return _ok(cmd, {"consumerTable": table, "messageQueueTable": {}})


async def query_correction_offset(ctrl, conn, cmd):
    """QUERY_CORRECTION_OFFSET: per queue, the lowest offset any group (but the filtered ones) has;
    Long.MAX_VALUE where the compare group is behind it. (Java's version also deletes the filtered
    groups' offsets from its table while looking, a bug not copied here.)"""
    topic = cmd.ext_fields.get("topic", "")
    skip = {g for g in (cmd.ext_fields.get("filterGroups") or "").split(",") if g}
    low: dict[int, int] = {}
    for key, queues in list(ctrl.offsets.table.items()):
        t, _, group = key.partition("@")
        if t != topic or group in skip:
            continue
        for qid, off in queues.items():
            if off >= ctrl.store.min_offset(topic, qid):
                low[qid] = min(off, low.get(qid, off))
    compare = ctrl.offsets.table.get(f"{topic}@{cmd.ext_fields.get('compareGroup', '')}", {})
    for qid, off in compare.items():
        if qid in low:
            low[qid] = 2**63 - 1 if low[qid] > off else low[qid]
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps({"correctionOffsets": low}, bare_int_keys=True))


async def resume_check_half_message(ctrl, conn, cmd):
    """RESUME_CHECK_HALF_MESSAGE: put a half message back with its check count reset to 0."""
    from mqtool_store.codes import Prop
    from mqtool_store.messagestore import Message
    from mqtool_store.properties import format_properties
    try:
        _ip, _port, offset = decode_offset_msg_id(cmd.ext_fields.get("msgId") or "")
        rec = ctrl.store.read(offset)
    except Exception:  # noqa: BLE001 - a bad id is answered like Java: SYSTEM_ERROR
        rec = None
    if rec is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC.")
    props = dict(rec.properties)
    props[Prop.TRANSACTION_CHECK_TIMES] = "0"
    msg = Message(rec.topic, rec.queue_id, rec.body, props, format_properties(props), rec.flag, rec.sys_flag,
                  rec.born_timestamp, (rec.born_ip, rec.born_port), rec.reconsume_times,
                  rec.prepared_transaction_offset)
    result = await ctrl.put(msg)
    if not result.ok:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
    return cmd.response(ResponseCode.SUCCESS)
