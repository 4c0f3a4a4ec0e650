"""Admin requests: topics, subscription groups, stats, connections, broker config and runtime info."""
from __future__ import annotations

import json

from mqtool_remoting import javaprops
from mqtool.broker import topicattrs
from mqtool.broker.subscriptions import SubscriptionGroupConfig
from mqtool.broker.topics import TopicConfig, check_topic_name, is_system_topic
from mqtool_remoting import jsonbody
from mqtool_remoting.bodies import ConsumeStats
from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.headers import (ConsumerGroupHeader, CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader,
                              GetConsumeStatsRequestHeader, GetTopicConfigRequestHeader, ProducerGroupHeader,
                              TopicRequestHeader, from_ext_fields)


SLAVE_ADMIN_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."


def _topic_refusal(ctrl, cmd, topic: str):
    """AdminBrokerProcessor's checks before a topic is created or deleted: not on a slave, a valid
    name, not a system topic (TopicValidator)."""
    if ctrl.is_slave:
        return cmd.response(ResponseCode.SYSTEM_ERROR, SLAVE_ADMIN_REMARK)
    problem = check_topic_name(topic)
    if problem:
        return cmd.response(ResponseCode.SYSTEM_ERROR, problem)
    if is_system_topic(topic) or (ctrl.config.traceTopicEnable and topic == ctrl.config.msgTraceTopicName):
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
    return None


async def create_topic(ctrl, conn, cmd):
    h = from_ext_fields(CreateTopicRequestHeader, cmd.ext_fields)
    refused = _topic_refusal(ctrl, cmd, h.topic)
    if refused:
        return refused
    if h.topic == ctrl.config.brokerClusterName:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"the topic[{h.topic}] is conflict with system reserved words.")
    existing = ctrl.topics.get(h.topic)
    try:
        attrs = topicattrs.alter(existing.attributes if existing else None, h.attributes,
                                 ctrl.config.enableMixedMessageType)
    except topicattrs.TopicAttributeError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    ctrl.topics.update(TopicConfig(h.topic, h.readQueueNums, h.writeQueueNums, h.perm, h.topicFilterType or "SINGLE_TAG",
                                   h.topicSysFlag or 0, bool(h.order), attrs))
    await ctrl.registration.wait_registered()      # registerIncrementBrokerData, before the answer
    return cmd.response(ResponseCode.SUCCESS)


async def delete_topic(ctrl, conn, cmd):
    """DELETE_TOPIC_IN_BROKER: the config, the consume queues (cleanUnusedTopic) and, unlike 4.9.8,
    the group offsets of the topic, which would otherwise point into queues that are gone."""
    from mqtool.broker.adminops import destroy_unused_queues
    h = from_ext_fields(TopicRequestHeader, cmd.ext_fields)
    refused = _topic_refusal(ctrl, cmd, h.topic)
    if refused:
        return refused
    ctrl.topics.delete(h.topic)
    destroy_unused_queues(ctrl)
    ctrl.offsets.remove_topic(h.topic)
    return cmd.response(ResponseCode.SUCCESS)


def plain_json(obj) -> bytes:
    """jsonbody.dumps' bytes for a body of string keys, strings, numbers, booleans and lists only,
    by the json module's C encoder: 10,000 topic configs in ~20 ms instead of ~300 ms."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


async def all_topic_config(ctrl, conn, cmd):
    body = {"dataVersion": ctrl.topics.data_version.to_json(),
            "topicConfigTable": {k: v.to_json() for k, v in ctrl.topics.table.items()}}
    return cmd.response(ResponseCode.SUCCESS, None, None, plain_json(body))


async def topic_config(ctrl, conn, cmd):
    """GET_TOPIC_CONFIG (351, 5.x's AdminBrokerProcessor.getTopicConfig): one topic's config, so that a
    client keeping what a broker has for a topic does not fetch the whole table; 4.9.8 brokers answer it
    REQUEST_CODE_NOT_SUPPORTED. The body is 5.x's TopicConfigAndQueueMapping without a mapping (no
    static topics here), which is the TopicConfig's JSON."""
    h = from_ext_fields(GetTopicConfigRequestHeader, cmd.ext_fields)
    cfg = ctrl.topics.get(h.topic)
    if cfg is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}")
    return cmd.response(ResponseCode.SUCCESS, None, None, plain_json(cfg.to_json()))


async def topic_stats(ctrl, conn, cmd):
    h = from_ext_fields(TopicRequestHeader, cmd.ext_fields)
    cfg = ctrl.topics.get(h.topic)
    if cfg is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
    rows = []
    store = ctrl.store
    for q in range(cfg.writeQueueNums):
        last = 0
        mx = store.max_offset(h.topic, q)
        if mx > 0:
            res = store.get(h.topic, q, mx - 1, 1)
            if res.messages:
                last = int.from_bytes(res.messages[0][56:64], "big")
        rows.append((q, last, mx, store.min_offset(h.topic, q)))
    return cmd.response(ResponseCode.SUCCESS, None, None, topic_stats_body(ctrl.config.brokerName, h.topic, rows))


