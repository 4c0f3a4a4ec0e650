"""The permissive-mode front (mqtool/proxy/tlsfront.py) on its own, in-process: a grpc.aio server on its
two unix sockets, plaintext and TLS clients on the one TCP port with their own address kept, 8 MiB both
ways through the splice, connections that never say what they speak, and nothing left after close."""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time

import grpc
import pytest

from mqtool.broker.config import BrokerConfig
from mqtool.proxy.tlsfront import TlsFront, grpc_peer, is_tls, tls_mode

METHOD = "/t.Echo/Echo"
BIG = 64 << 20


@pytest.fixture(scope="module")
def pem(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the test certificate")
    tmp = tmp_path_factory.mktemp("front")
    key, cert = tmp / "k.pem", tmp / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return key.read_bytes(), cert.read_bytes()


async def until(what: str, check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def serving(pem):
    """A front on a free loopback port before an echo server that answers `<its peer>|<the request>`."""
    front = TlsFront()
    port = front.listen("127.0.0.1", 0)
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", BIG), ("grpc.max_send_message_length", BIG)])

    async def echo(request, context):
        return front.real_peer(context.peer()).encode() + b"|" + request
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "t.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}),))
    server.add_insecure_port(front.plain_address)
    server.add_secure_port(front.tls_address, grpc.ssl_server_credentials([pem]))
    await server.start()
    await front.serve()
    return front, server, port


async def shut(front, server):
    front.stop_accepting()
    await server.stop(None)
    front.close()


def channels(port, pem):
    options = [("grpc.max_receive_message_length", BIG), ("grpc.max_send_message_length", BIG)]
    return (grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options),
            grpc.aio.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(root_certificates=pem[1]),
                                    options=options))


def test_plaintext_and_tls_on_one_port_each_with_its_own_address(pem):
    async def run():
        front, server, port = await serving(pem)
        try:
            plain, tls = channels(port, pem)
            big = os.urandom(8 << 20)              # far above the transports' buffers: the splice pauses
            peers = []
            for channel in (plain, tls):
                peer, _, body = (await channel.unary_unary(METHOD)(big, timeout=60)).partition(b"|")
                assert body == big
                peers.append(peer.decode())
            assert all(p.startswith("ipv4:127.0.0.1:") for p in peers) and peers[0] != peers[1]
            assert sorted(front.peers.values()) == sorted(peers)     # grpc's unix peers, mapped
            assert all(k.startswith(f"unix:{front.dir}/c") for k in front.peers)
            assert sorted(os.listdir(front.dir)) == ["plain.sock", "tls.sock"]   # bound names not left as files
            await plain.close()
            await tls.close()
            await until("the spliced connections to go", lambda: not front.halves and not front.peers)
        finally:
            await shut(front, server)
        assert not os.path.exists(front.dir)
    asyncio.run(run())


def test_a_plaintext_client_is_refused_by_the_tls_socket_only_when_it_speaks_tls(pem):
    """A TLS client that does not trust the certificate fails its handshake; plaintext goes on serving."""
    async def run():
        front, server, port = await serving(pem)
        try:
            untrusted = grpc.aio.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials())
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await untrusted.unary_unary(METHOD)(b"x", timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
            await untrusted.close()
            plain, tls = channels(port, pem)
            assert (await plain.unary_unary(METHOD)(b"still", timeout=10)).endswith(b"|still")
            await plain.close()
            await tls.close()
        finally:
            await shut(front, server)
    asyncio.run(run())


def test_connections_that_never_say_what_they_speak_are_closed(pem):
    async def run():
        front, server, port = await serving(pem)
        loop = asyncio.get_running_loop()
        try:
            for first in (b"", b"PR", b"GET / HTTP/1.1\r\n\r\n"):    # closed early; not gRPC at all
                sock = socket.create_connection(("127.0.0.1", port))
                sock.setblocking(False)
                await loop.sock_sendall(sock, first)
                sock.shutdown(socket.SHUT_WR)
                while await loop.sock_recv(sock, 65536):              # until the front (or grpc) closes it
                    pass
                sock.close()
            await until("no half left", lambda: not front.halves and not front.peers)
        finally:
            await shut(front, server)
    asyncio.run(run())


def test_stop_with_connections_open_removes_the_sockets(pem):
    async def run():
        front, server, port = await serving(pem)
        plain, _ = channels(port, pem)
        assert (await plain.unary_unary(METHOD)(b"a", timeout=10)).endswith(b"|a")
        assert front.halves
        await shut(front, server)
        assert not front.halves and not os.path.exists(front.dir)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        await plain.close()
    asyncio.run(run())


def test_the_first_bytes_decide():
    assert is_tls(b"\x16\x03\x01\x02\x00")                     # a TLS 1.0-1.3 ClientHello record
    assert not is_tls(b"PRI * HTTP/2.0\r\n")                    # the h2c preface
    assert not is_tls(b"\x16\x02\x00\x00\x00") and not is_tls(b"\x16")
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
