"""The asyncio transport over real 127.0.0.1 sockets (ephemeral ports)."""
from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess

import pytest

from mqtool_remoting.codes import FRAME_MAX_LENGTH, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import FrameError, RemotingClosed, RemotingConnectError, RemotingError, RemotingTimeout
from mqtool_remoting.framing import FrameDecoder
from mqtool_remoting.transport import (EAGER_IN_FLIGHT, FLUSH_FRAMES, LISTEN_BACKLOG, RemotingClient, connect, parse_addr,
                                      serve)

BOOM, SLOW, ASK_CLIENT, RECORD, ECHO = 1, 2, 3, 4, 10


class Service:
    """A scripted server: each request code does one thing."""

    def __init__(self):
        self.seen: asyncio.Queue = asyncio.Queue()
        self.release = asyncio.Event()

    async def handle(self, conn, cmd):
        if cmd.code == BOOM:
            raise RuntimeError("boom")
        if cmd.code == SLOW:
            await self.release.wait()
            return cmd.response(0, "late")
        if cmd.code == ASK_CLIENT:   # the server asks the client something on the client's own connection
            answer = await conn.request(RemotingCommand.request(40, {"q": "ping"}), 2)
            return cmd.response(0, answer.remark)
        if cmd.code == RECORD:
            await self.seen.put(cmd)
            return cmd.response(0, "must not be sent for a oneway request")
        return cmd.response(0, None, {"echo": cmd.ext_fields.get("x", "")}, cmd.body)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


async def raw_frames(reader, n: int) -> list[RemotingCommand]:
    decoder, out = FrameDecoder(), []
    while len(out) < n:
        data = await reader.read(65536)
        assert data, "connection closed early"
        out += decoder.feed(data)
    return out


def test_request_response_and_many_in_flight():
    async def scenario():
        server = await serve(Service().handle, "127.0.0.1", 0)
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"x": 5}, b"payload"))
        assert resp.code == 0 and resp.is_response and resp.ext_fields == {"echo": "5"} and resp.body == b"payload"
        many = await asyncio.gather(*(client.invoke(addr, RemotingCommand.request(ECHO, {"x": i})) for i in range(100)))
        assert [r.ext_fields["echo"] for r in many] == [str(i) for i in range(100)]
        big = await client.invoke(addr, RemotingCommand.request(ECHO, body=b"z" * 3_000_000))
        assert len(big.body) == 3_000_000
        assert len(client.connections) == 1
        await client.close()
        await server.stop()
    run(scenario())


def test_handler_exception_becomes_system_error_logged_once(caplog):
    async def scenario():
        server = await serve(Service().handle, "127.0.0.1", 0)
        a = await connect(f"127.0.0.1:{server.port}")
        b = await connect(f"127.0.0.1:{server.port}")
        with caplog.at_level(logging.ERROR, logger="mqtool.remoting"):
            bad = await a.request(RemotingCommand.request(BOOM))
        assert bad.code == ResponseCode.SYSTEM_ERROR and bad.remark == "RuntimeError: boom"
        assert len([r for r in caplog.records if "failed" in r.getMessage()]) == 1
        assert (await a.request(RemotingCommand.request(ECHO, {"x": "a"}))).ext_fields["echo"] == "a"
        assert (await b.request(RemotingCommand.request(ECHO, {"x": "b"}))).ext_fields["echo"] == "b"
        await a.close()
        await b.close()
        await server.stop()
    run(scenario())


def test_timeout_then_late_response_is_dropped():
    async def scenario():
        svc = Service()
        server = await serve(svc.handle, "127.0.0.1", 0)
        conn = await connect(f"127.0.0.1:{server.port}")
        with pytest.raises(RemotingTimeout, match="timed out after 100 ms"):
            await conn.request(RemotingCommand.request(SLOW), timeout_s=0.1)
        assert conn.pending == {}
        svc.release.set()              # the late answer arrives and matches nothing
        assert (await conn.request(RemotingCommand.request(ECHO, {"x": 1}))).ext_fields == {"echo": "1"}
        await conn.close()
        await server.stop()
    run(scenario())


