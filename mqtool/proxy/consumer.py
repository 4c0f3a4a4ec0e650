"""gRPC consumers as the broker sees them, and where they may read: a SimpleConsumer or PushConsumer
is a channel of its group in the broker's ConsumerManager (CONSUME_ACTIVELY / CONSUME_PASSIVELY,
CLUSTERING, as ClientActivity registers it), so `mqtool consumer connections` lists it; and
QueryAssignment (RouteActivity.queryAssignment, rocketmq5.md 3.10)."""
from __future__ import annotations

import logging
import re
import time

from mqtool.broker.clients import ClientChannelInfo
from mqtool.broker.subscriptions import SYSTEM_GROUPS
from mqtool.common.subscription import Subscription
from mqtool.proxy import route
from mqtool.proxy.codes import ClientType, Code, Permission, named
from mqtool.proxy.context import ProxyError, version_ordinal
from mqtool.proxy.descriptors import pb

log = logging.getLogger("mqtool.proxy")
GROUP_MAX_LENGTH = 255                    # Validators.CHARACTER_MAX_LENGTH
_VALID_GROUP = re.compile(r"^[%|a-zA-Z0-9_-]+$")
SQL, TAG = 2, 1                           # FilterType


def validate_group(group: str) -> None:
    """GrpcValidator.validateConsumerGroup."""
    if not group.strip():
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "consumerGroup cannot be blank")
    if len(group) > GROUP_MAX_LENGTH:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, f"consumerGroup {group!r} is longer than {GROUP_MAX_LENGTH}")
    if not _VALID_GROUP.match(group):
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, f"consumerGroup {group!r} contains illegal characters")
    if group in SYSTEM_GROUPS:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def expression_type(expr) -> str:
    return "SQL92" if expr.type == SQL else "TAG"


def subscriptions(settings) -> list[Subscription]:
    version = int(time.time() * 1000)
    return [Subscription.parse(e.topic.name, e.expression.expression or "*", version, expression_type(e.expression))
            for e in settings.subscription.subscriptions]


def register(proxy, client, settings) -> None:
    """Settings and heartbeats of a consumer: the client is a channel of its group."""
    ctrl = proxy.ctrl
    group = settings.subscription.group.name
    kind = named(ClientType, settings.client_type)
    consume_type = "CONSUME_ACTIVELY" if kind == ClientType.SIMPLE_CONSUMER else "CONSUME_PASSIVELY"
    if client.group and client.group != group:
        ctrl.consumers.unregister(client.group, client.channel)
    client.group = group
    subs = subscriptions(settings)
    info = ClientChannelInfo(client.channel, client.client_id, client.language, version_ordinal(client.version),
                             int(time.time() * 1000))
    ctrl.consumers.register(group, info, consume_type, "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", subs)
    for note in ctrl.filters.register(group, subs, info.last_update):        # SQL92 subscriptions
        log.warning("%s", note)


def _permission(perm: int) -> Permission:
    readable, writable = bool(perm & 4), bool(perm & 2)
    if readable and writable:
        return Permission.READ_WRITE
    return Permission.READ if readable else (Permission.WRITE if writable else Permission.NONE)


async def query_assignment(proxy, client, ctx, request):
    topic, group = request.topic.name, request.group.name
    route.validate_topic(topic)
    validate_group(group)
    ctrl = proxy.ctrl
    data = await route.name_server_route(ctrl, topic)
    group_cfg = ctrl.groups.find(group)
    orderly = bool(group_cfg is not None and group_cfg.consumeMessageOrderly)
    brokers = {b.brokerName: b for b in data.brokerDatas}
    assignments = []
    for qd in data.queueDatas:
        if not qd.perm & 4 or qd.readQueueNums <= 0:
            continue
        bd = brokers.get(qd.brokerName)
        master = bd.brokerAddrs.get(0) if bd is not None else None
        if master is None:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"broker {qd.brokerName} has no master in the route of {topic}")
        port = await route.peer_grpc_port(ctrl, master, proxy.port)
        broker = pb.Broker(name=qd.brokerName, id=0, endpoints=route.endpoints(master, port))
        for qid in (range(qd.readQueueNums) if orderly else (-1,)):
            queue = pb.MessageQueue(topic=pb.Resource(name=topic), id=qid, permission=int(_permission(qd.perm)),
                                    broker=broker)
            assignments.append(pb.Assignment(message_queue=queue))
    if not assignments:
        raise ProxyError(Code.FORBIDDEN, "no readable queue")
    return pb.QueryAssignmentResponse(status=pb.Status(code=Code.OK, message="OK"), assignments=assignments)
