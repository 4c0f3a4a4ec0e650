"""The one asyncio module: connections that carry RemotingCommands both ways.

A Connection matches responses to its requests by opaque, sends oneway requests, and hands the
requests that arrive to its handler: a client's requests on a server, or a server's requests on a
client (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED ... travel on the client's own
connection, told apart from responses only by the RPC_TYPE flag bit). Framing errors close the
connection; a handler exception becomes a SYSTEM_ERROR response and everything else carries on.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from mqtool_remoting.codes import FRAME_MAX_LENGTH, RPC_ONEWAY, RequestCode, ResponseCode, code_name
from mqtool_remoting.command import RemotingCommand, decode_frame_body
from mqtool_remoting.errors import (FrameError, RemotingClosed, RemotingConnectError, RemotingError, RemotingTimeout,
                             map_os_errors)
from mqtool_remoting.framing import FrameDecoder
from mqtool_remoting.listen import REUSE_ADDRESS

log = logging.getLogger("mqtool.remoting")
Handler = Callable[["Connection", RemotingCommand], Awaitable[RemotingCommand | None]]
# A server's fast path: given a frame's bytes after its length field, the whole answer frame, or None
# for "not mine" (the frame is then decoded and goes to the handler). It must answer exactly what the
# handler would, and leave alone any frame it does not fully understand.
FastPath = Callable[["Connection", bytes], bytes | None]
# A fast path may also have `runner(conn)`: a callable(bodies, i, j, answers) -> (taken, error), with
# `head` (bytes every frame it may take starts with after the header-length int), that
# answers bodies[i:j] from the first on, as many as it takes (one answer appended for each), and stops at
# the first it does not take (the per-frame call decides that one), or None for this read. `error`:
# what the frame after the taken ones raised (it is answered SYSTEM_ERROR), else None.
READ_CHUNK = 256 * 1024
LISTEN_BACKLOG = 1024   # NettyServerConfig.serverSocketBacklog; asyncio's 100 drops a burst of connects for 1 s
SERVER_IDLE_S = 120.0   # NettyServerConfig.serverChannelMaxIdleTimeSeconds' default
SWEEP_S = 0.05          # how often a connection with requests in flight looks for timed-out ones
FLUSH_FRAMES = 32        # a loop turn answering more frames than this writes them as it goes: the peer
                         # starts on the first answers while the rest are made (pipelining)
EAGER_IN_FLIGHT = 8      # a request sent with at most this many in flight on its connection is written at
                         # once: the peer is likely idle (a pull chain per queue), and the loop turn
                         # making it may go on decoding other answers; with more in flight, a turn's
                         # requests go out together
CLOSE_GRACE_S = 2.0     # after bad bytes: how long requests decoded before them may take to answer


def parse_addr(addr: str) -> tuple[str, int]:
    """`host:port` (IPv6 hosts may be bracketed) -> (host, port)."""
    host, _, port = addr.strip().rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise RemotingConnectError(addr, "address must be HOST:PORT")
    return host.strip("[]"), int(port)


class Connection:
    def __init__(self, reader: asyncio.StreamReader | None, writer: asyncio.StreamWriter,
                 handler: Handler | None = None, on_close: Callable[["Connection"], None] | None = None,
                 fast: FastPath | None = None):
        """With a `reader` a task reads it; with None (a Server's connections: _ServerProtocol) the
        protocol hands each chunk read to `received` as it arrives, without a reader buffer and
        a task wake-up between."""
        self.reader, self.writer = reader, writer
        self.handler = handler
        self.fast = fast
        self.on_close = on_close
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.peer_host, self.peer_port = peer[0], peer[1]
        self.pending: dict[int, asyncio.Future] = {}
        self._out: list[bytes] = []           # frames waiting for this loop turn's single write
        self._deadlines: dict[int, tuple] = {}  # opaque -> (loop time, timeout, future) of a request
        self.last_active = asyncio.get_running_loop().time()    # of the last read or write (idle checks)
        self._sweeper: asyncio.TimerHandle | None = None
        self.closed = asyncio.Event()
        self.attrs: dict = {}      # per-connection state for servers (client id, language, ...)
        self.signer: Callable[[RemotingCommand], None] | None = None   # ACL: signs each request sent
        self._tasks: set[asyncio.Task] = set()
        self._decoder = FrameDecoder()
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop()) if reader is not None else None

    def __repr__(self) -> str:
        return f"<Connection {self.peer}{' closed' if self.closed.is_set() else ''}>"

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self.reader.read(READ_CHUNK)
                if not data:
                    break
                if not self.received(data):
                    await self._grace()
                    break
        except (ConnectionError, OSError):
            pass
        finally:
            self.shutdown()

    def received(self, data: bytes) -> bool:
        """One chunk read: every frame it completes handled, this chunk's answers written. False
        after bad bytes: the connection closes once the requests decoded before them have
        answered (up to CLOSE_GRACE_S)."""
        if self.fast is None:
            return self._frames(self._decoder.feed, data, True)
        return self._frames(self._decoder.bodies, data, False)

    def filled(self, nbytes: int) -> bool:
        """`received` for a read of `nbytes` into the decoder's space() (_ServerProtocol's reads)."""
        return self._frames(self._decoder.filled, nbytes, False)

    def _frames(self, cut, arg, decoded: bool) -> bool:
        """received's work: `cut(arg)` gives the read's frames, decoded commands or bodies."""
        self.last_active = asyncio.get_running_loop().time()
        try:
            self._handle_frames(cut(arg), decoded)
            if self._out:        # this read's answers leave now, not after the other connections' turns
                self._flush()
            return True
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            try:                             # complete frames that preceded the bad bytes
                self._handle_frames(exc.decoded, decoded)
            except FrameError:
                pass
            if self.reader is None:
                self._close_after_tasks()
            return False

    def _handle_frames(self, frames: list, decoded: bool) -> None:
        if decoded:
            for cmd in frames:
                self._dispatch(cmd)
        elif self.fast is None:
            for body in frames:
                self._dispatch(decode_frame_body(body))
        else:
            self._fast_or_dispatch(frames)

    def _close_after_tasks(self) -> None:
        """Shut down once the handlers still running have answered (at most CLOSE_GRACE_S)."""
        if self.closed.is_set():
            return
        if not self._tasks:
            self.shutdown()
            return

        async def later() -> None:
            try:
                await self._grace()
            finally:
                self.shutdown()
        self._reader_task = asyncio.get_running_loop().create_task(later())

    async def _grace(self) -> None:
        if self._tasks:                  # let them answer before the socket goes
            await asyncio.wait(list(self._tasks), timeout=CLOSE_GRACE_S)

    def _fast_or_dispatch(self, bodies: list[bytes]) -> None:
        """Every frame of one read in one pass: the fast path's answers queued as they come, the
        rest decoded and dispatched as `feed` would (a bad one raises FrameError after the good
        ones before it were handled). A fast path with a `runner` (see FastPath) answers runs of
        frames in one call, up to FLUSH_FRAMES answers at a time."""
        fast = self.fast
        make_runner = getattr(fast, "runner", None)
        run = self._runner(make_runner) if make_runner is not None and len(bodies) > 1 else None
        i, n = 0, len(bodies)
        while i < n:
            if run is not None and bodies[i].startswith(run.head, 4):
                answers: list[bytes] = []
                j = min(n, i + max(1, FLUSH_FRAMES - len(self._out)))
                try:
                    taken, error = run(bodies, i, j, answers)
                except Exception:  # noqa: BLE001 - a bug around the runner: what it answered goes, then frame by frame
                    log.exception("the fast path's runner failed on a read from %s", self.peer)
                    taken, error, run, make_runner = len(answers), None, None, None
                self._queue_answers(answers)
                i += taken
                if error is not None:
                    self._answer_error(bodies[i], error)
                    i += 1
                    continue
                if i == j:                 # all taken: on to the next FLUSH_FRAMES (or the end)
                    continue
            body = bodies[i]
            i += 1
            try:
                answer = fast(self, body)
            except Exception as exc:  # noqa: BLE001 - as _handle: a bug answers SYSTEM_ERROR, the rest carries on
                self._answer_error(body, exc)
                continue
            if answer is None:
                self._dispatch(decode_frame_body(body))     # (its answer may flush self._out)
                if make_runner is not None:                  # what it changed holds for the frames after it
                    run = self._runner(make_runner)
            elif not self.closed.is_set():
                out = self._out
                out.append(answer)
                if len(out) >= FLUSH_FRAMES:
                    self._flush()

    def _runner(self, make_runner):
        try:
            return make_runner(self)
        except Exception:  # noqa: BLE001 - a bug there: frame by frame
            log.exception("the fast path's runner could not be made for %s", self.peer)
            return None

    def _queue_answers(self, answers) -> None:
        if answers and not self.closed.is_set():
            out = self._out
            out.extend(answers)
            if len(out) >= FLUSH_FRAMES:
                self._flush()

    def _answer_error(self, body: bytes, exc: BaseException) -> None:
        """A fast path that raised on a frame: SYSTEM_ERROR, as _handle answers a handler's bug."""
        cmd = decode_frame_body(body)
        log.error("request %s from %s failed", code_name(RequestCode, cmd.code), self.peer,
                  exc_info=(type(exc), exc, exc.__traceback__))
        if not cmd.is_oneway:
            self._queue_answers((cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}").encode(),))

    def _dispatch(self, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            fut = self.pending.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
            elif fut is None:
                log.debug("response opaque %d from %s matches no request (timed out?)", cmd.opaque, self.peer)
            return
        if self.handler is None:
            log.debug("no handler for request %s from %s", cmd.code, self.peer)
            return
        # Run the handler at once, in this task: most requests (a send under ASYNC_FLUSH, a heartbeat)
        # never wait, and finish here without a task of their own. One that does wait is handed,
        # at its first wait, to a task that carries it on.
        coro = self._handle(cmd)
        try:
            waiting_on = coro.send(None)
        except StopIteration:
            return
        task = asyncio.get_running_loop().create_task(_carry_on(coro, waiting_on))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, cmd: RemotingCommand) -> None:
        try:
            resp = await self.handler(self, cmd)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a handler bug must not take the connection or the server down
            log.exception("request %s from %s failed", code_name(RequestCode, cmd.code), self.peer)
            resp = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if resp is None or cmd.is_oneway:
            return
        try:
            frame = _checked_frame(resp)
        except RemotingError as exc:
            log.error("response to %s from %s not sent: %s", code_name(RequestCode, cmd.code), self.peer, exc)
            frame = cmd.response(ResponseCode.SYSTEM_ERROR, str(exc)).encode()
        self._write(frame)
        if self._backlogged() or self.writer.transport.is_closing():
            await self.drain()

    def send(self, cmd: RemotingCommand) -> None:
        """Queue one command for writing (no flow control: see `drain`)."""
        self._write(_checked_frame(cmd))

    def _write(self, frame: bytes, at_once: bool = False) -> None:
        """Frames written in one turn of the event loop go out in one write (one syscall):
        under pipelined load most of a server's answers leave together. `at_once` writes this
        frame (and any made before it) now."""
        if self.closed.is_set():
            return
        out = self._out
        out.append(frame)
        if at_once or len(out) >= FLUSH_FRAMES:
            self._flush()
        elif len(out) == 1:
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self.closed.is_set() or not out:
            return
        self.last_active = asyncio.get_running_loop().time()
        try:
            self.writer.write(out[0] if len(out) == 1 else b"".join(out))
        except (ConnectionError, OSError, RuntimeError):
            self.shutdown()

    async def request(self, cmd: RemotingCommand, timeout_s: float = 3.0) -> RemotingCommand:
        """Send `cmd` and wait for the response with its opaque."""
        if self.closed.is_set():
            raise RemotingClosed(self.peer)
        if self.signer is not None:
            cmd.header_json = None
            self.signer(cmd)
        frame = _checked_frame(cmd)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.pending[cmd.opaque] = fut
        # No task and no timer per request: a deadline, checked by one sweep per connection
        # (asyncio's timer heap cost a few microseconds a request with many in flight).
        self._deadlines[cmd.opaque] = (loop.time() + timeout_s, timeout_s, fut)
        if self._sweeper is None:
            self._sweeper = loop.call_later(SWEEP_S, self._sweep)
        try:
            self._write(frame, len(self.pending) <= EAGER_IN_FLIGHT)
            if self._backlogged():
                await self.drain()
            return await fut
        finally:
            self._deadlines.pop(cmd.opaque, None)
            if self.pending.get(cmd.opaque) is fut:
                del self.pending[cmd.opaque]

    def _sweep(self) -> None:
        """Fail the requests whose time is up (at most SWEEP_S late); look again while any wait."""
        self._sweeper = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        expired = [(opaque, t, fut) for opaque, (deadline, t, fut) in self._deadlines.items() if deadline <= now]
        for opaque, t, fut in expired:
            del self._deadlines[opaque]
            if not fut.done():
                fut.set_exception(RemotingTimeout(self.peer, t))
        if self._deadlines and not self.closed.is_set():
            self._sweeper = loop.call_later(SWEEP_S, self._sweep)

    def _backlogged(self) -> bool:
        """More than the transport's high-water mark is waiting to be sent (drain would wait)."""
        transport = self.writer.transport
        return transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]

    async def oneway(self, cmd: RemotingCommand) -> None:
        if not cmd.flag & RPC_ONEWAY:
            cmd.flag |= RPC_ONEWAY
            cmd.header_json = None
        if self.closed.is_set():
            raise RemotingClosed(self.peer)
        if self.signer is not None:
            cmd.header_json = None
            self.signer(cmd)
        self.send(cmd)
        await self.drain()

    async def drain(self) -> None:
        try:
            await self.writer.drain()
        except (ConnectionError, OSError, RuntimeError):
            self.shutdown()

    def shutdown(self) -> None:
        """Close now, from sync code too: pending requests fail with RemotingClosed."""
        if self.closed.is_set():
            return
        self._flush()                          # answers already made leave before the close
        self.closed.set()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
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
                log.exception("close callback for %s failed", self.peer)

    async def close(self) -> None:
        """Close, stop reading and cancel the handlers still running for this connection."""
        self.shutdown()
        tasks = [t for t in (self._reader_task, *self._tasks) if t is not None]
        for t in tasks:
            if t is not asyncio.current_task():
                t.cancel()
        await asyncio.gather(*(t for t in tasks if t is not asyncio.current_task()), return_exceptions=True)


