"""SIGKILL a writer at random points, reopen, and check nothing acknowledged or intact is lost."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqtool.cluster.lifeline import die_with_parent
from mqtool_store.layout import StorePaths
from mqtool_store.messagestore import MessageStore
from mqtool_store.reader import CommitLogReader
from mqtool_store.storeconfig import MessageStoreConfig
from mqtool_store.verify import verify_store

REPO = Path(__file__).parents[2]
CQ_UNIT = 20


def cfg(root):
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=256 * 1024,
                              mappedFileSizeConsumeQueue=2000, maxHashSlotNum=100, maxIndexNum=400)


def stored_seqs(root) -> list[int]:
    with CommitLogReader(StorePaths.of(root).commitlog) as r:
        return [int(rec.properties["seq"]) for _, rec in r.records(check_crc=True)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_sigkill_loop(tmp_path, mode):
    rnd = random.Random(7)
    root = tmp_path / "store"
    acked: list[int] = []
    next_seq = 0
    deadline = time.monotonic() + 20
    rounds = 0
    while rounds < 8 and time.monotonic() < deadline:
        proc = subprocess.Popen([sys.executable, "-m", "tests.store.crash_writer", str(root), mode, str(next_seq)],
                                cwd=REPO, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent())
        assert proc.stdout.readline().strip() == "ready"
        want = rnd.randint(1, 400)
        got = 0
        for line in proc.stdout:
            if line.startswith("ack"):
                acked.append(int(line.split()[1]))
                got += 1
                if got >= want:
                    break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
        rounds += 1
        with MessageStore(cfg(root)) as s:         # recovery runs here
            assert s.recovery_report.abnormal
            total = sum(s.max_offset("CrashTopic", q) for q in range(3))
        seqs = stored_seqs(root)
        assert len(seqs) == len(set(seqs)) == total       # no duplicate, every record dispatched
        missing = set(acked) - set(seqs)
        assert not missing, f"acknowledged messages lost: {sorted(missing)[:10]}"
        report = verify_store(root)
        assert report.ok, [str(p) for p in report.problems[:5]]
        next_seq = max(seqs) + 1 if seqs else 0
    assert rounds >= 3


def _fill(root, n=300):
    from mqtool_store.messagestore import Message
    with MessageStore(cfg(root)) as s:
        for i in range(n):
            s.put(Message("CrashTopic", i % 3, b"x" * (50 + i % 200), {"KEYS": f"c-{i}", "seq": str(i)}))


def test_a_cut_tail_newer_than_what_is_left_pulls_the_checkpoint_back(tmp_path):
    """The checkpoint was written after the last records, which a power cut then zeroed; the
    queues held everything else, so recovery re-dispatches nothing. The checkpoint's times must
    come back to the newest record left, else a later abnormal recovery starts too late (it did,
    when the zeroed records were a millisecond newer than the survivors)."""
    from mqtool_store.checkpoint import Checkpoint
    root = tmp_path / "store"
    _fill(root)
    with CommitLogReader(StorePaths.of(root).commitlog) as r:
        recs = [(pos, rec) for pos, rec in r.records(check_crc=True)]
    last = sorted((root / "commitlog").iterdir())[-1]
    keep_pos, keep = recs[-3]
    later = keep.store_timestamp + 1
    data = bytearray(last.read_bytes())
    for pos, _rec in recs[-2:]:                   # the two newest a millisecond later (store timestamp)
        data[pos - int(last.name) + 56:pos - int(last.name) + 64] = later.to_bytes(8, "big")
    torn = recs[-2][0] - int(last.name) + 100      # the second newest torn, the newest gone
    data[torn:] = bytes(len(data) - torn)
    last.write_bytes(bytes(data))
    (root / "checkpoint").write_bytes(Checkpoint(later, later, later).encode())
    (root / "abort").touch()
    with MessageStore(cfg(root)) as s:
        assert s.recovery_report.abnormal
    assert stored_seqs(root)[-1] == int(keep.properties["seq"])
    report = verify_store(root)
    assert report.ok, [str(p) for p in report.problems[:5]]


@pytest.mark.parametrize("damage", ["truncate_tail", "zero_tail", "flip_last_record", "cq_garbage",
                                    "cq_deleted", "index_garbage", "checkpoint_garbage"])
def test_power_cut_damage(tmp_path, damage):
    root = tmp_path / "store"
    _fill(root)
    before = stored_seqs(root)
    files = sorted((root / "commitlog").iterdir())
    last = files[-1]
    data = bytearray(last.read_bytes())
    end = max(i for i in range(len(data)) if data[i]) + 1
    cq = root / "consumequeue" / "CrashTopic" / "1" / "00000000000000000000"
    lost = 0
    if damage == "truncate_tail":          # the last record torn in half, file size kept
        data[end - 60:] = bytes(len(data) - end + 60)
        last.write_bytes(bytes(data))
        lost = 1
    elif damage == "zero_tail":
        data[end - 500:] = bytes(len(data) - end + 500)
        last.write_bytes(bytes(data))
        lost = None
    elif damage == "flip_last_record":
        data[end - 40] ^= 0xFF             # inside the last record's properties or body
        last.write_bytes(bytes(data))
        lost = None
    elif damage == "cq_garbage":
        raw = bytearray(cq.read_bytes())
        raw[40:80] = b"\xee" * 40
        cq.write_bytes(bytes(raw))
    elif damage == "cq_deleted":
        cq.unlink()
    elif damage == "index_garbage":
        for p in (root / "index").iterdir():
            p.write_bytes(b"\x11" * p.stat().st_size)
    elif damage == "checkpoint_garbage":
        (root / "checkpoint").write_bytes(os.urandom(4096))
    (root / "abort").touch()
    with MessageStore(cfg(root)) as s:
        plan = s.recovery_report
    after = stored_seqs(root)
    if lost == 0:
        assert after == before
    elif lost == 1:
        assert after == before[:-1]
    else:
        assert after == before[:len(after)] and len(after) >= len(before) - 5
    report = verify_store(root)
    assert report.ok, [str(p) for p in report.problems[:5]]
    if plan.commitlog_cuts:
        backups = list(root.glob("recovery-backup-*/commitlog/*"))
        assert backups and sum(b.stat().st_size for b in backups) == sum(c.length for c in plan.commitlog_cuts)


def test_a_last_unit_torn_before_its_tags_code_is_written_again(tmp_path):
    """A kill inside a consume queue write: the last unit's offset and size made it, its tags code
    did not (it reads as a valid unit). Abnormal recovery checks the last unit against its record."""
    from mqtool_store.messagestore import Message
    root = tmp_path / "store"
    with MessageStore(cfg(root)) as s:
        for i in range(30):
            s.put(Message("CrashTopic", 1, b"x" * 60, {"TAGS": f"Tag{i % 4}", "seq": str(i)}))
    cq = root / "consumequeue" / "CrashTopic" / "1" / "00000000000000000000"
    raw = bytearray(cq.read_bytes())
    last = 29 * CQ_UNIT
    assert raw[last + 12:last + 20] != bytes(8)
    raw[last + 12:last + 20] = bytes(8)                  # tags code of unit 29 never written
    cq.write_bytes(bytes(raw))
    assert not verify_store(root).ok
    (root / "abort").touch()
    with MessageStore(cfg(root)) as s:
        assert s.max_offset("CrashTopic", 1) == 30
    report = verify_store(root)
    assert report.ok, [str(p) for p in report.problems[:5]]


def _crash_writer(root, seconds: float, mode: str = "SYNC_FLUSH") -> list[int]:
    """Run the writer for `seconds` after its first ack, SIGKILL it; the acknowledged sequence numbers."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.store.crash_writer", str(root), mode, "0"],
                            cwd=REPO, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent())
    acked = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        until = None
        for line in proc.stdout:
            if line.startswith("ack"):
                acked.append(int(line.split()[1]))
                until = until or time.monotonic() + seconds
                if time.monotonic() >= until:
                    break
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
    return acked


