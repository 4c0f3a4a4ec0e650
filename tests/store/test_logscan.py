"""The header-only scan and the full decode walk the same records and stop at the same place."""
from __future__ import annotations

import random

import pytest

from mqtool_store.commitlog import encode_blank, encode_record, new_record
from mqtool_store.logscan import RecordIterator, scan_file

V4, V6 = b"\x7f\0\0\x01", bytes(range(16))


def build_file(size: int, n: int, seed: int = 1, v6_every: int = 0, long_topic_every: int = 0):
    rnd = random.Random(seed)
    out = bytearray()
    for i in range(n):
        host = V6 if v6_every and i % v6_every == 0 else V4
        topic = "t" * 150 if long_topic_every and i % long_topic_every == 0 else f"T{i % 3}"
        rec = new_record(topic, rnd.randbytes(rnd.randint(0, 300)), {"KEYS": f"k{i}", "TAGS": "x"},
                         queue_id=i % 4, queue_offset=i, physical_offset=len(out), born_host=(host, 1),
                         store_host=(V6 if host == V6 and i % 2 else V4, 10911), store_timestamp=1000 + i)
        raw = encode_record(rec)
        if len(out) + len(raw) + 8 > size:
            out += encode_blank(size - len(out))
            break
        out += raw
    return bytes(out.ljust(size, b"\0"))


def both(buf):
    table, end = scan_file(buf)
    it = RecordIterator(buf)
    recs = list(it)
    return table, end, recs, it.end


@pytest.mark.parametrize("v6_every,long_every", [(0, 0), (3, 0), (0, 5), (2, 7)])
def test_scan_equals_decode(v6_every, long_every):
    buf = build_file(64 * 1024, 200, v6_every=v6_every, long_topic_every=long_every)
    table, end, recs, end2 = both(buf)
    assert [p for p, _ in recs] == table["position"].tolist()
    for i, (pos, rec) in enumerate(recs):
        assert table["queue_offset"][i] == rec.queue_offset
        assert table["store_timestamp"][i] == rec.store_timestamp
        assert table["body_len"][i] == len(rec.body)
        a, n = int(table["topic_pos"][i]), int(table["topic_len"][i])
        assert buf[a:a + n].decode() == rec.topic
    assert end == end2 and end.clean


def test_full_file_ends_with_blank():
    buf = build_file(8 * 1024, 1000)
    _, end, recs, end2 = both(buf)
    assert end.reason == end2.reason == "blank" and end.position == end2.position


@pytest.mark.parametrize("damage", ["garbage_tail", "size_field", "zeroed_middle", "flipped_magic"])
def test_damage_stops_both_at_same_place(damage):
    buf = bytearray(build_file(32 * 1024, 60))
    table, _, recs, _ = both(bytes(buf))
    victim = recs[40][0]
    if damage == "garbage_tail":
        buf[victim:victim + 500] = b"\x5a" * 500
    elif damage == "size_field":
        buf[victim:victim + 4] = (recs[40][1].total_size + 3).to_bytes(4, "big")
    elif damage == "zeroed_middle":
        buf[victim:victim + 300] = bytes(300)
    else:
        buf[victim + 4] ^= 0xFF
    table, end, recs2, end2 = both(bytes(buf))
    assert len(table["position"]) == len(recs2) == 40
    assert end.position == end2.position == victim
    assert end.reason == end2.reason == "corrupt" and end.invalid_bytes == end2.invalid_bytes > 0


def test_unwritten_zeros_are_clean():
    buf = build_file(32 * 1024, 10)
    _, end, recs, end2 = both(buf)
    assert len(recs) == 10 and end.reason == end2.reason == "unwritten"