async def all_topic_offsets(ctrl, conn, cmd):
    """GET_ALL_TOPIC_OFFSETS (mqtool's own code): {"maxOffsets": {topic: [max offset of write queue 0,
    1, ...]}} for every topic, from one look-up per queue: `mqtool top` reads a 10,000-topic broker
    in one request (~40 ms here) instead of one GET_TOPIC_STATS_INFO per topic, each of which reads
    the last message of every queue for a timestamp top does not show."""
    queues = ctrl.store.queues               # drained once, not once per queue
    with ctrl.topics.lock:
        configs = list(ctrl.topics.table.values())
    table = {}
    for cfg in configs:
        topic = cfg.topicName
        table[topic] = [cq.max_offset if (cq := queues.get((topic, q))) is not None else 0
                        for q in range(cfg.writeQueueNums)]
    return cmd.response(ResponseCode.SUCCESS, None, None, plain_json({"maxOffsets": table}))


def topic_stats_body(broker: str, topic: str, rows) -> bytes:
    """TopicStatsTable as jsonbody.dumps writes it (MessageQueue keys as JSON objects), by string
    formatting: `mqtool top` asks it of every topic, and the general encoder took 1.5 ms of the
    broker's loop per topic (tests hold the two equal)."""
    b, t = json.dumps(broker, ensure_ascii=False), json.dumps(topic, ensure_ascii=False)
    return ('{"offsetTable":{' + ",".join(
        f'{{"brokerName":{b},"queueId":{q},"topic":{t}}}:{{"lastUpdateTimestamp":{last},"maxOffset":{mx},'
        f'"minOffset":{mn}}}' for q, last, mx, mn in rows) + "}}").encode()


async def create_group(ctrl, conn, cmd):
    if ctrl.is_slave:
        return cmd.response(ResponseCode.SYSTEM_ERROR, SLAVE_ADMIN_REMARK)
    data = jsonbody.loads(cmd.body)
    if not data.get("groupName"):
        return cmd.response(ResponseCode.SYSTEM_ERROR, "groupName is required")
    ctrl.groups.update(SubscriptionGroupConfig.from_json(data))
    return cmd.response(ResponseCode.SUCCESS)


async def all_groups(ctrl, conn, cmd):
    body = {"dataVersion": ctrl.groups.data_version.to_json(),
            "subscriptionGroupTable": {k: v.to_json() for k, v in ctrl.groups.table.items()}}
    return cmd.response(ResponseCode.SUCCESS, None, None, plain_json(body))


async def delete_group(ctrl, conn, cmd):
    if ctrl.is_slave:
        return cmd.response(ResponseCode.SYSTEM_ERROR, SLAVE_ADMIN_REMARK)
    h = from_ext_fields(DeleteSubscriptionGroupRequestHeader, cmd.ext_fields)
    ctrl.groups.delete(h.groupName)
    if h.removeOffset:
        ctrl.offsets.remove_group(h.groupName)
    return cmd.response(ResponseCode.SUCCESS)


async def consume_stats(ctrl, conn, cmd):
    """GET_CONSUME_STATS: one ConsumeStats over the group's topics (read queues), consumeTps summed."""
    from mqtool.broker.adminops import group_consume_stats, online_subscribes_elsewhere
    h = from_ext_fields(GetConsumeStatsRequestHeader, cmd.ext_fields)
    topics = [h.topic] if h.topic else sorted(ctrl.offsets.topics_of_group(h.consumerGroup))
    total = ConsumeStats()
    for topic in topics:
        cfg = ctrl.topics.get(topic)
        if cfg is None or online_subscribes_elsewhere(ctrl, h.consumerGroup, topic):
            continue
        stats = group_consume_stats(ctrl, h.consumerGroup, topic, cfg.readQueueNums)
        total.offsetTable.update(stats.offsetTable)
        total.consumeTps += stats.consumeTps
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(total.to_json()))


async def consumer_connections(ctrl, conn, cmd):
    h = from_ext_fields(ConsumerGroupHeader, cmd.ext_fields)
    g = ctrl.consumers.get(h.consumerGroup)
    if g is None:
        return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{h.consumerGroup}] not online")
    body = {"connectionSet": [{"clientAddr": c.channel.peer, "clientId": c.client_id, "language": c.language,
                               "version": c.version} for c in g.channels.values()],
            "consumeFromWhere": g.consume_from_where, "consumeType": g.consume_type,
            "messageModel": g.message_model,
            "subscriptionTable": {t: s.to_json() for t, s in g.subscriptions.items()}}
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(body))


async def producer_connections(ctrl, conn, cmd):
    h = from_ext_fields(ProducerGroupHeader, cmd.ext_fields)
    chans = ctrl.producers.groups.get(h.producerGroup)
    if not chans:                   # 4.9.8's AdminBrokerProcessor.getProducerConnectionList answers so
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producerGroup}] not exist")
    body = {"connectionSet": [{"clientAddr": c.channel.peer, "clientId": c.client_id, "language": c.language,
                               "version": c.version} for c in chans.values()]}
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(body))


async def get_broker_config(ctrl, conn, cmd):
    props = ctrl.all_properties()
    version = jsonbody.dumps(ctrl.topics.data_version.to_json()).decode()
    return cmd.response(ResponseCode.SUCCESS, None, {"version": version}, javaprops.dumps(props).encode())


async def update_broker_config(ctrl, conn, cmd):
    props = javaprops.loads(cmd.body.decode("utf-8", "replace"))
    try:
        unknown = ctrl.update_properties(props)
    except ValueError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    remark = "; ".join(unknown) or None      # one line for each key mqtool does not take
    return cmd.response(ResponseCode.SUCCESS, remark)
