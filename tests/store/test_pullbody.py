"""`MessageStore.get_joined` (store/pullbody.py): a common pull's records as one joined body, from the
kernel's pull_body or its pure-Python twin; `MessageStore.get`'s unit-by-unit loop is the reference."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from mqtool.common.subscription import Subscription
from mqtool_store import kernel as kernel_module, pullbody
from mqtool_store.messagestore import GetStatus, Message, MessageStore
from mqtool_store.pullbody import codes_bytes
from mqtool_store.storeconfig import MessageStoreConfig

TAGS = ["A", "B", "C", None]
EXPRESSIONS = ["*", "A", "B || C", "C", "A || B || C", "D", "||"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Records of varied sizes and tags in small commit log and consume queue files (pulls cross
    both kinds of file end), 3 queues."""
    root = tmp_path_factory.mktemp("joined")
    s = MessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1 << 16,
                                        mappedFileSizeConsumeQueue=2000)).start()
    for i in range(500):
        props = {"KEYS": f"k{i}"}
        if TAGS[i * 7 % 4] is not None:
            props["TAGS"] = TAGS[i * 7 % 4]
        s.put(Message("T", i % 3, bytes([i % 251]) * (i * 7 % 200), props))
    s.drain_dispatch()
    yield s
    s.shutdown()


def filters(expression: str):
    """(matches for `get`, codes for `get_joined`) of a TAG subscription."""
    sub = Subscription.parse("T", expression)
    if sub.sub_string == "*":
        return None, None
    return sub.matches, codes_bytes(sub.codes)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=150)
@example(queue=0, offset=0, count=32, limit=262144, cl_min=20000, expression="*")   # below the log's head
@example(queue=1, offset=95, count=32, limit=262144, cl_min=0, expression="*")      # a consume queue file's end
@given(queue=st.integers(0, 2), offset=st.integers(-2, 180), count=st.integers(1, 64),
       limit=st.sampled_from([1, 100, 300, 1000, 262144]), cl_min=st.sampled_from([0, 0, 0, 20000, 1 << 16]),
       expression=st.sampled_from(EXPRESSIONS))
def test_the_joined_body_is_what_the_loop_finds(store, store_kernel, monkeypatch, queue, offset, count, limit,
                                                cl_min, expression):
    """Over offsets, counts, tag filters, the byte limit and a commit log whose head was removed: where
    get_joined answers, `get` found the same records (joined), offsets and suggestion; where it does
    not, `get` found nothing or met a unit the loop decides."""
    monkeypatch.setattr(store.cfg, "maxTransferBytesOnMessageInMemory", limit)
    monkeypatch.setattr(type(store.commitlog), "min_offset", property(lambda self: cl_min))
    matches, codes = filters(expression)
    ref = store.get("T", queue, offset, count, matches)
    got = store.get_joined("T", queue, offset, count, codes)
    if got is not None:
        assert ref.status is GetStatus.FOUND
        assert got == (b"".join(ref.messages), len(ref.messages), ref.next_begin_offset, ref.min_offset,
                       ref.max_offset, ref.suggest_slave)
    TAKEN.append((got is not None, ref.status is GetStatus.FOUND))


TAKEN: list[tuple[bool, bool]] = []


def test_the_generated_pulls_exercise_both_answers():
    """(Runs after the property test.) Some found pulls were joined, some were left to the loop."""
    if TAKEN:
        assert any(joined for joined, _ in TAKEN) and any(found and not joined for joined, found in TAKEN)


def test_a_plain_pull_is_joined(store, store_kernel):
    got = store.get_joined("T", 2, 3, 32)
    cq = store.queues[("T", 2)]
    assert got is not None and got[1:3] == (32, 35)
    assert got[0] == b"".join(store.read_bytes(int(u["offset"]), int(u["size"])) for u in cq.units(3, 32))


_UNIT = struct.Struct(">qiq")
_CODES = st.sampled_from([0, 7, -7, (1 << 32) + 7, 0x80000000, 1 << 40])
# a unit: ("record", k, code) points at record k of the log; ("raw", offset, size, code) anywhere
_units = st.lists(st.one_of(
    st.tuples(st.just("record"), st.integers(0, 7), _CODES),
    st.tuples(st.just("raw"), st.one_of(st.integers(10, 250), st.sampled_from([0, 299, 300, 1000, -5])),
              st.one_of(st.integers(1, 40), st.sampled_from([0, -1, 0x7FFFFFFF])), _CODES)), max_size=12)
_records = st.lists(st.tuples(st.integers(36, 60), st.sampled_from([1, 1, 1, 2]), st.sampled_from([0, 0, 0, 1])),
                    min_size=8, max_size=8)       # (size, queue id, queue offset skew)
_HEAD = struct.Struct(">iiiiiqq")


def _log_and_units(records, units, log_start):
    """A commit log file whose record k (from byte 4) says queue id q, queue offset 100 + k + skew;
    the units as bytes."""
    log, at = bytearray(4), []
    for k, (size, qid, skew) in enumerate(records):
        at.append(len(log))
        log += _HEAD.pack(size, -626843481, 0, qid, 0, 100 + k + skew, log_start + len(log)) + bytes(size - 36)
    packed = []
    for u in units:
        if u[0] == "record":
            packed.append(_UNIT.pack(log_start + at[u[1]], records[u[1]][0], u[2]))
        else:
            packed.append(_UNIT.pack(*u[1:]))
    return bytes(log) + bytes(44), packed


@pytest.mark.skipif(kernel_module.kernel is None, reason="the store kernel is not built here")
@settings(max_examples=400)
@example(units=[("raw", 10, 5, (1 << 32) + 7), ("raw", 20, 5, 7), ("raw", 30, 5, 0x80000000)], records=[(40, 1, 0)] * 8,
         lead=0, log_start=0, written=400, log_min=0, count=5, limit=1 << 20, codes=[7, -(1 << 31)])
@example(units=[("record", k, 7) for k in range(8)], records=[(40, 1, 0)] * 8, lead=0, log_start=10, written=400,
         log_min=0, count=8, limit=1 << 20, codes=None)
@given(units=_units, records=_records, lead=st.integers(0, 3), log_start=st.sampled_from([0, 10, 100]),
       written=st.one_of(st.just(400), st.integers(0, 400)), log_min=st.sampled_from([0, 10, 50]),
       count=st.integers(0, 12), limit=st.sampled_from([0, 1, 30, 100, 1 << 20]),
       codes=st.one_of(st.none(), st.lists(st.sampled_from([7, -7, 0, -(1 << 31), 5]), max_size=3)))
def test_the_kernel_and_its_python_twin_agree(units, records, lead, log_start, written, log_min, count, limit, codes):
    """pull_body against _pull_body on any units: records of the queue and of others (queue id,
    queue offset), units inside records, blanks, removed records, records outside the file or past
    its written end, codes past 32 bits, ragged unit runs."""
    log, packed_units = _log_and_units(records, units, log_start)
    cq = b"\xee" * lead + b"".join(packed_units) + b"\x01\x02"
    packed = None if codes is None else codes_bytes(codes)
    args = (cq, lead, len(cq) - 2 + (len(units) and 1), log, log_start, min(written, len(log)), log_min, count, limit,
            packed, 1, 100)
    assert kernel_module.kernel.pull_body(*args) == pullbody._pull_body(*args)
