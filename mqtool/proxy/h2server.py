"""mqtool's gRPC server: HTTP/2 (remoting/http2.py, hpack.py) and gRPC's framing (remoting/grpcwire.py)
on the broker's own event loop, one asyncio.Protocol a connection. Each call runs as a task that calls into
the broker directly; its answer is written when it returns, in one write.

A method is one of three kinds: `unary` (request -> response), `server_stream` (request -> async generator
of responses) and `bidi` (an async iterator of requests and the Call, which writes). A handler answers a
gRPC status other than OK by raising Abort (Call.abort). Plaintext and TLS (ALPN h2) may share a port:
`permissive` looks at a connection's first bytes before it picks (5.3.3's ProxyAndTlsProtocolNegotiator)."""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Callable

from mqtool_remoting import grpcwire, http2
from mqtool_remoting.grpcwire import GrpcWireError, StatusCode

log = logging.getLogger("mqtool.proxy")
UNARY, SERVER_STREAM, BIDI = "unary", "server_stream", "bidi"
TLS_HEADER = 5               # a TLS record header: type, version (2), length (2); Netty peeks as many
TLS_RECORD_TYPES = (20, 21, 22, 23, 24)   # change_cipher_spec, alert, handshake, application_data, heartbeat
PEEK_TIMEOUT_S = 120.0       # a connection that says nothing is closed (grpc's own handshake timeout)
WRITE_AHEAD = 1 << 20        # a streaming writer waits while this much of its stream waits for window


@dataclass(frozen=True)
class Method:
    kind: str
    fn: Callable
    decode: Callable[[bytes], object]
    encode: Callable[[object], bytes]