async def _carry_on(coro, waiting_on) -> None:
    """Drive a coroutine that was started outside a task to its end: wait for what it waits on
    (a future, or one loop turn for a bare yield), then resume it; it reads the future's outcome
    itself. Cancelling this task cancels the future, which the coroutine then sees."""
    while True:
        if waiting_on is None:
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError as exc:
                try:
                    waiting_on = coro.throw(exc)
                except StopIteration:
                    return
                continue
        else:
            # The coroutine's yield marked the future as awaited (what a Task clears before it waits).
            waiting_on._asyncio_future_blocking = False
            try:
                await waiting_on
            except BaseException:  # noqa: BLE001 - the coroutine gets the outcome from the future
                if not waiting_on.done():
                    waiting_on.cancel()
        try:
            waiting_on = coro.send(None)
        except StopIteration:
            return


def _checked_frame(cmd: RemotingCommand) -> bytes:
    """Encode, refusing what the peer's decoder would reject (and close the connection for)."""
    frame = cmd.encode()
    if len(frame) - 4 > FRAME_MAX_LENGTH:
        raise FrameError(f"frame of {len(frame) - 4} bytes exceeds the {FRAME_MAX_LENGTH}-byte limit")
    return frame


class Server:
    """A listening socket; every accepted connection gets `handler`."""

    def __init__(self, handler: Handler, on_close: Callable[[Connection], None] | None = None,
                 idle_timeout_s: float = SERVER_IDLE_S, fast: FastPath | None = None):
        self.handler = handler
        self.fast = fast
        self.on_close = on_close
        self.connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None
        self.port = 0
        self.host = ""
        self.idle_timeout_s = idle_timeout_s       # NettyServerConfig.serverChannelMaxIdleTimeSeconds
        self._idle_check: asyncio.TimerHandle | None = None

    async def start(self, host: str, port: int) -> "Server":
        loop = asyncio.get_running_loop()
        with map_os_errors(f"{host}:{port}", listen=True):
            self._server = await loop.create_server(lambda: _ServerProtocol(self._accept), host, port,
                                                    reuse_address=REUSE_ADDRESS, backlog=LISTEN_BACKLOG)
        sock = self._server.sockets[0]
        self.host, self.port = sock.getsockname()[:2]
        if self.idle_timeout_s > 0:
            self._schedule_idle_check()
        return self

    def _schedule_idle_check(self) -> None:
        self._idle_check = asyncio.get_running_loop().call_later(min(self.idle_timeout_s / 4, 5.0),
                                                                 self._close_idle)

    def _close_idle(self) -> None:
        """Netty's IdleStateHandler(ALL_IDLE) as RocketMQ's server uses it: a connection that neither
        read nor wrote for serverChannelMaxIdleTimeSeconds is closed (clients heartbeat every 30 s)."""
        cutoff = asyncio.get_running_loop().time() - self.idle_timeout_s
        for conn in [c for c in self.connections if c.last_active < cutoff and not c.pending and not c._tasks]:
            log.info("closing idle connection from %s (nothing for %g s)", conn.peer, self.idle_timeout_s)
            conn.shutdown()
        self._schedule_idle_check()

    def _accept(self, writer: asyncio.StreamWriter) -> Connection:
        conn = Connection(None, writer, self.handler, self._closed, self.fast)
        self.connections.add(conn)
        return conn

    def _closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if self.on_close:
            self.on_close(conn)

    async def stop(self) -> None:
        if self._idle_check is not None:
            self._idle_check.cancel()
            self._idle_check = None
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            await conn.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None


