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
    """Slave side: the master's frames, each returned once its whole body has arrived."""

    def __init__(self, max_size: int = MAX_FRAME_SIZE):
        self._buf = bytearray()
        self.max_size = max_size

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        out, pos, buf = [], 0, self._buf
        while len(buf) - pos >= FRAME_HEADER_SIZE:
            offset, size = FRAME_HEADER.unpack_from(buf, pos)
            if offset < 0 or size < 0 or size > self.max_size:
                raise HAProtocolError(f"bad frame header: offset {offset}, size {size}")
            end = pos + FRAME_HEADER_SIZE + size
            if len(buf) < end:
                break
            out.append(Frame(offset, bytes(buf[pos + FRAME_HEADER_SIZE:end])))
            pos = end
        if pos:
            del buf[:pos]
        return out
