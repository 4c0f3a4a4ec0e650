"""Which topic each record of a header table belongs to, without decoding every topic.

`topic_ids_loop` decodes one topic per record (the reference); `topic_ids` groups records by
their topic's bytes read as 64-bit words and decodes one record per group; `TopicIds` does the
same chunk after chunk and remembers the topics it has seen, so that a chunk whose topics are
all known costs one sorted search and an equality check per record.
"""
from __future__ import annotations

import numpy as np

from .logscan import _every_offset


def topic_ids_loop(buf, topic_pos: np.ndarray, topic_len: np.ndarray, cache: dict[bytes, str]):
    """The reference: one topic decode per record -> (topic id per record, name by id)."""
    ids: dict[str, int] = {}
    tids = np.fromiter((ids.setdefault(_topic(buf, a, ln, cache), len(ids))
                        for a, ln in zip(topic_pos.tolist(), topic_len.tolist())),
                       dtype=np.int64, count=len(topic_pos))
    return tids, {i: t for t, i in ids.items()}


# A topic shorter than 16 (or 32) bytes is told apart exactly by its bytes read as two (four)
# 64-bit words, its length in the last word's top byte; longer ones are decoded one by one.
# By topic length (0..32): the mask of word k's bytes that belong to the topic, and the length
# in the top byte.
_WORD_MASKS = [np.array([(1 << (8 * min(max(n - 8 * k, 0), 8))) - 1 for n in range(33)], dtype=np.uint64)
               for k in range(4)]
_LENGTH_TAGS = np.array([n << 56 for n in range(33)], dtype=np.uint64)
_SLOW = np.uint64((1 << 64) - 1)   # never a fast record's last word (its top byte is a length < 32)
_DISTINCT_BY_MASK = 16   # this many distinct topics are found by equality masks, more by a sort


def topic_ids(buf, topic_pos: np.ndarray, topic_len: np.ndarray, cache: dict[bytes, str]):
    """What `topic_ids_loop` answers (the ids may be numbered differently), vectorised.

    Records are grouped by their topic's words; one representative per group is decoded.
    """
    n = len(topic_pos)
    pos = np.asarray(topic_pos, dtype=np.int64)
    length = np.asarray(topic_len, dtype=np.int64)
    nwords = 2 if int(length.max()) < 16 else 4
    width = 8 * nwords
    slow = (length >= width) | (pos + width > len(buf))
    any_slow = bool(slow.any())
    raw = _every_offset(buf, f"S{width}")[np.where(slow, 0, pos) if any_slow else pos]
    raw = raw.view("<u8").reshape(n, nwords)
    short = np.minimum(length, 32) if any_slow else length
    cols = [raw[:, k] & _WORD_MASKS[k][short] for k in range(nwords)]
    cols[-1] |= _LENGTH_TAGS[short]
    if any_slow:
        cols[-1][slow] = _SLOW
    group, reps = _distinct(cols)
    ids: dict[str, int] = {}
    named = np.array([-1 if r < 0 or slow[r] else ids.setdefault(_topic(buf, int(pos[r]), int(length[r]), cache), len(ids))
                      for r in reps.tolist()], dtype=np.int64)
    tids = named[group]
    for i in np.flatnonzero(tids < 0).tolist():
        tids[i] = ids.setdefault(_topic(buf, int(pos[i]), int(length[i]), cache), len(ids))
    return tids, {i: t for t, i in ids.items()}


