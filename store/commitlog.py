"""CommitLog records: the construct schema (the spec and test oracle) and the fast codec.

Byte table (big-endian; CommitLog.MessageExtEncoder / MessageDecoder, 4.9.8), offsets for
IPv4 born and store hosts. An IPv6 host (sysflag 0x10 born, 0x20 store) is 16+4 bytes,
shifting what follows by 12.

    off  size  field
      0     4  TOTALSIZE             whole record, this field included
      4     4  MAGICCODE             0xDAA320A7 (0xDAA320AB: 5.x V2, 2-byte topic length)
      8     4  BODYCRC               zlib.crc32(stored body) & 0x7FFFFFFF
     12     4  QUEUEID
     16     4  FLAG
     20     8  QUEUEOFFSET
     28     8  PHYSICALOFFSET        commitlog offset of this record
     36     4  SYSFLAG               store.codes.SysFlag
     40     8  BORNTIMESTAMP
     48     8  BORNHOST              4-byte IP + int port
     56     8  STORETIMESTAMP
     64     8  STOREHOSTADDRESS      4-byte IP + int port
     72     4  RECONSUMETIMES
     76     8  PREPARED TRANSACTION OFFSET
     84   4+n  BODYLENGTH, BODY      stored bytes (compressed when sysflag says so)
   88+n   1+t  TOPICLENGTH, TOPIC    signed byte (V2: signed short)
 89+n+t   2+p  PROPERTIESLENGTH, PROPERTIES   signed short; see store.properties

    BLANK record (end of file): TOTALSIZE = bytes left in the file, MAGIC 0xCBD43194.
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field

from .codes import (END_FILE_MIN_BLANK_LENGTH, HOST_V6_EXTRA, MSG_FIXED_SIZE_V4,
                    TRANSACTION_TYPE_MASK, MagicCode, Prop, SysFlag, named)
from .crc import crc32
from .errors import FormatError
from .lazyschema import on_first_use
from .msgid import create_offset_msg_id
from .properties import format_properties, parse_properties

MESSAGE_MAGIC = int(MagicCode.MESSAGE_MAGIC_CODE)
MESSAGE_MAGIC_V2 = int(MagicCode.MESSAGE_MAGIC_CODE_V2)
BLANK_MAGIC = int(MagicCode.BLANK_MAGIC_CODE)
BORN_V6 = int(SysFlag.BORNHOST_V6_FLAG)
STORE_V6 = int(SysFlag.STOREHOSTADDRESS_V6_FLAG)


def body_crc(body: bytes) -> int:
    """UtilAll.crc32: CRC-32 masked to a non-negative int."""
    return crc32(body) & 0x7FFFFFFF


def record_size(sys_flag: int, body_len: int, topic_len: int, props_len: int, v2: bool = False) -> int:
    """CommitLog.calMsgLength (+1 for the V2 two-byte topic length)."""
    size = MSG_FIXED_SIZE_V4 + body_len + topic_len + props_len
    if sys_flag & BORN_V6:
        size += HOST_V6_EXTRA
    if sys_flag & STORE_V6:
        size += HOST_V6_EXTRA
    return size + (1 if v2 else 0)


# ---------------------------------------------------------------- construct schema (oracle)

def _expected_size(ctx) -> int:
    return record_size(ctx.sys_flag, len(ctx.body), len(ctx.topic.encode()),
                       len(ctx.properties.encode()), ctx.magic == MESSAGE_MAGIC_V2)


def _schemas() -> dict:
    """MessageRecordSchema and BlankRecordSchema, built on first use (store/lazyschema.py)."""
    from construct import (Bytes, Check, Const, GreedyBytes, IfThenElse, Int8sb, Int16sb, Int32sb, Int64sb,
                           PascalString, Prefixed, Rebuild, Struct, this)

    def host(flag: int):
        return IfThenElse(this.sys_flag & flag,
                          Struct("ip" / Bytes(16), "port" / Int32sb),
                          Struct("ip" / Bytes(4), "port" / Int32sb))

    message = Struct(
        "total_size" / Rebuild(Int32sb, _expected_size),
        "magic" / Int32sb,
        Check((this.magic == MESSAGE_MAGIC) | (this.magic == MESSAGE_MAGIC_V2)),
        "body_crc" / Int32sb,
        "queue_id" / Int32sb,
        "flag" / Int32sb,
        "queue_offset" / Int64sb,
        "physical_offset" / Int64sb,
        "sys_flag" / Int32sb,
        "born_timestamp" / Int64sb,
        "born_host" / host(BORN_V6),
        "store_timestamp" / Int64sb,
        "store_host" / host(STORE_V6),
        "reconsume_times" / Int32sb,
        "prepared_transaction_offset" / Int64sb,
        "body" / Prefixed(Int32sb, GreedyBytes),
        "topic" / IfThenElse(this.magic == MESSAGE_MAGIC_V2,
                             PascalString(Int16sb, "utf8"), PascalString(Int8sb, "utf8")),
        "properties" / PascalString(Int16sb, "utf8"),
        Check(this.total_size == _expected_size),
    )
    blank = Struct(
        "total_size" / Int32sb,
        "magic" / Const(BLANK_MAGIC, Int32sb),
    )
    return {"MessageRecordSchema": message, "BlankRecordSchema": blank}


__getattr__ = on_first_use(globals(), _schemas, "MessageRecordSchema", "BlankRecordSchema")


# ---------------------------------------------------------------- decoded record

@dataclass(slots=True)
class MessageRecord:
    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_ip: bytes
    born_port: int
    store_timestamp: int
    store_ip: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_text: str
    # The properties as a dict, parsed from properties_text on first use (most readers of a pulled
    # or scanned record never look): pass it when you have it, read and set it as `properties`.
    parsed_properties: dict | None = field(default=None, compare=False, repr=False)

    @property
    def properties(self) -> dict:
        props = self.parsed_properties
        if props is None:
            props = self.parsed_properties = parse_properties(self.properties_text)
        return props

    @properties.setter
    def properties(self, value: dict) -> None:
        self.parsed_properties = value

    # Derived views; cheap, so not stored.
    @property
    def born_host(self) -> str:
        return host_text(self.born_ip, self.born_port)

    @property
    def store_host(self) -> str:
        return host_text(self.store_ip, self.store_port)

    @property
    def tags(self) -> str | None:
        return self.properties.get(Prop.TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(Prop.KEYS, "").split(" ") if k]

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(Prop.UNIQ_KEY)

    @property
    def msg_id(self) -> str:
        return create_offset_msg_id(self.store_ip, self.store_port, self.physical_offset)

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_TYPE_MASK

    @property
    def crc_ok(self) -> bool:
        return body_crc(self.body) == self.body_crc

    @property
    def magic_name(self):
        return named(MagicCode, self.magic)


def host_text(ip: bytes, port: int) -> str:
    addr = ipaddress.ip_address(ip)
    return f"[{addr}]:{port}" if addr.version == 6 else f"{addr}:{port}"


def record_from_schema(parsed) -> MessageRecord:
    """The construct container as a MessageRecord, so both paths compare field by field."""
    return MessageRecord(
        parsed.total_size, parsed.magic, parsed.body_crc, parsed.queue_id, parsed.flag,
        parsed.queue_offset, parsed.physical_offset, parsed.sys_flag, parsed.born_timestamp,
        parsed.born_host.ip, parsed.born_host.port, parsed.store_timestamp,
        parsed.store_host.ip, parsed.store_host.port, parsed.reconsume_times,
        parsed.prepared_transaction_offset, parsed.body, parsed.topic, parsed.properties,
        parse_properties(parsed.properties))


# ---------------------------------------------------------------- fast path

_SIZE_MAGIC = struct.Struct(">ii")
# TOTALSIZE .. BORNTIMESTAMP (fixed for every host kind): 48 bytes.
_HEAD = struct.Struct(">iiiiiqqiq")
_HOST4 = struct.Struct(">4si")
_HOST6 = struct.Struct(">16si")
# STORETIMESTAMP is followed by the store host; the tail after it is fixed again.
_TAIL = struct.Struct(">iqi")  # reconsume times, prepared tx offset, body length
# The whole fixed part when both hosts are IPv4 (the overwhelmingly common case).
_FIXED_V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")


def decode_record(buf, pos: int = 0, end: int | None = None, check_crc: bool = False) -> MessageRecord:
    """Decode the message record at `pos`. Raises FormatError with the offset on any defect.

    `buf` is anything supporting the buffer protocol (bytes, mmap, memoryview).
    """
    if end is None:
        end = len(buf)
    if pos + 8 > end:
        raise FormatError("record header is cut off", offset=pos)
    total_size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic != MESSAGE_MAGIC and magic != MESSAGE_MAGIC_V2:
        raise FormatError(f"bad magic code {magic & 0xFFFFFFFF:#010x}", offset=pos)
    if total_size < MSG_FIXED_SIZE_V4 or pos + total_size > end:
        raise FormatError(f"record size {total_size} does not fit (bytes left: {end - pos})", offset=pos)
    rec_end = pos + total_size
    try:
        (_, _, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_ip, born_port,
         store_ts, store_ip, store_port, reconsume, prepared, body_len) = _FIXED_V4.unpack_from(buf, pos)
        p = pos + 88
        if sys_flag & (BORN_V6 | STORE_V6):  # rare: re-read the hosts at their real widths
            p = pos + 48
            host = _HOST6 if sys_flag & BORN_V6 else _HOST4
            born_ip, born_port = host.unpack_from(buf, p)
            p += host.size
            store_ts = _I64_AT(buf, p)
            p += 8
            host = _HOST6 if sys_flag & STORE_V6 else _HOST4
            store_ip, store_port = host.unpack_from(buf, p)
            p += host.size
            reconsume, prepared, body_len = _TAIL.unpack_from(buf, p)
            p += _TAIL.size
        if body_len < 0 or p + body_len > rec_end:
            raise FormatError(f"body length {body_len} runs past the record end", offset=pos)
        body = buf[p:p + body_len]
        if type(body) is not bytes:
            body = bytes(body)
        p += body_len
        if magic == MESSAGE_MAGIC:
            topic_len = _I8.unpack_from(buf, p)[0]
            p += 1
        else:
            topic_len = _I16.unpack_from(buf, p)[0]
            p += 2
        if topic_len < 0 or p + topic_len > rec_end:
            raise FormatError(f"topic length {topic_len} runs past the record end", offset=pos)
        topic = bytes(buf[p:p + topic_len]).decode("utf-8", "replace")
        p += topic_len
        props_len = _I16.unpack_from(buf, p)[0]
        p += 2
        if props_len < 0 or p + props_len > rec_end:
            raise FormatError(f"properties length {props_len} runs past the record end", offset=pos)
        props_text = bytes(buf[p:p + props_len]).decode("utf-8", "replace")
        p += props_len
    except struct.error:
        raise FormatError("record is cut off", offset=pos) from None
    if p != rec_end:
        raise FormatError(f"record size {total_size} does not match its fields ({p - pos} bytes)", offset=pos)
    if check_crc and (crc32(body) & 0x7FFFFFFF) != crc:
        raise FormatError(f"body CRC mismatch (stored {crc}, computed {body_crc(body)})", offset=pos)
    return MessageRecord(total_size, magic, crc, queue_id, flag, queue_offset, phys, sys_flag,
                         born_ts, born_ip, born_port, store_ts, store_ip, store_port, reconsume,
                         prepared, body, topic, props_text)


def decode_records(buf: bytes) -> list[MessageRecord]:
    """Every record of `buf`, whole records back to back (a pull answer's body), as decode_record
    reads each: the usual record (magic V1, IPv4 hosts, every length in place) with one unpack and
    its topic text cached; anything else, including any defect, by decode_record itself, which
    raises the FormatError."""
    out = []
    end_all = len(buf)
    pos = 0
    topics: dict[bytes, str] = {}
    unpack = _FIXED_V4.unpack_from
    while pos < end_all:
        if pos + 88 <= end_all:
            (total_size, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_ip, born_port,
             store_ts, store_ip, store_port, reconsume, prepared, body_len) = unpack(buf, pos)
            rec_end = pos + total_size
            p = pos + 88 + body_len
            if (magic == MESSAGE_MAGIC and not sys_flag & (BORN_V6 | STORE_V6) and body_len >= 0
                    and total_size >= MSG_FIXED_SIZE_V4 and rec_end <= end_all and p + 3 <= rec_end):
                topic_len = buf[p]
                q = p + 1 + topic_len
                if topic_len < 128 and q + 2 <= rec_end:
                    props_len = (buf[q] << 8) | buf[q + 1]
                    if props_len < 0x8000 and q + 2 + props_len == rec_end:
                        raw = buf[p + 1:q]
                        topic = topics.get(raw)
                        if topic is None:
                            topic = topics[raw] = bytes(raw).decode("utf-8", "replace")
                        body = buf[pos + 88:p]
                        if type(body) is not bytes:
                            body = bytes(body)
                        out.append(MessageRecord(
                            total_size, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_ip,
                            born_port, store_ts, store_ip, store_port, reconsume, prepared, body, topic,
                            bytes(buf[q + 2:rec_end]).decode("utf-8", "replace")))
                        pos = rec_end
                        continue
        rec = decode_record(buf, pos)
        out.append(rec)
        pos += rec.total_size
    return out


def _I32_AT(buf, pos: int) -> int:
    return _I32.unpack_from(buf, pos)[0]


def _I64_AT(buf, pos: int) -> int:
    return _I64.unpack_from(buf, pos)[0]


_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def encode_record(rec: MessageRecord) -> bytes:
    """Build a record's bytes (TOTALSIZE computed from the fields). Fast path of the schema's build."""
    v2 = rec.magic == MESSAGE_MAGIC_V2
    topic = rec.topic.encode()
    props = rec.properties_text.encode()
    size = record_size(rec.sys_flag, len(rec.body), len(topic), len(props), v2)
    parts = [
        _HEAD.pack(size, rec.magic, rec.body_crc, rec.queue_id, rec.flag, rec.queue_offset,
                   rec.physical_offset, rec.sys_flag, rec.born_timestamp),
        (_HOST6 if rec.sys_flag & BORN_V6 else _HOST4).pack(rec.born_ip, rec.born_port),
        _I64.pack(rec.store_timestamp),
        (_HOST6 if rec.sys_flag & STORE_V6 else _HOST4).pack(rec.store_ip, rec.store_port),
        _TAIL.pack(rec.reconsume_times, rec.prepared_transaction_offset, len(rec.body)),
        rec.body,
        (_I16 if v2 else _I8).pack(len(topic)), topic,
        _I16.pack(len(props)), props,
    ]
    return b"".join(parts)


def new_record(topic: str, body: bytes, properties: dict | None = None, *, queue_id: int = 0,
               queue_offset: int = 0, physical_offset: int = 0, sys_flag: int = 0, flag: int = 0,
               born_timestamp: int = 0, born_host: tuple[bytes, int] = (b"\x7f\0\0\x01", 0),
               store_timestamp: int = 0, store_host: tuple[bytes, int] = (b"\x7f\0\0\x01", 10911),
               reconsume_times: int = 0, prepared_transaction_offset: int = 0,
               properties_text: str | None = None) -> MessageRecord:
    """A MessageRecord with the CRC and size filled in, ready for encode_record."""
    props = dict(properties or {})
    text = properties_text if properties_text is not None else format_properties(props)
    if properties_text is not None:
        props = parse_properties(text)
    if len(born_host[0]) == 16:
        sys_flag |= BORN_V6
    if len(store_host[0]) == 16:
        sys_flag |= STORE_V6
    magic = MESSAGE_MAGIC_V2 if len(topic.encode()) > 127 else MESSAGE_MAGIC
    size = record_size(sys_flag, len(body), len(topic.encode()), len(text.encode()), magic == MESSAGE_MAGIC_V2)
    return MessageRecord(size, magic, body_crc(body), queue_id, flag, queue_offset, physical_offset,
                         sys_flag, born_timestamp, born_host[0], born_host[1], store_timestamp,
                         store_host[0], store_host[1], reconsume_times, prepared_transaction_offset,
                         body, topic, text, props)


# The engine's put writes records straight into the mapped file: the fixed 88 bytes (TOTALSIZE ..
# BODYLENGTH, both hosts IPv4) with one pack_into, then the body, then TOPICLENGTH+TOPIC+
# PROPERTIESLENGTH+PROPERTIES as one tail. tests/store/test_commitlog.py pins it to the schema.
FIXED_V4 = _FIXED_V4
FIXED_V4 = _FIXED_V4            # the fixed part as a struct (a run packs its shared fields with it)
FIXED_V4_SIZE = _FIXED_V4.size


def topic_field(topic: bytes) -> bytes:
    """TOPICLENGTH (signed byte) + TOPIC of a V1 record; topics longer than 127 bytes need V2."""
    if len(topic) > 127:
        raise ValueError("a V1 record holds topics of at most 127 bytes")
    return bytes((len(topic),)) + topic


def properties_field(props: bytes) -> bytes:
    """PROPERTIESLENGTH (signed short) + PROPERTIES."""
    return _I16.pack(len(props)) + props


def write_record_v4(buf, pos: int, size: int, crc: int, queue_id: int, flag: int, queue_offset: int,
                    physical_offset: int, sys_flag: int, born_timestamp: int, born_ip: bytes, born_port: int,
                    store_timestamp: int, store_ip: bytes, store_port: int, reconsume_times: int,
                    prepared_transaction_offset: int, body: bytes, tail: bytes) -> int:
    """Write one V1 record with IPv4 hosts at `pos` of a writable buffer; `tail` is
    topic_field + properties_field. Returns the position after it. Same bytes as encode_record."""
    _FIXED_V4.pack_into(buf, pos, size, MESSAGE_MAGIC, crc, queue_id, flag, queue_offset, physical_offset,
                        sys_flag, born_timestamp, born_ip, born_port, store_timestamp, store_ip, store_port,
                        reconsume_times, prepared_transaction_offset, len(body))
    p = pos + 88
    q = p + len(body)
    buf[p:q] = body
    end = q + len(tail)
    buf[q:end] = tail
    return end


def encode_blank(size: int) -> bytes:
    if size < END_FILE_MIN_BLANK_LENGTH:
        raise ValueError("a blank record needs at least 8 bytes")
    return _SIZE_MAGIC.pack(size, BLANK_MAGIC)
