"""Grouping records by equal fields with numpy: a dense group number per record, no sort.

`store stats` groups records by (topic, queue), `store dump --json` by topic and by host
fields; both hold thousands of records that share a handful of values. Rows are hashed into
4096 slots, one row per slot is kept as its representative, and every row is compared with
its slot's representative column by column, so the answer is exact: when two different rows
share a slot the grouping gives up (None) and the caller takes its slower exact path.
"""
from __future__ import annotations

import numpy as np

from .logscan import _every_offset

_SLOT_BITS = 12
_SLOTS = 1 << _SLOT_BITS
_MULTIPLIERS = [np.uint64((0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019 * k) % (1 << 64) | 1) for k in range(8)]
# A topic shorter than 16 bytes is told apart exactly by its bytes read as two 64-bit words
# (the bytes after it masked off) and its length in the top byte of the second word.
_TOPIC_WORDS = 2
_WORD_MASKS = [np.array([(1 << (8 * min(max(n - 8 * k, 0), 8))) - 1 for n in range(16)], dtype=np.uint64)
               for k in range(_TOPIC_WORDS)]
_LENGTH_TAGS = np.array([n << 56 for n in range(16)], dtype=np.uint64)


def group_rows(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """(group number per row, 0..k-1 in order of first appearance not promised; the index of
    one row of each group) for rows equal in every column, or None when undecided."""
    n = len(cols[0])
    if n == 0:
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    same = cols[0] == cols[0][0]
    for c in cols[1:]:
        same &= c == c[0]
    if same.all():                      # the usual case: one value in the whole chunk
        return np.zeros(n, np.intp), np.zeros(1, np.intp)
    with np.errstate(over="ignore"):
        key = cols[0].astype(np.uint64) * _MULTIPLIERS[0]
        for k, c in enumerate(cols[1:], 1):
            key += c.astype(np.uint64) * _MULTIPLIERS[k % len(_MULTIPLIERS)]
            key ^= key >> np.uint64(31)
        key *= _MULTIPLIERS[1]
    slot = (key >> np.uint64(64 - _SLOT_BITS)).astype(np.intp)
    rep = np.empty(_SLOTS, np.intp)
    rep[slot] = np.arange(n, dtype=np.intp)
    mine = rep[slot]
    for c in cols:
        if not (c[mine] == c).all():
            return None
    used = np.zeros(_SLOTS, np.intp)
    used[slot] = 1
    dense = np.cumsum(used) - 1
    return dense[slot], rep[used.astype(bool)]


def topic_words(buf, topic_pos: np.ndarray, topic_len: np.ndarray) -> list[np.ndarray] | None:
    """Two uint64 columns that are equal exactly when the topics' bytes are, or None when a
    topic is 16 bytes or longer (or too near the buffer's end to read 16 bytes)."""
    n = len(topic_pos)
    if n == 0:
        return [np.zeros(0, np.uint64)] * _TOPIC_WORDS
    length = topic_len
    if int(length.max()) >= 16 or int(topic_pos.max()) + 16 > len(buf):
        return None
    raw = _every_offset(buf, "S16")[topic_pos].view("<u8").reshape(n, _TOPIC_WORDS)
    w0 = raw[:, 0] & _WORD_MASKS[0][length]
    w1 = (raw[:, 1] & _WORD_MASKS[1][length]) | _LENGTH_TAGS[length]
    return [w0, w1]
