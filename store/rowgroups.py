"""Grouping records by equal fields with numpy: a dense group number per record, no sort.

`store stats` groups records by (topic, queue), `store dump --json` by topic and by host
fields; both hold thousands of records that share a handful of values. Rows are hashed into
4096-65536 slots, one row per slot is kept as its representative, and every row is compared
with its slot's representative column by column, so the answer is exact: when two different
rows share a slot another hash is tried, and after three the grouping gives up (None) and the
caller takes its slower exact path.
"""
from __future__ import annotations

import numpy as np

from .commitlog import MESSAGE_MAGIC_V2
from .logscan import _every_offset

_SLOT_BITS = 12        # at least; up to 16 for large chunks (4x as many slots as rows)
_MULTIPLIERS = [np.uint64((0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019 * k) % (1 << 64) | 1) for k in range(8)]
_ALL = np.uint64((1 << 64) - 1)


def group_rows(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """(group number per row, the index of one row of each group) for rows equal in every
    column, or None when undecided (different rows kept sharing a slot)."""
    n = len(cols[0])
    if n == 0:
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    same = cols[0] == cols[0][0]
    for c in cols[1:]:
        same &= c == c[0]
    if same.all():                      # the usual case: one value in the whole chunk
        return np.zeros(n, np.intp), np.zeros(1, np.intp)
    slotted = slot_rows(cols)
    if slotted is None:
        return None
    slot, rep, slots = slotted
    used = np.zeros(slots, np.intp)
    used[slot] = 1
    dense = np.cumsum(used) - 1
    return dense[slot], rep[used.astype(bool)]


def slot_rows(cols: list[np.ndarray], tries: int = 3):
    """(slot per row, one row of each used slot indexed by slot, number of slots) when the rows
    in each slot are equal in every column, else None (after `tries` hash functions).
    Unused slots' rows are undefined."""
    n = len(cols[0])
    bits = min(max(int(n).bit_length() + 2, _SLOT_BITS), 16)
    rows = np.arange(n, dtype=np.intp)
    for attempt in range(tries):
        with np.errstate(over="ignore"):
            key = cols[0].astype(np.uint64, copy=False) * _MULTIPLIERS[attempt]
            for k, c in enumerate(cols[1:], 1):
                key ^= c.astype(np.uint64, copy=False) * _MULTIPLIERS[(attempt + 3 * k) % len(_MULTIPLIERS)]
            key ^= key >> np.uint64(29)
            key *= _MULTIPLIERS[attempt + 1]
            key >>= np.uint64(64 - bits)
        slot = key.view(np.intp)
        rep = np.empty(1 << bits, np.intp)
        rep[slot] = rows
        mine = rep[slot]
        if all((c[mine] == c).all() for c in cols):
            return slot, rep, 1 << bits
    return None


def topic_head(buf, table: dict, n: int) -> np.ndarray | None:
    """Each record's topic length byte and the 15 bytes after it, as two little-endian words
    (n, 2), for the first n records of a header table; None when a record has a 2-byte topic
    length (V2) or is too near the buffer's end."""
    if n == 0 or (table["magic"][:n] == MESSAGE_MAGIC_V2).any():
        return None
    at = table["topic_pos"][:n] - 1
    if int(at.max()) + 16 > len(buf):
        return None
    return _every_offset(buf, "S16")[at].view("<u8").reshape(n, 2)


def topic_words(head: np.ndarray | None, length: np.ndarray) -> list[np.ndarray] | None:
    """Two uint64 columns equal exactly when the records' topics are, from `topic_head` and the
    topic lengths: the bytes past each topic are masked off. None when a topic is 16 bytes or
    longer, or there is no head."""
    if head is None or (len(length) and (int(length.max()) > 15 or int(length.min()) < 0)):
        return None
    w0, w1 = np.ascontiguousarray(head.T)
    keep0 = np.minimum(length, 7) + 1              # bytes of word 0 that are the length or topic
    w0 &= _ALL >> (64 - 8 * keep0).astype(np.uint64)
    keep1 = np.maximum(length - 7, 0)
    w1 &= _ALL >> (64 - 8 * keep1).astype(np.uint64)
    return [w0, w1]
