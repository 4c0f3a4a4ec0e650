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
