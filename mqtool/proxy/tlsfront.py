"""Plaintext and TLS gRPC on one TCP port, as 5.3.3's proxy serves them with `tls.server.mode=permissive`
(ProxyAndTlsProtocolNegotiator): grpcio listens on one kind per port, so in that mode grpc.aio listens on
two unix sockets in a private directory (plaintext, TLS) and this front, on grpcServerPort, looks at the
first bytes of each connection and splices it to one of them, both ways, at the transport level (one
callback a chunk, no task; reading paused while the other side's buffer is full). `enforcing` and
`disabled` need no front: grpcio listens on the TCP port itself.

The client's address: a spliced connection's unix socket is bound to a name of its own before it
connects, so grpc's `context.peer()` is `unix:<dir>/c<n>`; `peers` maps that to the client's
`ipv4:host:port`, which the handlers take in its place (ACL whitelists, born host)."""
from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import socket
import tempfile

log = logging.getLogger("mqtool.proxy")
MODES = ("permissive", "enforcing", "disabled")     # TlsMode's names (tls.server.mode)
TLS_HEADER = 5               # a TLS record header: type, version (2), length (2); Netty peeks as many
TLS_RECORD_TYPES = (20, 21, 22, 23, 24)   # change_cipher_spec, alert, handshake, application_data, heartbeat
PEEK_TIMEOUT_S = 120.0       # a connection that sends nothing is closed (grpc's own handshake timeout)


def tls_mode(cfg) -> str:
    """The gRPC port's mode from tlsServerMode (5.3.3's `tls.server.mode`): unset, `permissive` when a
    certificate and key are configured (5.3.3's default), else `disabled`. ValueError for what the
    broker cannot honour: another value, or TLS without both PEM files (mqtool has no test
    certificate, 5.3.3's tlsTestModeEnable)."""
    mode = cfg.tlsServerMode.strip().lower()
    if mode and mode not in MODES:
        raise ValueError(f"tlsServerMode must be permissive, enforcing or disabled, not {cfg.tlsServerMode!r}")
    if mode == "disabled":
        return mode
    cert, key = cfg.grpcTlsCertPath, cfg.grpcTlsKeyPath
    if (cert or key) and not (cert and key):
        raise ValueError("TLS on the gRPC port needs both grpcTlsCertPath and grpcTlsKeyPath")
    if not cert:
        if mode:
            raise ValueError(f"tlsServerMode={mode} needs grpcTlsCertPath and grpcTlsKeyPath (PEM files)")
        return "disabled"
    return mode or "permissive"


def is_tls(head: bytes) -> bool:
    """SslHandler.isEncrypted's test of a TLS record header (SSLv2 hellos, which grpc never sends, are
    taken as plaintext); an h2c connection starts with `PRI * HTTP/2.0`."""
    return len(head) >= 3 and head[0] in TLS_RECORD_TYPES and head[1] == 3


def grpc_peer(peername) -> str:
    """A TCP peer as grpc writes it: `ipv4:127.0.0.1:5555`, `ipv6:[::1]:5555` (v4-mapped as ipv4)."""
    host, port = peername[0], peername[1]
    if ":" not in host:
        return f"ipv4:{host}:{port}"
    if host.startswith("::ffff:") and "." in host:
        return f"ipv4:{host[7:]}:{port}"
    return f"ipv6:[{host}]:{port}"


