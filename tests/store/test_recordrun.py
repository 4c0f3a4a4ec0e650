"""A batch put as a run (store/recordrun.py) writes the bytes the record-by-record path writes:
commit log, consume queues and index, file rolls included."""
from __future__ import annotations

import random
import time
import types

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mqtool_store import messagestore
from mqtool_store.commitlog import decode_record, topic_field
from mqtool_store.messagestore import Message, MessageStore, PutStatus
from mqtool_store.properties import format_properties
from mqtool_store.recordrun import KERNEL_RUN_MIN, RUN_MIN, prepare_run
from mqtool_store.storeconfig import MessageStoreConfig
from mqtool_store.verify import verify_store

SMALL = dict(mappedFileSizeCommitLog=96 * 1024, mappedFileSizeConsumeQueue=400, maxHashSlotNum=50, maxIndexNum=200)
FIXED_NS = 1_700_000_000_123_000_000
HOST = (b"\x0a\0\0\x01", 10911)


@pytest.fixture
def fixed_clock(monkeypatch):
    """Both stores stamp the same store time, so their bytes can be compared whole."""
    clock = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("_")})
    clock.time_ns = lambda: FIXED_NS
    monkeypatch.setattr(messagestore, "time", clock)


def _files(root, sub):
    return {p.relative_to(root / sub).as_posix(): p.read_bytes() for p in sorted((root / sub).rglob("*")) if p.is_file()}


def _index_bytes(root):
    # index files are named by the wall clock when created: compare their contents in order
    return [p.read_bytes() for p in sorted((root / "index").iterdir())]


def _per_queue(log):
    out = {}
    for topic, queue_id, max_offset, code in log:
        out.setdefault((topic, queue_id), []).append((max_offset, code))
    return out


def _batches(rng, count):
    out = []
    for b in range(count):
        topic = rng.choice(["TopicA", "T", "TopicWithALongerName"])
        queue = rng.randrange(4)
        n = rng.randrange(1, 40)
        msgs = []
        for i in range(n):
            props = {}
            if rng.random() < 0.8:
                props["TAGS"] = rng.choice(["A", "B", "TagC", ""])
            if rng.random() < 0.7:
                props["KEYS"] = rng.choice([f"k{b}-{i}", f"a{i} b{i}", f" lead{i}", "x  y"])
            if rng.random() < 0.5:
                props["UNIQ_KEY"] = f"{b:08X}{i:08X}"
            text = format_properties(props) if rng.random() < 0.7 else None
            msgs.append(Message(topic, queue, rng.randbytes(rng.randrange(0, 3000)), props, text,
                                flag=rng.randrange(8), born_timestamp=1_700_000_000_000 + b,
                                born_host=(b"\xc0\xa8\0\x07", 40000 + b)))
        # one batch of records alike (the common shape: one key each, one tag)
        if b % 3 == 0:
            msgs = [Message(topic, queue, rng.randbytes(1024), {"KEYS": f"k{b}.{i}", "TAGS": "A"},
                            f"KEYS\x01k{b}.{i}\x02TAGS\x01A\x02") for i in range(rng.randrange(RUN_MIN, 60))]
        elif b % 3 == 1:    # what producers send: a UNIQ_KEY on every message, a key or none
            keyed = b % 2 == 0
            msgs = [Message(topic, queue, rng.randbytes(100), p, format_properties(p))
                    for p in ({"UNIQ_KEY": f"{b:08X}{i:024X}", **({"KEYS": f"order{i}"} if keyed else {})}
                              for i in range(rng.randrange(RUN_MIN, RUN_MIN + 30)))]
        out.append(msgs)
    return out


def _store(root, msgs_list, as_runs, listener_log=None):
    cfg = MessageStoreConfig(storePathRootDir=str(root), **SMALL)
    results = []
    with MessageStore(cfg, store_host=(b"\x0a\0\0\x01", 10911)) as s:
        if listener_log is not None:
            s.listeners.append(lambda *a: listener_log.append(a))
        for t in {m.topic for msgs in msgs_list for m in msgs}:     # warm the topic field cache alike
            s._topic_fields[t] = topic_field(t.encode())
        for msgs in msgs_list:
            r = s.put_batch(msgs, batch=as_runs)
            assert r.status is PutStatus.PUT_OK
            results.append((r.offset, r.size, r.queue_offset, r.msg_ids))
        s.drain_dispatch()
    return results