def _distinct(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(group per row, index of one row per group) for rows whose columns are all equal.

    A group whose rows are not all equal (a hash collision in the sort path) is left at -1."""
    n = len(cols[0])
    group = np.full(n, -1, dtype=np.int64)
    reps = []
    for _ in range(_DISTINCT_BY_MASK):
        i = int(np.argmax(group < 0))
        if group[i] >= 0:
            return group, np.array(reps, dtype=np.int64)
        same = cols[0] == cols[0][i]
        for c in cols[1:]:
            same &= c == c[i]
        group[same] = len(reps)
        reps.append(i)
    if group.min() >= 0:
        return group, np.array(reps, dtype=np.int64)
    with np.errstate(over="ignore"):
        key = np.zeros(n, dtype=np.uint64)
        for k, c in enumerate(cols):
            key ^= c * np.uint64(0x9E3779B97F4A7C15 + 2 * k)
            key ^= key >> np.uint64(29)
    uniq = np.unique(key)
    group = np.searchsorted(uniq, key)
    first = np.full(len(uniq), n, dtype=np.int64)
    np.minimum.at(first, group, np.arange(n, dtype=np.int64))
    rep = first[group]
    same = np.ones(n, dtype=bool)
    for c in cols:
        same &= c == c[rep]
    group[~same] = len(first)           # collisions: decoded one by one
    return group, np.append(first, -1)


def _topic(buf, at: int, length: int, cache: dict[bytes, str]) -> str:
    raw = bytes(buf[at:at + length])
    name = cache.get(raw)
    if name is None:
        name = cache[raw] = raw.decode("utf-8", "replace")
    return name


_HASH = np.uint64(0x9E3779B97F4A7C15)


class TopicIds:
    """`topic_ids` for one chunk after another (of one file or several): ids stay the same
    across chunks (`names[id]` is the topic) and topics seen before are found by a sorted search.

    Only topics shorter than 16 bytes take the search (their two words and length are the
    whole key); a chunk with a longer topic, or one too close to the buffer's end to read 16
    bytes, goes through `topic_ids`. One instance per thread: it changes as it learns (the
    `cache` of decoded names may be shared).
    """

    def __init__(self, cache: dict[bytes, str]):
        self.cache = cache
        self.names: list[str] = []
        self._by_name: dict[str, int] = {}
        self._keys: dict[tuple[int, int], int] = {}     # (word 0, word 1 with the length) -> id
        self._column = -1     # the searched column: 0, 1, 2 (a hash of both); -1 no key yet, -2 none works
        self._sorted = self._first = self._second = self._ids = np.zeros(0, np.uint64)

    def __call__(self, buf, topic_pos: np.ndarray, topic_len: np.ndarray) -> np.ndarray:
        n = len(topic_pos)
        if n == 0:
            return np.zeros(0, np.int64)
        pos = np.asarray(topic_pos, dtype=np.int64)
        length = np.asarray(topic_len, dtype=np.int64)
        shortest, longest = int(length.min()), int(length.max())
        if longest >= 16 or shortest < 0 or int(pos.max()) + 16 > len(buf) or self._column == -2:
            return self._general(buf, pos, length)
        raw = _every_offset(buf, "S16")[pos].view("<u8").reshape(n, 2)
        by = longest if shortest == longest else length   # one length: scalar masks, no gathers
        w0 = raw[:, 0] & _WORD_MASKS[0][by]
        w1 = raw[:, 1] & _WORD_MASKS[1][by]
        w1 |= _LENGTH_TAGS[by]
        tids = self._lookup(w0, w1)
        miss = np.flatnonzero(tids < 0)
        if miss.size:
            self._learn(buf, pos[miss], length[miss], w0[miss], w1[miss])
            found = self._lookup(w0[miss], w1[miss])
            if (found < 0).any():       # no column tells the keys apart (see _learn)
                return self._general(buf, pos, length)
            tids[miss] = found
        return tids

    def _general(self, buf, pos, length) -> np.ndarray:
        tids, names = topic_ids(buf, pos, length, self.cache)
        return np.array([self._id(names[i]) for i in range(len(names))], dtype=np.int64)[tids]

    def _id(self, name: str) -> int:
        i = self._by_name.get(name)
        if i is None:
            i = self._by_name[name] = len(self.names)
            self.names.append(name)
        return i

    def _lookup(self, w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
        """The id of each (w0, w1) key already known, -1 for the others."""
        if self._column < 0:
            return np.full(len(w0), -1, dtype=np.int64)
        if self._column == 2:
            with np.errstate(over="ignore"):
                col = w0 ^ (w1 * _HASH)
        else:
            col = w1 if self._column == 1 else w0
        g = np.searchsorted(self._sorted, col)
        np.minimum(g, len(self._sorted) - 1, out=g)
        hit = self._first[g] == w0
        hit &= self._second[g] == w1
        ids = self._ids[g]
        if not hit.all():
            ids[~hit] = -1
        return ids

    def _learn(self, buf, pos, length, w0, w1) -> None:
        """Add the keys of records no search found (one decode per new key) and re-sort."""
        group, reps = _distinct([w0, w1])
        rows = [r for r in reps.tolist() if r >= 0] + np.flatnonzero(group < 0).tolist()  # collisions one by one
        for r in rows:
            key = (int(w0[r]), int(w1[r]))
            if key not in self._keys:
                self._keys[key] = self._id(_topic(buf, int(pos[r]), int(length[r]), self.cache))
        first = np.array([k[0] for k in self._keys], dtype=np.uint64)
        second = np.array([k[1] for k in self._keys], dtype=np.uint64)
        with np.errstate(over="ignore"):
            columns = [first, second, first ^ (second * _HASH)]
        self._column = next((c for c in (1, 0, 2) if len(np.unique(columns[c])) == len(first)), -2)
        if self._column == -2:      # two keys with one hash: `topic_ids` from now on
            return
        order = np.argsort(columns[self._column], kind="stable")
        self._sorted = columns[self._column][order]
        self._first, self._second = first[order], second[order]
        self._ids = np.array(list(self._keys.values()), dtype=np.int64)[order]