class _ServerProtocol(asyncio.streams.FlowControlMixin, asyncio.BufferedProtocol):
    """An accepted socket's protocol: what asyncio.start_server's StreamReaderProtocol does for a
    server's connections (a StreamWriter with flow control, a close waiter), except that each read
    goes into the Connection's frame decoder (FrameDecoder.space) and is handled at once
    (Connection.filled), not into a StreamReader that a reader task then copies it out of."""

    def __init__(self, accept: Callable[[asyncio.StreamWriter], Connection]):
        super().__init__()
        self._accept = accept
        self._conn: Connection | None = None
        self._closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        writer = asyncio.StreamWriter(transport, self, None, asyncio.get_running_loop())
        self._conn = self._accept(writer)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._conn._decoder.space()

    def buffer_updated(self, nbytes: int) -> None:
        conn = self._conn
        if not conn.closed.is_set() and not conn.filled(nbytes):
            transport = conn.writer.transport
            if not transport.is_closing():
                transport.pause_reading()     # nothing more is read from a connection being closed

    def eof_received(self) -> bool:
        self._conn.shutdown()
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)          # wakes writers waiting in drain
        if not self._closed.done():
            self._closed.set_result(None)
        if self._conn is not None:
            self._conn.shutdown()

    def _get_close_waiter(self, stream) -> asyncio.Future:
        return self._closed