@pytest.mark.slow
def test_a_crash_under_load_re_dispatches_only_the_unvouched_tail(tmp_path):
    """SYNC_FLUSH puts for 5 s, SIGKILL: the checkpoint (written every flushIntervalConsumeQueue)
    vouches for all but the last ~3 s; recovery re-dispatches those records and no others, and
    loses no acknowledged message."""
    from mqtool_store.checkpoint import decode_checkpoint
    root = tmp_path / "store"
    acked = _crash_writer(root, 5.0)
    cp = decode_checkpoint((root / "checkpoint").read_bytes())
    with CommitLogReader(StorePaths.of(root).commitlog) as r:
        stamps = [(rec.physical_offset, rec.store_timestamp) for _, rec in r.records(check_crc=True)]
    unvouched = [off for off, ts in stamps if ts > cp.min_timestamp]
    assert 0 < len(unvouched) < len(stamps), (len(unvouched), len(stamps))   # the checkpoint vouched for some
    with MessageStore(cfg(root)) as s:
        plan = s.recovery_report
        total = sum(s.max_offset("CrashTopic", q) for q in range(3))
    assert plan.abnormal and plan.vouched_until == unvouched[0]
    redone = [off for off, _ in stamps if off >= plan.redispatch_from]
    assert plan.records_redispatched == len(redone)
    # a unit torn by the kill can move the start back by that one record, never more
    assert len(unvouched) <= plan.records_redispatched <= len(unvouched) + 1
    seqs = stored_seqs(root)
    assert not set(acked) - set(seqs) and len(seqs) == total
    assert verify_store(root).ok