def test_oneway_gets_no_response():
    async def scenario():
        svc = Service()
        server = await serve(svc.handle, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        oneway = RemotingCommand.request(RECORD, {"v": "seen"}, oneway=True)
        echo = RemotingCommand.request(ECHO, {"x": "after"})
        writer.write(oneway.encode() + echo.encode())
        got = await svc.seen.get()
        assert got.is_oneway and got.ext_fields == {"v": "seen"}
        (first,) = await raw_frames(reader, 1)
        assert first.opaque == echo.opaque         # nothing was sent back for the oneway request
        client = RemotingClient()
        await client.invoke_oneway(f"127.0.0.1:{server.port}", RemotingCommand.request(RECORD, {"v": "two"}))
        assert (await svc.seen.get()).ext_fields == {"v": "two"}
        writer.close()
        await client.close()
        await server.stop()
    run(scenario())


def test_server_sends_a_request_to_its_client():
    async def scenario():
        server = await serve(Service().handle, "127.0.0.1", 0)

        async def client_side(conn, cmd):
            assert not cmd.is_response
            return cmd.response(0, "pong:" + cmd.ext_fields["q"])
        client = RemotingClient(client_side)
        asked = await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.request(ASK_CLIENT))
        assert asked.remark == "pong:ping"
        (server_conn,) = server.connections
        direct = await server_conn.request(RemotingCommand.request(39, {"q": "direct"}))
        assert direct.remark == "pong:direct"
        await client.close()
        await server.stop()
    run(scenario())


def test_garbage_and_oversize_close_only_that_connection():
    async def scenario():
        closed = asyncio.Queue()
        server = await serve(Service().handle, "127.0.0.1", 0, on_close=closed.put_nowait)
        good = await connect(f"127.0.0.1:{server.port}")
        for junk in (b"\xff\xff\xff\xffGARBAGE", (FRAME_MAX_LENGTH + 1).to_bytes(4, "big"),
                     b"\x00\x00\x00\x08\x00\x00\x00\x04{{{{"):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(junk)       # the oversize length is refused before any of its body arrives
            assert await reader.read() == b""
            await closed.get()
            writer.close()
        resp = await good.request(RemotingCommand.request(ECHO, {"x": "still"}))
        assert resp.ext_fields["echo"] == "still" and len(server.connections) == 1
        await good.close()
        await server.stop()
    run(scenario())


