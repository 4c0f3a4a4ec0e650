"""How a consumer group's queues are shared among its clients, as the 4.9.8 client's
AllocateMessageQueueStrategy implementations share them: used by mqtool's own consumers
(mqtool/client/consumer.py) and by the broker's QUERY_ASSIGNMENT (mqtool/broker/pop/assignment.py).
A queue is anything that sorts as MessageQueue.compareTo does; the caller sorts."""
from __future__ import annotations


class AllocateError(ValueError):
    """AbstractAllocateMessageQueueStrategy.check's IllegalArgumentException: no assignment at all."""


def check(cid: str | None, mq_all: list, cid_all: list[str]) -> bool:
    if not cid:
        raise AllocateError("currentCID is empty")
    if not mq_all:
        raise AllocateError("mqAll is null or mqAll empty")
    if not cid_all:
        raise AllocateError("cidAll is null or cidAll empty")
    return cid in cid_all           # not in the group: an empty assignment


def allocate_averagely(cid: str, mq_all: list, cid_all: list[str]) -> list:
    """AllocateMessageQueueAveragely ("AVG"): consecutive runs, the first `len % clients` one longer."""
    if not check(cid, mq_all, cid_all):
        return []
    index, m, n = cid_all.index(cid), len(mq_all), len(cid_all)
    mod = m % n
    size = 1 if m <= n else (m // n + 1 if index < mod else m // n)
    start = index * size if mod > 0 and index < mod else index * size + mod
    return mq_all[start:start + max(0, min(size, m - start))]


def allocate_by_circle(cid: str, mq_all: list, cid_all: list[str]) -> list:
    """AllocateMessageQueueAveragelyByCircle ("AVG_BY_CIRCLE"): every n-th queue from the client's index."""
    if not check(cid, mq_all, cid_all):
        return []
    index = cid_all.index(cid)
    return mq_all[index::len(cid_all)]


STRATEGIES = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_by_circle}