def test_runs_write_the_same_store_as_record_by_record(tmp_path, fixed_clock, store_kernel):
    rng = random.Random(11)
    batches = _batches(rng, 40)
    assert sum(prepare_run(b, topic_field(b[0].topic.encode()), 4 << 20, HOST) is not None for b in batches) >= 15
    runs_log, plain_log = [], []
    runs = _store(tmp_path / "runs", batches, True, runs_log)
    plain = _store(tmp_path / "plain", batches, False, plain_log)
    assert runs == plain
    # what the broker's pull-hold listeners hear, queue by queue (dispatch rounds interleave queues)
    assert _per_queue(runs_log) == _per_queue(plain_log) and len(plain_log) == sum(map(len, batches))
    assert _files(tmp_path / "runs", "commitlog") == _files(tmp_path / "plain", "commitlog")
    assert len(_files(tmp_path / "runs", "commitlog")) > 3                 # the runs rolled files
    assert _files(tmp_path / "runs", "consumequeue") == _files(tmp_path / "plain", "consumequeue")
    assert _index_bytes(tmp_path / "runs") == _index_bytes(tmp_path / "plain")
    assert len(_index_bytes(tmp_path / "runs")) > 1                          # ... and index files
    assert verify_store(tmp_path / "runs").ok


def test_a_run_reads_back_as_its_messages(tmp_path, store_kernel):
    msgs = [Message("Run", 2, bytes([i]) * (i * 7), {"KEYS": f"key{i}", "TAGS": "T"}, flag=i) for i in range(40)]
    assert prepare_run(msgs, topic_field(b"Run"), 1 << 20, HOST) is not None
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path / "s"), **SMALL)
    with MessageStore(cfg) as s:
        s.put(Message("Run", 2, b"first", {}))
        r = s.put_batch(msgs)
        assert (r.queue_offset, len(r.msg_ids)) == (1, 40)
        got, at = [], 1
        while at < 41:         # a get ends with its consume queue file (20 units here)
            page = s.get("Run", 2, at, 64)
            got += [decode_record(raw, check_crc=True) for raw in page.messages]
            at = page.next_begin_offset
        assert [m.body for m in got] == [m.body for m in msgs]
        assert [m.flag for m in got] == list(range(40))
        assert [m.msg_id for m in got] == r.msg_ids
        assert [m.queue_offset for m in got] == list(range(1, 41))
        assert got[0].physical_offset == r.offset and sum(m.total_size for m in got) == r.size
        hits, _, _ = s.query("Run", "key13", 10, 0, 1 << 62)
        assert [decode_record(raw).body for raw in hits] == [msgs[13].body]


@pytest.mark.parametrize("change", ["queue", "topic", "v6", "transaction", "born", "few"])
def test_what_is_not_a_run(change, store_kernel):
    msgs = [Message("T", 0, b"x", {"KEYS": "k"}) for _ in range(RUN_MIN)]
    tf = topic_field(b"T")
    assert prepare_run(msgs, tf, 1 << 20, HOST) is not None
    if change == "queue":
        msgs[3].queue_id = 1
    elif change == "topic":
        msgs[-1].topic = "U"
    elif change == "v6":
        msgs[0].born_host = (bytes(16), 1)
    elif change == "transaction":
        for m in msgs:
            m.sys_flag = 4
    elif change == "born":
        msgs[5].born_timestamp = 9
    else:      # fewer than a run's least (smaller with the kernel: its runs cost less to set up)
        msgs = msgs[:(RUN_MIN if store_kernel is None else KERNEL_RUN_MIN) - 1]
    assert prepare_run(msgs, tf, 1 << 20, HOST) is None
    assert prepare_run(msgs[:RUN_MIN], tf, 1 << 20, (bytes(16), 10911)) is None     # an IPv6 store host


def test_an_oversized_body_is_refused_by_the_general_path(tmp_path, store_kernel):
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path / "s"), maxMessageSize=100, **SMALL)
    msgs = [Message("T", 0, b"x" * (200 if i == 5 else 10), {}) for i in range(RUN_MIN)]
    with MessageStore(cfg) as s:
        s.put(Message("T", 0, b"warm", {}))
        r = s.put_batch(msgs)
        assert r.status is PutStatus.MESSAGE_ILLEGAL and "maxMessageSize" in r.remark
        assert s.max_offset("T", 0) == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32), st.integers(1, 12))
def test_generated_batches_match(tmp_path_factory, fixed_clock, store_kernel, seed, count):
    root = tmp_path_factory.mktemp("runs")
    batches = _batches(random.Random(seed), count)
    assert _store(root / "a", batches, True) == _store(root / "b", batches, False)
    assert _files(root / "a", "commitlog") == _files(root / "b", "commitlog")
    assert _files(root / "a", "consumequeue") == _files(root / "b", "consumequeue")
    assert _index_bytes(root / "a") == _index_bytes(root / "b")