def test_a_frame_before_garbage_in_the_same_packet_is_still_answered():
    async def scenario():
        server = await serve(Service().handle, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        req = RemotingCommand.request(ECHO, {"x": "first"})
        writer.write(req.encode() + b"\xff\xff\xff\xff")
        data = await reader.read()          # the response, then EOF
        (resp,) = FrameDecoder().feed(data)
        assert resp.opaque == req.opaque and resp.ext_fields == {"echo": "first"}
        writer.close()
        await server.stop()
    run(scenario())


def test_pending_requests_fail_when_the_peer_goes_away():
    async def scenario():
        svc = Service()
        server = await serve(svc.handle, "127.0.0.1", 0)
        conn = await connect(f"127.0.0.1:{server.port}")
        pending = asyncio.ensure_future(conn.request(RemotingCommand.request(SLOW), timeout_s=10))
        while not server.connections:
            await asyncio.sleep(0)
        await server.stop()
        with pytest.raises(RemotingClosed):
            await pending
        with pytest.raises(RemotingClosed):
            await conn.request(RemotingCommand.request(ECHO))
        await conn.close()
    run(scenario())


def test_client_reconnects_after_the_connection_closed():
    async def scenario():
        server = await serve(Service().handle, "127.0.0.1", 0)
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        await client.invoke(addr, RemotingCommand.request(ECHO))
        first = client.connections[addr]
        await first.close()
        assert (await client.invoke(addr, RemotingCommand.request(ECHO, {"x": 2}))).ext_fields["echo"] == "2"
        assert client.connections[addr] is not first
        await client.close()
        await server.stop()
    run(scenario())


def test_oversize_outgoing_frame_is_refused_locally():
    async def scenario():
        server = await serve(Service().handle, "127.0.0.1", 0)
        conn = await connect(f"127.0.0.1:{server.port}")
        with pytest.raises(FrameError, match="exceeds"):
            await conn.request(RemotingCommand.request(ECHO, body=b"\0" * FRAME_MAX_LENGTH))
        assert (await conn.request(RemotingCommand.request(ECHO, {"x": "ok"}))).ext_fields["echo"] == "ok"
        await conn.close()
        await server.stop()
    run(scenario())


def test_connect_and_listen_errors_are_remoting_errors():
    async def scenario():
        server = await serve(Service().handle, "127.0.0.1", 0)
        port = server.port
        with pytest.raises(RemotingError, match=f"cannot listen on 127.0.0.1:{port}"):
            await serve(Service().handle, "127.0.0.1", port)
        await server.stop()
        with pytest.raises(RemotingConnectError, match=f"127.0.0.1:{port}"):
            await connect(f"127.0.0.1:{port}")
        with pytest.raises(RemotingConnectError, match="HOST:PORT"):
            await connect("no-port")
    run(scenario())
    assert parse_addr("[::1]:9876") == ("::1", 9876)


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to read a listening socket's backlog")
def test_server_listens_with_nettys_backlog_so_a_burst_of_connects_is_not_dropped():
    """asyncio's default backlog (100) dropped the SYNs of a burst of 1,000 connects: a 1 s retry each."""
    async def scenario():
        srv = await serve(lambda conn, cmd: None, "127.0.0.1", 0)
        try:
            out = subprocess.run(["ss", "-ltnH", f"sport = :{srv.port}"], capture_output=True, text=True).stdout
        finally:
            await srv.stop()
        return out
    assert asyncio.run(scenario()).split()[2] == str(LISTEN_BACKLOG) == "1024"


def test_timeouts_are_per_request_on_one_connection():
    async def scenario():
        svc = Service()
        server = await serve(svc.handle, "127.0.0.1", 0)
        conn = await connect(f"127.0.0.1:{server.port}")
        patient = asyncio.ensure_future(conn.request(RemotingCommand.request(SLOW), timeout_s=5))
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(RemotingTimeout):
            await conn.request(RemotingCommand.request(SLOW), timeout_s=0.2)
        assert 0.2 <= loop.time() - start < 1.0            # the sweep runs every 50 ms
        assert not patient.done()                          # the other request still waits
        svc.release.set()
        assert (await patient).remark == "late"
        await asyncio.sleep(0.1)
        assert conn._sweeper is None and conn._deadlines == {}   # nothing waits: no sweep scheduled
        await conn.close()
        await server.stop()
    run(scenario())


def test_a_connection_idle_past_the_limit_is_closed_and_a_busy_one_is_not():
    """serverChannelMaxIdleTimeSeconds (Netty's ALL_IDLE handler): nothing read or written for that long."""
    async def scenario():
        from mqtool_remoting.transport import Server
        closed = asyncio.Queue()
        server = await Server(Service().handle, on_close=closed.put_nowait, idle_timeout_s=0.4).start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)     # says nothing
        busy = await connect(f"127.0.0.1:{server.port}")
        loop = asyncio.get_running_loop()
        start = loop.time()
        while loop.time() - start < 1.2:                  # a client that keeps talking stays
            assert (await busy.request(RemotingCommand.request(ECHO, {"x": "hi"}))).ext_fields == {"echo": "hi"}
            await asyncio.sleep(0.1)
        assert await asyncio.wait_for(reader.read(), 2) == b""          # the silent one was closed
        assert (await closed.get()).peer.endswith(str(writer.get_extra_info("sockname")[1]))
        assert not busy.closed.is_set()
        writer.close()
        await busy.close()
        await server.stop()
    run(scenario())


async def connected_to_raw_server():
    """A Connection to a plain asyncio server: (connection, the server side's reader and writer, listener)."""
    got = asyncio.Queue()

    async def on_connect(reader, writer):
        await got.put((reader, writer))
    listener = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    conn = await connect(f"127.0.0.1:{listener.sockets[0].getsockname()[1]}")
    reader, writer = await got.get()
    return conn, reader, writer, listener


def test_a_long_turn_of_answers_is_written_as_it_goes():
    """Frames made in one loop turn leave in one write, but past FLUSH_FRAMES they are written as
    they come, so the peer can start on the first ones (pipelining): here the server's side has
    the first 2 * FLUSH_FRAMES frames before this turn ends, and the rest right after."""
    async def scenario():
        conn, reader, writer, listener = await connected_to_raw_server()
        count = 2 * FLUSH_FRAMES + 5
        frames = [RemotingCommand.request(ECHO, {"x": i}) for i in range(count)]
        for cmd in frames:                 # one turn: no await between them
            conn.send(cmd)
        sock = writer.get_extra_info("socket")
        early = _drain_socket(sock.dup())            # no await: still the same turn
        decoded = FrameDecoder().feed(early)
        assert len(decoded) == 2 * FLUSH_FRAMES     # written before the turn ended
        rest = await raw_frames(reader, 5)           # the last five: at the end of the turn
        assert [c.ext_fields["x"] for c in decoded + rest] == [str(i) for i in range(count)]
        await conn.close()
        writer.close()
        listener.close()
    run(scenario())


