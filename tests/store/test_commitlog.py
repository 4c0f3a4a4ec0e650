"""Commitlog record codec: the construct schema (oracle) and the fast path, held to each other."""
from __future__ import annotations

import struct
import zlib

import pytest

from mqtool_store.codes import MagicCode, SysFlag
from mqtool_store.commitlog import (MessageRecordSchema, BlankRecordSchema, body_crc, decode_record,
                             encode_blank, encode_record, new_record, record_from_schema)
from mqtool_store.compression import compress, decompress
from mqtool_store.codes import CompressionType
from mqtool_store.errors import FormatError
from mqtool_store.msgid import create_offset_msg_id, decode_offset_msg_id
from mqtool_store.properties import format_properties, parse_properties

# store-formats.md §3.2 [ran]: MessageDecoder.encode of TopicTest/1/5 at 1024.
SPEC_VECTOR = bytes.fromhex(
    "00000076" "daa320a7" "77d18982" "00000001" "00000000" "0000000000000005" "0000000000000400"
    "00000000" "0000018bcfe56800" "c0a80002" "0000d431" "0000018bcfe5687b" "c0a80001" "00002a9f"
    "00000000" "0000000000000000" "00000005" "48656c6c6f" "09" "546f70696354657374"
    "000d" "61016202544147530154616741"
)


def schema_decode(buf, pos=0, end=None, check_crc=False):
    end = len(buf) if end is None else end
    if pos + 4 > end:
        raise FormatError("cut off", offset=pos)
    size = struct.unpack_from(">i", buf, pos)[0]
    try:
        rec = record_from_schema(MessageRecordSchema.parse(bytes(buf[pos:pos + max(size, 0)])))
    except Exception as exc:  # construct raises its own errors
        raise FormatError(str(exc), offset=pos) from None
    if check_crc and not rec.crc_ok:
        raise FormatError("CRC", offset=pos)
    return rec


@pytest.fixture(params=["fast", "schema"])
def decode(request):
    """Every decoder test runs against both paths so they cannot drift apart."""
    return decode_record if request.param == "fast" else schema_decode


def test_spec_vector_decodes(decode):
    rec = decode(SPEC_VECTOR)
    assert rec.total_size == 118 and rec.magic == MagicCode.MESSAGE_MAGIC_CODE
    assert (rec.topic, rec.queue_id, rec.queue_offset, rec.physical_offset) == ("TopicTest", 1, 5, 1024)
    assert rec.born_timestamp == 1700000000000 and rec.store_timestamp == 1700000000123
    assert rec.born_host == "192.168.0.2:54321" and rec.store_host == "192.168.0.1:10911"
    assert rec.body == b"Hello" and rec.body_crc == 2010220930 and rec.crc_ok
    assert rec.properties == {"a": "b", "TAGS": "TagA"} and rec.tags == "TagA"
    assert rec.msg_id == "C0A8000100002A9F0000000000000400"


def test_spec_vector_reencodes_byte_identically():
    rec = decode_record(SPEC_VECTOR)
    assert encode_record(rec) == SPEC_VECTOR
    parsed = MessageRecordSchema.parse(SPEC_VECTOR)
    assert MessageRecordSchema.build(parsed) == SPEC_VECTOR


def test_body_crc_vector():
    assert zlib.crc32(b"Hello") == 4157704578
    assert body_crc(b"Hello") == 2010220930


def test_offset_msg_id_round_trip():
    mid = create_offset_msg_id(bytes([192, 168, 0, 1]), 10911, 1024)
    assert mid == "C0A8000100002A9F0000000000000400"
    assert decode_offset_msg_id(mid) == ("192.168.0.1", 10911, 1024)
    with pytest.raises(FormatError):
        decode_offset_msg_id("XYZ")


@pytest.mark.parametrize("born,store", [(4, 4), (16, 4), (4, 16), (16, 16)])
def test_ipv6_hosts_round_trip(decode, born, store):
    rec = new_record("T", b"body", {"TAGS": "x"}, born_host=(bytes(range(born)), 1234),
                     store_host=(bytes(range(1, store + 1)), 10911), physical_offset=77,
                     store_timestamp=5, born_timestamp=4)
    raw = encode_record(rec)
    assert len(raw) == rec.total_size == 91 + 4 + 1 + len("TAGS\x01x") + (12 if born == 16 else 0) + (12 if store == 16 else 0)
    back = decode(raw)
    assert back == rec
    assert bool(back.sys_flag & SysFlag.BORNHOST_V6_FLAG) == (born == 16)
    assert bool(back.sys_flag & SysFlag.STOREHOSTADDRESS_V6_FLAG) == (store == 16)
    assert MessageRecordSchema.build(MessageRecordSchema.parse(raw)) == raw
    if store == 16:
        assert len(back.msg_id) == 56


def test_v2_magic_long_topic(decode):
    topic = "t" * 200
    rec = new_record(topic, b"x")
    assert rec.magic == MagicCode.MESSAGE_MAGIC_CODE_V2
    raw = encode_record(rec)
    back = decode(raw)
    assert back.topic == topic and back.total_size == len(raw)


@pytest.mark.parametrize("kind", list(CompressionType))
def test_compressed_bodies(kind):
    body = b"hello world " * 400
    packed = compress(body, kind)
    flag = SysFlag.COMPRESSED_FLAG | (kind << 8)
    assert decompress(packed, flag) == body
    assert decompress(zlib.compress(body), SysFlag.COMPRESSED_FLAG) == body  # old clients: type bits 0
    assert decompress(body, 0) == body


def test_properties_rules():
    assert parse_properties("a\x01b\x02c\x01d\x02") == {"a": "b", "c": "d"}       # C++ trailing sep
    assert parse_properties("a\x01b\x02a\x01z") == {"a": "z"}                        # last wins
    assert parse_properties("x\x02\x01v\x02k\x01\x02ok\x01v\x01w") == {"ok": "v\x01w"}  # empties dropped
    assert format_properties({"a": "b", "c": "d"}) == "a\x01b\x02c\x01d"
    assert format_properties({"a": "b"}, trailing_separator=True) == "a\x01b\x02"
    # a None value is left out and other values are written with str(), as before the fast join
    assert format_properties({"a": None, "n": 5, "c": "d"}) == "n\x015\x02c\x01d"
    assert format_properties({}) == "" and format_properties({"a": None}, trailing_separator=True) == ""


def test_blank_record():
    raw = encode_blank(1000)
    assert BlankRecordSchema.parse(raw).total_size == 1000
    with pytest.raises(Exception):
        BlankRecordSchema.parse(SPEC_VECTOR)


@pytest.mark.parametrize("damage", ["cut", "magic", "size", "topic_len", "props_len"])
def test_damaged_records_raise(decode, damage):
    raw = bytearray(SPEC_VECTOR)
    if damage == "cut":
        raw = raw[:60]
    elif damage == "magic":
        raw[4:8] = b"\0\0\0\1"
    elif damage == "size":
        raw[0:4] = struct.pack(">i", 117)
    elif damage == "topic_len":
        raw[93] = 0x7F
    else:
        raw[103:105] = b"\x7f\xff"
    with pytest.raises(FormatError):
        decode(bytes(raw))


def test_crc_check(decode):
    raw = bytearray(SPEC_VECTOR)
    raw[88] ^= 0x20  # flip a body bit
    assert decode(bytes(raw)).crc_ok is False
    with pytest.raises(FormatError):
        decode(bytes(raw), check_crc=True)
