"""The one asyncio module: connections that carry RemotingCommands both ways.

A Connection matches responses to requests by opaque, sends oneway requests, and hands
requests that arrive (from a client, or from a server to its client: CHECK_TRANSACTION_STATE,
NOTIFY_CONSUMER_IDS_CHANGED) to its handler. Framing errors close the connection; a handler
exception becomes a SYSTEM_ERROR response and the connection goes on.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import (FrameError, RemotingClosed, RemotingConnectError, RemotingError, RemotingListenError,
                             RemotingTimeout, map_os_errors)
from remoting.framing import FrameDecoder

log = logging.getLogger("mqtool.remoting")
Handler = Callable[["Connection", RemotingCommand], Awaitable[RemotingCommand | None]]
READ_CHUNK = 256 * 1024


def parse_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.strip().rpartition(":")
    if not host or not port.isdigit():
        raise RemotingConnectError(addr, "address must be HOST:PORT")
    return host.strip("[]"), int(port)


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 handler: Handler | None = None, on_close: Callable[["Connection"], None] | None = None):
        self.reader, self.writer = reader, writer
        self.handler = handler
        self.on_close = on_close
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.peer_host, self.peer_port = peer[0], peer[1]
        self.pending: dict[int, asyncio.Future] = {}
        self.closed = asyncio.Event()
        self.attrs: dict = {}      # per-connection state for servers (client id, language, ...)
        self._tasks: set[asyncio.Task] = set()
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())

    async def _read_loop(self) -> None:
        decoder = FrameDecoder()
        try:
            while True:
                data = await self.reader.read(READ_CHUNK)
                if not data:
                    break
                for cmd in decoder.feed(data):
                    self._dispatch(cmd)
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except (ConnectionError, OSError):
            pass
        finally:
            self._shutdown()

    def _dispatch(self, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            fut = self.pending.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
            return
        if self.handler is None:
            return
        task = asyncio.get_running_loop().create_task(self._handle(cmd))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, cmd: RemotingCommand) -> None:
        try:
            resp = await self.handler(self, cmd)
        except Exception as exc:  # a handler bug must not take the connection down
            log.exception("request code %s from %s failed", cmd.code, self.peer)
            resp = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if resp is not None and not cmd.is_oneway:
            self.send(resp)

    def send(self, cmd: RemotingCommand) -> None:
        if self.closed.is_set():
            return
        try:
            self.writer.write(cmd.encode())
        except (ConnectionError, OSError):
            self._shutdown()

    async def request(self, cmd: RemotingCommand, timeout_s: float = 3.0) -> RemotingCommand:
        if self.closed.is_set():
            raise RemotingClosed(self.peer)
        fut = asyncio.get_running_loop().create_future()
        self.pending[cmd.opaque] = fut
        self.send(cmd)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            raise RemotingTimeout(self.peer, timeout_s) from None
        finally:
            self.pending.pop(cmd.opaque, None)

    async def oneway(self, cmd: RemotingCommand) -> None:
        cmd.flag |= 0x2
        self.send(cmd)
        await self.drain()

    async def drain(self) -> None:
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            self._shutdown()

    def _shutdown(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(RemotingClosed(self.peer))
        self.pending.clear()
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - closing a broken transport
            pass
        if self.on_close:
            try:
                self.on_close(self)
            except Exception:  # noqa: BLE001
                log.exception("close callback failed")

    async def close(self) -> None:
        self._shutdown()
        self._reader_task.cancel()
        try:
            await self._reader_task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001
            pass


class Server:
    """A listening socket; every accepted connection gets `handler`."""

    def __init__(self, handler: Handler, on_close: Callable[[Connection], None] | None = None):
        self.handler = handler
        self.on_close = on_close
        self.connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None
        self.port = 0
        self.host = ""

    async def start(self, host: str, port: int) -> "Server":
        try:
            self._server = await asyncio.start_server(self._accept, host, port, reuse_address=True)
        except OSError as exc:
            raise RemotingListenError(f"{host}:{port}", (exc.strerror or str(exc)).lower()) from None
        sock = self._server.sockets[0]
        self.host, self.port = sock.getsockname()[:2]
        return self

    async def _accept(self, reader, writer) -> None:
        conn = Connection(reader, writer, self.handler, self._closed)
        self.connections.add(conn)

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if self.on_close:
            self.on_close(conn)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.close()
        if self._server is not None:
            await self._server.wait_closed()


async def connect(addr: str, handler: Handler | None = None, timeout_s: float = 3.0) -> Connection:
    host, port = parse_addr(addr)
    with map_os_errors(addr):
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        except asyncio.TimeoutError:
            raise RemotingTimeout(addr, timeout_s, "connect") from None
    return Connection(reader, writer, handler)


class RemotingClient:
    """Connections kept per address, reopened on demand; `invoke` sends and awaits the response."""

    def __init__(self, handler: Handler | None = None):
        self.handler = handler
        self.connections: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def connection(self, addr: str) -> Connection:
        conn = self.connections.get(addr)
        if conn is not None and not conn.closed.is_set():
            return conn
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self.connections.get(addr)
            if conn is None or conn.closed.is_set():
                conn = self.connections[addr] = await connect(addr, self.handler)
            return conn

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float = 3.0) -> RemotingCommand:
        conn = await self.connection(addr)
        return await conn.request(cmd, timeout_s)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        conn = await self.connection(addr)
        await conn.oneway(cmd)

    async def close(self) -> None:
        for conn in list(self.connections.values()):
            await conn.close()
        self.connections.clear()


__all__ = ["Connection", "Server", "RemotingClient", "connect", "parse_addr", "RemotingError"]
