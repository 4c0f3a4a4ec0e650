"""A task's read of queue ranges from live brokers, as Arrow record batches.

Each range is cut into strides of `pullBatchSize` offsets; a stride is a chain of PULL_MESSAGE
requests from its first offset until the broker's nextBeginOffset passes its end, and up to
WINDOW strides are in flight at once (across the task's ranges), so the task does not wait a
round trip per pull. Pulls go to the broker the route names for the queue's group (the slave
when the master is gone, or the one a suggestWhichBrokerId named). Answers are the records as
stored; many answers are joined and decoded together by the export's vectorised decoder, and
records outside their stride (a tag-filtered pull scans past it) are masked out, so rows never
pass through Python one at a time.
"""
from __future__ import annotations

import asyncio
import logging
import time

import numpy as np

from mqtool.client.base import MessageQueue
from mqtool.spark.livecluster import consumer
from mqtool.spark.liveoptions import LiveOptions
from mqtool.spark.liveplan import DataLossError, QueueRange
from mqtool_remoting.codes import ResponseCode, code_name
from mqtool_remoting.errors import RemotingCommandError, RemotingError

log = logging.getLogger("mqtool.spark")
WINDOW = 16                  # strides in flight per task
DECODE_RECORDS = 32_768      # about this many records are decoded together
DECODE_BYTES = 16 << 20
RETRY_PAUSE_S = 0.2


class ReadError(RuntimeError):
    """A range could not be read (broker gone for longer than timeoutMs, or an answer that makes no sense)."""


class _Stride:
    __slots__ = ("range", "lo", "hi")

    def __init__(self, r: QueueRange, lo: int, hi: int):
        self.range, self.lo, self.hi = r, lo, hi


def strides(rs: list[QueueRange], size: int):
    """Strides of every range, taken round-robin so that a task's ranges advance together."""
    cursors = [[r, r.start] for r in rs]
    while cursors:
        for c in list(cursors):
            r, lo = c
            hi = min(lo + size, r.end)
            yield _Stride(r, lo, hi)
            if hi >= r.end:
                cursors.remove(c)
            else:
                c[1] = hi


class _Answers:
    """Pull answers the workers gathered, handed to the reading side a decode's worth at a time."""

    def __init__(self):
        self.items: list[tuple] = []
        self.rows = self.bytes = 0
        self.finished = False
        self.failure: BaseException | None = None
        self.ready = asyncio.Event()        # a decode's worth gathered, or the read finished
        self.room = asyncio.Event()         # cleared while twice that waits to be taken
        self.room.set()

    def add(self, body: bytes, broker: str, lo: int, hi: int, rows: int) -> None:
        self.items.append((body, broker, lo, hi))
        self.rows += rows
        self.bytes += len(body)
        if self.rows >= DECODE_RECORDS or self.bytes >= DECODE_BYTES:
            self.ready.set()
            if self.rows >= 2 * DECODE_RECORDS or self.bytes >= 2 * DECODE_BYTES:
                self.room.clear()

    def finish(self, failure: BaseException | None = None) -> None:
        self.failure = self.failure or failure
        self.finished = True
        self.ready.set()

    async def take(self) -> list[tuple]:
        await self.ready.wait()
        if self.failure is not None:
            raise self.failure
        items, self.items, self.rows, self.bytes = self.items, [], 0, 0
        if not self.finished:
            self.ready.clear()
        self.room.set()
        return items


async def _pull_stride(client, opts: LiveOptions, s: _Stride, out: _Answers) -> None:
    """Every record of the stride, as pull answers added to `out`."""
    r = s.range
    mq = MessageQueue(r.topic, r.broker, r.queue_id)
    off, waited_since = s.lo, None
    filtered = opts.tags.strip() not in ("", "*")
    while off < s.hi:
        want = opts.pull_batch if filtered else min(opts.pull_batch, s.hi - off)
        if not out.room.is_set():
            await out.room.wait()
        try:
            resp = await client.pull_raw(mq, off, want, opts.tags)
        except RemotingCommandError:
            raise
        except RemotingError as exc:        # broker down: wait for its slave in the route, or for it back
            waited_since = waited_since or time.monotonic()
            if time.monotonic() - waited_since > opts.timeout_s:
                raise ReadError(f"{r.name()}: no broker of {r.broker} answered for {opts.timeout_s:.0f} s ({exc})") from None
            await asyncio.sleep(RETRY_PAUSE_S)
            try:
                await client.route(r.topic, refresh=True)
            except RemotingError:
                pass
            client.pull_from.pop(mq, None)
            continue
        e = resp.ext_fields
        nxt = int(e.get("nextBeginOffset", off))
        qmin, qmax = int(e.get("minOffset", 0)), int(e.get("maxOffset", 0))
        if off < qmin:
            _lost(opts, r, off, min(qmin, s.hi), qmin)
            off = min(qmin, s.hi)
            continue
        if resp.code == ResponseCode.SUCCESS:
            out.add(resp.body, r.broker, s.lo, s.hi, min(nxt, s.hi) - off)
        elif resp.code != ResponseCode.PULL_RETRY_IMMEDIATELY and off >= qmax:
            # Planned from another broker's max offset (a slave behind its master, or a master that
            # lost its tail): wait for the messages, then give up naming what the broker holds.
            waited_since = waited_since or time.monotonic()
            if time.monotonic() - waited_since > opts.timeout_s:
                raise ReadError(f"{r.name()}: offsets [{off}, {s.hi}) were planned but the broker holds "
                                f"messages only up to {qmax} (waited {opts.timeout_s:.0f} s)")
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        if nxt <= off:
            raise ReadError(f"{r.name()}: the broker answered {code_name(ResponseCode, resp.code)} at offset {off} "
                            f"without moving on (nextBeginOffset {nxt})")
        off, waited_since = nxt, None


