"""Scans for non-zero bytes read only a file's data ranges (SEEK_DATA / SEEK_HOLE): a consume queue
file of 5.7 MiB holding a few units costs its one written page at start-up, and bytes written past
a hole are still found."""
from __future__ import annotations

import os

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
