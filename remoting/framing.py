"""Sans-IO frame decoder: feed bytes, get RemotingCommands. No sockets, no event loop."""
from __future__ import annotations

import struct

from remoting.codes import FRAME_MAX_LENGTH
from remoting.command import RemotingCommand, decode_frame_body
from remoting.errors import FrameError

_LEN = struct.Struct(">i")


class FrameDecoder:
    def __init__(self, max_frame: int = FRAME_MAX_LENGTH):
        self.max_frame = max_frame
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Every complete frame in the bytes so far. FrameError means: close the connection."""
        self._buf += data
        out = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= 4:
            length = _LEN.unpack_from(buf, pos)[0]
            if length < 4 or length > self.max_frame:
                raise FrameError(f"frame length {length} outside 4..{self.max_frame}")
            if len(buf) - pos - 4 < length:
                break
            out.append(decode_frame_body(bytes(buf[pos + 4:pos + 4 + length])))
            pos += 4 + length
        if pos:
            del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        return len(self._buf)
