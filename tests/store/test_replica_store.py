"""The store's side of replication: a master's bytes appended to a slave store, dispatched there."""
from __future__ import annotations

import random
import time

import pytest

from mqtool_store.errors import ReplicationError
from mqtool_store.messagestore import Message, MessageStore, PutStatus
from mqtool_store.storeconfig import MessageStoreConfig

FILE = 64 * 1024


def config(root, role="ASYNC_MASTER") -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=FILE,
                              mappedFileSizeConsumeQueue=600, brokerRole=role)


def fill(store: MessageStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        r = store.put(Message("T", i % 3, b"x" * (50 + i % 400), {"KEYS": f"k-{i}", "TAGS": "TagA",
                                                                  "UNIQ_KEY": f"{i:032X}"}, born_timestamp=1))
        assert r.status is PutStatus.PUT_OK


def replicate(master: MessageStore, slave: MessageStore, start: int, rng: random.Random) -> int:
    """Copy master bytes to the slave the way a master's writer does: up to a batch, one file at a time."""
    offset = start
    while True:
        data = master.transfer_slice(offset, rng.choice([7, 100, 1000, 4096, 32768]))
        if not data:
            return offset
        slave.append_data(offset, bytes(data))
        offset += len(data)


def wait_dispatched(slave: MessageStore, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while slave.dispatch_behind_bytes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert slave.dispatch_behind_bytes == 0, slave.reput_error


def cq_bytes(root, topic, queue) -> bytes:
    d = root / "consumequeue" / topic / str(queue)
    return b"".join(p.read_bytes() for p in sorted(d.iterdir()))


def test_slave_holds_the_same_bytes_and_builds_the_same_queues(tmp_path):
    rng = random.Random(7)
    with MessageStore(config(tmp_path / "m")) as m, MessageStore(config(tmp_path / "s", "SLAVE")) as s:
        fill(m, 700)                               # several 64 KiB files, blank ends included
        assert len(m.commitlog.files) >= 4
        end = replicate(m, s, 0, rng)
        assert end == m.commitlog_max_offset == s.commitlog_max_offset
        wait_dispatched(s)
        for q in range(3):
            assert s.max_offset("T", q) == m.max_offset("T", q)
            got = s.get("T", q, 0, 32)
            assert got.messages == m.get("T", q, 0, 32).messages
        data, _, _ = s.query("T", "k-650", 4, 0, 2**62)
        assert len(data) == 1
        assert s.checkpoint.physic_msg_timestamp == m.commitlog.last.store_timestamp
    for f in sorted((tmp_path / "m" / "commitlog").iterdir()):
        assert (tmp_path / "s" / "commitlog" / f.name).read_bytes() == f.read_bytes()
    for q in range(3):
        assert cq_bytes(tmp_path / "s", "T", q) == cq_bytes(tmp_path / "m", "T", q)


def test_an_empty_slave_can_start_at_a_later_file(tmp_path):
    with MessageStore(config(tmp_path / "m")) as m, MessageStore(config(tmp_path / "s", "SLAVE")) as s:
        fill(m, 700)
        top = m.commitlog_max_offset
        start = top - top % FILE                   # the master's rule for a slave that reports 0
        replicate(m, s, start, random.Random(1))
        wait_dispatched(s)
        assert s.commitlog_min_offset == start and s.commitlog_max_offset == top
        last = m.read(start)
        assert s.max_offset("T", last.queue_id) == m.max_offset("T", last.queue_id)


def test_bytes_for_the_wrong_offset_are_refused_and_nothing_is_written(tmp_path):
    with MessageStore(config(tmp_path / "m")) as m, MessageStore(config(tmp_path / "s", "SLAVE")) as s:
        fill(m, 20)
        first = bytes(m.transfer_slice(0, 1000))
        with pytest.raises(ReplicationError):
            s.append_data(100, first)              # not a file boundary on an empty slave
        s.append_data(0, first)
        before = s.commitlog_max_offset
        with pytest.raises(ReplicationError):
            s.append_data(before + 8, b"zz")       # a gap
        with pytest.raises(ReplicationError):
            s.append_data(before - 8, b"zz")       # an overlap
        with pytest.raises(ReplicationError):
            s.append_data(before, bytes(FILE))      # would cross the end of the file
        assert s.commitlog_max_offset == before
        assert bytes(s.transfer_slice(0, before)) == first


def test_a_slave_refuses_client_writes(tmp_path):
    with MessageStore(config(tmp_path / "s", "SLAVE")) as s:
        r = s.put(Message("T", 0, b"x"))
        assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and "slave" in r.remark
        assert s.commitlog_max_offset == 0


def test_a_torn_record_on_a_stopped_slave_is_cut_and_replication_resumes(tmp_path):
    with MessageStore(config(tmp_path / "m")) as m:
        fill(m, 30)
        size = m.read(0).total_size
        whole = bytes(m.transfer_slice(0, m.commitlog_max_offset))
        with MessageStore(config(tmp_path / "s", "SLAVE")) as s:
            s.append_data(0, whole[:size + 10])    # one record and a piece of the next
            deadline = time.monotonic() + 5
            while s.reput_from < size and time.monotonic() < deadline:
                time.sleep(0.01)
            assert s.reput_from == size            # the piece is not dispatched
        with MessageStore(config(tmp_path / "s", "SLAVE")) as s:
            assert s.commitlog_max_offset == size  # recovery cut the torn record (and backed it up)
            assert list((tmp_path / "s").glob("recovery-backup-*"))
            s.append_data(size, whole[size:])
            wait_dispatched(s)
            assert sum(s.max_offset("T", q) for q in range(3)) == 30


def test_transfer_slices_never_cross_a_file(tmp_path):
    with MessageStore(config(tmp_path / "m")) as m:
        fill(m, 700)
        offset, sizes = 0, []
        while data := m.transfer_slice(offset, 50_000):
            assert offset // FILE == (offset + len(data) - 1) // FILE
            sizes.append(len(data))
            offset += len(data)
        assert offset == m.commitlog_max_offset and max(sizes) == 50_000
        assert m.transfer_slice(offset, 10) == b""
