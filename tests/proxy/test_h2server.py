"""mqtool's gRPC server (mqtool/proxy/h2server.py) against grpcio's own clients: unary, server-streaming and
bidi calls, flow control both ways with messages far above the windows, gzip, statuses, cancellation,
plaintext and TLS on one port (tlsServerMode=permissive), and what it does with peers that are not gRPC."""
from __future__ import annotations

import asyncio
import os
import socket
import time

import grpc
import pytest

from mqtool.broker.config import BrokerConfig
from mqtool.proxy.h2server import BIDI, SERVER_STREAM, UNARY, GrpcServer, Method, grpc_peer, is_tls
from mqtool.proxy.tls import tls_mode
from mqtool_remoting.grpcwire import StatusCode

METHOD = "/t.Echo/Echo"
BIG = 64 << 20
SMALL = 1 << 20


async def until(what: str, check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def tls_ctx(pem):
    from mqtool.proxy.tls import tls_context
    key, cert = pem
    return tls_context(BrokerConfig(brokerName="b", grpcTlsCertPath=str(cert), grpcTlsKeyPath=str(key)))


async def echo(request, call):
    if request.startswith(b"abort:"):
        await call.abort(StatusCode.FAILED_PRECONDITION, request[6:].decode())
    if request == b"raise":
        raise RuntimeError("boom")
    if request == b"hang":
        await asyncio.Event().wait()
    if request == b"slow":
        await asyncio.sleep(0.3)                 # a call still under way when the server stops
    if request == b"deadline":
        return str(round(call.time_remaining())).encode()
    return call.peer().encode() + b"|" + request


async def count(request, call):
    """Server streaming: `n` answers of `size` bytes each."""
    n, size = (int(x) for x in request.split(b","))
    for i in range(n):
        yield bytes([i % 256]) * size


async def chat(requests, call):
    """Bidi: each request answered at once, reversed; b"bye" ends the call with OK."""
    async for request in requests:
        if request == b"bye":
            return
        await call.write(request[::-1])


def methods():
    ident = (bytes, bytes)
    return {b"/t.Echo/Echo": Method(UNARY, echo, *ident), b"/t.Echo/Count": Method(SERVER_STREAM, count, *ident),
            b"/t.Echo/Chat": Method(BIDI, chat, *ident)}


async def serving(pem=None, max_message=BIG):
    server = GrpcServer(methods(), max_message)
    port = await server.listen("127.0.0.1", 0, tls_ctx(pem) if pem else None, permissive=pem is not None)
    return server, port


def channels(port, pem):
    options = [("grpc.max_receive_message_length", BIG), ("grpc.max_send_message_length", BIG)]
    plain = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options)
    if pem is None:
        return plain, None
    return plain, grpc.aio.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(
        root_certificates=pem[1].read_bytes()), options=options)


def test_unary_both_ways_far_above_the_windows_plaintext_and_tls_on_one_port(pem):
    async def run():
        server, port = await serving(pem)
        try:
            plain, tls = channels(port, pem)
            big = os.urandom(8 << 20)          # 8 MiB: both directions wait on HTTP/2 flow control
            peers = []
            for channel in (plain, tls):
                peer, _, body = (await channel.unary_unary(METHOD)(big, timeout=60)).partition(b"|")
                assert body == big
                peers.append(peer.decode())
            assert all(p.startswith("ipv4:127.0.0.1:") for p in peers) and peers[0] != peers[1]
            await plain.close()
            await tls.close()
            await until("the connections to go", lambda: not server.connections)
        finally:
            await server.stop()
    asyncio.run(run())


def test_many_calls_in_flight_on_one_connection_each_gets_its_own_answer():
    async def run():
        server, port = await serving()
        try:
            plain, _ = channels(port, None)
            echo_call = plain.unary_unary(METHOD)
            answers = await asyncio.gather(*(echo_call(b"n%d" % i, timeout=30) for i in range(300)))
            assert [a.partition(b"|")[2] for a in answers] == [b"n%d" % i for i in range(300)]
            assert len(server.connections) == 1
            await plain.close()
        finally:
            await server.stop()
    asyncio.run(run())


