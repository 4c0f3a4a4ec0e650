"""The gRPC endpoint: apache.rocketmq.v2.MessagingService on the broker's own event loop (h2server.py:
mqtool's own HTTP/2, a call a task), so every handler calls into the broker (its store, topics, producers)
as the remoting handlers do, with no thread hop and no lock. Off unless enableProxy=true
(`mqtool broker start --enable-proxy`), on grpcServerPort (8081): plaintext, TLS, or both on the one
port (tlsServerMode, tls.py).

Served: QueryRoute, Heartbeat, SendMessage, EndTransaction, Telemetry (Settings; orphaned-transaction
recovery), NotifyClientTermination, RecallMessage, and for consumers QueryAssignment, ReceiveMessage,
AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue over the broker's POP. PullMessage,
UpdateOffset, GetOffset and QueryOffset are UNIMPLEMENTED as in 5.3.3."""
from __future__ import annotations

import asyncio
import logging
import os
import time

from mqtool.broker.acl.perms import PUB, SUB, retry_topic
from mqtool.proxy import ack, auth, consumer, recall, receive, renew, route, send, settings, transaction
from mqtool.proxy.clients import GrpcClients
from mqtool.proxy.codes import ClientType, Code, named
from mqtool.proxy.context import ProxyError, from_metadata, require_client_id
from mqtool.proxy.descriptors import SERVICE, pb
from mqtool.proxy.h2server import BIDI, SERVER_STREAM, UNARY, GrpcServer, Method
from mqtool.proxy.tls import tls_context, tls_mode
from mqtool_remoting.codes import RequestCode
from mqtool_remoting.grpcwire import StatusCode

log = logging.getLogger("mqtool.proxy")
CLIENT_EXPIRED_MS = 120_000          # a client with no stream and no request for this long is forgotten
SWEEP_S = 10.0
UNSERVED = ("PullMessage", "UpdateOffset", "GetOffset", "QueryOffset")   # as in 5.3.3's proxy


def _reads(request) -> dict:
    """A consumer RPC needs SUB on its topic and its group (as `%RETRY%<group>`), as POP does over remoting."""
    group = request.group.name if request.HasField("group") else ""
    topic = request.message_queue.topic.name if hasattr(request, "message_queue") else request.topic.name
    return {topic: SUB, retry_topic(group): SUB}


def _ok():
    return pb.Status(code=Code.OK, message="OK")


async def heartbeat(proxy, client, ctx, request):
    if client.settings is None:
        raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
    kind = named(ClientType, client.settings.client_type)
    if kind == ClientType.PRODUCER:
        proxy.clients.register_producer(client, client.topics)
    elif kind in (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER):
        if client.settings.HasField("subscription"):
            consumer.register(proxy, client, client.settings)
    else:
        raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, f"unknown client type: {getattr(kind, 'name', kind)}")
    return pb.HeartbeatResponse(status=_ok())


async def notify_client_termination(proxy, client, ctx, request):
    if client.settings is None:
        raise ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
    proxy.clients.remove(client.client_id)
    return pb.NotifyClientTerminationResponse(status=_ok())


