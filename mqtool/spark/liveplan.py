"""What a read of a live cluster covers, worked out from queue offsets alone: pure, no I/O.

A queue is (topic, broker name, queue id); its state is its (min, max) offset as the broker that
holds it answers them. Start and end offsets resolve against those states, ranges below a
queue's min offset are data loss (fail or skip, `failOnDataLoss`), a read limit is spread over
the queues in proportion to what each has waiting, and `minPartitions` splits large ranges.
"""
from __future__ import annotations

from dataclasses import dataclass

from mqtool.spark.liveoptions import EARLIEST, LATEST, Offsets, Queue


class DataLossError(RuntimeError):
    """Messages a read was to cover are gone from the broker (deleted by retention, or a topic
    deleted and created again)."""


@dataclass(frozen=True)
class QueueRange:
    topic: str
    broker: str
    queue_id: int
    start: int
    end: int            # exclusive

    @property
    def queue(self) -> Queue:
        return (self.topic, self.broker, self.queue_id)

    @property
    def size(self) -> int:
        return self.end - self.start

    def name(self) -> str:
        return f"{self.topic} {self.broker}:{self.queue_id}"


def queue_name(q: Queue) -> str:
    return f"{q[0]} {q[1]}:{q[2]}"


def resolve(spec, states: dict[Queue, tuple[int, int]], default: str) -> Offsets:
    """'earliest' / 'latest' / {Queue: offset or EARLIEST/LATEST} -> an offset for every queue of
    `states`. Queues the JSON does not name take `default` ('earliest' or 'latest')."""
    out: Offsets = {}
    for q, (lo, hi) in states.items():
        v = spec.get(q, EARLIEST if default == "earliest" else LATEST) if isinstance(spec, dict) else (
            EARLIEST if spec == "earliest" else LATEST)
        out[q] = lo if v == EARLIEST else hi if v == LATEST else v
    return out


def check_named(spec, states: dict[Queue, tuple[int, int]], option: str) -> None:
    """Every queue an offsets JSON names must exist: a typo would otherwise read nothing."""
    if isinstance(spec, dict):
        missing = [q for q in spec if q not in states]
        if missing:
            raise ValueError(f"{option} names {queue_name(missing[0])}, which the cluster does not have "
                             f"(queues of {missing[0][0]}: "
                             f"{', '.join(f'{b}:{i}' for t, b, i in sorted(states) if t == missing[0][0]) or 'none'})")


def ranges(start: Offsets, end: Offsets, states: dict[Queue, tuple[int, int]], fail_on_data_loss: bool,
           warn=None) -> list[QueueRange]:
    """The non-empty ranges [start, end) of every queue in `end`; a queue missing from `start`
    (new since) starts at 0. Below a queue's min offset: DataLossError, or with fail_on_data_loss
    false the range starts at the min offset and `warn` is told."""
    out = []
    for q in sorted(end):
        lo = start.get(q, 0)
        hi = end[q]
        qmin = states.get(q, (0, hi))[0]
        if lo < qmin and hi > lo:
            what = (f"{queue_name(q)}: offsets [{lo}, {min(qmin, hi)}) are no longer on the broker "
                    f"(its min offset is {qmin}; deleted by retention, or the topic was re-created)")
            if fail_on_data_loss:
                raise DataLossError(what + "; set failOnDataLoss=false to skip them")
            if warn:
                warn(what + "; skipped (failOnDataLoss=false)")
            lo = min(qmin, hi)
        if hi > lo:
            out.append(QueueRange(q[0], q[1], q[2], lo, hi))
    return out


def limit(start: Offsets, latest: Offsets, max_rows: int | None) -> Offsets:
    """`latest`, or at most `max_rows` messages past `start` spread over the queues in proportion
    to what each has waiting (every queue with messages gets its share, rounded down, and what
    rounding left goes to the queues with most waiting)."""
    waiting = {q: max(0, hi - start.get(q, 0)) for q, hi in latest.items()}
    total = sum(waiting.values())
    if max_rows is None or total <= max_rows:
        return dict(latest)
    share = {q: n * max_rows // total for q, n in waiting.items()}
    left = max_rows - sum(share.values())
    for q in sorted(waiting, key=lambda q: (-(waiting[q] - share[q]), q)):
        if left <= 0:
            break
        if waiting[q] > share[q]:
            share[q] += 1
            left -= 1
    return {q: start.get(q, 0) + share[q] for q in latest}


def split(rs: list[QueueRange], min_partitions: int | None) -> list[QueueRange]:
    """One piece per range; with min_partitions above the number of ranges, large ranges are cut
    in proportion to their size (as Spark's Kafka source does) so there are at least that many."""
    if not min_partitions or min_partitions <= len(rs) or not rs:
        return list(rs)
    total = sum(r.size for r in rs)
    out = []
    for r in rs:
        parts = max(1, min(r.size, round(r.size * min_partitions / total)))
        step, extra = divmod(r.size, parts)
        lo = r.start
        for i in range(parts):
            hi = lo + step + (1 if i < extra else 0)
            out.append(QueueRange(r.topic, r.broker, r.queue_id, lo, hi))
            lo = hi
    return out


def pack(pieces: list[QueueRange], min_partitions: int | None, rows_per_task: int) -> list[list[QueueRange]]:
    """Pieces grouped into tasks: as many as `min_partitions` asks, else one per `rows_per_task`
    messages (a small micro-batch is one task, not one per queue: a task costs ~0.1 s to start),
    never more than there are pieces; largest first onto the lightest task."""
    if not pieces:
        return []
    total = sum(p.size for p in pieces)
    n = max(min_partitions or 1, -(-total // max(rows_per_task, 1)))
    n = min(n, len(pieces))
    bins: list[list[QueueRange]] = [[] for _ in range(n)]
    load = [0] * n
    for p in sorted(pieces, key=lambda p: (-p.size, p.queue, p.start)):
        i = load.index(min(load))
        bins[i].append(p)
        load[i] += p.size
    return bins
