"""Property tests of every store file decoder: commitlog records (construct schema, fast path and the
header-only scan), consume queue units, index files, the checkpoint, config files, the HA stream.

Two kinds: round trips (build -> parse -> the same value and bytes) and hostile bytes (random or
mutated): only the store's own errors (FormatError, HAProtocolError), never IndexError,
struct.error, UnicodeDecodeError or a hang; where a construct schema and a fast path both read a
format they agree, or both reject. Profiles: tests/conftest.py.
"""
from __future__ import annotations

import construct
import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from mqtool_store import configfiles
from mqtool_store.checkpoint import CheckpointSchema, Checkpoint, decode_checkpoint
from mqtool_store.codes import CHECKPOINT_FILE_SIZE, MSG_FIXED_SIZE_V4
from mqtool_store.commitlog import (MessageRecordSchema, decode_record, decode_records, encode_blank, encode_record,
                                    new_record, record_from_schema)
from mqtool_store.compression import decompress
from mqtool_store.consumequeue import CqUnitSchema, encode_unit, read_units, valid_prefix
from mqtool_store.errors import FormatError
from mqtool_store.ha.protocol import (FrameReader, HAProtocolError, ReportReader, encode_frame_header,
                                      encode_report)
from mqtool_store.indexfile import (ENTRY_DTYPE, IndexEntrySchema, IndexFile, IndexHeader, IndexHeaderSchema,
                                    encode_entry, index_file_size)
from mqtool_store.javahash import index_key_hash
from mqtool_store.delaylevels import parse_delay_levels
from mqtool_store.logscan import RecordIterator, scan_file
from mqtool_store.msgid import create_offset_msg_id, decode_offset_msg_id

I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
PROP = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=8)
HOST = st.one_of(st.tuples(st.binary(min_size=4, max_size=4), I32), st.tuples(st.binary(min_size=16, max_size=16), I32))


@st.composite
def records(draw):
    topic = draw(st.text(max_size=8) | st.text(min_size=128, max_size=140))    # the long ones take magic V2
    return new_record(topic, draw(st.binary(max_size=60)), draw(st.dictionaries(PROP, PROP, max_size=4)),
                      queue_id=draw(I32), queue_offset=draw(I64), physical_offset=draw(I64), flag=draw(I32),
                      sys_flag=draw(st.integers(0, 0xFFFF)) & ~0x30, born_timestamp=draw(I64),
                      born_host=draw(HOST), store_timestamp=draw(I64), store_host=draw(HOST),
                      reconsume_times=draw(I32), prepared_transaction_offset=draw(I64))


def schema_record(buf: bytes):
    """The oracle: construct's parse of the bytes at 0, or None when it rejects them."""
    try:
        return record_from_schema(MessageRecordSchema.parse(buf))
    except (construct.ConstructError, UnicodeDecodeError):
        return None


def fast_record(buf: bytes):
    try:
        return decode_record(buf)
    except FormatError:
        return None