@pytest.mark.parametrize("count", [3, EAGER_IN_FLIGHT + 4])
def test_a_request_with_few_in_flight_leaves_at_once(count):
    """A request sent with at most EAGER_IN_FLIGHT in flight is written before its loop turn
    ends (a consumer's pull chains: the broker starts on one pull while the client decodes the
    other answers); past that, a turn's requests wait for its end and leave together."""
    async def scenario():
        conn, reader, writer, listener = await connected_to_raw_server()
        sock = writer.get_extra_info("socket")
        seen = []

        async def look():                   # runs after the requests' first steps, in the same turn
            seen.append(FrameDecoder().feed(_drain_socket(sock.dup())))
        calls = [asyncio.ensure_future(conn.request(RemotingCommand.request(ECHO, {"x": i}), 5)) for i in range(count)]
        await asyncio.ensure_future(look())
        early = [int(c.ext_fields["x"]) for c in seen[0]]
        assert early == list(range(min(count, EAGER_IN_FLIGHT)))
        rest = await raw_frames(reader, count - len(early))   # the others: at the end of that turn
        assert [int(c.ext_fields["x"]) for c in rest] == list(range(len(early), count))
        for c in calls:
            c.cancel()
        await conn.close()
        writer.close()
        listener.close()
    run(scenario())


def test_a_reads_answers_leave_before_the_loop_turns_to_other_work():
    """A server writes the answers to one read's requests as soon as they are made, before the
    loop runs what else is ready (other connections' reads): a consumer's pull is not kept waiting
    behind the senders' turns (broker_capacity.py --tail: 8.5 against 12.7 ms a round trip)."""
    async def scenario():
        seen_by_next_callback = []
        raw = {}

        async def handle(conn, cmd):
            # runs before the answer is written; the callback runs when the loop moves on
            asyncio.get_running_loop().call_soon(
                lambda: seen_by_next_callback.append(FrameDecoder().feed(_drain_socket(raw["sock"].dup()))))
            return cmd.response(0, None, {"echo": cmd.ext_fields.get("x", "")})
        server = await serve(handle, "127.0.0.1", 0)
        _, writer = await asyncio.open_connection("127.0.0.1", server.port)
        raw["sock"] = writer.get_extra_info("socket")
        writer.write(b"".join(RemotingCommand.request(ECHO, {"x": i}).encode() for i in range(3)))
        while len(seen_by_next_callback) < 3:
            await asyncio.sleep(0.01)
        first = seen_by_next_callback[0]            # read off the socket when the loop moved on
        assert [c.ext_fields["echo"] for c in first] == ["0", "1", "2"]
        writer.close()
        await server.stop()
    run(scenario())


def test_a_cancel_as_the_connection_opens_is_not_lost(monkeypatch):
    """A cancel that lands while the connection completes cancels the caller (asyncio.wait_for on
    3.11 returned the connection instead, and a Ctrl-C turned into that cancel was lost)."""
    async def scenario():
        listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        real_open = asyncio.open_connection
        caller: list[asyncio.Task] = []

        async def open_then_cancel(host, port):
            streams = await real_open(host, port)
            caller[0].cancel()                 # the cancel arrives as the connection is made
            return streams
        monkeypatch.setattr(asyncio, "open_connection", open_then_cancel)

        async def connect_then_idle():
            conn = await connect(f"127.0.0.1:{port}")
            try:
                await asyncio.sleep(5)
            finally:
                await conn.close()
        caller.append(asyncio.ensure_future(connect_then_idle()))
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait([caller[0]], timeout=2) and caller[0].result()
        listener.close()
    run(scenario())


def _drain_socket(sock) -> bytes:
    """What is readable on `sock` right now, without waiting for more."""
    sock.setblocking(False)
    out = b""
    try:
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            out += chunk
    except BlockingIOError:
        pass
    finally:
        sock.close()
    return out


FAST = 11


def fast_hook(seen: list):
    """A server's fast path: answers FAST requests from the frame bytes, raises on x=boom, leaves
    the rest (None) to the handler; `seen` gets each frame body it was shown."""
    from mqtool_remoting.command import decode_frame_body

    def fast(conn, body: bytes):
        seen.append(body)
        cmd = decode_frame_body(body)
        if cmd.code != FAST:
            return None
        if cmd.ext_fields.get("x") == "boom":
            raise RuntimeError("fast boom")
        return cmd.response(0, "fast", {"echo": cmd.ext_fields.get("x", "")}).encode()
    return fast


