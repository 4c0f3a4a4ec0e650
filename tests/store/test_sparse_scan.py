"""Scans for non-zero bytes read only a file's data ranges (SEEK_DATA / SEEK_HOLE): a consume queue
file of 5.7 MiB holding a few units costs its one written page at start-up, and bytes written past
a hole are still found."""
from __future__ import annotations

import os

import numpy as np

from mqtool_store.cqwriter import ConsumeQueue
from mqtool_store.logscan import last_nonzero, last_nonzero_in
from mqtool_store.mappedfiles import ReadOnlyMap, data_ranges
from mqtool_store.messagestore import Message, MessageStore
from mqtool_store.storeconfig import MessageStoreConfig

SIZE = 6_000_000


def _sparse(path, writes):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, SIZE)
        for at, data in writes:
            os.pwrite(fd, data, at)
    finally:
        os.close(fd)


def test_data_ranges_skip_holes_and_the_last_non_zero_byte_is_found_past_one(tmp_path):
    path = tmp_path / "f"
    _sparse(path, [(0, b"\x01" * 20), (4_000_000, b"\x00\x07\x00")])
    with ReadOnlyMap(path) as m:
        ranges = m.data_ranges()
        covered = sum(hi - lo for lo, hi in ranges)
        assert ranges[0][0] == 0 and covered < 64 * 1024                    # two pages or so, not 6 MB
        assert any(lo <= 4_000_001 < hi for lo, hi in ranges)
        assert last_nonzero_in(m.buf, ranges, 20, SIZE) == last_nonzero(m.buf, 20, SIZE) == 4_000_001
        assert last_nonzero_in(m.buf, ranges, 4_000_002, SIZE) == -1
    fd = os.open(path, os.O_RDONLY)
    try:
        assert data_ranges(fd, 5_000_000, SIZE) == []                          # nothing but a hole there
    finally:
        os.close(fd)


def test_recovery_cuts_units_and_bytes_written_past_a_hole(tmp_path):
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path))
    with MessageStore(cfg) as s:
        for i in range(3):
            s.put(Message("T", 0, b"m%d" % i, {"WAIT": "true"}, None))
        s.drain_dispatch()
    qdir = tmp_path / "consumequeue" / "T" / "0"
    path = qdir / ("0" * 20)
    _sparse(path, [(4_000_000, b"garbage")])                                 # torn bytes far past the units
    cq = ConsumeQueue(qdir, "T", 0, cfg.mappedFileSizeConsumeQueue)
    cq.load()
    try:
        assert cq.recover() == 4_000_000 + len(b"garbage") - 3 * 20
        assert cq.max_offset == 3
    finally:
        cq.close()
    with ReadOnlyMap(path) as m:
        assert last_nonzero(m.buf, 60, len(m.buf)) == -1                     # zeroed by the recovery


# ---- offline commands on a fresh store: a few records in a large preallocated commit log file

BIG = 256 << 20


def _fresh_store(root, records: int = 3):
    """A store whose one commit log file is BIG bytes holding `records` records, the rest a hole, as
    a broker leaves a fresh file (RandomAccessFile.setLength / ftruncate). The store's own writer
    pre-writes zeros ahead of its records; those pages are made a hole again here."""
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=BIG)
    with MessageStore(cfg) as s:
        for i in range(records):
            s.put(Message("T", 0, b"m%d" % i, {"WAIT": "true", "KEYS": "k%d" % i}, None))
        s.drain_dispatch()
    path = root / "commitlog" / ("0" * 20)
    head = _head(path)
    os.truncate(path, 0)
    _sparse_big(path, [(0, head)])
    return path


def _head(path) -> bytes:
    with open(path, "rb") as f:
        return f.read(64 * 1024)


def _sparse_big(path, writes):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, BIG)
        for at, data in writes:
            os.pwrite(fd, data, at)
    finally:
        os.close(fd)


class _ScanSpy:
    """logscan's numpy with flatnonzero counted: every search for a magic code or a non-zero byte
    goes through it, so the elements it sees are the bytes the scans look at."""

    def __init__(self):
        self.elements = 0

    def __getattr__(self, name):
        return getattr(np, name)

    def flatnonzero(self, a):
        self.elements += np.size(a)
        return np.flatnonzero(a)


def test_verify_stats_and_ha_status_store_read_the_records_not_the_preallocated_file(tmp_path, monkeypatch):
    from mqtool_store import logscan
    from mqtool_store.stats import store_stats
    from mqtool_store.storediff import compare_commitlogs
    from mqtool_store.verify import verify_store

    master = _fresh_store(tmp_path / "a")
    (tmp_path / "b" / "commitlog").mkdir(parents=True)
    _sparse_big(tmp_path / "b" / "commitlog" / master.name, [(0, _head(master))])   # a slave's copy
    spy = _ScanSpy()
    monkeypatch.setattr(logscan, "np", spy)
    report = verify_store(tmp_path / "a")
    assert (report.ok, report.records, report.queue_units) == (True, 3, 3)
    stats = store_stats(tmp_path / "a")
    assert [(f["records"], f["end"]) for f in stats["commitlog"]["files"]] == [(3, "unwritten")]
    diff = compare_commitlogs(tmp_path / "a", tmp_path / "b")
    assert diff.in_sync and diff.master_end == "unwritten"
    assert spy.elements < 1 << 20                   # 3 scans of 64 KiB of data, not of 256 MiB each


def test_bytes_past_the_hole_of_a_preallocated_file_are_still_reported(tmp_path):
    from mqtool_store.stats import store_stats
    from mqtool_store.verify import verify_store

    path = _fresh_store(tmp_path)
    _sparse_big(path, [(200 << 20, b"garbage")])
    report = verify_store(tmp_path)
    [problem] = report.problems
    entry = store_stats(tmp_path)["commitlog"]["files"][0]
    assert entry["end"] == "corrupt"
    assert problem.offset == entry["write_position"]
    assert entry["invalid_bytes"] == (200 << 20) + len(b"garbage") - entry["write_position"]
    assert f"{entry['invalid_bytes']} invalid bytes" in problem.message


def test_populate_faults_in_only_the_data_of_a_sparse_file(tmp_path, monkeypatch):
    import mmap

    flags = []

    class Spy(mmap.mmap):
        def __new__(cls, fd, size, **kw):
            flags.append(kw.get("flags", 0))
            return super().__new__(cls, fd, size, **kw)

    monkeypatch.setattr(mmap, "mmap", Spy)
    _sparse(tmp_path / "sparse", [(0, b"\x01" * 20)])
    (tmp_path / "full").write_bytes(b"\x01" * SIZE)
    populate = getattr(mmap, "MAP_POPULATE", 0)
    for name in ("sparse", "full"):
        with ReadOnlyMap(tmp_path / name, populate=True) as m:
            assert m.buf[:20] == b"\x01" * 20
    assert [bool(f & populate) for f in flags] == [False, bool(populate)]   # the holes are not faulted in
