"""gRPC clients as the broker sees them: each is a channel in the broker's ProducerManager (group =
topic, as the 5.x proxy registers gRPC producers), with its last Settings and its Telemetry streams,
on which the broker's CHECK_TRANSACTION_STATE reaches it as a recover_orphaned_transaction_command."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from mqtool.broker.clients import ClientChannelInfo
from mqtool.proxy.context import RequestContext, version_ordinal
from mqtool_remoting.codes import RequestCode
from mqtool_remoting.errors import RemotingError

log = logging.getLogger("mqtool.proxy")


class GrpcChannel:
    """What the broker's managers and handlers use of a connection (peer, attrs, oneway), for one
    gRPC client id. A remoting request to it has no answer: gRPC clients are asked only through
    Telemetry."""

    def __init__(self, client_id: str, peer: str, on_check):
        self.client_id = client_id
        self.peer = peer
        self.peer_host = peer.rpartition(":")[0].strip("[]")
        port = peer.rpartition(":")[2]
        self.peer_port = int(port) if port.isdigit() else 0
        self.attrs: dict = {}
        self._on_check = on_check

    async def oneway(self, cmd) -> None:
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            self._on_check(self, cmd)

    async def request(self, cmd, timeout_s=None):
        raise RemotingError(f"{self.client_id} is a gRPC client: the broker cannot call it over remoting")

    def __repr__(self) -> str:
        return f"<GrpcChannel {self.client_id} {self.peer}>"


@dataclass
class GrpcClient:
    client_id: str
    channel: GrpcChannel
    language: str
    version: str
    settings: object = None                          # the effective Settings last answered
    topics: list[str] = field(default_factory=list)  # producer: the settings' topics (its producer groups)
    group: str = ""                                  # consumer: its group
    streams: list[asyncio.Queue] = field(default_factory=list)    # open Telemetry streams, newest last
    last_seen: float = field(default_factory=time.monotonic)
    settled: asyncio.Event = field(default_factory=asyncio.Event)   # set once Settings were answered


class GrpcClients:
    def __init__(self, ctrl, on_check):
        self.ctrl = ctrl
        self.table: dict[str, GrpcClient] = {}
        self._on_check = on_check

    def get(self, client_id: str) -> GrpcClient | None:
        return self.table.get(client_id)

    def ensure(self, ctx: RequestContext) -> GrpcClient:
        client = self.table.get(ctx.client_id)
        if client is None:
            client = GrpcClient(ctx.client_id, GrpcChannel(ctx.client_id, ctx.peer, self._on_check),
                                ctx.language or "JAVA", ctx.version)
            self.table[ctx.client_id] = client
        return client

    def register_producer(self, client: GrpcClient, topics: list[str]) -> None:
        """Settings and heartbeats: the client is a producer of group <topic> for each topic."""
        now = int(time.time() * 1000)
        for gone in set(client.topics) - set(topics):
            self.ctrl.producers.unregister(gone, client.channel)
        client.topics = list(topics)
        for topic in topics:
            self.ctrl.producers.register(topic, ClientChannelInfo(client.channel, client.client_id, client.language,
                                                                  version_ordinal(client.version), now))

    def remove(self, client_id: str) -> GrpcClient | None:
        client = self.table.pop(client_id, None)
        if client is not None:
            self.ctrl.producers.channel_closed(client.channel)
            self.ctrl.consumers.channel_closed(client.channel)
        return client

    def push(self, client: GrpcClient, command) -> bool:
        """A command to the client's newest Telemetry stream; False when it has none open."""
        if not client.streams:
            return False
        client.streams[-1].put_nowait(command)
        return True
