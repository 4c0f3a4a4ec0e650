"""store/residency.py: mincore over a map's pages (a new POP group starts at 0 when its queue's first
message is resident, rocketmq5.md 2.5)."""
from __future__ import annotations

import mmap

import pytest
from mqtool_store.residency import resident


def test_untouched_pages_are_not_resident_and_written_ones_are():
    mm = mmap.mmap(-1, 64 * mmap.PAGESIZE)
    try:
        if resident(mm, 0, 1) is None:
            pytest.skip("mincore is not available here")
        assert resident(mm, 10 * mmap.PAGESIZE, 100) is False
        mm[10 * mmap.PAGESIZE:10 * mmap.PAGESIZE + 100] = b"x" * 100
        assert resident(mm, 10 * mmap.PAGESIZE, 100) is True
        assert resident(mm, 10 * mmap.PAGESIZE, 2 * mmap.PAGESIZE) is False      # the next page untouched
        assert resident(mm, -1, 10) is None and resident(mm, 0, 0) is None
    finally:
        mm.close()            # (no export left behind: close would raise BufferError)