def _tear_tail(root) -> None:
    """A half-written record after the last good one (what a kill mid-write leaves)."""
    last = sorted((root / "commitlog").iterdir())[-1]
    data = bytearray(last.read_bytes())
    end = max(i for i in range(len(data)) if data[i]) + 1
    data[end:end + 100] = b"\x42" * 100
    last.write_bytes(bytes(data))
    (root / "abort").touch()


def test_backups_keep_only_commit_log_bytes_and_at_most_recovery_backup_keep(tmp_path):
    root = tmp_path / "store"
    _fill(root, 50)
    old = root / "recovery-backup-20000101-000000-000"          # what an older mqtool left
    for sub in ("commitlog", "index", "consumequeue/T/0"):
        (old / sub).mkdir(parents=True)
        (old / sub / "x").write_bytes(b"copy")
    c = cfg(root)
    c.recoveryBackupKeep = 2
    for crash in range(4):
        _tear_tail(root)
        with MessageStore(c) as s:
            plan = s.recovery_report
            assert plan.backup_bytes == 100 and plan.commitlog_cuts
        backups = sorted(root.glob("recovery-backup-*"))
        assert len(backups) <= 2 and str(backups[-1]) == plan.backup_dir
        assert not list(root.glob("recovery-backup-*/index")) and not list(root.glob("recovery-backup-*/consumequeue"))
        saved = list(Path(plan.backup_dir).glob("commitlog/*.at-*"))
        assert len(saved) == 1 and saved[0].read_bytes() == b"\x42" * 100
        if crash == 0:          # the old one is within the count: only its derived copies went
            assert (old / "commitlog" / "x").exists()
    assert not old.exists()
    c.fileReservedTime = 1
    past = time.time() - 7200
    for b in root.glob("recovery-backup-*"):
        os.utime(b, (past, past))
    (root / "abort").touch()
    with MessageStore(c) as s:
        assert len(s.recovery_report.backups_removed) == 2
    assert not list(root.glob("recovery-backup-*"))


def test_recovery_says_in_the_log_what_it_did(tmp_path, caplog, monkeypatch):
    import logging

    from mqtool_store import recovery, redispatch
    monkeypatch.setattr(recovery, "PROGRESS_EVERY_S", 0.0)       # every step of a long one
    monkeypatch.setattr(redispatch, "PROGRESS_EVERY_S", 0.0)
    root = tmp_path / "store"
    _fill(root, 60)
    with caplog.at_level(logging.INFO, logger="mqtool.store.recovery"):
        with MessageStore(cfg(root)):
            pass
        assert "normal mode (clean shutdown)" in caplog.text and "recoveryBackupKeep" in caplog.text
        caplog.clear()
        _tear_tail(root)
        with MessageStore(cfg(root)) as s:
            plan = s.recovery_report
    text = caplog.text
    assert "abnormal mode (abort file present" in text
    assert f"checked {plan.records_scanned} records from commit log file {plan.start_file}" in text
    assert f"cut 100 bytes of {plan.commitlog_cuts[0].path}" in text and f"saved under {plan.backup_dir}" in text
    assert f"re-dispatched {plan.records_redispatched} records" in text and "done in" in text
    assert f"checking {plan.start_file}, " in text and " records so far" in text     # progress lines
    import re
    assert re.search(r"re-dispatched \d+ of \d+ bytes", text)


def test_written_end_bounds_a_scan_to_the_written_part_of_a_sparse_file(tmp_path):
    from mqtool_store.mappedfiles import ReadOnlyMap
    p = tmp_path / "f"
    with open(p, "wb") as f:
        f.truncate(64 << 20)
        f.write(b"\x01" * 10_000)
    with ReadOnlyMap(p) as m:
        end = m.written_end()
        assert 10_000 <= end <= 64 << 20
        assert m.written_end(end) == end and not bytes(m.buf[end:end + 4096]).strip(b"\0")


def test_index_slots_a_kill_left_past_the_header_are_mended(tmp_path):
    """Entries and slots written, the header's count not (a kill inside an index batch): the
    kept file's slots are followed back through prevIndex to counted entries, so older keys in
    the same slots stay reachable."""
    from mqtool_store.indexwriter import IndexService
    d = tmp_path / "index"
    svc = IndexService(d, 16, 400)
    svc.load()
    for i in range(40):
        svc.put("T", [f"k{i}"], 1000 + i * 10, 1_700_000_000_000 + i)
    w = svc.files[-1]
    header = bytes(w.mf.mm[:40])
    for i in range(40, 60):                       # written after the "kill": their header never lands
        svc.put("T", [f"k{i}"], 1000 + i * 10, 1_700_000_000_000 + i)
    w.mf.mm[:40] = header
    svc.close()
    svc = IndexService(d, 16, 400)
    svc.load()
    assert svc.repair_tail() > 0
    for i in range(40):
        offsets, _, _ = svc.query("T", f"k{i}", 32, 0, 2**62)
        assert offsets == [1000 + i * 10], i
    svc.close()