def _mutate(data: bytes, draw) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "flip" and out:
            out[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and out:
            del out[at:at + draw(st.integers(1, 8))]
        elif kind == "cut":
            del out[at:]
    return bytes(out)


# ------------------------------------------------------------------ commitlog records

@given(records())
def test_record_round_trips_through_schema_and_fast_path(rec):
    raw = encode_record(rec)
    assert decode_record(raw, check_crc=True) == rec
    assert schema_record(raw) == rec
    assert MessageRecordSchema.build(MessageRecordSchema.parse(raw)) == raw


def _agree(raw: bytes) -> None:
    fast, oracle = fast_record(raw), schema_record(raw)
    if fast is not None and oracle is not None:
        assert fast == oracle
    elif oracle is not None:
        raise AssertionError(f"the fast path rejects what the schema reads: {raw.hex()}")
    elif fast is not None:
        # The one documented difference: the fast path reads bad UTF-8 in topic/properties as U+FFFD.
        assert "\ufffd" in fast.topic + fast.properties_text, raw.hex()


@given(st.data())
def test_mutated_record_schema_and_fast_path_agree_or_both_reject(data):
    _agree(_mutate(encode_record(data.draw(records())), data.draw))


@given(st.binary(min_size=8, max_size=200))
@example(b"\x00\x00\x00\x5b\xda\xa3\x20\xa7" + b"\x00" * 83)            # the minimum size, all zeros
@example(b"\x7f\xff\xff\xff\xda\xa3\x20\xa7" + b"\x00" * 100)           # TOTALSIZE 2 GiB
def test_random_record_bytes_schema_and_fast_path_agree_or_both_reject(raw):
    _agree(raw)


@given(st.data())
def test_header_scan_and_full_decode_stop_at_the_same_place(data):
    """logscan's two speeds over a file of records, mutated: same records, same end and reason."""
    recs = data.draw(st.lists(records(), min_size=1, max_size=4))
    raw = b"".join(encode_record(r) for r in recs)
    raw = _mutate(raw, data.draw) if data.draw(st.booleans()) else raw
    raw += data.draw(st.sampled_from([b"", encode_blank(8), bytes(data.draw(st.integers(0, 120)))]))
    table, end = scan_file(raw)
    it = RecordIterator(raw)
    positions = [pos for pos, _ in it]
    assert list(table["position"]) == positions
    assert (end.position, end.reason) == (it.end.position, it.end.reason)


# ------------------------------------------------------------------ consume queue

@given(st.lists(st.tuples(I64, I32, I64), max_size=20))
def test_consume_queue_units_round_trip(units):
    raw = b"".join(encode_unit(*u) for u in units)
    got = read_units(raw)
    assert [tuple(int(x) for x in row) for row in got] == units


@given(st.binary(max_size=400), st.integers(0, 25))
def test_consume_queue_numpy_and_schema_agree_on_any_bytes(raw, start):
    units = read_units(raw, min(start, len(raw)))
    for i, row in enumerate(units):
        at = min(start, len(raw)) + i * 20
        parsed = CqUnitSchema.parse(raw[at:at + 20])
        assert (parsed.offset, parsed.size, parsed.tags_code) == tuple(int(x) for x in row)
    rule = next((i for i, row in enumerate(units) if row["offset"] < 0 or row["size"] <= 0), len(units))
    assert valid_prefix(units) == rule


# ------------------------------------------------------------------ index files

SLOTS, ENTRIES = 7, 28
SIZE = index_file_size(SLOTS, ENTRIES)


def build_index(keys: list[tuple[str, int, int]], begin_ts: int) -> bytes:
    """What IndexFile.putKey writes, for (key, phyOffset, seconds after begin) in order."""
    buf = bytearray(SIZE)
    count = 1
    for key, phy, diff in keys[:ENTRIES - 1]:
        h = index_key_hash(key)
        slot_at = 40 + (h % SLOTS) * 4
        prev = int.from_bytes(buf[slot_at:slot_at + 4], "big", signed=True)
        at = 40 + SLOTS * 4 + count * 20
        buf[at:at + 20] = encode_entry(h, phy, diff, prev)
        buf[slot_at:slot_at + 4] = count.to_bytes(4, "big")
        count += 1
    buf[:40] = IndexHeader(begin_ts, begin_ts + 1000, 0, 0, SLOTS, count).encode()
    return bytes(buf)


KEYS = st.lists(st.tuples(st.sampled_from(["T#a", "T#b", "T#c", "U#a", "T#" + "x" * 30]),
                          st.integers(0, 1 << 40), st.integers(0, 1000)), max_size=30)


@given(KEYS, st.integers(0, 1 << 41))
def test_index_lookup_finds_every_entry_of_a_key_newest_first(keys, begin_ts):
    idx = IndexFile(build_index(keys, begin_ts))
    for key in {k for k, _, _ in keys}:
        h = index_key_hash(key)
        want = [phy for k, phy, _ in reversed(keys[:ENTRIES - 1]) if index_key_hash(k) == h]
        assert idx.select_offsets(key) == want


@given(st.data())
def test_index_of_any_bytes_reads_or_raises_format_error(data):
    raw = data.draw(st.binary(min_size=SIZE, max_size=SIZE) | st.binary(max_size=80) |
                    st.builds(_mutate, st.builds(build_index, KEYS, st.just(0)), st.just(data.draw)))
    try:
        idx = IndexFile(raw, max_hash_slot_num=SLOTS if data.draw(st.booleans()) else None)
    except FormatError:
        return
    parsed = IndexHeaderSchema.parse(raw[:40])
    assert (parsed.begin_timestamp, parsed.index_count) == (idx.header.begin_timestamp, idx.header.index_count)
    entries = idx.entries()
    for i, row in enumerate(entries):
        at = idx.entries_at + (i + 1) * 20
        e = IndexEntrySchema.parse(raw[at:at + 20])
        assert (e.key_hash, e.phy_offset, e.time_diff, e.prev_index) == tuple(int(x) for x in row)
    assert entries.dtype == ENTRY_DTYPE
    for key in ("T#a", "T#b", data.draw(st.text(max_size=5))):
        idx.select_offsets(key)          # a damaged chain (loops, wild numbers) ends, never raises


# ------------------------------------------------------------------ checkpoint

@given(st.tuples(I64, I64, I64, I64, I64))
def test_checkpoint_round_trips_through_schema_and_fast_path(fields):
    cp = Checkpoint(*fields)
    raw = cp.encode()
    assert decode_checkpoint(raw) == cp
    assert CheckpointSchema.build(CheckpointSchema.parse(raw)) == raw
    assert tuple(v for k, v in CheckpointSchema.parse(raw).items() if not k.startswith("_")) == fields


@given(st.binary(max_size=120) | st.binary(min_size=CHECKPOINT_FILE_SIZE, max_size=CHECKPOINT_FILE_SIZE))
def test_checkpoint_of_any_bytes_reads_or_raises_format_error(raw):
    try:
        cp = decode_checkpoint(raw)
    except FormatError:
        assert len(raw) < 24
        return
    if len(raw) >= CHECKPOINT_FILE_SIZE:
        parsed = CheckpointSchema.parse(raw)
        assert parsed.physic_msg_timestamp == cp.physic_msg_timestamp
        assert parsed.confirm_phy_offset == cp.confirm_phy_offset


# ------------------------------------------------------------------ config files (fastjson text)

def _config_values():
    scalars = st.none() | st.booleans() | I64 | st.text(max_size=8)
    return st.recursive(scalars, lambda kids: st.lists(kids, max_size=3) |
                        st.dictionaries(st.text(max_size=6) | I32, kids, max_size=4), max_leaves=10)


def _keys_as_text(v):
    if isinstance(v, dict):
        return {str(k): _keys_as_text(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_keys_as_text(x) for x in v]
    return v


@given(st.dictionaries(st.text(max_size=8) | I32, _config_values(), max_size=5), st.sampled_from([0, 2]))
def test_config_file_text_round_trips(obj, indent):
    assert configfiles.loads(configfiles.dumps_fastjson(obj, indent)) == _keys_as_text(obj)


@given(st.text(max_size=80) | st.text(st.sampled_from('{}[]:,"0a\\ \n'), max_size=60))
@example("[" * 50_000)
@example('{0:{1:')
def test_config_file_of_any_text_loads_or_raises_format_error(text):
    try:
        configfiles._parse(text, "topics.json")
    except FormatError:
        pass


# ------------------------------------------------------------------ the HA stream

@given(st.lists(st.tuples(st.integers(0, 1 << 62), st.binary(max_size=40)), max_size=5),
       st.lists(st.integers(0, 400), max_size=5))
def test_ha_frames_round_trip_in_any_chunks(frames, cuts):
    raw = b"".join(encode_frame_header(off, len(d)) + d for off, d in frames)
    reader, got, prev = FrameReader(max_size=1 << 16, capacity=64), [], 0
    for cut in sorted(c % (len(raw) + 1) for c in cuts) + [len(raw)]:
        got += [(f.offset, f.data) for f in reader.feed(raw[prev:cut])]
        prev = cut
    assert got == frames


@given(st.binary(max_size=200), st.integers(1, 50))
def test_ha_stream_of_any_bytes_raises_only_ha_protocol_error(raw, chunk):
    reader, reports = FrameReader(max_size=1 << 16, capacity=64), ReportReader()
    try:
        for i in range(0, len(raw), chunk):
            reader.feed(raw[i:i + chunk])
    except HAProtocolError:
        pass
    try:
        for i in range(0, len(raw), chunk):
            reports.feed(raw[i:i + chunk])
    except HAProtocolError:
        pass


@given(st.integers(0, (1 << 63) - 1))
def test_ha_report_round_trips(offset):
    assert ReportReader().feed(encode_report(offset)) == offset


def test_min_record_size_is_the_scans_lower_bound():
    assert MSG_FIXED_SIZE_V4 == 91 and np.dtype(ENTRY_DTYPE).itemsize == 20


def test_a_config_file_that_is_not_utf8_is_a_format_error_and_the_backup_is_used(tmp_path):
    """Found by the property tests' review: read_text raised UnicodeDecodeError past load_config."""
    (tmp_path / "topics.json").write_bytes(b'{"a":"\xff"}')
    (tmp_path / "topics.json.bak").write_text('{"b":1}')
    loaded = configfiles.load_config(tmp_path / "topics.json")
    assert loaded.used_backup and loaded.data == {"b": 1}
    try:
        configfiles.load_config(tmp_path / "topics.json", fallback_to_bak=False)
    except FormatError as exc:
        assert "UTF-8" in str(exc)
    else:
        raise AssertionError("no FormatError")


# ------------------------------------------------------------------ message ids, delay levels, compressed bodies

@given(st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16), I32, I64)
def test_offset_message_id_round_trips(ip, port, offset):
    import ipaddress
    assert decode_offset_msg_id(create_offset_msg_id(ip, port, offset)) == (str(ipaddress.ip_address(ip)), port,
                                                                         offset)


@given(st.text(st.sampled_from("0123456789abcdefABCDEF \t\n\u0661g"), min_size=30, max_size=58) | st.text(max_size=60))
@example("00 11 2233445566778899aabbccddee")        # bytes.fromhex skips spaces: 15 bytes, not 16
def test_offset_message_id_of_any_text_decodes_or_raises_format_error(text):
    try:
        decode_offset_msg_id(text)
    except FormatError:
        pass


@given(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from("smhdSMHD")), max_size=20))
def test_delay_levels_round_trip(items):
    text = " ".join(f"{n}{u}" for n, u in items)
    assert parse_delay_levels(text) == {i: n * {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[u.lower()]
                                        for i, (n, u) in enumerate(items, start=1)}


@given(st.text(max_size=40) | st.text(st.sampled_from("1s5mhd \u00b2\u0661x-"), max_size=20))
@example("\u00b2s")                                  # str.isdigit() is true for a superscript two; int() is not
def test_delay_levels_of_any_text_parse_or_raise_format_error(text):
    try:
        parse_delay_levels(text)
    except FormatError:
        pass


@given(st.binary(max_size=100), st.sampled_from([0x1, 0x1 | (1 << 8), 0x1 | (2 << 8), 0x1 | (3 << 8)]))
def test_compressed_body_of_any_bytes_inflates_or_raises_format_error(raw, sys_flag):
    try:
        decompress(raw, sys_flag)
    except FormatError:
        pass


def _one_by_one(buf: bytes):
    """decode_records' reference: decode_record at each record's start."""
    out, pos = [], 0
    try:
        while pos < len(buf):
            rec = decode_record(buf, pos)
            out.append(rec)
            pos += rec.total_size
    except FormatError as exc:
        return "FormatError", str(exc)
    return out


def _all_at_once(buf: bytes):
    try:
        return decode_records(buf)
    except FormatError as exc:
        return "FormatError", str(exc)


@given(st.lists(records(), max_size=6))
def test_a_run_of_records_decodes_as_one_record_at_a_time(recs):
    buf = b"".join(encode_record(r) for r in recs)
    assert decode_records(buf) == recs == _one_by_one(buf)


@given(st.data())
def test_a_damaged_run_decodes_or_fails_as_one_record_at_a_time(data):
    buf = _mutate(b"".join(encode_record(r) for r in data.draw(st.lists(records(), min_size=1, max_size=4))),
                  data.draw)
    assert _all_at_once(buf) == _one_by_one(buf)