async def serve(handler: Handler, host: str, port: int,
                on_close: Callable[[Connection], None] | None = None) -> Server:
    """Listen on host:port (0 = any free port; see `.port`) and serve `handler` until `stop()`."""
    return await Server(handler, on_close).start(host, port)


async def connect(addr: str, handler: Handler | None = None, timeout_s: float = 3.0) -> Connection:
    """Open a connection; `handler` serves requests the server sends on it."""
    host, port = parse_addr(addr)
    # The opening is a task of its own with a timer that cancels it: not asyncio.timeout, which binds
    # to the current task (a request handler runs inside its connection's reader task until it first
    # waits, and a timeout entered there cancelled the reader), and not wait_for, which in 3.11 can
    # swallow a cancellation.
    loop = asyncio.get_running_loop()
    opening = loop.create_task(asyncio.open_connection(host, port))
    late: list[bool] = []
    timer = loop.call_later(timeout_s, lambda: (late.append(True), opening.cancel()))
    with map_os_errors(addr, "connect", timeout_s):
        try:
            reader, writer = await opening
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if late and not (current is not None and current.cancelling()):
                raise TimeoutError from None
            raise
        finally:
            timer.cancel()
    return Connection(reader, writer, handler)


class RemotingClient:
    """Connections kept per address, reopened on demand; `invoke` sends and awaits the response.
    With a `signer` (remoting.acl.Credentials) every request it sends is signed (AclClientRPCHook)."""

    def __init__(self, handler: Handler | None = None, signer: Callable[[RemotingCommand], None] | None = None):
        self.handler = handler
        self.signer = signer
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
                conn.signer = self.signer
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


__all__ = ["Connection", "Server", "RemotingClient", "serve", "connect", "parse_addr", "RemotingError"]
