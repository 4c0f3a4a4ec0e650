"""QueryRoute (RouteActivity.queryRoute in Local mode): the name server's route of the topic, every
broker address given a gRPC port, queues numbered per QueueData, accept_message_types from the local
topic's `message.type` attribute. Also the topic checks every RPC shares (GrpcValidator.validateTopic).

5.3.3 gives every broker of the route the answering proxy's own port (each broker's proxy listens on
8081 of its own host). Brokers of one host need a port each (`cluster start` gives broker i
grpcServerPort + i), so mqtool asks each other broker of a route for its grpcServerPort
(GET_BROKER_CONFIG, remembered for a minute) and falls back to its own port when a broker does not
answer."""
from __future__ import annotations

import asyncio
import ipaddress
import time

from mqtool.broker.topics import check_topic_name
from mqtool.proxy.codes import ACCEPTS, MESSAGE_TYPE_ATTR, AddressScheme, Code, MessageType, Permission
from mqtool.proxy.context import ProxyError
from mqtool.proxy.descriptors import pb
from mqtool_remoting.bodies import TopicRouteData
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingError
from mqtool_store.codes import SYSTEM_TOPIC_PREFIX, SYSTEM_TOPICS

# TopicValidator.isSystemTopic at 5.3.3: 4.9.8's set and CHECKPOINT_TOPIC
PROXY_SYSTEM_TOPICS = SYSTEM_TOPICS | {"CHECKPOINT_TOPIC"}
NAMESRV_TIMEOUT_S = 3.0
PEER_PORT_TIMEOUT_S = 1.0
PEER_PORT_TTL_S = 60.0
_peer_ports: dict[str, tuple[float, int]] = {}     # broker address -> (when asked, its grpcServerPort)


def validate_topic(topic: str) -> None:
    problem = check_topic_name(topic)
    if problem:
        raise ProxyError(Code.ILLEGAL_TOPIC, problem)
    if topic in PROXY_SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX):
        raise ProxyError(Code.ILLEGAL_TOPIC, "cannot access system topic")


def topic_message_type(ctrl, topic: str) -> str | None:
    """The local topic's `message.type` (NORMAL when unset); None for a topic this broker lacks."""
    cfg = ctrl.topics.get(topic)
    if cfg is None:
        return None
    return (cfg.attributes or {}).get(MESSAGE_TYPE_ATTR, "NORMAL")


def accept_types(ctrl, topic: str) -> list[int]:
    kind = topic_message_type(ctrl, topic)
    return [int(t) for t in ACCEPTS.get(kind, [MessageType.MESSAGE_TYPE_UNSPECIFIED])]


async def name_server_route(ctrl, topic: str) -> TopicRouteData:
    last = "no name server configured"
    for addr in ctrl.config.namesrv_addrs:
        try:
            resp = await ctrl.namesrv_client.invoke(addr, RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, language="JAVA"), NAMESRV_TIMEOUT_S)
        except RemotingError as exc:
            last = f"name server {addr}: {exc}"
            continue
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {topic}")
        if resp.code != ResponseCode.SUCCESS:
            last = f"name server {addr}: {resp.remark}"
            continue
        return TopicRouteData.decode(resp.body)
    raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"cannot read the route of topic {topic}: {last}")


def endpoints(addr: str, grpc_port: int):
    host = addr.rpartition(":")[0].strip("[]")
    try:
        scheme = AddressScheme.IPv4 if ipaddress.ip_address(host).version == 4 else AddressScheme.IPv6
    except ValueError:
        scheme = AddressScheme.DOMAIN_NAME
    return pb.Endpoints(scheme=int(scheme), addresses=[pb.Address(host=host, port=grpc_port)])


def queue_permissions(read: int, write: int, perm: int) -> list[int]:
    """genMessageQueueFromQueueData: read-only, write-only, then read-write entries when perm is 6."""
    readable, writable = bool(perm & 4), bool(perm & 2)
    if readable and writable:
        rw = min(read, write)
        return ([Permission.READ] * (read - rw) + [Permission.WRITE] * (write - rw) + [Permission.READ_WRITE] * rw)
    if writable:
        return [Permission.WRITE] * write
    if readable:
        return [Permission.READ] * read
    return [Permission.NONE] * max(1, read, write)


async def peer_grpc_port(ctrl, addr: str, own_port: int) -> int:
    """The gRPC port of the broker at `addr`: this broker's own for itself, else what it says."""
    if addr == ctrl.config.broker_addr:
        return own_port
    now = time.monotonic()
    known = _peer_ports.get(addr)
    if known is not None and now - known[0] < PEER_PORT_TTL_S:
        return known[1]
    port = own_port
    try:
        from mqtool_remoting import javaprops
        resp = await ctrl.namesrv_client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG,
                                                                              language="JAVA"), PEER_PORT_TIMEOUT_S)
        if resp.code == ResponseCode.SUCCESS and resp.body:
            text = javaprops.loads(resp.body.decode("utf-8", "replace")).get("grpcServerPort", "")
            port = int(text) if text.strip().isdigit() else own_port
    except (RemotingError, OSError, asyncio.TimeoutError, ValueError):
        pass
    _peer_ports[addr] = (now, port)
    return port


async def message_queues(ctrl, topic: str, route: TopicRouteData, grpc_port: int) -> list:
    brokers = {b.brokerName: b for b in route.brokerDatas}
    accepts = accept_types(ctrl, topic)
    addrs = sorted({a for b in route.brokerDatas for a in b.brokerAddrs.values()})
    ports = dict(zip(addrs, await asyncio.gather(*(peer_grpc_port(ctrl, a, grpc_port) for a in addrs))))
    out = []
    for qd in route.queueDatas:
        bd = brokers.get(qd.brokerName)
        if bd is None:
            break                      # Java's loop stops here (break, not continue)
        for broker_id, addr in sorted(bd.brokerAddrs.items()):
            broker = pb.Broker(name=bd.brokerName, id=broker_id, endpoints=endpoints(addr, ports[addr]))
            for qid, perm in enumerate(queue_permissions(qd.readQueueNums, qd.writeQueueNums, qd.perm)):
                out.append(pb.MessageQueue(topic=pb.Resource(name=topic), id=qid, permission=int(perm),
                                           broker=broker, accept_message_types=accepts))
    return out


async def query_route(proxy, client, ctx, request):
    topic = request.topic.name
    validate_topic(topic)
    route = await name_server_route(proxy.ctrl, topic)
    queues = await message_queues(proxy.ctrl, topic, route, proxy.port)
    return pb.QueryRouteResponse(status=pb.Status(code=Code.OK, message="OK"), message_queues=queues)
