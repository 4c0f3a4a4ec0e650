"""A single put through the store kernel (put_one, pending_units) writes exactly what the Python
path writes: the same commit log, consume queues, index and answers, for every kind of message
the broker stores, and hands back to the Python path whatever it does not take."""
from __future__ import annotations

import random
import time

import pytest

from mqtool_store import dispatch, messagestore
from mqtool_store.codes import SCHEDULE_TOPIC
from mqtool_store.kernel import kernel
from mqtool_store.messagestore import Message, MessageStore
from mqtool_store.properties import format_properties
from mqtool_store.reader import CommitLogReader
from mqtool_store.storeconfig import MessageStoreConfig
from mqtool_store.verify import verify_store

from .test_putpath import SMALL, _index_bytes

needs_kernel = pytest.mark.skipif(kernel is None, reason="the store kernel is not built here")
FIXED_MS = 1_764_000_000_123


class _FixedClock:
    """The time module with a fixed time_ns: two stores written apart get the same store times."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def time_ns() -> int:
        return FIXED_MS * 1_000_000


def _messages(seed: int, n: int) -> list[Message]:
    rnd = random.Random(seed)
    msgs = []
    for i in range(n):
        props = {}
        if rnd.random() < 0.8:
            props["TAGS"] = rnd.choice(["A", "B", "TagC", "", "标签"])
        if rnd.random() < 0.7:
            props["KEYS"] = " ".join(rnd.choice(["k1", "", "key-2", "ключ"]) for _ in range(rnd.randint(1, 3)))
        if rnd.random() < 0.5:
            props["UNIQ_KEY"] = f"{i:032X}"
        text = format_properties(props)
        kind = rnd.random()
        if kind < 0.1:
            text = None                     # the dict only: the Python path formats it
        elif kind < 0.2:
            props = {}                      # the text only: the Python path parses it
        topic = rnd.choice(["T1", "T2", "Tøpic", "T1"]) if i % 40 else f"New{i}"
        sys_flag = rnd.choice([0, 0, 0, 0x1, 0x4, 0x8, 0xC])       # compressed, prepared, commit, rollback
        born = (bytes(range(16)), 7) if rnd.random() < 0.05 else (bytes([10, 0, 0, rnd.randint(1, 9)]), 40000 + i)
        msgs.append(Message(topic, rnd.randint(0, 3), rnd.randbytes(rnd.choice([0, 1, 100, 1024, 3000])), props, text,
                            flag=rnd.choice([0, 5, -1, 2**31 - 1, -2**31]), sys_flag=sys_flag,
                            born_timestamp=rnd.randint(0, 2**62), born_host=born,
                            reconsume_times=rnd.randint(0, 16), prepared_transaction_offset=rnd.randint(0, 2**40)))
    msgs[7] = Message(SCHEDULE_TOPIC, 2, b"delayed", {"DELAY": "3", "REAL_TOPIC": "T1", "REAL_QID": "0"},
                      "DELAY\x013\x02REAL_TOPIC\x01T1\x02REAL_QID\x010\x02")
    msgs[8] = Message("T1", 0, b"x" * 5000, {"TAGS": "big"}, "TAGS\x01big\x02")           # over maxMessageSize
    msgs[9] = Message("T" * 128, 0, b"long topic", {"TAGS": "A"}, "TAGS\x01A\x02")         # refused
    return msgs


def _store_files(root) -> dict:
    files = {p.relative_to(root): p.read_bytes() for p in (root / "commitlog").iterdir()}
    files.update({p.relative_to(root): p.read_bytes() for p in (root / "consumequeue").rglob("0000*")})
    return files


class _Counting:
    """The kernel, counting the calls of its single-put functions that took the message(s)."""

    def __init__(self):
        self.taken = {"put_one": 0, "pending_units": 0}

    def __getattr__(self, name):
        fn = getattr(kernel, name)
        if name not in self.taken:
            return fn

        def counted(*args):
            got = fn(*args)
            self.taken[name] += got is not None
            return got
        return counted


def _put_all(root, msgs, use_kernel, monkeypatch, store_host=(b"\x0a\0\0\x01", 10911)):
    """Put msgs one by one into a new store; the answers (and, with the kernel, its call counts)."""
    counting = _Counting() if use_kernel else None
    monkeypatch.setattr(messagestore, "kernel", counting)
    monkeypatch.setattr(dispatch, "kernel", counting)
    monkeypatch.setattr(messagestore, "time", _FixedClock())
    answers = []
    cfg = MessageStoreConfig(storePathRootDir=str(root), **SMALL, maxMessageSize=4096)
    with MessageStore(cfg, store_host=store_host) as s:
        for i, m in enumerate(msgs):
            r = s.put(m)
            answers.append((r.status, r.offset, r.size, r.queue_offset, r.msg_ids, r.store_timestamp, r.remark))
            if i % 97 == 0:
                s.drain_dispatch()              # dispatch rounds of every length
    return (answers, counting.taken) if use_kernel else answers


@needs_kernel
@pytest.mark.parametrize("seed", [1, 2])
def test_single_puts_write_the_same_store_with_and_without_the_kernel(tmp_path, monkeypatch, seed):
    msgs = _messages(seed, 600)
    with_kernel, taken = _put_all(tmp_path / "k", msgs, True, monkeypatch)
    without = _put_all(tmp_path / "p", msgs, False, monkeypatch)
    assert with_kernel == without
    assert taken["put_one"] > 300 and taken["pending_units"] > 0        # the kernel did the most of it
    assert sum(a[0].name == "PUT_OK" for a in with_kernel) >= 590          # the two refusals, and files full
    assert {a[0].name for a in with_kernel} >= {"PUT_OK", "MESSAGE_ILLEGAL"}
    assert _store_files(tmp_path / "k") == _store_files(tmp_path / "p")
    assert _index_bytes(tmp_path / "k" / "index") == _index_bytes(tmp_path / "p" / "index")
    assert verify_store(tmp_path / "k").ok


@needs_kernel
def test_an_ipv6_store_host_takes_the_python_path(tmp_path, monkeypatch):
    msgs = _messages(3, 100)
    v6 = (bytes(range(100, 116)), 10911)
    with_kernel, taken = _put_all(tmp_path / "k", msgs, True, monkeypatch, v6)
    assert with_kernel == _put_all(tmp_path / "p", msgs, False, monkeypatch, v6)
    assert taken["put_one"] == 0
    assert _store_files(tmp_path / "k") == _store_files(tmp_path / "p")


def _put_one(msg, buf, table, pending, room=None, topic_fields=None):
    return kernel.put_one(msg, buf, 0, len(buf) if room is None else room, 4096, FIXED_MS,
                          {"T": b"\x01T"} if topic_fields is None else topic_fields, b"\x0a\0\0\x01\0\0\x2a\x9f",
                          lambda b: 0x89ABCDEF, 1024, table, pending)


@needs_kernel
@pytest.mark.parametrize("change", [
    dict(topic="Unknown"), dict(body=b"x" * 1025), dict(body=bytearray(b"x")), dict(properties_text=None),
    dict(properties={}), dict(properties_text="A\x01" + "b" * 32765), dict(properties_text="\ud800"),
    dict(flag=2**31), dict(queue_id=-2**31 - 1), dict(born_timestamp=2**63), dict(sys_flag=0x10),
    dict(born_host=(bytes(16), 1)), dict(born_host=(b"\x7f\0\0\x01", 2**31)), dict(reconsume_times="1"),
])
def test_put_one_leaves_to_the_python_path_what_it_does_not_take(change):
    msg = Message("T", 1, b"body", {"A": "b"}, "A\x01b\x02")
    for name, value in change.items():
        setattr(msg, name, value)
    buf, table, pending = bytearray(512), {}, []
    assert _put_one(msg, buf, table, pending) is None
    assert buf == bytearray(512) and table == {} and pending == []


@needs_kernel
def test_put_one_places_the_record_and_counts_the_queue():
    buf, table, pending = bytearray(512), {("T", 1): 41}, []
    msg = Message("T", 1, b"body", {"A": "b"}, "A\x01b\x02", sys_flag=0x8)
    size, queue_offset = _put_one(msg, buf, table, pending)
    assert (size, queue_offset, table) == (88 + 4 + 2 + 2 + 4, 41, {("T", 1): 42})
    assert pending == [("T", 1, msg.properties, 4096, size, 41, FIXED_MS, 0x8)]
    assert _put_one(msg, buf, table, pending, room=size - 1) is None      # no room: nothing changes
    prepared = Message("T", 1, b"body", {"A": "b"}, "A\x01b\x02", sys_flag=0x4)
    assert _put_one(prepared, buf, table, pending)[1] == 0 and table == {("T", 1): 42}


@needs_kernel
def test_pending_units_leaves_runs_schedule_records_and_gaps_to_the_python_path():
    single = ("T", 0, {"TAGS": "A"}, 100, 50, 7, FIXED_MS, 0)
    queues, keys, _, _ = kernel.pending_units([single, ("T", 0, {}, 150, 60, 8, FIXED_MS, 0)], True, SCHEDULE_TOPIC)
    assert [(k, bytes(v[0]), v[1:]) for k, v in queues.items()] == [
        (("T", 0), bytes.fromhex("0000000000000064" "00000032" "0000000000000041"
                                 "0000000000000096" "0000003c" "0000000000000000"), [7, 9])]
    assert keys == []
    run = ("T", 0, [{}], 150, 60, 8, FIXED_MS, 0, b"")
    assert kernel.pending_units([single, run], True, SCHEDULE_TOPIC) is None
    assert kernel.pending_units([(SCHEDULE_TOPIC,) + single[1:]], True, SCHEDULE_TOPIC) is None
    assert kernel.pending_units([single, single], True, SCHEDULE_TOPIC) is None          # offset 7 twice


def test_a_sync_flush_put_that_rolls_the_file_does_not_wait_out_sync_flush_timeout(tmp_path):
    """The Python single put hands a put that does not fit to put_batch: outside the put lock,
    or its flush wait holds the lock the group commit needs and every roll costs syncFlushTimeout."""
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path / "s"), flushDiskType="SYNC_FLUSH",
                             mappedFileSizeCommitLog=16 * 1024, syncFlushTimeout=3000)
    with MessageStore(cfg) as s:
        slowest = 0.0
        for i in range(200):         # ~20 files' worth
            t = time.monotonic()
            r = s.put(Message("Roll", 0, b"y" * 1500, {"seq": str(i)}))
            slowest = max(slowest, time.monotonic() - t)
            assert r.status.value == "PUT_OK", (i, r.status)
        assert len(s.commitlog.files) > 10 and slowest < 1.5


@pytest.mark.parametrize("use_kernel", [True, False] if kernel is not None else [False])
@pytest.mark.parametrize("batch", [False, True])
def test_ipv6_host_flags_sent_with_ipv4_hosts_are_set_from_the_hosts(tmp_path, monkeypatch, use_kernel, batch):
    """A client's sysFlag may carry BORNHOST_V6 / STOREHOSTADDRESS_V6 while both hosts are IPv4: the
    record is written with the widths of the hosts it holds (it raised IndexError in the put)."""
    if not use_kernel:
        monkeypatch.setattr(messagestore, "kernel", None)
        monkeypatch.setattr(dispatch, "kernel", None)
    text = format_properties({"TAGS": "a", "KEYS": "k"})
    msgs = [Message("T1", 0, b"body-%d" % i, {"TAGS": "a", "KEYS": "k"}, text, sys_flag=0x10 | 0x20 | 0x1,
                    born_host=(b"\x0a\0\0\x01", 5000 + i)) for i in range(20)]
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), **SMALL)
    with MessageStore(cfg, store_host=(b"\x0a\0\0\x02", 10911)) as s:
        answers = [s.put_batch(msgs)] if batch else [s.put(m) for m in msgs]
        assert {a.status.name for a in answers} == {"PUT_OK"}
        s.drain_dispatch()
    assert verify_store(tmp_path).ok
    with CommitLogReader(tmp_path / "commitlog") as reader:
        recs = [rec for _off, rec in reader.records()]
    assert [r.body for r in recs] == [m.body for m in msgs]
    assert {r.sys_flag for r in recs} == {0x1}                      # compressed kept, the host flags cleared
    assert [(r.born_ip, r.born_port) for r in recs] == [m.born_host for m in msgs]
