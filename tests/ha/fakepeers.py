"""Scripted HA peers, written from spec/ha.md alone: plain blocking sockets, no mqtool code.

FakeSlave connects to a real master's HA port; FakeMaster is the address a real slave is told to
follow (haMasterAddress). Both speak the two messages of the 4.x HA channel byte for byte:

    slave -> master   8 bytes   offset report: the slave's commit log max offset (int64, BE)
    master -> slave   12 bytes  frame header: phyOffset (int64, BE), size (int32, BE)
                      + size bytes of raw commit log (size 0: heartbeat)

Every read takes a timeout, so a peer that misbehaves fails a test instead of hanging it.
"""
from __future__ import annotations

import socket
import struct
import time

REPORT = struct.Struct(">q")
HEADER = struct.Struct(">qi")
HEADER_SIZE = HEADER.size            # 12


class PeerClosed(ConnectionError):
    """The other side closed the connection while we were waiting for bytes."""


class _Channel:
    """A connected socket with a receive buffer and deadline-bounded reads."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = bytearray()

    def _recv_some(self, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no bytes from the peer in time")
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(1 << 16)
        except socket.timeout:
            raise TimeoutError("no bytes from the peer in time") from None
        except ConnectionResetError:
            data = b""
        if not data:
            raise PeerClosed("the peer closed the connection")
        return data

    def recv_exact(self, n: int, timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while len(self.buf) < n:
            self.buf += self._recv_some(deadline)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def closed_within(self, timeout: float) -> bool:
        """True once the peer closes (whatever it sends before is read and dropped), False at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._recv_some(deadline)
            except PeerClosed:
                return True
            except TimeoutError:
                return False
            self.buf.clear()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()


class FakeSlave(_Channel):
    """A slave that does only what a test tells it: report offsets, read frames."""

    def __init__(self, addr: str, timeout: float = 5.0):
        host, _, port = addr.rpartition(":")
        super().__init__(socket.create_connection((host, int(port)), timeout))

    def report(self, offset: int) -> None:
        self.send_raw(REPORT.pack(offset))

    def read_frame(self, timeout: float = 5.0) -> tuple[int, bytes]:
        """(phyOffset, data) of the next frame; data is b"" for a heartbeat."""
        deadline = time.monotonic() + timeout
        offset, size = HEADER.unpack(self.recv_exact(HEADER_SIZE, timeout))
        assert size >= 0, f"frame header with a negative size {size} at offset {offset}"
        return offset, self.recv_exact(size, max(deadline - time.monotonic(), 0.001))

    def __enter__(self) -> "FakeSlave":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class FakeMaster:
    """Listens on 127.0.0.1:0; one slave connection at a time (a reconnect replaces it)."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.conn: _Channel | None = None
        self.accepted = 0

    def accept(self, timeout: float = 10.0) -> None:
        if self.conn is not None:
            self.conn.close()
        self.server.settimeout(timeout)
        try:
            sock, _ = self.server.accept()
        except socket.timeout:
            raise TimeoutError(f"no slave connected to {self.addr} within {timeout} s") from None
        self.conn = _Channel(sock)
        self.accepted += 1

    def read_report(self, timeout: float = 5.0) -> int:
        return REPORT.unpack(self.conn.recv_exact(REPORT.size, timeout))[0]

    def send_frame(self, offset: int, data: bytes) -> None:
        self.conn.send_raw(HEADER.pack(offset, len(data)) + data)

    def send_raw(self, data: bytes) -> None:
        self.conn.send_raw(data)

    def closed_within(self, timeout: float) -> bool:
        return self.conn.closed_within(timeout)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.server.close()

    def __enter__(self) -> "FakeMaster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