class Abort(Exception):
    def __init__(self, status: StatusCode, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def is_tls(head: bytes) -> bool:
    """SslHandler.isEncrypted's test of a TLS record header (its type, and its major version once there);
    an h2c connection starts with `PRI * HTTP/2.0`."""
    return bool(head) and head[0] in TLS_RECORD_TYPES and (len(head) < 2 or head[1] == 3)


def grpc_peer(peername) -> str:
    """A TCP peer as grpc writes it: `ipv4:127.0.0.1:5555`, `ipv6:[::1]:5555` (v4-mapped as ipv4)."""
    host, port = peername[0], peername[1]
    if ":" not in host:
        return f"ipv4:{host}:{port}"
    if host.startswith("::ffff:") and "." in host:
        return f"ipv4:{host[7:]}:{port}"
    return f"ipv6:[{host}]:{port}"


class Call:
    """One RPC: its metadata, peer and deadline, the request messages, and what the handler writes."""

    def __init__(self, conn: "_Connection", sid: int, headers: list, max_message: int):
        self.conn = conn
        self.sid = sid
        self.metadata: list[tuple[str, str]] = []
        self.deadline = None
        encoding = b""
        for name, value in headers:
            if name[:1] == b":" or name in (b"te", b"content-type"):
                continue
            if name == b"grpc-timeout":
                seconds = grpcwire.timeout_seconds(value)
                if seconds is not None:
                    self.deadline = time.monotonic() + seconds
                continue
            if name == b"grpc-encoding":
                encoding = value
            self.metadata.append((name.decode("latin-1"), value.decode("utf-8", "replace")))
        self.reader = grpcwire.MessageReader(max_message, encoding)
        self.requests: list[bytes] = []
        self.inbox: asyncio.Queue | None = None     # bidi: decoded requests, None at the end
        self.task: asyncio.Task | None = None
        self.method: Method | None = None
        self.started = False                         # response headers sent
        self.done = False

    # the parts of grpc's ServicerContext the handlers use
    def peer(self) -> str:
        return self.conn.peer

    def invocation_metadata(self):
        return self.metadata

    def time_remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    async def abort(self, status: StatusCode, message: str):
        raise Abort(status, message)

    async def write(self, response) -> None:
        """One streamed response; waits while the peer's window holds the stream back."""
        self.conn.send(self, self.method.encode(response))
        await self.conn.drained(self)


class _Connection(asyncio.Protocol):
    def __init__(self, server: "GrpcServer"):
        self.server = server
        self.h2 = http2.Connection()
        self.transport = None
        self.peer = ""
        self.calls: dict[int, Call] = {}
        self.waiters: dict[int, asyncio.Future] = {}
        self.paused: asyncio.Future | None = None
        self.flush_soon = False
        self.peer_gone = False      # the client sent GOAWAY: closed once its last call is answered

    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:        # asyncio leaves Nagle on for accepted sockets: a streamed answer's
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)     # trailers waited 40 ms
        self.peer = grpc_peer(transport.get_extra_info("peername"))
        self.server.connections.add(self)
        transport.write(self.h2.take())

    def connection_lost(self, exc) -> None:
        self.server.connections.discard(self)
        for call in list(self.calls.values()):
            self._cancel(call)
        self.calls.clear()
        for waiter in self.waiters.values():
            if not waiter.done():
                waiter.cancel()

    def pause_writing(self) -> None:
        self.paused = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.paused is not None and not self.paused.done():
            self.paused.set_result(None)
        self.paused = None

    def data_received(self, data: bytes) -> None:
        for event in self.h2.receive(data):
            kind = event[0]
            if kind is http2.DATA:
                call = self.calls.get(event[1])
                if call is not None:
                    self._data(call, event[2], event[3])
            elif kind is http2.REQUEST:
                self._request(event[1], event[2], event[3])
            elif kind is http2.RESET:
                call = self.calls.pop(event[1], None)
                if call is not None:
                    self._cancel(call)
            elif kind is http2.GOAWAY:
                self.peer_gone = True
            else:
                for call in list(self.calls.values()):
                    self._cancel(call)
                self.calls.clear()
        if self.waiters:
            for sid in [s for s in self.waiters if self.h2.blocked(s) < WRITE_AHEAD]:
                waiter = self.waiters.pop(sid)
                if not waiter.done():
                    waiter.set_result(None)
        out = self.h2.take()
        if out:
            self.transport.write(out)
        if self.h2.closed or (self.peer_gone and not self.calls):
            self.transport.close()

    def _request(self, sid: int, headers: list, end: bool) -> None:
        path = next((v for n, v in headers if n == b":path"), b"")
        method = self.server.methods.get(path)
        if method is None:
            self._trailers_only(sid, StatusCode.UNIMPLEMENTED, f"Method not found: {path.decode(errors='replace')}")
            return
        call = Call(self, sid, headers, self.server.max_message)
        call.method = method
        self.calls[sid] = call
        if method.kind is BIDI:
            call.inbox = asyncio.Queue()
            call.task = asyncio.get_running_loop().create_task(self._run(call, None))
        if end:
            self._data(call, b"", True)

    def _data(self, call: Call, payload: bytes, end: bool) -> None:
        try:
            messages = call.reader.feed(payload) if payload else ()
        except GrpcWireError as exc:
            self._finish(call, exc.status, str(exc))
            return
        if call.inbox is not None:
            for raw in messages:
                call.inbox.put_nowait(raw)
            if end:
                call.inbox.put_nowait(None)
            return
        call.requests.extend(messages)
        if end:
            if len(call.requests) != 1:
                self._finish(call, StatusCode.INTERNAL,
                             f"expected one request message, got {len(call.requests)}")
                return
            call.task = asyncio.get_running_loop().create_task(self._run(call, call.requests[0]))

    async def _run(self, call: Call, raw: bytes | None) -> None:
        method = call.method
        try:
            if method.kind is BIDI:
                await method.fn(self._inbox(call), call)
            else:
                try:
                    request = method.decode(raw)
                except Exception as exc:  # noqa: BLE001 - a malformed message is the client's error
                    raise Abort(StatusCode.INTERNAL, f"cannot parse the request: {exc}") from None
                if method.kind is UNARY:
                    answer = grpcwire.message(method.encode(await method.fn(request, call)))
                    if call.sid in self.calls:
                        self.calls.pop(call.sid)
                        call.done = True
                        self.h2.send_headers(call.sid, grpcwire.RESPONSE_HEADERS)
                        self.h2.send_data(call.sid, answer)
                        self.h2.send_headers(call.sid, grpcwire.trailers(StatusCode.OK), end_stream=True)
                        self._write()
                    return
                async for response in method.fn(request, call):
                    await call.write(response)
            self._finish(call, StatusCode.OK, "")
        except Abort as exc:
            self._finish(call, exc.status, exc.message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - grpc answers UNKNOWN for a handler's exception
            log.exception("gRPC call %s failed", call.sid)
            self._finish(call, StatusCode.UNKNOWN, f"Unexpected {type(exc).__name__}: {exc}")

    async def _inbox(self, call: Call):
        decode = call.method.decode
        while True:
            raw = await call.inbox.get()
            if raw is None:
                return
            yield decode(raw)

    def send(self, call: Call, payload: bytes) -> None:
        if call.done or call.sid not in self.calls:
            raise asyncio.CancelledError()
        if not call.started:
            call.started = True
            self.h2.send_headers(call.sid, grpcwire.RESPONSE_HEADERS)
        self.h2.send_data(call.sid, grpcwire.message(payload))
        self._write()

    async def drained(self, call: Call) -> None:
        if self.paused is not None:
            await asyncio.shield(self.paused)
        if self.h2.blocked(call.sid) >= WRITE_AHEAD:
            waiter = self.waiters.setdefault(call.sid, asyncio.get_running_loop().create_future())
            await waiter

    def _finish(self, call: Call, status: StatusCode, message: str) -> None:
        if call.done or self.calls.get(call.sid) is not call:
            return
        call.done = True
        del self.calls[call.sid]
        if call.started:
            self.h2.send_headers(call.sid, grpcwire.trailers(status, message), end_stream=True)
            self._write()
        else:
            self._trailers_only(call.sid, status, message)
        if call.inbox is not None and call.task is not None and not call.task.done() \
                and call.task is not asyncio.current_task():
            call.task.cancel()

    def _trailers_only(self, sid: int, status: StatusCode, message: str) -> None:
        self.h2.send_headers(sid, grpcwire.trailers(status, message, only=True), end_stream=True)
        self._write()

    def _cancel(self, call: Call) -> None:
        call.done = True
        if call.task is not None and not call.task.done():
            call.task.cancel()
        if call.inbox is not None:
            call.inbox.put_nowait(None)

    def _write(self) -> None:
        """What the calls wrote goes out once the loop turn ends: one write for all of it."""
        if not self.flush_soon:
            self.flush_soon = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self.flush_soon = False
        out = self.h2.take()
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(out)
            if self.peer_gone and not self.calls:
                self.transport.close()

    def goaway(self) -> None:
        self.h2.goaway()
        self._flush()


class GrpcServer:
    """Serves `methods` ({b"/package.Service/Method": Method}) on one TCP port."""

    def __init__(self, methods: dict[bytes, Method], max_message: int):
        self.methods = methods
        self.max_message = max_message
        self.connections: set[_Connection] = set()
        self._servers: list = []
        self._accept: asyncio.Task | None = None
        self._sock: socket.socket | None = None

    async def listen(self, host: str, port: int, tls: ssl.SSLContext | None = None, permissive: bool = False) -> int:
        """Bind and serve; the port bound. `permissive` takes plaintext and TLS (`tls`) on the port."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=1024, dualstack_ipv6=host == "::")
        loop = asyncio.get_running_loop()
        if permissive:
            self._sock.setblocking(False)
            self._accept = loop.create_task(self._accept_loop(tls))
        else:
            self._servers.append(await loop.create_server(lambda: _Connection(self), sock=self._sock, ssl=tls))
        return self._sock.getsockname()[1]

    async def _accept_loop(self, tls: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(self._sock)
            loop.create_task(self._sniff(conn, tls))

    async def _sniff(self, conn: socket.socket, tls: ssl.SSLContext) -> None:
        """Peek at the first bytes (they stay in the socket for whichever side takes it)."""
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        try:
            ready = loop.create_future()
            loop.add_reader(conn.fileno(), lambda: ready.done() or ready.set_result(None))
            try:
                async with asyncio.timeout(PEEK_TIMEOUT_S):
                    await ready
            finally:
                loop.remove_reader(conn.fileno())
            head = conn.recv(TLS_HEADER, socket.MSG_PEEK)
            if not head:
                conn.close()
                return
            await loop.connect_accepted_socket(lambda: _Connection(self), conn, ssl=tls if is_tls(head) else None)
        except (OSError, asyncio.TimeoutError, ssl.SSLError):
            conn.close()

    async def stop(self, grace: float = 1.0) -> None:
        for server in self._servers:
            server.close()
        if self._accept is not None:
            self._accept.cancel()
            self._sock.close()
        for conn in list(self.connections):
            conn.goaway()
        running = [call.task for conn in self.connections for call in conn.calls.values() if call.task is not None]
        if running:                 # the calls under way get `grace` seconds to answer
            await asyncio.wait(running, timeout=grace)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for server in self._servers:
            await server.wait_closed()