def test_statuses_gzip_deadline_and_unknown_methods():
    async def run():
        server, port = await serving(max_message=SMALL)
        try:
            plain, _ = channels(port, None)
            call = plain.unary_unary(METHOD)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(b"abort:no such group 100%", timeout=10)
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert err.value.details() == "no such group 100%"          # percent-encoded on the wire
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(b"raise", timeout=10)
            assert err.value.code() == grpc.StatusCode.UNKNOWN and "boom" in err.value.details()
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await plain.unary_unary("/t.Echo/Nope")(b"x", timeout=10)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(b"x" * (SMALL + 1), timeout=10)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            packed = os.urandom(1000) + b"a" * (SMALL - 2000)            # fits once gunzipped
            got = await call(packed, timeout=10, compression=grpc.Compression.Gzip)
            assert got.partition(b"|")[2] == packed
            assert int(await call(b"deadline", timeout=30)) in (29, 30)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(b"hang", timeout=0.5)
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            await until("the hung call to be cancelled", lambda: not any(c.calls for c in server.connections))
            await plain.close()
        finally:
            await server.stop()
    asyncio.run(run())


def test_server_streaming_with_flow_control_and_a_client_that_cancels():
    async def run():
        server, port = await serving()
        try:
            plain, _ = channels(port, None)
            stream = plain.unary_stream("/t.Echo/Count")
            answers = [a async for a in stream(b"40,300000", timeout=60)]      # 12 MB, well past the windows
            assert [len(a) for a in answers] == [300000] * 40 and answers[39][0] == 39
            endless = stream(b"1000000,1000", timeout=60)
            got = 0
            async for _ in endless:
                got += 1
                if got == 50:
                    endless.cancel()
                    break
            await until("the cancelled stream to end", lambda: not any(c.calls for c in server.connections))
            await plain.close()
        finally:
            await server.stop()
    asyncio.run(run())


def test_bidi_answers_each_request_and_ends_when_the_handler_returns():
    async def run():
        server, port = await serving()
        try:
            plain, _ = channels(port, None)
            call = plain.stream_stream("/t.Echo/Chat")()
            for word in (b"abc", b"hello", os.urandom(3 << 20)):
                await call.write(word)
                assert await call.read() == word[::-1]
            await call.write(b"bye")
            assert await call.read() is grpc.aio.EOF
            assert await call.code() == grpc.StatusCode.OK
            await plain.close()
        finally:
            await server.stop()
    asyncio.run(run())


