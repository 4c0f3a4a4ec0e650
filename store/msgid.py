"""Offset message ids: store host IP + port + commitlog offset, as uppercase hex.

MessageDecoder.createMessageId / decodeMessageId. 32 hex chars for an IPv4 store host,
56 for IPv6. A unique key (UNIQ_KEY, MessageClientIDSetter: IP, pid(2), class loader hash(4),
ms since the month began(4), counter(2); the msgId a producer prints) has as many hex chars:
read as an offset id its "port" is pid << 16 | hash >> 16, past 65535 unless pid % 65536 is 0.
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


def is_message_id(text: str) -> bool:
    """Whether text has a message id's form, an offset id's or a unique key's: 32 or 56 hex digits."""
    t = text.strip()
    return len(t) in (32, 56) and all(c in "0123456789abcdefABCDEF" for c in t)


def offset_id_fields(msg_id: str) -> tuple[str, int, int] | None:
    """decode_offset_msg_id's answer for an id that can be an offset id (its port 1..65535, its
    offset not negative), None for any other id: a unique key, or a key of another client's
    making. mqadmin tries every id at its decoded address and falls back on the unique key
    look-up; this tells the two apart before anything is asked."""
    try:
        ip, port, offset = decode_offset_msg_id(msg_id)
    except FormatError:
        return None
    return (ip, port, offset) if 0 < port <= 0xFFFF and offset >= 0 else None
