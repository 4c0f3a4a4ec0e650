"""The body of SEND_BATCH_MESSAGE (MessageDecoder.encodeMessages / decodeMessages, 4.9.8).

Each message of the batch, back to back:

    +-----------+-------+-----+------+-----------+------+-----------+------------+
    | totalSize | magic | crc | flag | bodyLen   | body | propsLen  | properties |
    | int32     | int32 | i32 | i32  | int32     |      | int16     | UTF-8      |
    +-----------+-------+-----+------+-----------+------+-----------+------------+

The client writes magic and crc as 0; the broker recomputes what it stores.
"""
from __future__ import annotations

import struct

from mqtool_remoting.errors import BodyError

_BATCH_HEAD = struct.Struct(">iiiii")   # total, magic, crc, flag, body length (20 bytes)
_SHORT = struct.Struct(">h")


class BatchFormatError(BodyError):
    """A batch body MessageDecoder.decodeMessages could not read either."""


def decode_batch(body: bytes) -> list[tuple[int, bytes, str]]:
    """MessageDecoder.decodeMessages of a batch body: (flag, body, properties text) per message."""
    out, p, end = [], 0, len(body)
    head, short, append = _BATCH_HEAD.unpack_from, _SHORT.unpack_from, out.append
    while p < end:
        if p + 20 > end:
            raise BatchFormatError("batch body is cut off")
        total, _magic, _crc, flag, blen = head(body, p)
        q = p + 20
        if blen < 0 or q + blen + 2 > end or total < 22 or p + total > end:
            raise BatchFormatError(f"bad batch entry at {p}")
        data = body[q:q + blen]
        q += blen
        plen = short(body, q)[0]
        q += 2
        if plen < 0 or q + plen > end:     # Java: NegativeArraySizeException / BufferUnderflowException
            raise BatchFormatError(f"bad properties length {plen} in the batch entry at {p}")
        append((flag, data, body[q:q + plen].decode("utf-8", "replace")))
        p += total
    return out


def encode_batch(messages: list[tuple[int, bytes, str]]) -> bytes:
    parts = []
    for flag, data, props in messages:
        praw = props.encode()
        total = 20 + len(data) + 2 + len(praw)
        parts.append(_BATCH_HEAD.pack(total, 0, 0, flag, len(data)) + data + struct.pack(">h", len(praw)) + praw)
    return b"".join(parts)


def merge_batch_properties(inner: str, outer: str) -> str:
    """Batch inner properties, then one 0x02 (unless already there), then the batch-level ones."""
    if inner and outer and not inner.endswith("\x02"):
        return inner + "\x02" + outer
    return inner + outer
