"""Selection.mask on a hand-made header table: which queue offsets --queue-offsets keeps (pure, no Spark)."""
from __future__ import annotations

import numpy as np

from mqtool.spark.selection import Selection, parse_queue_offsets


def table(rows):
    """A header table of (topic index, queue id, queue offset) rows, as Selection.mask reads it."""
    inv = np.array([r[0] for r in rows], dtype=np.int64)
    return inv, {"queue_id": np.array([r[1] for r in rows], dtype=np.int64),
                 "queue_offset": np.array([r[2] for r in rows], dtype=np.int64),
                 "store_timestamp": np.zeros(len(rows), dtype=np.int64)}


def kept(text, names, rows):
    inv, t = table(rows)
    m = Selection(queue_offsets=parse_queue_offsets(text)).mask(names, inv, t)
    return [r for r, ok in zip(rows, m) if ok]


def test_an_explicit_queue_range_wins_over_star():
    # the README's example: queue 0 takes offsets 0-99 only; "*" is the default of the other queues
    rows = [(0, q, off) for q in (0, 1, 2) for off in (0, 4, 5, 99, 100, 536)]
    got = kept('{"TopicA": {"0": [0, 100], "*": [[5, null]]}}', ["TopicA"], rows)
    assert [r for r in got if r[1] == 0] == [(0, 0, 0), (0, 0, 4), (0, 0, 5), (0, 0, 99)]
    for q in (1, 2):
        assert [r[2] for r in got if r[1] == q] == [5, 99, 100, 536]


def test_star_alone_and_listed_queues_alone():
    rows = [(0, q, off) for q in (0, 3) for off in (0, 1, 10, 11)] + [(1, 0, 0), (1, 0, 7)]
    assert kept('{"A": {"*": [1, 11]}}', ["A", "B"], rows) == [(0, 0, 1), (0, 0, 10), (0, 3, 1), (0, 3, 10)]
    assert kept('{"A": {"3": [[0, 1], [11, null]]}, "B": [7, null]}', ["A", "B"], rows) == [
        (0, 3, 0), (0, 3, 11), (1, 0, 7)]
