"""The HA channel's two messages (HAService / HAConnection, 4.9.8), as a sans-IO codec.

It is raw TCP, not remoting frames:

    slave -> master   +------------------------------+
    (offset report)   | slave max offset (int64, BE) |   8 bytes: the next byte it needs
                      +------------------------------+

    master -> slave   +----------------------+-----------------+--------------+
    (data frame)      | phyOffset (int64 BE) | size (int32 BE) | size bytes   |   12-byte header
                      +----------------------+-----------------+--------------+

A frame carries raw commit log bytes starting at `phyOffset`, never across a commit log file;
`size == 0` is the master's heartbeat. Readers are fed whatever the socket gave and return
what is complete; they never block and never touch a socket.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import ReplicationError

REPORT_SIZE = 8
FRAME_HEADER = struct.Struct(">qi")
FRAME_HEADER_SIZE = FRAME_HEADER.size          # 12
_REPORT = struct.Struct(">q")

# Defaults of MessageStoreConfig (4.9.8).
HA_SEND_HEARTBEAT_INTERVAL_MS = 5000
HA_HOUSEKEEPING_INTERVAL_MS = 20_000
HA_TRANSFER_BATCH_SIZE = 32 * 1024
HA_SLAVE_FALLBEHIND_MAX = 256 * 1024 * 1024
SLAVE_TIMEOUT_MS = 3000
HA_CONNECT_RETRY_S = 5.0                       # HAClient sleeps 5 s after a failed connect
MASTER_IDLE_WAIT_S = 0.1                       # WriteSocketService waits up to 100 ms for new data
# A frame larger than this is not from a 4.x master (its batch is 32 KiB, one file at most).
MAX_FRAME_SIZE = 1 << 30
READ_BUFFER_SIZE = 4 * 1024 * 1024             # HAClient's read buffer


class HAProtocolError(ReplicationError):
    """Bytes on the HA channel that no RocketMQ peer sends."""


def encode_report(offset: int) -> bytes:
    return _REPORT.pack(offset)


def encode_frame_header(offset: int, size: int) -> bytes:
    return FRAME_HEADER.pack(offset, size)


class ReportReader:
    """Master side: the slave's offset reports. Like ReadSocketService, only the last complete
    8-byte value of what has arrived matters; earlier ones are superseded."""

    def __init__(self):
        self._pending = b""
        self.reports = 0

    def feed(self, data: bytes) -> int | None:
        buf = self._pending + bytes(data)
        whole = len(buf) - len(buf) % REPORT_SIZE
        self._pending = buf[whole:]
        if whole == 0:
            return None
        self.reports += whole // REPORT_SIZE
        value = _REPORT.unpack_from(buf, whole - REPORT_SIZE)[0]
        if value < 0:
            raise HAProtocolError(f"slave reported a negative offset {value}")
        return value


@dataclass(frozen=True)
class Frame:
    offset: int
    data: bytes          # empty for a heartbeat

    @property
    def heartbeat(self) -> bool:
        return not self.data


class FrameReader:
    """Slave side: the master's frames, each returned once its whole body has arrived.

    Two ways in: `feed(data)` copies and returns frames holding bytes; `writable()` + `filled(n)`
    let a socket read straight into the reader's buffer (HAClient's 4 MiB buffer) and return frames
    whose data are views into it, valid until the next `writable()`: one copy fewer per byte on
    the slave's hot path.
    """

    def __init__(self, max_size: int = MAX_FRAME_SIZE, capacity: int = READ_BUFFER_SIZE):
        self.max_size = max_size
        self._buf = bytearray(capacity)
        self._start = self._end = 0

    @property
    def buffered(self) -> int:
        return self._end - self._start

    def writable(self, at_least: int = 1) -> memoryview:
        """Free space to read into (the unparsed rest moved to the front, or a bigger buffer)."""
        need = self._end - self._start + max(at_least, FRAME_HEADER_SIZE)
        if self.buffered >= FRAME_HEADER_SIZE:
            need = max(need, FRAME_HEADER_SIZE + FRAME_HEADER.unpack_from(self._buf, self._start)[1])
        if need > len(self._buf):
            grown = bytearray(max(need, 2 * len(self._buf)))
            grown[:self.buffered] = self._buf[self._start:self._end]
            self._buf, self._end, self._start = grown, self.buffered, 0
        elif self._start and len(self._buf) - self._end < max(at_least, len(self._buf) // 4):
            n = self.buffered
            self._buf[:n] = self._buf[self._start:self._end]
            self._start, self._end = 0, n
        return memoryview(self._buf)[self._end:]

    def filled(self, n: int) -> list[tuple[int, memoryview]]:
        """`n` bytes were written into the last `writable()`: the frames now complete."""
        self._end += n
        out, pos, buf = [], self._start, self._buf
        view = memoryview(buf)
        while self._end - pos >= FRAME_HEADER_SIZE:
            offset, size = FRAME_HEADER.unpack_from(buf, pos)
            if offset < 0 or size < 0 or size > self.max_size:
                raise HAProtocolError(f"bad frame header: offset {offset}, size {size}")
            end = pos + FRAME_HEADER_SIZE + size
            if self._end < end:
                break
            out.append((offset, view[pos + FRAME_HEADER_SIZE:end]))
            pos = end
        self._start = pos
        if self._start == self._end:
            self._start = self._end = 0
        return out

    def next_header(self) -> tuple[int, int] | None:
        """(phyOffset, size) of the frame whose body is still arriving, once its header is complete:
        HAClient checks the offset on the header alone, before the body comes."""
        if self.buffered < FRAME_HEADER_SIZE:
            return None
        return FRAME_HEADER.unpack_from(self._buf, self._start)

    def feed(self, data: bytes) -> list[Frame]:
        data = memoryview(data)
        out = []
        while len(data):
            room = self.writable(len(data))
            n = min(len(room), len(data))
            room[:n] = data[:n]
            data = data[n:]
            out += [Frame(off, bytes(d)) for off, d in self.filled(n)]
        return out
