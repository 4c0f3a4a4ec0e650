"""Server-side rebalance for RocketMQ 5 remoting consumers (5.3.3 QueryAssignmentProcessor; rocketmq5.md
2.1, 2.2): QUERY_ASSIGNMENT answers which queues of a topic a client of a group takes and whether it
pulls or pops them; SET_MESSAGE_REQUEST_MODE (mqadmin setConsumeMode) sets that per topic and group
(`requestmode.py`). The topic's queues are every broker's, from the name server's route.

Java answers SUCCESS whatever happens: a topic with no route, a group with no online client, an
unknown strategy or a client that is not in its group give a body with no `messageQueueAssignments`
(the client keeps what it had) or an empty list (the client drops its queues); only a body it cannot
read is an error.
"""
from __future__ import annotations

import asyncio
import logging
import time

from mqtool_remoting import jsonbody
from mqtool_remoting.bodies import TopicRouteData
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingError
from mqtool_store.codes import RETRY_GROUP_TOPIC_PREFIX

from mqtool.broker.clients import MESSAGE_MODELS, enum_name
from mqtool.broker.pop.requestmode import POP, PULL, RequestMode
from mqtool.common.allocate import STRATEGIES, AllocateError, check

log = logging.getLogger("mqtool.broker")

LMQ_PREFIX, LMQ_QUEUE_ID = "%LMQ%", 0
ROUTE_TIMEOUT_S = 3.0                  # TopicRouteInfoManager.GET_TOPIC_ROUTE_TIMEOUT

# a queue is (topic, brokerName, queueId): tuples sort as MessageQueue.compareTo does


def allocate_for_pop(strategy, cid: str, mq_all: list, cid_all: list[str], share: int) -> list:
    """allocate4Pop: with popShareQueueNum <= 0 or >= clients - 1 every client pops every broker's
    queues (queueId -1); else its own queues and those of the `share` clients after it in the
    (sorted) client list, or, with more clients than queues, one queue each, round the queues."""
    if share <= 0 or share >= len(cid_all) - 1:
        return [(topic, broker, -1) for topic, broker, _ in mq_all]
    if len(cid_all) <= len(mq_all):
        result = strategy(cid, mq_all, cid_all)
        if cid in cid_all:
            index = cid_all.index(cid)
            for _ in range(share):
                index = (index + 1) % len(cid_all)
                result += strategy(cid_all[index], mq_all, cid_all)
        return result
    if not check(cid, mq_all, cid_all):
        return []
    return [mq_all[cid_all.index(cid) % len(mq_all)]]


def subscribe_queues(topic: str, route: TopicRouteData) -> set[tuple[str, str, int]]:
    """topicRouteData2TopicSubscribeInfo: each readable QueueData's read queues."""
    return {(topic, qd.brokerName, i) for qd in route.queueDatas if qd.perm & 4 for i in range(qd.readQueueNums)}


class SubscribeInfo:
    """TopicRouteInfoManager's topicSubscribeInfoTable: a topic's queues across the cluster, read from
    the name server when first asked (or found empty) and again once loadBalancePollNameServerInterval
    has passed (Java refreshes every known topic on that period in the background)."""

    def __init__(self, ctrl):
        self.ctrl = ctrl
        self.table: dict[str, tuple[set, float]] = {}

    async def get(self, topic: str) -> set | None:
        cached = self.table.get(topic)
        age_ms = (time.monotonic() - cached[1]) * 1000 if cached else 0
        if not cached or not cached[0] or age_ms >= self.ctrl.config.loadBalancePollNameServerInterval:
            await self._update(topic)
            cached = self.table.get(topic)
        return cached[0] if cached else None

    async def _update(self, topic: str) -> None:
        for addr in self.ctrl.config.namesrv_addrs:
            try:
                resp = await self.ctrl.namesrv_client.invoke(addr, RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, language="JAVA"), ROUTE_TIMEOUT_S)
            except RemotingError as exc:
                log.warning("QueryLoad: route of %s from name server %s: %s", topic, addr, exc)
                continue
            if resp.code == ResponseCode.TOPIC_NOT_EXIST:
                if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):    # cleanNoneRouteTopic
                    self.table.pop(topic, None)
                return
            if resp.code == ResponseCode.SUCCESS:
                self.table[topic] = (subscribe_queues(topic, TopicRouteData.decode(resp.body)), time.monotonic())
                return
            log.warning("QueryLoad: route of %s from name server %s: %s %s", topic, addr, resp.code, resp.remark)


def _body(cmd: RemotingCommand, what: str) -> dict:
    body = jsonbody.loads(cmd.body) if cmd.body else None
    if not isinstance(body, dict):
        raise ValueError(f"{what} needs a JSON object body")
    return body


