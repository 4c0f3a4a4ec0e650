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
READ_SIZE = 256 * 1024      # a read into space() (asyncio's own read size)
_SPARE: list[bytearray] = []   # READ_SIZE buffers no decoder holds bytes in, lent out by space()
_SPARE_MAX = 4


class FrameDecoder:
    def __init__(self, max_frame: int = FRAME_MAX_LENGTH):
        self.max_frame = max_frame
        self._buf = bytearray()
        self._error: FrameError | None = None
        self._read: bytearray | None = None    # space()'s buffer: bytes [0:_held] read, not yet a whole frame
        self._held = 0

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

    def space(self) -> memoryview:
        """Where the next read goes (asyncio.BufferedProtocol.get_buffer): the free end of a buffer
        the decoder reads frames from in place, with room for the rest of the frame it waits for.
        A read needs no bytes object of its own and a frame cut across reads is not copied whole
        again, as `bodies` does with its `data`. The buffer is lent from a few spares while the
        decoder holds no bytes in it, so an idle connection holds none; a buffer is replaced,
        never resized (a read's view of it may still be alive)."""
        if self._error is not None:
            raise FrameError(f"decoder already failed: {self._error}")
        buf, held = self._read, self._held
        if buf is None:
            buf = self._read = _SPARE.pop() if _SPARE else bytearray(READ_SIZE)
        need = 1
        if held >= 4:
            length = _LEN.unpack_from(buf, 0)[0]
            if 4 <= length <= self.max_frame:
                need = 4 + length - held
        if len(buf) - held < need:
            bigger = bytearray(max(READ_SIZE, held + need))
            bigger[:held] = memoryview(buf)[:held]
            buf = self._read = bigger
        return memoryview(buf)[held:]

    def filled(self, nbytes: int) -> list[bytes]:
        """`bodies` of what a read put into `space()` (`nbytes` bytes), with the same errors."""
        buf = self._read
        end = self._held + nbytes
        out: list[bytes] = []
        pos = 0
        unpack = _LEN.unpack_from
        with memoryview(buf) as view:
            while end - pos >= 4:
                length = unpack(buf, pos)[0]
                if length < 4 or length > self.max_frame:
                    self._error = FrameError(f"frame length {length} outside 4..{self.max_frame}", out)
                    self._read, self._held = None, 0
                    raise self._error
                if end - pos - 4 < length:
                    break
                out.append(view[pos + 4:pos + 4 + length].tobytes())
                pos += 4 + length
            if pos and pos < end:              # a frame not yet whole: to the front
                view[:end - pos] = view[pos:end]
        self._held = end - pos
        if not self._held:
            self._read = None
            if len(buf) == READ_SIZE and len(_SPARE) < _SPARE_MAX:
                _SPARE.append(buf)
        return out

    @property
    def pending(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._buf) + self._held
