"""Controller mode's store operations: roles changed while running, confirmOffset as a dispatch
limit, and a replica's divergent tail truncated (kept in a recovery backup)."""
from __future__ import annotations

import random

import pytest

from mqtool_store.errors import ReplicationError
from mqtool_store.messagestore import Message, MessageStore, PutStatus
from tests.store.test_replica_store import config, cq_bytes, fill, replicate, wait_dispatched


def test_a_dispatch_limit_holds_records_out_of_the_consume_queues_until_it_moves(tmp_path):
    with MessageStore(config(tmp_path / "m")) as m:
        fill(m, 30)
        m.set_dispatch_limit(m.commitlog_max_offset)
        mark = m.commitlog_max_offset
        before = [m.max_offset("T", q) for q in range(3)]
        fill(m, 30, start=30)
        m.drain_dispatch()
        assert [m.max_offset("T", q) for q in range(3)] == before       # stored, not yet consumable
        assert m.dispatch_behind_bytes == m.commitlog_max_offset - mark
        m.set_dispatch_limit(m.commitlog_max_offset)
        m.drain_dispatch()
        assert sum(m.max_offset("T", q) for q in range(3)) == 60


def test_a_master_steps_down_replicates_and_is_promoted_again(tmp_path):
    rng = random.Random(3)
    with MessageStore(config(tmp_path / "a")) as a, MessageStore(config(tmp_path / "b")) as b:
        fill(a, 100)
        b.become_slave()
        assert b.put(Message("T", 0, b"x", {})).status is PutStatus.SERVICE_NOT_AVAILABLE
        replicate(a, b, 0, rng)
        wait_dispatched(b)
        b.become_master("SYNC_MASTER")
        fill(b, 10, start=100)                        # queue offsets continue where a's left them
        assert sum(b.max_offset("T", q) for q in range(3)) == 110
        a.become_slave()
        replicate(b, a, a.commitlog_max_offset, rng)
        wait_dispatched(a)
    for q in range(3):
        assert cq_bytes(tmp_path / "a", "T", q) == cq_bytes(tmp_path / "b", "T", q)


def test_truncation_cuts_the_tail_at_a_record_and_keeps_the_cut_bytes(tmp_path):
    with MessageStore(config(tmp_path / "a")) as a:
        fill(a, 700)                                  # several 64 KiB files
        cut_at = a.commitlog.files[1].start + 0       # the first record of the second file
        tail_files = [f.path.name for f in a.commitlog.files if f.start > cut_at]
        with pytest.raises(ReplicationError, match="no record starts"):
            a.truncate_files(cut_at + 3)
        top = a.commitlog_max_offset
        assert a.truncate_files(cut_at) == top - cut_at
        assert a.commitlog_max_offset == cut_at
        counts = [a.max_offset("T", q) for q in range(3)]
        assert 0 < sum(counts) < 700
        for q, c in enumerate(counts):
            assert 0 < a.queue("T", q).max_physic_offset <= cut_at      # no unit points past the cut
            assert a.get("T", q, c - 1, 1).messages and not a.get("T", q, c, 1).messages
        fill(a, 5, start=700)                        # writes continue at the cut
        assert sum(a.max_offset("T", q) for q in range(3)) == sum(counts) + 5
    backup = next((tmp_path / "a").glob("recovery-backup-*"))
    kept = {p.name for p in (backup / "commitlog").iterdir()}
    assert set(tail_files) <= kept


def _confirmed_in_checkpoint(root) -> int:
    return int.from_bytes((root / "checkpoint").read_bytes()[32:40], "big", signed=True)


def _open(root, role="SLAVE", confirm_offsets=True) -> MessageStore:
    store = MessageStore(config(root, role))
    store.confirm_offsets = confirm_offsets                # what enableControllerMode=true sets
    return store.start()


@pytest.mark.parametrize("abnormal", [False, True])
def test_confirm_offset_is_kept_in_the_checkpoint_and_bounds_dispatch_after_a_restart(tmp_path, abnormal):
    root = tmp_path / "m"
    m = _open(root, "ASYNC_MASTER")
    fill(m, 30)
    mark = m.commitlog_max_offset
    m.set_dispatch_limit(mark)
    fill(m, 30, start=30)                             # stored past confirmOffset: not consumable yet
    m.shutdown()
    assert _confirmed_in_checkpoint(root) == mark
    if abnormal:
        (root / "abort").touch()
    with _open(root) as r:                            # restarts fenced, as a slave (controller mode)
        assert sum(r.max_offset("T", q) for q in range(3)) == 30
        assert (r.reput_from, r.dispatch_limit) == (mark, mark)
        assert r.recovery_report.confirm_offset == mark
        r.set_dispatch_limit(r.commitlog_max_offset)  # the master's next frame confirms the rest
        wait_dispatched(r)
        assert sum(r.max_offset("T", q) for q in range(3)) == 60