def test_an_untrusted_tls_client_fails_and_plaintext_goes_on(pem):
    async def run():
        server, port = await serving(pem)
        try:
            untrusted = grpc.aio.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials())
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await untrusted.unary_unary(METHOD)(b"x", timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
            await untrusted.close()
            plain, tls = channels(port, pem)
            assert (await plain.unary_unary(METHOD)(b"still", timeout=10)).endswith(b"|still")
            assert (await tls.unary_unary(METHOD)(b"tls", timeout=10)).endswith(b"|tls")
            await plain.close()
            await tls.close()
        finally:
            await server.stop()
    asyncio.run(run())


def test_peers_that_do_not_speak_grpc_are_closed(pem):
    async def run():
        server, port = await serving(pem)
        loop = asyncio.get_running_loop()
        try:
            for first in (b"", b"P", b"PR", b"GET / HTTP/1.1\r\n\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 20):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.setblocking(False)
                await loop.sock_sendall(sock, first)
                sock.shutdown(socket.SHUT_WR)
                try:
                    while await loop.sock_recv(sock, 65536):          # until the server closes it
                        pass
                except ConnectionResetError:                          # closed with our bytes unread
                    pass
                sock.close()
            await until("no connection left", lambda: not server.connections)
            plain, _ = channels(port, None)
            assert (await plain.unary_unary(METHOD)(b"ok", timeout=10)).endswith(b"|ok")
            await plain.close()
        finally:
            await server.stop()
    asyncio.run(run())


def test_stop_lets_a_call_under_way_answer():
    async def run():
        server, port = await serving()
        plain, _ = channels(port, None)
        call = plain.unary_unary(METHOD)
        assert (await call(b"warm", timeout=10)).endswith(b"|warm")
        slow = asyncio.ensure_future(call(b"slow", timeout=10))
        await until("the slow call to arrive", lambda: any(c.calls for c in server.connections))
        await server.stop(grace=5)
        assert (await slow).endswith(b"|slow")
        await plain.close()
    asyncio.run(run())


def test_stop_with_connections_open_closes_them_and_the_port(pem):
    async def run():
        server, port = await serving(pem)
        plain, _ = channels(port, pem)
        assert (await plain.unary_unary(METHOD)(b"a", timeout=10)).endswith(b"|a")
        assert server.connections
        await server.stop()
        await until("the connections to close", lambda: not server.connections)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        await plain.close()
    asyncio.run(run())


def test_the_first_bytes_decide():
    assert is_tls(b"\x16\x03\x01\x02\x00")                     # a TLS 1.0-1.3 ClientHello record
    assert not is_tls(b"PRI * HTTP/2.0\r\n")                    # the h2c preface
    assert not is_tls(b"\x16\x02\x00\x00\x00") and not is_tls(b"") and not is_tls(b"P")
    assert is_tls(b"\x16")                                       # the record type alone, when that is all
    assert grpc_peer(("127.0.0.1", 5)) == "ipv4:127.0.0.1:5"
    assert grpc_peer(("::1", 5, 0, 0)) == "ipv6:[::1]:5"
    assert grpc_peer(("::ffff:10.0.0.1", 5, 0, 0)) == "ipv4:10.0.0.1:5"


@pytest.mark.parametrize("keys, mode", [
    ({}, "disabled"),
    ({"grpcTlsCertPath": "c", "grpcTlsKeyPath": "k"}, "permissive"),           # 5.3.3's default
    ({"grpcTlsCertPath": "c", "grpcTlsKeyPath": "k", "tlsServerMode": "ENFORCING"}, "enforcing"),
    ({"grpcTlsCertPath": "c", "grpcTlsKeyPath": "k", "tlsServerMode": "disabled"}, "disabled"),
    ({"tlsServerMode": "disabled"}, "disabled"),
])
def test_the_mode(keys, mode):
    assert tls_mode(BrokerConfig(brokerName="b", **keys)) == mode


@pytest.mark.parametrize("keys, error", [
    ({"tlsServerMode": "strict"}, "tlsServerMode must be permissive, enforcing or disabled, not 'strict'"),
    ({"tlsServerMode": "permissive"}, "tlsServerMode=permissive needs grpcTlsCertPath and grpcTlsKeyPath"),
    ({"tlsServerMode": "enforcing", "grpcTlsCertPath": "c"}, "needs both grpcTlsCertPath and grpcTlsKeyPath"),
    ({"grpcTlsKeyPath": "k"}, "needs both grpcTlsCertPath and grpcTlsKeyPath"),
])
def test_a_mode_the_port_cannot_have_is_refused(keys, error, tmp_path):
    from mqtool.broker.controller import BrokerController
    with pytest.raises(ValueError, match=error):
        tls_mode(BrokerConfig(brokerName="b", **keys))
    cfg = BrokerConfig(brokerName="b", listenPort=0, storePathRootDir=str(tmp_path / "s"), enableProxy=True, **keys)
    with pytest.raises(ValueError, match=error):
        BrokerController(cfg, {})
    assert not (tmp_path / "s").exists()                   # refused before the store opened
