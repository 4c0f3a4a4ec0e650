"""The dispatch tells its listeners (the broker's pull holds) of the units of the queues `listened`
names only, on every dispatch way: a single put's record, single puts gathered (by the kernel's
pending_units or in Python), a batch put as a run, and a dispatch of one record."""
from __future__ import annotations

from mqtool_store.messagestore import Message, MessageStore, PutStatus
from mqtool_store.storeconfig import MessageStoreConfig


def _told(root, listened) -> list:
    told = []
    with MessageStore(MessageStoreConfig(storePathRootDir=str(root))) as s:
        s.wake_dispatcher = False
        s.listeners.append(lambda *a: told.append(a))
        s.listened = listened
        for i in range(12):          # single puts, drained together (pending_units with the kernel)
            assert s.put(Message("T", i % 3, b"one", {"TAGS": "A"})).status is PutStatus.PUT_OK
        s.drain_dispatch()
        assert s.put(Message("T", 1, b"alone", {})).status is PutStatus.PUT_OK
        s.drain_dispatch()
        for q in (0, 1):             # batches stored as runs
            assert s.put_batch([Message("T", q, b"b%d" % k, {"KEYS": "k"}) for k in range(40)]).ok
        s.drain_dispatch()
        for q in (0, 1):             # one record each (recovery's and a slave's reput way)
            s._dispatch("T", q, {}, s.commitlog_max_offset + 100 * q, 10, s.max_offset("T", q), 0, 0)
    return told


def test_only_the_listened_queues_are_told(tmp_path, store_kernel):
    everything = _told(tmp_path / "all", None)
    queue_one = _told(tmp_path / "one", lambda topic, queue_id: (topic, queue_id) == ("T", 1))
    assert queue_one == [a for a in everything if a[1] == 1]
    assert {a[1] for a in everything} == {0, 1, 2}
    assert [a[2] for a in queue_one] == list(range(1, 47))
