"""Generated commitlogs with every kind of record the offline tools must render alike.

Unicode, escaped and malformed properties, empty and binary bodies, every sysflag bit, zlib /
LZ4 / ZSTD / broken / unknown compression, IPv4 and IPv6 hosts, V2 (long topic) records,
negative fields, magic-code look-alikes inside bodies; optionally damaged files.
"""
from __future__ import annotations

import random
import struct
from pathlib import Path

from mqtool_store.commitlog import encode_blank, encode_record, new_record
from mqtool_store.compression import compress
from mqtool_store.codes import CompressionType
from mqtool_store.mappedfiles import offset_to_file_name

V6 = bytes.fromhex("20010db8000000000000000000000001")
BAD_UTF8 = b"\xc3\x28\xff\xfe\xe4"          # replaces the same-length placeholder below (ends cut short)
PLACEHOLDER = b"@BAD@"
MAGIC_LOOKALIKE = struct.pack(">ii", 200, -626843481)   # a TOTALSIZE and MESSAGE_MAGIC, in a body

PROPERTY_TEXTS = [
    "",
    "KEYS\x01k1\x02TAGS\x01TagA\x02UNIQ_KEY\x01ABCDEF0123",
    "KEYS\x01k1 k2  k3\x02TAGS\x01x",
    "KEYS\x01 lead trail \x02UNIQ_KEY\x01u",
    "KEYS\x01   ",
    "TAGS\x01中文标签\x02KEYS\x01ключ\x02note\x01emoji 🎉 \u2028 end",
    'TAGS\x01say "hi"\x02KEYS\x01back\\slash',
    "TAGS\x01line\nbreak\x02KEYS\x01tab\there\x02ctl\x01\x00\x03\x1f\x7f",
    "KEYS\x01a\x02KEYS\x01b\x02TAGS\x01dup",                   # a key twice: the last wins
    "KEYS\x01k\x02TAGS\x01t\x02",                               # the C++ client's trailing separator
    "KEYS\x01k\x02\x02TAGS\x01t",                               # an empty piece
    "EMPTYVALUE\x01\x02TAGS\x01t",
    "\x01novalue\x02TAGS\x01t",
    "lonely\x02TAGS\x01t",
    "A\x01b\x01c\x02TAGS\x01t",                                 # 0x01 inside a value
    "UNIQ_KEY\x01only",
    "TAGS\x01" + PLACEHOLDER.decode() + "\x02KEYS\x01k",         # invalid UTF-8 in a value
]
SYS_FLAGS = [0, 0x2, 0x4, 0x8, 0xC, 0x40, 0x80, 0x2 | 0x8, 0x400, 0xFF00 & ~0x700]
TOPICS = ["Orders", "话题", 'quo"te', "%RETRY%GID_x", "t" * 150, "T" + PLACEHOLDER.decode()]


def varied_records(n: int = 300, seed: int = 7) -> list:
    """(record, raw bytes patch) specs; physical offsets are filled in by write_commitlog."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        text = PROPERTY_TEXTS[i % len(PROPERTY_TEXTS)]
        body = [b"", b"plain body %d" % i, "unicodé ✓".encode(), bytes(rnd.randrange(256) for _ in range(40)),
                b"x" + PLACEHOLDER + b"y", MAGIC_LOOKALIKE * 3][i % 6]
        sys_flag = SYS_FLAGS[i % len(SYS_FLAGS)]
        kind = i % 11
        if kind == 3:
            body, sys_flag = compress(body or b"z", CompressionType.ZLIB), sys_flag | 0x1
        elif kind == 5:
            body, sys_flag = compress(b"lz4 body %d" % i, CompressionType.LZ4), 0x101
        elif kind == 7:
            body, sys_flag = compress(b"zstd body %d" % i, CompressionType.ZSTD), 0x201
        elif kind == 9:
            body, sys_flag = b"not zlib at all", 0x1
        elif kind == 10 and i % 2:
            body, sys_flag = b"unknown type", 0x501
        born = (V6, 40000 + i) if i % 13 == 4 else (bytes([10, 0, i % 256, 1]), 50000 + i)
        store = (V6, 10911) if i % 17 == 6 else (b"\x7f\0\0\x01", 10911 + i % 3)
        rec = new_record(TOPICS[i % len(TOPICS)] if i % 4 == 0 else "Orders", body, properties_text=text,
                         queue_id=[0, 1, 7, -1, 2**31 - 1][i % 5], queue_offset=i * 3,
                         sys_flag=sys_flag, flag=[0, 1, -5][i % 3], born_timestamp=1_700_000_000_000 + i,
                         store_timestamp=[1_700_000_000_100 + i, 0, -3][i % 29 % 3] if i % 29 < 3 else 1_700_000_000_100 + i,
                         born_host=born, store_host=store, reconsume_times=i % 4,
                         prepared_transaction_offset=[0, 123456][i % 2])
        if i % 23 == 1:
            rec.body_crc ^= 1                 # a wrong body CRC
        out.append(rec)
    return out


def encode(rec) -> bytes:
    return encode_record(rec).replace(PLACEHOLDER, BAD_UTF8)


def write_commitlog(directory: Path, records: list, file_size: int = 16 * 1024, negative_phys_every: int = 0) -> list[Path]:
    """Records into files of `file_size` (blank records at file ends, zeros after the last)."""
    directory.mkdir(parents=True, exist_ok=True)
    files: list[bytearray] = [bytearray()]
    for i, rec in enumerate(records):
        size = len(encode(rec))
        if len(files[-1]) + size + 8 > file_size:
            files[-1] += encode_blank(file_size - len(files[-1]))
            files.append(bytearray())
        rec.physical_offset = (len(files) - 1) * file_size + len(files[-1])
        if negative_phys_every and i % negative_phys_every == 2:
            rec.physical_offset = -rec.physical_offset - 1
        files[-1] += encode(rec)
    paths = []
    for k, data in enumerate(files):
        p = directory / offset_to_file_name(k * file_size)
        p.write_bytes(bytes(data.ljust(file_size, b"\0")))
        paths.append(p)
    return paths


def damage(path: Path, how: str, at_record: int = 5) -> int:
    """Damage the at_record-th record of a file; returns its position."""
    data = bytearray(path.read_bytes())
    pos = 0
    for _ in range(at_record):
        pos += struct.unpack_from(">i", data, pos)[0]
    if how == "garbage":
        data[pos:pos + 300] = b"\x5a" * 300
    elif how == "size":
        data[pos:pos + 4] = (struct.unpack_from(">i", data, pos)[0] + 3).to_bytes(4, "big")
    elif how == "magic":
        data[pos + 4] ^= 0xFF
    elif how == "zeros":
        data[pos:pos + 120] = bytes(120)
    elif how == "body_len":
        data[pos + 84:pos + 88] = (10**6).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    return pos