class GrpcProxy:
    def __init__(self, ctrl):
        self.ctrl = ctrl
        self.clients = GrpcClients(ctrl, self._check_transaction)
        self.transactions = transaction.TransactionData()
        self.renewals = renew.Renewals(self)
        self.server: GrpcServer | None = None
        self.port = 0
        self._tasks: list[asyncio.Task] = []

    async def start(self, host: str, port: int) -> "GrpcProxy":
        """grpcServerPort in the mode tls_mode gives: `disabled` plaintext, `enforcing` TLS, `permissive` both."""
        cfg = self.ctrl.config
        try:
            mode = tls_mode(cfg)
            tls = None if mode == "disabled" else tls_context(cfg)
        except ValueError as exc:
            raise OSError(str(exc)) from None
        self.server = GrpcServer(self._handlers(), cfg.grpcMaxInboundMessageSize)
        try:
            self.port = await self.server.listen(host, port, tls, permissive=mode == "permissive")
        except OSError as exc:
            await self.stop()
            reason = os.strerror(exc.errno).lower() if exc.errno else exc   # "address already in use"
            raise OSError(f"cannot listen on grpcServerPort {port}: {reason}") from None
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._sweep()), loop.create_task(self.renewals.run())]
        log.info("gRPC endpoint (RocketMQ 5 clients, proxy Local mode) listening on %s:%d (%s)", host, self.port,
                 {"permissive": "plaintext and TLS", "enforcing": "TLS", "disabled": "plaintext"}[mode])
        return self

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for client in list(self.clients.table.values()):
            for stream in client.streams:
                stream.put_nowait(None)
        if self.server is not None:
            await self.server.stop(grace=1.0)

    # ------------------------------------------------------------------ the method table

    def _handlers(self) -> dict:
        h = {
            "QueryRoute": self._unary(route.query_route, pb.QueryRouteRequest, pb.QueryRouteResponse),
            "Heartbeat": self._unary(heartbeat, pb.HeartbeatRequest, pb.HeartbeatResponse),
            "SendMessage": self._unary(send.send_message, pb.SendMessageRequest, pb.SendMessageResponse,
                                       RequestCode.SEND_MESSAGE, lambda r: {m.topic.name: PUB for m in r.messages}),
            "EndTransaction": self._unary(transaction.end_transaction, pb.EndTransactionRequest,
                                          pb.EndTransactionResponse, RequestCode.END_TRANSACTION,
                                          lambda r: {r.topic.name: PUB}),
            "NotifyClientTermination": self._unary(notify_client_termination, pb.NotifyClientTerminationRequest,
                                                   pb.NotifyClientTerminationResponse),
            "Telemetry": Method(BIDI, self._telemetry, pb.TelemetryCommand.FromString,
                                pb.TelemetryCommand.SerializeToString),
            "QueryAssignment": self._unary(consumer.query_assignment, pb.QueryAssignmentRequest,
                                           pb.QueryAssignmentResponse, RequestCode.POP_MESSAGE, _reads),
            "ReceiveMessage": Method(SERVER_STREAM, self._receive, pb.ReceiveMessageRequest.FromString,
                                     pb.ReceiveMessageResponse.SerializeToString),
            "AckMessage": self._unary(ack.ack_message, pb.AckMessageRequest, pb.AckMessageResponse,
                                      RequestCode.ACK_MESSAGE, _reads),
            "ChangeInvisibleDuration": self._unary(ack.change_invisible_duration, pb.ChangeInvisibleDurationRequest,
                                                   pb.ChangeInvisibleDurationResponse,
                                                   RequestCode.CHANGE_MESSAGE_INVISIBLETIME, _reads),
            "ForwardMessageToDeadLetterQueue": self._unary(
                ack.forward_message_to_dlq, pb.ForwardMessageToDeadLetterQueueRequest,
                pb.ForwardMessageToDeadLetterQueueResponse, RequestCode.CONSUMER_SEND_MSG_BACK, _reads),
            "RecallMessage": self._unary(recall.recall_message, pb.RecallMessageRequest, pb.RecallMessageResponse,
                                         RequestCode.RECALL_MESSAGE, lambda r: {r.topic.name: PUB}),
        }
        for method in UNSERVED:
            h[method] = Method(UNARY, self._unserved(method), bytes, bytes)
        return {f"/{SERVICE}/{name}".encode(): method for name, method in h.items()}

    def _context(self, context, code: int = RequestCode.HEART_BEAT, needed: dict | None = None):
        """The request's metadata, checked: a client id, and with aclEnable the signature and the
        permissions `needed` (resource -> PUB/SUB) as the remoting request `code` would need them."""
        ctx = from_metadata(context.invocation_metadata(), context.peer())
        require_client_id(ctx)
        if self.ctrl.acl is not None:
            auth.check_acl(ctx, self.ctrl.acl.manager, code, needed or {})
        return ctx

    def _unary(self, fn, request_class, response_class, code: int = RequestCode.HEART_BEAT, needs=None):
        async def handler(request, context):
            try:
                ctx = self._context(context, code, needs(request) if needs else None)
                client = self.clients.ensure(ctx)
                client.last_seen = time.monotonic()
                return await fn(self, client, ctx, request)
            except ProxyError as exc:
                return response_class(status=pb.Status(code=exc.code, message=exc.message))
            except Exception as exc:  # noqa: BLE001 - every failure is an answer, as 5.3.3's exception interceptor
                log.exception("gRPC %s failed", fn.__name__)
                return response_class(status=pb.Status(code=Code.INTERNAL_SERVER_ERROR, message=str(exc)))
        return Method(UNARY, handler, request_class.FromString, response_class.SerializeToString)

    @staticmethod
    def _unserved(method: str):
        async def handler(request, context):
            await context.abort(StatusCode.UNIMPLEMENTED, f"{method} is not implemented, as in RocketMQ 5.3.3's "
                                "proxy")
        return handler

    async def _receive(self, request, context):
        """ReceiveMessage: a stream of status, messages, delivery timestamp (receive.py)."""
        try:
            ctx = self._context(context, RequestCode.POP_MESSAGE, _reads(request))
        except ProxyError as exc:
            yield pb.ReceiveMessageResponse(status=pb.Status(code=exc.code, message=exc.message))
            return
        client = self.clients.ensure(ctx)
        client.last_seen = time.monotonic()
        try:
            async for item in receive.receive_message(self, client, ctx, request, context):
                yield item
        except Exception as exc:  # noqa: BLE001 - an answer, as every other RPC's failures
            if isinstance(exc, asyncio.CancelledError):
                raise
            log.exception("gRPC ReceiveMessage failed")
            yield pb.ReceiveMessageResponse(status=pb.Status(code=Code.INTERNAL_SERVER_ERROR, message=str(exc)))

    # ------------------------------------------------------------------ Telemetry

    async def _telemetry(self, request_iterator, context):
        try:
            ctx = self._context(context)
        except ProxyError as exc:
            await context.abort(StatusCode.INVALID_ARGUMENT, exc.message)
            return
        client = self.clients.ensure(ctx)
        queue: asyncio.Queue = asyncio.Queue()
        client.streams.append(queue)

        async def read():
            try:
                async for command in request_iterator:
                    if command.HasField("settings"):
                        queue.put_nowait(self._settings(client, command.settings))
            finally:
                queue.put_nowait(None)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, settings.SettingsStreamError):
                    code = StatusCode.INVALID_ARGUMENT if 40000 <= item.code < 50000 else StatusCode.INTERNAL
                    await context.abort(code, str(item))
                await context.write(item)
        finally:
            reader.cancel()
            if queue in client.streams:
                client.streams.remove(queue)
            client.last_seen = time.monotonic()

    def _settings(self, client, given):
        try:
            effective = settings.answer(self.ctrl, given)
        except settings.SettingsStreamError as exc:
            return exc
        client.settings = effective
        client.settled.set()
        if self.clients.get(client.client_id) is not client:
            pass                    # NotifyClientTermination came first: a late Settings registers nothing
        elif settings.is_producer(effective):
            self.clients.register_producer(client, [t.name for t in effective.publishing.topics])
        elif effective.HasField("subscription"):
            consumer.register(self, client, effective)
        return pb.TelemetryCommand(status=_ok(), settings=effective)

    def _check_transaction(self, channel, cmd) -> None:
        """The broker's CHECK_TRANSACTION_STATE to a gRPC producer of the half message's topic."""
        client = self.clients.get(channel.client_id)
        if client is None:
            return
        try:
            command = transaction.recover_command(self, cmd)
        except Exception:  # noqa: BLE001
            log.exception("cannot turn a transaction check into a gRPC command for %s", channel.client_id)
            return
        if not self.clients.push(client, command):
            log.info("transaction check for %s: the client has no Telemetry stream open", channel.client_id)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            now = time.monotonic()
            for client in list(self.clients.table.values()):
                if not client.streams and (now - client.last_seen) * 1000 > CLIENT_EXPIRED_MS:
                    self.clients.remove(client.client_id)
