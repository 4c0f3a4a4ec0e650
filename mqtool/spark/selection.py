"""Which records a job keeps: topic globs, store-time window, queue-offset ranges, system topics.

Evaluated on header tables (`store.logscan.header_table`), vectorised, so records left out are
never decoded. Queue-offset ranges are JSON, one object per topic:

    {"TopicA": {"0": [0, 100], "3": [[0, 10], [50, null]]}, "TopicB": {"*": [200, null]}, "TopicC": [0, 5]}

Ranges are [from, to) queue offsets, `null` for open; "*" (or a bare range list) covers every
queue the topic does not list by id: a listed queue's own ranges win over "*". With
--queue-offsets only the listed topics and queues are exported.
"""
from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mqtool_store.codes import SYSTEM_TOPICS

ALL_QUEUES = -1
INT64_MAX = 2**63 - 1


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(("%RETRY%", "%DLQ%", "RMQ_SYS_", "rmq_sys_"))


def parse_queue_offsets(text: str) -> dict[str, dict[int, list[tuple[int, int]]]]:
    """JSON text (or @file) -> {topic: {queue id or ALL_QUEUES: [(from, to), ...]}}. ValueError if bad."""
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
            raise ValueError(f"--queue-offsets {text}: {why}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--queue-offsets is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError('--queue-offsets must be an object: {"TOPIC": {"QUEUE_ID": [FROM, TO]}}')
    out: dict[str, dict[int, list[tuple[int, int]]]] = {}
    for topic, queues in doc.items():
        if isinstance(queues, list):
            queues = {"*": queues}
        if not isinstance(queues, dict):
            raise ValueError(f"--queue-offsets: {topic!r} must map queue ids to ranges")
        per: dict[int, list[tuple[int, int]]] = {}
        for qid, ranges in queues.items():
            if qid == "*":
                q = ALL_QUEUES
            elif str(qid).isdigit():
                q = int(qid)
            else:
                raise ValueError(f"--queue-offsets: queue id {qid!r} of {topic!r} is not a number or '*'")
            per[q] = [_range(topic, qid, r) for r in (ranges if ranges and isinstance(ranges[0], list) else [ranges])]
        out[topic] = per
    return out


def _range(topic, qid, r) -> tuple[int, int]:
    if not (isinstance(r, list) and len(r) == 2 and all(v is None or isinstance(v, int) for v in r)):
        raise ValueError(f"--queue-offsets: range {r!r} of {topic!r} queue {qid} must be [FROM, TO] (null = open)")
    lo, hi = r
    return (0 if lo is None else lo, INT64_MAX if hi is None else hi)


@dataclass
class Selection:
    topics: tuple[str, ...] = ()          # globs (fnmatch, case-sensitive); empty = every topic
    since: int | None = None              # store time, ms, inclusive
    until: int | None = None              # store time, ms, inclusive
    include_system: bool = False
    queue_offsets: dict | None = None     # parse_queue_offsets output

    def topic_ok(self, topic: str) -> bool:
        if not self.include_system and is_system_topic(topic):
            return False
        if self.topics and not any(fnmatch.fnmatchcase(topic, t) for t in self.topics):
            return False
        return self.queue_offsets is None or topic in self.queue_offsets

    def mask(self, names: list[str], inv: np.ndarray, table: dict) -> np.ndarray:
        """Which rows of a header table are selected; `names[inv[i]]` is row i's topic."""
        ok_topic = np.array([self.topic_ok(n) for n in names], dtype=bool)
        m = ok_topic[inv] if len(names) else np.zeros(len(inv), dtype=bool)
        ts = table["store_timestamp"]
        if self.since is not None:
            m &= ts >= self.since
        if self.until is not None:
            m &= ts <= self.until
        if self.queue_offsets:
            qid, qoff = table["queue_id"], table["queue_offset"]
            for k, name in enumerate(names):
                if not ok_topic[k]:
                    continue
                rows = inv == k
                allowed = np.zeros(len(inv), dtype=bool)
                per = self.queue_offsets[name]
                listed = np.array([q for q in per if q != ALL_QUEUES], dtype=np.int64)
                for q, ranges in per.items():
                    in_q = rows & ~np.isin(qid, listed) if q == ALL_QUEUES else rows & (qid == q)
                    for lo, hi in ranges:
                        allowed |= in_q & (qoff >= lo) & (qoff < hi)
                m &= ~rows | allowed
        return m

    def count(self, buf, table: dict, acc: dict[str, list[int]]) -> None:
        """Add the selected rows and bytes per topic of a header table to acc."""
        names, inv = topic_index(buf, table)
        m = self.mask(names, inv, table)
        if not m.any():
            return
        rows = np.bincount(inv[m], minlength=len(names))
        size = np.bincount(inv[m], weights=table["total_size"][m], minlength=len(names))
        for k in np.flatnonzero(rows):
            a = acc.setdefault(names[k], [0, 0])
            a[0] += int(rows[k])
            a[1] += int(size[k])


def topic_index(buf, table: dict) -> tuple[list[str], np.ndarray]:
    """The distinct topics of a header table's rows, and each row's index into them (no decoding)."""
    tp, tl = table["topic_pos"], table["topic_len"]
    if not len(tp):
        return [], np.zeros(0, dtype=np.int64)
    width = max(int(tl.max()), 1)
    arr = np.frombuffer(buf, dtype=np.uint8)
    cols = np.arange(width)
    idx = np.minimum(tp[:, None] + cols, len(arr) - 1)
    raw = np.where(cols < tl[:, None], arr[idx], 0).astype(np.uint8)
    del arr
    keys = np.ascontiguousarray(raw).view(f"V{width}").ravel()
    uniq, inv = np.unique(keys, return_inverse=True)
    names = [bytes(u).rstrip(b"\0").decode("utf-8", "replace") for u in uniq]
    return names, inv.ravel()