def test_a_fast_path_answers_its_frames_and_leaves_the_rest_to_the_handler(caplog):
    """Every frame of one write: the fast path's answers and the handler's, each to its opaque; a
    fast path that raises answers SYSTEM_ERROR (as a handler's exception does) and the rest goes on."""
    from mqtool_remoting.transport import Server

    async def scenario():
        seen: list = []
        server = await Server(Service().handle, fast=fast_hook(seen)).start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        # more answers than FLUSH_FRAMES, the two kinds interleaved: a flush by either loses none
        reqs = [RemotingCommand.request(FAST if i % 2 else ECHO, {"x": f"v{i}"}) for i in range(40)]
        reqs.append(RemotingCommand.request(FAST, {"x": "boom"}))
        reqs.append(RemotingCommand.request(FAST, {"x": "after"}))
        writer.write(b"".join(r.encode() for r in reqs))
        got = {r.opaque: r for r in await raw_frames(reader, len(reqs))}
        assert len(seen) == len(reqs) and seen[0] == reqs[0].encode()[4:]
        for i, req in enumerate(reqs[:40]):
            assert got[req.opaque].ext_fields["echo"] == f"v{i}"
            assert got[req.opaque].remark == ("fast" if i % 2 else None)
        boom = got[reqs[40].opaque]
        assert boom.code == ResponseCode.SYSTEM_ERROR and boom.remark == "RuntimeError: fast boom"
        assert got[reqs[41].opaque].remark == "fast"
        writer.close()
        await server.stop()
    with caplog.at_level(logging.ERROR, logger="mqtool.remoting"):
        run(scenario())
    assert sum("failed" in r.getMessage() for r in caplog.records) == 1


def test_with_a_fast_path_a_frame_before_garbage_is_still_answered():
    from mqtool_remoting.transport import Server

    async def scenario():
        closed = asyncio.Queue()
        server = await Server(Service().handle, on_close=closed.put_nowait, fast=fast_hook([])).start("127.0.0.1", 0)
        for junk in (b"\xff\xff\xff\xff", b"\x00\x00\x00\x08\x00\x00\x00\x04{{{{"):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            first, second = RemotingCommand.request(FAST, {"x": "a"}), RemotingCommand.request(ECHO, {"x": "b"})
            writer.write(first.encode() + second.encode() + junk)
            answers = FrameDecoder().feed(await reader.read())      # the answers, then EOF
            assert {a.opaque: a.ext_fields["echo"] for a in answers} == {first.opaque: "a", second.opaque: "b"}
            await closed.get()
            writer.close()
        await server.stop()
    run(scenario())


def test_a_connect_timing_out_inside_a_handler_leaves_the_callers_connection_open():
    """A handler that connects somewhere before its first wait runs inside its connection's reader
    task: the connect's timeout must fail the connect (RemotingTimeout), not cancel that reader
    (which closed the caller's connection). The peer never accepts: a listener whose backlog is full."""
    import socket
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)
    fillers = []
    for _ in range(8):                        # the backlog fills; later SYNs are dropped, connects hang
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(full.getsockname())
        fillers.append(s)
    blackhole = "127.0.0.1:%d" % full.getsockname()[1]

    async def handle(conn, cmd):
        try:
            await connect(blackhole, timeout_s=0.3)
        except RemotingTimeout:
            return cmd.response(0, "timed out")
        return cmd.response(1, "connected")

    async def scenario():
        server = await serve(handle, "127.0.0.1", 0)
        conn = await connect(f"127.0.0.1:{server.port}")
        loop = asyncio.get_running_loop()
        start = loop.time()
        got = await conn.request(RemotingCommand.request(ECHO), timeout_s=5)
        assert got.remark == "timed out" and 0.3 <= loop.time() - start < 3
        await asyncio.sleep(0.1)
        assert not conn.closed.is_set() and all(not c.closed.is_set() for c in server.connections)
        assert (await conn.request(RemotingCommand.request(ECHO), timeout_s=5)).remark == "timed out"
        await conn.close()
        await server.stop()
    try:
        run(scenario())
    finally:
        for s in fillers + [full]:
            s.close()
