"""What producers, consumers and the admin API share: name servers, routes, the remoting client."""
from __future__ import annotations

import contextvars
import os
import random
import socket
import time
from dataclasses import dataclass

from mqtool_remoting import jsonbody
from mqtool_remoting.acl import Credentials
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingCommandError, RemotingError
from mqtool_remoting.transport import RemotingClient

ROUTE_TTL_S = 30.0
DEFAULT_TIMEOUT_S = 3.0
# Credentials for clients built without any (the CLI sets them once per command: --access-key ...).
DEFAULT_CREDENTIALS: contextvars.ContextVar[Credentials | None] = contextvars.ContextVar("credentials", default=None)


@dataclass(frozen=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


@dataclass
class TopicRoute:
    topic: str
    brokers: dict[str, dict[int, str]]     # brokerName -> brokerId -> address
    queues: list[dict]
    fetched: float

    def master(self, broker_name: str) -> str | None:
        return self.brokers.get(broker_name, {}).get(0)

    def reader(self, broker_name: str, broker_id: int = 0) -> str | None:
        """findBrokerAddressInSubscribe: the suggested broker, else the master, else any slave
        (a broker group whose master is down is still read from its slave)."""
        addrs = self.brokers.get(broker_name, {})
        for bid in (broker_id, 0, *sorted(addrs)):
            if bid in addrs:
                return addrs[bid]
        return None

    def all_addrs(self) -> set[str]:
        return {a for addrs in self.brokers.values() for a in addrs.values()}

    def write_queues(self) -> list[MessageQueue]:
        """The queues a producer may send to (worked out once per route: a route is replaced, not changed)."""
        cached = self.__dict__.get("_write_queues")
        if cached is not None:
            return cached
        out = []
        for q in sorted(self.queues, key=lambda q: q["brokerName"]):
            if q.get("perm", 6) & 2 and self.master(q["brokerName"]):
                out += [MessageQueue(self.topic, q["brokerName"], i) for i in range(q["writeQueueNums"])]
        self.__dict__["_write_queues"] = out
        return out

    def read_queues(self) -> list[MessageQueue]:
        out = []
        for q in sorted(self.queues, key=lambda q: q["brokerName"]):
            if q.get("perm", 6) & 4:
                out += [MessageQueue(self.topic, q["brokerName"], i) for i in range(q["readQueueNums"])]
        return out


def client_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


class ClientBase:
    """`credentials` (plain ACL) sign every request, to name servers and brokers alike, as the Java
    client's AclClientRPCHook does; without them, DEFAULT_CREDENTIALS, else requests go unsigned."""

    def __init__(self, namesrv: str, timeout_s: float = DEFAULT_TIMEOUT_S, instance: str | None = None,
                 credentials: Credentials | None = None):
        self.namesrv_addrs = [a.strip() for a in namesrv.split(";") if a.strip()]
        if not self.namesrv_addrs:
            raise RemotingError("no name server address given (-n HOST:PORT)")
        self.timeout_s = timeout_s
        self.credentials = credentials or DEFAULT_CREDENTIALS.get()
        self.remoting = RemotingClient(self.on_request, self.credentials.sign if self.credentials else None)
        self.routes: dict[str, TopicRoute] = {}
        self.client_id = f"{client_ip()}@{instance or f'{os.getpid()}#{time.monotonic_ns()}'}"
        self.tracer = None          # a TraceDispatcher (mqtool/client/trace.py) the producer or consumer is given

    async def on_request(self, conn, cmd):
        """Requests the broker sends us; subclasses answer the ones they know."""
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request {cmd.code} not supported by client")

    async def invoke_namesrv(self, cmd: RemotingCommand) -> RemotingCommand:
        last: Exception | None = None
        for addr in random.sample(self.namesrv_addrs, len(self.namesrv_addrs)):
            try:
                return await self.remoting.invoke(addr, cmd, self.timeout_s)
            except RemotingError as exc:
                last = exc
        raise last

    async def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        r = self.routes.get(topic)
        if r is not None and not refresh and time.monotonic() - r.fetched < ROUTE_TTL_S:
            return r
        resp = await self.invoke_namesrv(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                 {"topic": topic}))
        if resp.code != ResponseCode.SUCCESS:
            raise RemotingCommandError(resp.code, resp.remark, f"route of topic {topic}")
        data = jsonbody.loads(resp.body)
        brokers = {b["brokerName"]: {int(k): v for k, v in b["brokerAddrs"].items()} for b in data.get("brokerDatas", [])}
        r = self.routes[topic] = TopicRoute(topic, brokers, data.get("queueDatas", []), time.monotonic())
        return r

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        return await self.remoting.invoke(addr, cmd, timeout_s or self.timeout_s)

    async def close(self) -> None:
        if self.tracer is not None:
            await self.tracer.close()          # the trace records still batched go out first
        await self.remoting.close()


def check(resp: RemotingCommand, what: str, ok=(ResponseCode.SUCCESS,)) -> RemotingCommand:
    if resp.code not in ok:
        raise RemotingCommandError(resp.code, resp.remark, what)
    return resp