def _required(body: dict, key: str, what: str) -> str:
    value = body.get(key)
    if value is None:               # Java: a NullPointerException, answered SYSTEM_ERROR
        raise ValueError(f"{what}: {key} is null")
    return str(value)


def request_mode(ctrl, topic: str, group: str) -> RequestMode:
    """The mode set for topic/group, else the broker's default (a retry topic: always PULL)."""
    mode = ctrl.pop.request_modes.get(topic, group)
    if mode is None:
        cfg = ctrl.config
        name = PULL if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else cfg.defaultMessageRequestMode
        mode = RequestMode(topic, group, name, cfg.defaultPopShareQueueNum if name == POP else 0)
    return mode


async def assigned_queues(ctrl, topic: str, group: str, cid: str | None, model: str, strategy_name,
                          mode: RequestMode) -> set | None:
    """doLoadBalance: the client's queues; None when there is no answer (the client keeps its own)."""
    info = ctrl.pop.subscribe_info
    if model == "BROADCASTING":
        queues = await info.get(topic)
        if queues is None:
            log.warning("QueryLoad: no assignment for group[%s], the topic[%s] does not exist.", group, topic)
        return queues
    if topic.startswith(LMQ_PREFIX):
        mq_set = {(topic, ctrl.config.brokerName, LMQ_QUEUE_ID)}
    else:
        mq_set = await info.get(topic)
    if mq_set is None:
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            log.warning("QueryLoad: no assignment for group[%s], the topic[%s] does not exist.", group, topic)
        return None
    if not ctrl.config.serverLoadBalancerEnable:
        return mq_set
    members = ctrl.consumers.get(group)
    if members is None:
        log.warning("QueryLoad: no assignment for group[%s] topic[%s], get consumer id list failed", group, topic)
        return None
    cid_all, mq_all = members.client_ids(), sorted(mq_set)
    strategy = STRATEGIES.get(strategy_name) if isinstance(strategy_name, str) else None
    if strategy is None:
        log.warning("QueryLoad: unsupported strategy [%s]", strategy_name)
        return None
    try:
        if mode.mode == POP:
            return set(allocate_for_pop(strategy, cid, mq_all, cid_all, mode.popShareQueueNum))
        return set(strategy(cid, mq_all, cid_all))
    except AllocateError as exc:
        log.warning("QueryLoad: no assignment for group[%s] topic[%s]: %s", group, topic, exc)
        return None


async def query_assignment(ctrl, conn, cmd):
    body = _body(cmd, "QUERY_ASSIGNMENT")
    topic = _required(body, "topic", "QUERY_ASSIGNMENT")
    group = _required(body, "consumerGroup", "QUERY_ASSIGNMENT")
    model = enum_name(_required(body, "messageModel", "QUERY_ASSIGNMENT"), MESSAGE_MODELS)
    if model not in MESSAGE_MODELS:
        raise ValueError(f"QUERY_ASSIGNMENT: messageModel {model!r} is not BROADCASTING or CLUSTERING")
    client_id = body.get("clientId")
    mode = request_mode(ctrl, topic, group)
    queues = await assigned_queues(ctrl, topic, group, None if client_id is None else str(client_id), model,
                                   body.get("strategyName"), mode)
    out = {}
    if queues is not None:
        out["messageQueueAssignments"] = [
            {k: v for k, v in (("messageQueue", {"brokerName": b, "queueId": q, "topic": t}),
                               ("mode", mode.mode)) if v is not None}
            for t, b, q in sorted(queues)]
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(out))


async def set_message_request_mode(ctrl, conn, cmd):
    mode = RequestMode.from_json(_body(cmd, "SET_MESSAGE_REQUEST_MODE"))
    if mode.topic is None:
        raise ValueError("SET_MESSAGE_REQUEST_MODE: topic is null")
    if mode.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return cmd.response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
    if ctrl.topics.get(mode.topic) is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{mode.topic}] not exist")
    if mode.consumerGroup is None:
        raise ValueError("SET_MESSAGE_REQUEST_MODE: consumerGroup is null")
    if ctrl.groups.find(mode.consumerGroup) is None:
        return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
    modes = ctrl.pop.request_modes
    modes.set(mode.topic, mode.consumerGroup, mode)
    await asyncio.get_running_loop().run_in_executor(None, modes.persist)
    return cmd.response(ResponseCode.SUCCESS)


async def all_message_request_modes(ctrl, conn, cmd):
    """GET_ALL_MESSAGE_REQUEST_MODE (AdminBrokerProcessor): the table as the file has it, compact;
    what a 5.3.3 slave copies from its master."""
    return cmd.response(ResponseCode.SUCCESS, None, None, ctrl.pop.request_modes.encode().encode())
