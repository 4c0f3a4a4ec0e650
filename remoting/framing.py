"""Sans-IO frame decoder: feed bytes, get RemotingCommands. No sockets, no event loop.

Same limits as Java's NettyDecoder (a LengthFieldBasedFrameDecoder with a 16 MiB maximum). A
FrameError means the byte stream can no longer be trusted: the caller closes the connection, and
the decoder refuses further input.
"""
from __future__ import annotations

import struct

from mqtool_remoting.codes import FRAME_MAX_LENGTH
from mqtool_remoting.command import RemotingCommand, decode_frame_body
from mqtool_remoting.errors import FrameError

_LEN = struct.Struct(">i")


class FrameDecoder:
    def __init__(self, max_frame: int = FRAME_MAX_LENGTH):
        self.max_frame = max_frame
        self._buf = bytearray()
        self._error: FrameError | None = None

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Every frame completed by `data`, in order.

        On bad input raises FrameError whose `decoded` lists the good commands that preceded it.
        """
        if self._error is not None:
            raise FrameError(f"decoder already failed: {self._error}")
        self._buf += data
        out: list[RemotingCommand] = []
        buf, pos = self._buf, 0
        try:
            while len(buf) - pos >= 4:
                length = _LEN.unpack_from(buf, pos)[0]
                if length < 4 or length > self.max_frame:
                    # Checked before the frame arrives, so a huge length never makes us buffer it.
                    raise FrameError(f"frame length {length} outside 4..{self.max_frame}")
                if len(buf) - pos - 4 < length:
                    break
                out.append(decode_frame_body(bytes(buf[pos + 4:pos + 4 + length])))
                pos += 4 + length
        except FrameError as exc:
            self._error = FrameError(str(exc), out)
            self._buf = bytearray()
            raise self._error from None
        if pos:
            del buf[:pos]
        return out

    def bodies(self, data: bytes) -> list[bytes]:
        """Every frame completed by `data`, each as the bytes after its length field (what
        `decode_frame_body` reads), for a caller that looks at some frames before decoding them.
        A bad length raises FrameError whose `decoded` lists the bodies before it (undecoded), and
        the decoder refuses further input."""
        if self._error is not None:
            raise FrameError(f"decoder already failed: {self._error}")
        buf = self._buf
        if buf:
            buf += data
            src = buf
        else:                  # nothing held: frames are cut straight from `data`, the rest kept
            src = data
        out: list[bytes] = []
        pos, end = 0, len(src)
        unpack = _LEN.unpack_from
        with memoryview(src) as view:      # one copy a frame (a bytearray slice would be two)
            while end - pos >= 4:
                length = unpack(src, pos)[0]
                if length < 4 or length > self.max_frame:
                    self._error = FrameError(f"frame length {length} outside 4..{self.max_frame}", out)
                    self._buf = bytearray()
                    raise self._error
                if end - pos - 4 < length:
                    break
                out.append(view[pos + 4:pos + 4 + length].tobytes())
                pos += 4 + length
            if src is data and pos < end:
                buf += view[pos:]
        if src is buf and pos:
            del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._buf)
