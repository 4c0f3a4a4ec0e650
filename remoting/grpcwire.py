"""gRPC over HTTP/2, the wire parts a server needs (grpc/grpc PROTOCOL-HTTP2.md):

    request   HEADERS  :method POST, :path /<package.Service>/<Method>, content-type application/grpc[+proto],
                       te trailers, grpc-timeout <n><H|M|S|m|u|n>, custom metadata
              DATA     length-prefixed messages: compressed u8 | length u32 | message
    response  HEADERS  :status 200, content-type application/grpc
              DATA     length-prefixed messages
              HEADERS  (trailers, END_STREAM) grpc-status <code>, grpc-message <percent-encoded text>
    or, with no message, one HEADERS holding both (Trailers-Only).

A message flagged compressed is gzip (grpc-encoding gzip, the one encoding grpc's clients offer by default);
others are refused with UNIMPLEMENTED as grpc does."""
from __future__ import annotations

import struct
import zlib
from enum import IntEnum

from mqtool_remoting.hpack import literal

_PREFIX = struct.Struct(">BL")


class StatusCode(IntEnum):
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class GrpcWireError(ValueError):
    def __init__(self, status: StatusCode, message: str):
        super().__init__(message)
        self.status = status


RESPONSE_HEADERS = b"\x88" + literal(b"content-type", b"application/grpc")     # \x88: static :status 200
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_SAFE = frozenset(range(0x20, 0x7F)) - {ord("%")}


def message(payload: bytes) -> bytes:
    return _PREFIX.pack(0, len(payload)) + payload


def trailers(status: int, text: str = "", only: bool = False) -> bytes:
    """The trailing header block; `only` makes it a Trailers-Only response (status and content type too)."""
    block = RESPONSE_HEADERS if only else b""
    block += literal(b"grpc-status", str(int(status)).encode())
    if text:
        block += literal(b"grpc-message", percent_encode(text))
    return block


def percent_encode(text: str) -> bytes:
    return b"".join(bytes((b,)) if b in _SAFE else b"%%%02X" % b for b in text.encode())


def timeout_seconds(value: bytes) -> float | None:
    """grpc-timeout as seconds, None when absent or malformed (a malformed one is ignored, as grpc does)."""
    text = value.decode("ascii", "replace")
    if len(text) < 2 or text[-1] not in _TIMEOUT_UNITS or not text[:-1].isdigit() or len(text) > 9:
        return None
    return int(text[:-1]) * _TIMEOUT_UNITS[text[-1]]


class MessageReader:
    """Length-prefixed messages out of a stream's DATA payloads."""

    def __init__(self, max_size: int, encoding: bytes = b""):
        self.buf = bytearray()
        self.max_size = max_size
        self.encoding = encoding

    def feed(self, data: bytes) -> list[bytes]:
        buf = self.buf
        if not buf and len(data) >= 5:            # the common case: whole messages, nothing buffered
            flag, size = _PREFIX.unpack_from(data)
            if len(data) == 5 + size and size <= self.max_size:
                return [self._plain(flag, data[5:])]
        buf += data
        out = []
        while len(buf) >= 5:
            flag, size = _PREFIX.unpack_from(buf)
            if size > self.max_size:
                raise GrpcWireError(StatusCode.RESOURCE_EXHAUSTED,
                                    f"received message larger than max ({size} vs. {self.max_size})")
            if len(buf) < 5 + size:
                break
            out.append(self._plain(flag, bytes(buf[5:5 + size])))
            del buf[:5 + size]
        return out

    def _plain(self, flag: int, payload: bytes) -> bytes:
        if not flag:
            return payload
        if self.encoding != b"gzip":
            raise GrpcWireError(StatusCode.UNIMPLEMENTED,
                                f"compressed message with grpc-encoding {self.encoding.decode() or 'none'}")
        try:
            plain = zlib.decompress(payload, 16 + zlib.MAX_WBITS)
        except zlib.error as exc:
            raise GrpcWireError(StatusCode.INTERNAL, f"cannot gunzip a message: {exc}") from None
        if len(plain) > self.max_size:
            raise GrpcWireError(StatusCode.RESOURCE_EXHAUSTED,
                                f"received message larger than max ({len(plain)} vs. {self.max_size})")
        return plain
