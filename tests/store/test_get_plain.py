"""`MessageStore.get` for a pull without filters takes its records in one pass (`_get_plain`) where
every unit is a readable record of one commit log file; the unit-by-unit loop is the reference."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from mqtool_store.messagestore import GetStatus, Message, MessageStore
from mqtool_store.storeconfig import MessageStoreConfig


PLAIN = MessageStore._get_plain         # (the tests patch it; this stays the real one)


def fields(r):
    return (r.status, r.messages, r.next_begin_offset, r.min_offset, r.max_offset, r.suggest_slave)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Records of varied sizes in small commit log files (pulls cross file ends), 3 queues."""
    root = tmp_path_factory.mktemp("plain")
    s = MessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1 << 16,
                                        mappedFileSizeConsumeQueue=6000)).start()
    for i in range(400):
        s.put(Message("T", i % 3, b"b" * (i * 7 % 200), {"KEYS": f"k{i}", "TAGS": "A" if i % 2 else "B"}))
    s.drain_dispatch()
    yield s
    s.shutdown()


def both(s, monkeypatch_get, *args):
    """(plain-path answer, loop answer, whether the plain path answered)."""
    taken = []

    def spy(self, *a):
        got = PLAIN(self, *a)
        taken.append(got is not None)
        return got
    monkeypatch_get(MessageStore, "_get_plain", spy)
    fast = s.get(*args)
    monkeypatch_get(MessageStore, "_get_plain", lambda self, *a: None)
    slow = s.get(*args)
    return fast, slow, any(taken)


def test_plain_pulls_take_the_one_pass(store, monkeypatch):
    fast, slow, taken = both(store, monkeypatch.setattr, "T", 0, 0, 32)
    assert taken and fields(fast) == fields(slow)
    assert fast.status is GetStatus.FOUND and len(fast.messages) == 32 and fast.next_begin_offset == 32
    cq = store.queues[("T", 0)]
    assert fast.messages == [store.read_bytes(int(u["offset"]), int(u["size"])) for u in cq.units(0, 32)]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(queue=0, offset=0, count=32, limit=262144, cl_min=20000)     # units below the commit log's head
@given(queue=st.integers(0, 2), offset=st.integers(0, 140), count=st.integers(1, 64),
       limit=st.sampled_from([1, 100, 300, 1000, 262144]), cl_min=st.sampled_from([0, 0, 20000, 1 << 16]))
def test_the_one_pass_answers_what_the_loop_answers(store, monkeypatch, queue, offset, count, limit, cl_min):
    """Over offsets, counts, the byte limit (maxTransferBytesOnMessageInMemory) and a commit log
    whose head was removed (units below its min offset: MESSAGE_WAS_REMOVING from the loop)."""
    monkeypatch.setattr(store.cfg, "maxTransferBytesOnMessageInMemory", limit)
    monkeypatch.setattr(type(store.commitlog), "min_offset", property(lambda self: cl_min))
    fast, slow, taken = both(store, monkeypatch.setattr, "T", queue, offset, count)
    assert fields(fast) == fields(slow)
    TAKEN.append(taken)


TAKEN: list[bool] = []


def test_the_byte_limit_is_held_at_its_edge(store, monkeypatch):
    """A record is taken while the bytes before it are under maxTransferBytesOnMessageInMemory: the
    one pass answers when the limit takes every unit up to the count, the loop where it cuts them."""
    sizes = [int(u["size"]) for u in store.queues[("T", 1)].units(2, 5)]
    for limit, want, one_pass in ((sum(sizes[:4]) + 1, 5, True), (sum(sizes[:4]), 4, False),
                                  (sum(sizes[:3]), 3, False)):
        monkeypatch.setattr(store.cfg, "maxTransferBytesOnMessageInMemory", limit)
        fast, slow, taken = both(store, monkeypatch.setattr, "T", 1, 2, 5)
        assert fields(fast) == fields(slow) and len(fast.messages) == want and taken is one_pass


def test_the_generated_pulls_took_both_ways():
    """(After the property test.) The one pass answered some pulls, the loop others."""
    if TAKEN:
        assert any(TAKEN) and not all(TAKEN)
