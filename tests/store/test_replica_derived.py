"""Issue 43: a replica's consume queues and index match its commit log after any role change, restart
or truncation, and a pull steps over a unit that points at no record of its queue.

Each test is a finding of a chaos run, replayed on stores in one process: a slave restarted under load,
a master stepping down with records past confirmOffset, a truncation with units and index entries past
the cut, and a pull over a unit that points at nothing."""
from __future__ import annotations

import random

import pytest

from mqtool_store import pullbody
from mqtool_store.commitlog import decode_record, decode_records
from mqtool_store.consumequeue import encode_unit
from mqtool_store.messagestore import Message, MessageStore, PutStatus
from mqtool_store.verify import verify_store
from tests.store.test_replica_store import config, fill, replicate, wait_dispatched


def _open(root, role="SLAVE") -> MessageStore:
    store = MessageStore(config(root, role))
    store.confirm_offsets = True                 # what enableControllerMode=true sets
    return store.start()


def _clean(root) -> None:
    report = verify_store(root)
    assert report.ok, [str(p) for p in report.problems]


def _units(store: MessageStore, topic: str = "T", queues: int = 3) -> int:
    return sum(store.max_offset(topic, q) for q in range(queues))


def fill_other(store: MessageStore, n: int, start: int = 0) -> None:
    """Records of another topic, of other sizes: what a new master wrote where a cut tail was."""
    for i in range(start, start + n):
        r = store.put(Message("Other", i % 2, b"y" * (90 + i % 170), {"KEYS": f"o-{i}", "UNIQ_KEY": f"{i:032X}"},
                              born_timestamp=1))
        assert r.status is PutStatus.PUT_OK


def test_a_slave_restarted_under_load_dispatches_the_records_past_its_confirm_offset(tmp_path):
    """Finding 1: recovery dispatched up to the checkpoint's confirmOffset; the controller's 'slave'
    (become_slave at start-up) moved the reput position to the commit log's end, so the records in
    between never got their units."""
    root = tmp_path / "r"
    m = _open(root, "ASYNC_MASTER")
    fill(m, 30)
    mark = m.commitlog_max_offset
    m.set_dispatch_limit(mark)
    fill(m, 7, start=30)                          # replicated, not confirmed yet when the kill lands
    m.shutdown()
    (root / "abort").touch()
    with _open(root) as r:                        # starts fenced, as a slave
        assert r.reput_from == mark
        r.become_slave()                          # the controller's answer: slave of the same master
        r.set_dispatch_limit(r.commitlog_max_offset)      # the master's next frame confirms the rest
        wait_dispatched(r)
        assert _units(r) == 37
    _clean(root)


def test_a_master_stepping_down_hands_its_unconfirmed_records_to_the_reput_thread(tmp_path):
    """Finding 1 at an epoch boundary: the records a master put past confirmOffset were left in its
    pending list when it stepped down and the reput thread started at the commit log's end."""
    root = tmp_path / "m"
    with _open(root, "ASYNC_MASTER") as m:
        fill(m, 30)
        mark = m.commitlog_max_offset
        m.set_dispatch_limit(mark)
        fill(m, 5, start=30)
        m.drain_dispatch()
        assert _units(m) == 30
        m.become_slave()
        assert m.reput_from == mark and not m._pending
        m.set_dispatch_limit(m.commitlog_max_offset)      # the new master confirmed them: they were on it
        wait_dispatched(m)
        assert _units(m) == 35
    _clean(root)


