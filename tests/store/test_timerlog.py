"""The timer files' byte layouts against the spec's vectors (rocketmq5.md §1.5), schema and struct twin."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtool_store.codes import TIMER_UNIT_SIZE, TimerMagic
from mqtool_store.errors import FormatError
from mqtool_store.javahash import java_string_hash
from mqtool_store.timerlog import (CHECK, WHEEL_FILE_SIZE, TimerCheck, TimerCheckSchema, TimerSlotSchema, TimerUnit,
                                   TimerUnitSchema, decode_check, decode_slot, decode_unit, encode_slot, slot_index,
                                   snap_precision)
from mqtool_store.timerstore import TimerCheckFile, TimerLog, TimerWheel

UNIT_VECTOR = bytes.fromhex("00000034 ffffffffffffffff 00000001 0000018bcfe56800 00007148 0000000000001000 "
                            "0000012c 8e987641 0000000000000000".replace(" ", ""))
SLOT_VECTOR = bytes.fromhex("000000006553f11d 0000000000000000 0000000000000000 00000001 00000000".replace(" ", ""))


def test_unit_vector_both_ways():
    unit = TimerUnit(-1, TimerMagic.MAGIC_DEFAULT, 1700000000000, 29000, 4096, 300, java_string_hash("TopicTest"))
    assert java_string_hash("TopicTest") == -1902610879
    assert unit.encode() == UNIT_VECTOR
    assert TimerUnitSchema.build(dict(prev_pos=-1, magic=1, write_time=1700000000000, delay=29000, offset_py=4096,
                                      size_py=300, topic_hash=-1902610879, reserved=0)) == UNIT_VECTOR
    parsed = TimerUnitSchema.parse(UNIT_VECTOR)
    assert decode_unit(UNIT_VECTOR) == unit
    assert (parsed.prev_pos, parsed.magic, parsed.write_time + parsed.delay) == (-1, 1, 1700000029000)
    assert unit.slot_time == 1700000029000 and TimerUnitSchema.sizeof() == TIMER_UNIT_SIZE


def test_slot_vector_index_and_offset():
    t = 1700000029000
    assert slot_index(t, 1000) == 512029 and slot_index(t, 1000) * 32 == 16384928
    assert encode_slot(t, 1000, 0, 0, 1) == SLOT_VECTOR
    assert TimerSlotSchema.build(dict(time=1700000029, first_pos=0, last_pos=0, num=1, magic=0)) == SLOT_VECTOR
    wheel = bytearray(WHEEL_FILE_SIZE)
    wheel[16384928:16384928 + 32] = SLOT_VECTOR
    slot = decode_slot(wheel, t, 1000)
    assert (slot.time_ms, slot.first_pos, slot.last_pos, slot.num) == (t, 0, 0, 1)
    assert decode_slot(wheel, t + 1209600 * 1000, 1000).time_ms == -1     # same index, another time: empty


def test_wheel_file_writes_the_vector(tmp_path):
    assert WHEEL_FILE_SIZE == 38707200
    w = TimerWheel(tmp_path / "timerwheel", 1000)
    w.put(1700000029000, 0, 0, 1)
    assert w.get(1700000029000).num == 1 and w.get(1700000030000).time_ms == -1
    assert w.next_used(1700000000000, 1700000040000) == 1700000029000
    assert w.next_used(1700000030000, 1700000040000) == 1700000040000
    assert w.pending(1700000000000) == (1, 1700000029000) and w.pending(1700000030000) == (0, -1)
    w.flush()
    w.close()
    data = (tmp_path / "timerwheel").read_bytes()
    assert len(data) == 38707200 and data[16384928:16384960] == SLOT_VECTOR
    (tmp_path / "bad").write_bytes(b"\0" * 64)
    with pytest.raises(FormatError, match="Timer wheel length:64 != expected:38707200"):
        TimerWheel(tmp_path / "bad", 1000)


def test_checkpoint_layout_and_short_body(tmp_path):
    check = TimerCheck(1700000029000, 104, 7, 8, 0, 1700000000000, 3)
    data = check.encode()
    assert data == CHECK.pack(1700000029000, 104, 7, 8, 0, 1700000000000, 3)
    assert TimerCheckSchema.build(dict(last_read_time_ms=1700000029000, last_timer_log_flush_pos=104,
                                       last_timer_queue_offset=7, master_timer_queue_offset=8, state_version=0,
                                       timestamp=1700000000000, counter=3))[:56] == data
    assert TimerCheckSchema.sizeof() == 4096
    assert decode_check(data) == check
    assert decode_check(data[:32]) == TimerCheck(1700000029000, 104, 7, 8)    # a 4.x-era 32-byte body
    f = TimerCheckFile(tmp_path / "config" / "timercheck")
    f.write(check)
    f.close()
    assert (tmp_path / "config" / "timercheck").stat().st_size == 4096
    assert TimerCheckFile(tmp_path / "config" / "timercheck").read() == check


def test_timerlog_blank_at_file_end(tmp_path):
    size = 52 * 3 + 10          # room for 2 units and a blank: the third goes to the next file
    log = TimerLog(tmp_path / "timerlog", size)
    unit = TimerUnit(-1, 1, 1000, 1000, 0, 100).encode()
    assert [log.append(unit) for _ in range(3)] == [0, 52, size]
    first = (tmp_path / "timerlog" / "00000000000000000000").read_bytes()
    assert first[104:120] == bytes.fromhex("0000003e 0000000000000000 cbd43194".replace(" ", ""))
    positions, units, end = log.scan(0)
    assert positions.tolist() == [0, 52, size] and end == size + 52 and units["offset_py"].tolist() == [0, 0, 0]
    assert log.scan(60)[0].tolist() == [52, size]
    log.close()


def test_bad_unit_and_precision():
    with pytest.raises(FormatError):
        decode_unit(b"\0" * 52)
    assert [snap_precision(v) for v in (1, 150, 200, 499, 500, 999, 1000, 5000)] == [100, 100, 200, 200, 500, 500,
                                                                                  1000, 1000]


def _timer_store(root):
    """A store with two wheel-topic records, their units (one slot) and a checkpoint, as a broker leaves them."""
    from mqtool_store.codes import TIMER_TOPIC
    from mqtool_store.messagestore import Message, MessageStore
    from mqtool_store.storeconfig import MessageStoreConfig
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1 << 20,
                             mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100, maxIndexNum=400)
    with MessageStore(cfg) as s:
        results = [s.put(Message(TIMER_TOPIC, 0, b"b%d" % i, {"TIMER_OUT_MS": "1700000029000", "REAL_TOPIC": "T",
                                                               "REAL_QID": "0"}, born_timestamp=1)) for i in range(2)]
    log = TimerLog(root / "timerlog", 52 * 100)
    wheel = TimerWheel(root / "timerwheel", 1000)
    prev = -1
    for r in results:
        pos = log.append(TimerUnit(prev, 1, 1700000000000, 29000, r.offset, r.size, java_string_hash("T")).encode())
        wheel.put(1700000029000, 0, pos, 2 if prev >= 0 else 1)
        prev = pos
    check = TimerCheckFile(root / "config" / "timercheck")
    check.write(TimerCheck(1700000000000, 104, 2, 2))
    for f in (log, wheel, check):
        f.close()
    return results


def test_verify_and_dump_timer_files(tmp_path):
    from mqtool_store.dump import Filters, dump_path
    from mqtool_store.layout import Kind, detect_kind
    from mqtool_store.verify import verify_store
    results = _timer_store(tmp_path)
    report = verify_store(tmp_path)
    assert report.ok, report.problems
    assert report.timer_units == 2
    assert [detect_kind(tmp_path / n) for n in ("timerlog", "timerwheel", "config/timercheck")] == \
        [Kind.TIMERLOG, Kind.TIMERWHEEL, Kind.TIMERCHECK]
    units = list(dump_path(tmp_path / "timerlog", Kind.TIMERLOG, Filters()))
    assert [(u["position"], u["prev_pos"], u["offset_py"]) for u in units] == \
        [(0, -1, results[0].offset), (52, 0, results[1].offset)]
    slots = list(dump_path(tmp_path / "timerwheel", Kind.TIMERWHEEL, Filters()))
    assert [(s["index"], s["time"], s["last_pos"], s["num"]) for s in slots] == [(512029, 1700000029, 52, 2)]
    check = list(dump_path(tmp_path / "config" / "timercheck", Kind.TIMERCHECK, Filters()))
    assert check[0]["master_timer_queue_offset"] == 2


def test_verify_finds_timer_problems(tmp_path):
    from mqtool_store.verify import verify_store
    _timer_store(tmp_path)
    wheel = TimerWheel(tmp_path / "timerwheel", 1000)
    wheel.put(1700000031000, 0, 520, 1)                     # a slot whose last unit does not exist
    wheel.close()
    log = TimerLog(tmp_path / "timerlog", 52 * 100)
    log.files.last.write_pos = 104
    log.append(TimerUnit(-1, 1, 1700000000000, 1000, 999_999, 10).encode())   # points at no record
    log.close()
    problems = [str(p) for p in verify_store(tmp_path).problems if p.area == "timer"]
    assert len(problems) == 2, problems
    assert "no record starts there" in problems[0] and "lastPos 520 is no timerlog unit" in problems[1]
    from mqtool_store.timerfiles import verify_timer
    from mqtool_store.verify import VerifyReport, _Records
    records, report = _Records(), VerifyReport(str(tmp_path))
    records.freeze()
    verify_timer(tmp_path, records, report, commitlog_min=1 << 20)      # every record gone to retention
    assert [p.message for p in report.problems] == ["slot 512031 (time 1700000031): lastPos 520 is no timerlog unit"]


def test_store_cli_dumps_and_verifies_timer_files(tmp_path):
    from tests.conftest import json_lines, run_cli
    _timer_store(tmp_path)
    out = run_cli("store", "dump", tmp_path / "timerwheel", "--json", check=True).stdout
    assert [r["index"] for r in json_lines(out)] == [512029]
    out = run_cli("store", "dump", "--kind", "timerlog", tmp_path / "timerlog", check=True).stdout
    assert "2 timer units" in out and "MAGIC_DEFAULT" in out
    out = run_cli("store", "dump", tmp_path / "config" / "timercheck", "--json", check=True).stdout
    assert json_lines(out)[0]["last_read_time_ms"] == 1700000000000
    proc = run_cli("store", "verify", tmp_path)
    assert proc.returncode == 0 and "2 timerlog units" in proc.stdout


def test_timerlog_files_whose_records_are_gone_are_removed(tmp_path):
    log = TimerLog(tmp_path / "timerlog", 52 * 2 + 16)
    for py in (100, 200, 300, 400, 500):                    # files: [100, 200], [300, 400], [500]
        log.append(TimerUnit(-1, 1, 1000, 1000, py, 10).encode())
    assert [f.start for f in log.files.files] == [0, 120, 240]
    assert log.delete_expired(200) == 0                     # the first file's last record is still there
    assert log.delete_expired(201) == 1 and log.delete_expired(10_000) == 1      # the last file stays
    assert [f.start for f in log.files.files] == [240] and sorted(p.name for p in (tmp_path / "timerlog").iterdir()) \
        == ["00000000000000000240"]
    log.close()


_I64 = st.integers(-(1 << 63), (1 << 63) - 1)
_I32 = st.integers(-(1 << 31), (1 << 31) - 1)


@given(_I64, _I32, _I64, _I32, _I64, _I32, _I32)
def test_unit_struct_twin_matches_the_schema(prev, magic, write, delay, off, size, h):
    built = TimerUnitSchema.build(dict(prev_pos=prev, magic=magic, write_time=write, delay=delay, offset_py=off,
                                       size_py=size, topic_hash=h, reserved=0))
    unit = TimerUnit(prev, magic, write, delay, off, size, h)
    assert unit.encode() == built and decode_unit(built) == unit


@given(st.integers(0, 1 << 45), _I64, _I64, _I32, st.sampled_from([100, 200, 500, 1000]))
def test_slot_and_check_twins_match_the_schemas(time_ms, first, last, num, precision):
    built = TimerSlotSchema.build(dict(time=time_ms // precision, first_pos=first, last_pos=last, num=num, magic=0))
    assert encode_slot(time_ms, precision, first, last, num) == built
    check = TimerCheck(time_ms, first, last, num, 0, time_ms, num)
    assert TimerCheckSchema.build(vars(check))[:56] == check.encode() and decode_check(check.encode()) == check