def test_without_controller_mode_recovery_dispatches_to_the_end(tmp_path):
    root = tmp_path / "m"
    m = _open(root, "ASYNC_MASTER", confirm_offsets=False)
    fill(m, 30)
    m.set_dispatch_limit(m.commitlog_max_offset)
    fill(m, 30, start=30)
    m.shutdown()
    with _open(root, "ASYNC_MASTER", confirm_offsets=False) as r:
        assert sum(r.max_offset("T", q) for q in range(3)) == 60
        assert r.dispatch_limit is None and r.recovery_report.confirm_offset is None


def test_a_master_alone_confirms_all_it_holds_and_truncation_lowers_confirm_offset(tmp_path):
    root = tmp_path / "m"
    with _open(root, "ASYNC_MASTER") as m:
        m.set_dispatch_limit(None)                    # a SyncStateSet of one: confirmOffset = max offset
        fill(m, 700)
        m.write_checkpoint()
        assert _confirmed_in_checkpoint(root) == m.commitlog_max_offset
        m.set_dispatch_limit(m.commitlog_max_offset)
        cut_at = m.commitlog.files[1].start
        m.become_slave()
        m.truncate_files(cut_at)
        m.write_checkpoint()
        assert _confirmed_in_checkpoint(root) == cut_at
    with _open(root) as r:
        assert r.dispatch_limit == cut_at == r.commitlog_max_offset


def test_a_checkpoint_confirm_offset_off_a_record_falls_back_to_the_queues_end(tmp_path):
    root = tmp_path / "m"
    m = _open(root, "ASYNC_MASTER")
    fill(m, 30)
    mark = m.commitlog_max_offset
    m.set_dispatch_limit(mark)
    fill(m, 30, start=30)
    m.set_dispatch_limit(mark + 7)                    # not a record boundary (a damaged checkpoint)
    m.shutdown()
    with _open(root) as r:
        assert r.dispatch_limit == mark
        assert sum(r.max_offset("T", q) for q in range(3)) == 30


@pytest.mark.parametrize("cut_while_reading", ["after the pass read past it", "while the pass reads it"])
def test_a_truncation_during_a_reput_pass_leaves_no_unit_past_the_cut(tmp_path, monkeypatch, cut_while_reading):
    """A slave's handshake truncation can land while the reput thread has read records it has not
    dispatched yet: those records are dropped and read again, never dispatched past the cut, and
    bytes seen mid-zeroing are no dispatch error."""
    import mqtool_store.replication as replication
    with MessageStore(config(tmp_path / "a")) as a, MessageStore(config(tmp_path / "b")) as b:
        fill(a, 10)
        a.drain_dispatch()
        b.append_data(0, bytes(a.transfer_slice(0, 1 << 20)))   # b is no slave: no reput thread races us
        units = a.queue("T", 0).units(0, a.max_offset("T", 0))
        cut = int(units["offset"][2])                   # the third record of queue 0: a record start
        real, calls = replication.decode_record, []
        trigger = 9 if cut_while_reading.startswith("after") else 0

        def decode_then_cut(buf, lo, hi):
            rec = real(buf, lo, hi)
            calls.append(lo)
            if len(calls) == trigger + 1:
                b.truncate_files(cut)
            return rec
        monkeypatch.setattr(replication, "decode_record", decode_then_cut)
        b._reput_some()
        monkeypatch.setattr(replication, "decode_record", real)
        assert b.reput_error is None and b.reput_from <= cut
        assert all(b.queue("T", q).max_physic_offset <= cut for q in range(3) if b.max_offset("T", q))
        b._reput_some()
        assert b.reput_from == cut == b.commitlog_max_offset and b.reput_error is None
        below_cut = sum(int((a.queue("T", q).units(0, a.max_offset("T", q))["offset"] < cut).sum()) for q in range(3))
        assert sum(b.max_offset("T", q) for q in range(3)) == below_cut == 6     # records 0-5 precede the cut