@pytest.mark.parametrize("kernel_off", [False, True])
def test_a_truncation_past_confirm_offset_leaves_no_unit_or_index_entry_past_the_cut(tmp_path, kernel_off,
                                                                                   monkeypatch):
    """Finding 2: a deposed master's records past confirmOffset are cut at the handshake; the new
    master's records of another topic then fill the same offsets. No unit of the cut records may
    survive (nor be dispatched later from the pending list), the index must lose their entries, and
    the records appended after the cut must get their units and index entries."""
    if kernel_off:
        import mqtool_store.messagestore as ms
        monkeypatch.setattr(ms, "kernel", None)
    rng = random.Random(5)
    with _open(tmp_path / "a", "ASYNC_MASTER") as a, _open(tmp_path / "b", "ASYNC_MASTER") as b:
        a.set_dispatch_limit(None)
        fill(a, 40)
        a.drain_dispatch()
        b.become_slave()
        replicate(a, b, 0, rng)
        b.set_dispatch_limit(b.commitlog_max_offset)
        wait_dispatched(b)
        common = a.commitlog_max_offset
        a.set_dispatch_limit(common)              # allAck: the replica is gone, nothing more confirmed
        fill(a, 12, start=40)                     # written by the deposed master at its old epoch
        a.drain_dispatch()
        b.become_master("SYNC_MASTER")            # the new master writes another topic from `common`
        fill_other(b, 20)
        b.drain_dispatch()
        a.become_slave()
        assert a.truncate_files(common) > 0
        assert a.query("T", "k-45", 4, 0, 2**62)[0] == []      # the cut record's key is gone from the index
        replicate(b, a, common, rng)
        a.set_dispatch_limit(a.commitlog_max_offset)
        wait_dispatched(a)
        a.drain_dispatch()
        assert _units(a) == 40 and _units(a, "Other", 2) == 20
        assert len(a.query("Other", "o-19", 4, 0, 2**62)[0]) == 1
    _clean(tmp_path / "a")
    _clean(tmp_path / "b")


def test_a_truncation_keeps_the_index_entries_before_the_cut_and_indexes_what_follows(tmp_path):
    with _open(tmp_path / "a", "ASYNC_MASTER") as a:
        a.set_dispatch_limit(None)
        fill(a, 300)
        a.drain_dispatch()
        cut = a.commitlog.files[1].start
        a.become_slave()
        a.truncate_files(cut)
        kept = [i for i in range(300) if a.query("T", f"k-{i}", 4, 0, 2**62)[0]]
        assert kept and kept == list(range(len(kept)))          # a prefix: the records before the cut
        assert a.index.end_phy_offset < cut
        a.become_master("SYNC_MASTER")
        fill_other(a, 10)
        a.drain_dispatch()
        assert all(len(a.query("Other", f"o-{i}", 4, 0, 2**62)[0]) == 1 for i in range(10))
    _clean(tmp_path / "a")


def _spoil_unit(store: MessageStore, topic: str, qid: int, queue_offset: int, offset: int, size: int) -> None:
    cq = store.queue(topic, qid)
    pos = queue_offset * 20
    f = cq.files.find(pos)
    f.mm[pos - f.start:pos - f.start + 20] = encode_unit(offset, size, 0)


@pytest.mark.parametrize("joined", [True, False])
@pytest.mark.parametrize("python_twin", [False, True])
def test_a_pull_steps_over_a_unit_that_points_at_no_record_of_its_queue(tmp_path, monkeypatch, joined,
                                                                      python_twin, caplog):
    """Finding 2's pull: FOUND with 0 messages and nextBeginOffset 4 units on, the valid messages
    of the batch skipped. A unit pointing inside a record, or at a record of another queue, is
    stepped over alone, with one log line; the records around it are returned."""
    if python_twin:
        monkeypatch.setattr(pullbody, "kernel", None)
    with MessageStore(config(tmp_path / "s")) as s:
        fill(s, 30)                               # queue 0 holds records 0, 3, 6, ...
        s.drain_dispatch()
        units = s.queue("T", 0).units(0, 10)
        other = s.queue("T", 1).units(0, 10)
        _spoil_unit(s, "T", 0, 2, int(units["offset"][2]) + 8, int(units["size"][2]))       # inside a record
        _spoil_unit(s, "T", 0, 4, int(other["offset"][4]), int(other["size"][4]))          # queue 1's record
        want = [s.read(int(o)).body for i, o in enumerate(units["offset"][:8]) if i not in (2, 4)]
        got, offset = [], 0
        for _ in range(10):
            if joined:
                j = s.get_joined("T", 0, offset, 8)
                if j is not None:
                    got += [r.body for r in decode_records(j[0])]
                    offset = j[2]
                    continue
            res = s.get("T", 0, offset, 8)
            got += [decode_record(bytes(m)).body for m in res.messages]
            offset = res.next_begin_offset
            if offset >= 8:
                break
        assert got[:6] == want
        assert sum("steps over" in r.getMessage() for r in caplog.records) == 2