def _lost(opts: LiveOptions, r: QueueRange, lo: int, hi: int, qmin: int) -> None:
    what = (f"{r.name()}: offsets [{lo}, {hi}) are no longer on the broker (its min offset is {qmin}; "
            f"deleted by retention, or the topic was re-created)")
    if opts.fail_on_data_loss:
        raise DataLossError(what + "; set failOnDataLoss=false to skip them")
    log.warning("%s; skipped (failOnDataLoss=false)", what)


async def _produce(opts: LiveOptions, rs: list[QueueRange], out: _Answers) -> None:
    """WINDOW workers, each pulling the next stride until none is left (no task per stride)."""
    client = consumer(opts, timeout_s=min(opts.timeout_s, 10.0))
    todo = strides(rs, max(opts.pull_batch, 1))

    async def worker():
        for s in todo:                       # the workers share one iterator
            if out.failure is not None:
                return
            await _pull_stride(client, opts, s, out)
    workers = [asyncio.create_task(worker()) for _ in range(WINDOW)]
    failure = None
    try:
        for w in asyncio.as_completed(workers):
            await w
    except BaseException as exc:  # noqa: BLE001 - handed to the reading side
        failure = exc
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        await client.close()                 # before the reading side hears the end and closes the loop
        out.finish(failure)


def read_ranges(opts: LiveOptions, rs: list[QueueRange]):
    """Record batches (LIVE_COLUMNS order) of every message in the ranges."""
    loop = asyncio.new_event_loop()
    out = _Answers()
    producer = loop.create_task(_produce(opts, rs, out))
    try:
        while True:
            items = loop.run_until_complete(out.take())
            if items:
                yield from decode_answers(items, opts.tags)
            if out.finished and not out.items:
                break
    finally:
        if not producer.done():
            producer.cancel()
            try:
                loop.run_until_complete(producer)
            except BaseException:  # noqa: BLE001 - cancelled on the way out
                pass
        loop.close()


def decode_answers(answers: list[tuple], tags: str = "*"):
    """Pull answers (body, broker, lo, hi) -> record batches of the records whose queue offset is
    in [lo, hi) (and whose tag is in `tags`: the broker filters by tag hash only)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mqtool.common.subscription import Subscription
    from mqtool.spark.columns import table_batch
    from mqtool.spark.reference import reference_batches
    from mqtool.spark.schema import live_arrow_schema
    from mqtool.spark.source import Split
    from mqtool_store.logscan import header_table, walk_array
    buf = b"".join(a[0] for a in answers)
    starts = np.zeros(len(answers), dtype=np.int64)
    np.cumsum([len(a[0]) for a in answers[:-1]], out=starts[1:])
    lo = np.array([a[2] for a in answers], dtype=np.int64)
    hi = np.array([a[3] for a in answers], dtype=np.int64)
    brokers = sorted({a[1] for a in answers})
    broker_of = np.array([brokers.index(a[1]) for a in answers], dtype=np.int32)
    positions, _end = walk_array(buf, 0, len(buf))
    t, ok = header_table(buf, positions, len(buf))
    if ok < len(positions):
        raise ReadError(f"a pull answer holds a malformed record (at byte {int(positions[ok])} of {len(buf)})")
    which = np.searchsorted(starts, positions, side="right") - 1
    qoff = t["queue_offset"].astype(np.int64)
    keep = (qoff >= lo[which]) & (qoff < hi[which])
    t = {k: v[keep] for k, v in t.items()}
    which = which[keep]
    if not len(which):
        return
    offsets = t["physical_offset"].astype(np.int64)
    batch = table_batch(buf, t, 0, offsets=offsets)
    if batch is None:      # properties the vectorised rules do not cover: record by record
        split = Split("<pull>", 0, 0, len(buf))
        batch = pa.Table.from_batches(list(reference_batches(buf, 0, split, t["position"], len(offsets),
                                                             offsets=offsets))).combine_chunks().to_batches()[0]
    names = pa.DictionaryArray.from_arrays(pa.array(broker_of[which]), pa.array(brokers, pa.string())).cast(pa.string())
    batch = pa.RecordBatch.from_arrays([*batch.columns, names], schema=live_arrow_schema())
    sub = Subscription.parse("", tags)
    if sub.tags:
        batch = batch.filter(pc.is_in(batch.column("tags"), value_set=pa.array(sorted(sub.tags), pa.string())))
    yield batch
