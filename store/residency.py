"""Whether a record's page is in the page cache (mincore): 5.x DefaultMessageStore.checkInMemByConsumeOffset,
which a new POP group uses to start at offset 0 when the queue's first message is still in memory
(rocketmq5.md 2.5). Linux only; None where mincore cannot be asked (the caller then falls back)."""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap

_PAGE = mmap.PAGESIZE
_libc = None


def _mincore():
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            _libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
        except (OSError, AttributeError):
            _libc = False
    return _libc or None


def resident(mm: mmap.mmap, pos: int, size: int) -> bool | None:
    """Every page of mm[pos:pos+size] is resident; None when mincore is not there or fails."""
    libc = _mincore()
    if libc is None or size <= 0 or pos < 0 or pos + size > len(mm):
        return None
    view = ctypes.c_char.from_buffer(mm)      # the map's address (released at once: a live export blocks close)
    try:
        base = ctypes.addressof(view)
        start = (base + pos) // _PAGE * _PAGE
        length = base + pos + size - start
        pages = (length + _PAGE - 1) // _PAGE
        vec = ctypes.create_string_buffer(pages)
        if libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(length), vec) != 0:
            return None
        return all(b & 1 for b in vec.raw)
    finally:
        del view