class TlsFront:
    def __init__(self):
        # 0700: only the broker's user reaches the sockets; kept short, a unix socket's path has 107 bytes at most
        self.dir = tempfile.mkdtemp(prefix="mqtool-grpc-", dir=None if len(tempfile.gettempdir()) < 64 else "/tmp")
        self.plain_path = os.path.join(self.dir, "plain.sock")
        self.tls_path = os.path.join(self.dir, "tls.sock")
        self.peers: dict[str, str] = {}      # grpc's peer of a spliced connection -> the client's TCP peer
        self.halves: set[_Half] = set()
        self._ids = itertools.count(1)
        self._sock: socket.socket | None = None
        self._server: asyncio.AbstractServer | None = None

    @property
    def plain_address(self) -> str:
        return f"unix:{self.plain_path}"

    @property
    def tls_address(self) -> str:
        return f"unix:{self.tls_path}"

    def listen(self, host: str, port: int) -> int:
        """Bind the TCP port (before grpc starts, so a taken port fails first); the port bound."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=1024,
                                          dualstack_ipv6=host == "::")
        return self._sock.getsockname()[1]

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Client(self), sock=self._sock)

    def real_peer(self, peer: str) -> str:
        return self.peers.get(peer, peer)

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()
        elif self._sock is not None:
            self._sock.close()

    def close(self) -> None:
        """Close what is left of the spliced connections and remove the socket files."""
        for half in list(self.halves):
            if half.transport is not None:
                half.transport.abort()
        self.halves.clear()
        self.peers.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def new_name(self) -> str:
        return os.path.join(self.dir, f"c{next(self._ids)}")


class _Half(asyncio.Protocol):
    """One side of a spliced connection: what it reads, its `other` writes."""

    def __init__(self, front: TlsFront):
        self.front = front
        self.transport = None
        self.other: _Half | None = None
        self.eof = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.front.halves.add(self)

    def data_received(self, data: bytes) -> None:
        self.other.transport.write(data)

    def eof_received(self) -> bool:
        """A half-close goes across; both halves closed, both sides close (after their writes are out)."""
        self.eof = True
        if self.other is None or self.other.transport is None:
            return False
        if self.other.eof:
            self.other.transport.close()
            return False
        self.other.transport.write_eof()
        return True

    def connection_lost(self, exc) -> None:
        self.front.halves.discard(self)
        if self.other is not None and self.other.transport is not None:
            self.other.transport.close()

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()


class _Client(_Half):
    """The TCP side: it reads the first bytes, then connects to the grpc socket they call for."""

    def __init__(self, front: TlsFront):
        super().__init__(front)
        self.head = b""
        self.peer = ""
        self.timer = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.peer = grpc_peer(transport.get_extra_info("peername"))
        self.timer = asyncio.get_running_loop().call_later(PEEK_TIMEOUT_S, transport.abort)

    def data_received(self, data: bytes) -> None:
        if self.other is not None:
            self.other.transport.write(data)
            return
        self.head += data
        if len(self.head) < TLS_HEADER:
            return
        self.timer.cancel()
        self.transport.pause_reading()
        path = self.front.tls_path if is_tls(self.head) else self.front.plain_path
        asyncio.get_running_loop().create_task(self._connect(path))

    def eof_received(self) -> bool:
        if self.other is None or self.other.transport is None:
            return False                          # closed before it said what it speaks (or before the splice)
        return super().eof_received()

    def connection_lost(self, exc) -> None:
        if self.timer is not None:
            self.timer.cancel()
        super().connection_lost(exc)

    async def _connect(self, path: str) -> None:
        loop = asyncio.get_running_loop()
        name = self.front.new_name()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.bind(name)                   # the name grpc will give as this connection's peer
            await loop.sock_connect(sock, path)
            up = _Upstream(self.front, f"unix:{name}")
            up.other, self.other = self, up
            await loop.create_unix_connection(lambda: up, sock=sock)
        except OSError as exc:
            log.warning("gRPC connection from %s: cannot reach the endpoint's %s: %s", self.peer, path, exc)
            sock.close()
            self.other = None
            self.transport.abort()
            return
        finally:
            try:
                os.unlink(name)               # the bound name stays the socket's own; the file is not needed
            except OSError:
                pass
        if self.transport.is_closing():
            up.transport.close()
            return
        self.front.peers[up.key] = self.peer
        up.transport.write(self.head)
        self.head = b""
        self.transport.resume_reading()


class _Upstream(_Half):
    """The unix side, to grpc; `key` is its peer as grpc names it."""

    def __init__(self, front: TlsFront, key: str):
        super().__init__(front)
        self.key = key

    def connection_lost(self, exc) -> None:
        self.front.peers.pop(self.key, None)
        super().connection_lost(exc)
