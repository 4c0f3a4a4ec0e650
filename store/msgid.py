"""Offset message ids: store host IP + port + commitlog offset, as uppercase hex.

MessageDecoder.createMessageId / decodeMessageId. 32 hex chars for an IPv4 store host,
56 for IPv6.
"""
import ipaddress
import struct

from .errors import FormatError


def create_offset_msg_id(store_ip: bytes, store_port: int, commitlog_offset: int) -> str:
    return (store_ip + struct.pack(">iq", store_port, commitlog_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """-> (ip text, port, commitlog offset). Raises FormatError for anything else."""
    text = msg_id.strip()
    if len(text) not in (32, 56):
        raise FormatError(f"message id {msg_id!r} is not an offset message id (32 or 56 hex chars)")
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise FormatError(f"message id {msg_id!r} is not hexadecimal") from None
    if len(raw) * 2 != len(text):           # fromhex skips whitespace inside the text
        raise FormatError(f"message id {msg_id!r} is not hexadecimal")
    ip_len = len(raw) - 12
    port, offset = struct.unpack(">iq", raw[ip_len:])
    return str(ipaddress.ip_address(raw[:ip_len])), port, offset
