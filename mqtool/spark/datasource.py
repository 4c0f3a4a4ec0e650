"""The `rocketmq` format for PySpark (Python Data Source API, PySpark 4.2+): batch and streaming
reads of a live cluster, and a batch and streaming sink.

    from mqtool.spark import register
    register(spark)
    df = spark.read.format("rocketmq").option("namesrv", "h1:9876").option("topics", "Orders,Pay*").load()

Spark's offsets are every queue's position, {"TOPIC": {"BROKER:QUEUE": offset}}; a micro-batch
reads exactly [start, end) of each queue, so a query restarted from its checkpoint re-reads the
same messages for an unfinished batch and goes on where the last committed one stopped.
"""
from __future__ import annotations

import logging

from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamArrowWriter,
                                    DataSourceStreamReader, InputPartition, WriterCommitMessage)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from mqtool.spark import livecluster as cluster
from mqtool.spark.liveoptions import LiveOptions, offsets_from_json, offsets_to_json, parse_options
from mqtool.spark.liveplan import QueueRange, check_named, limit, pack, ranges, resolve, split
from mqtool.spark.schema import LIVE_SCHEMA_DDL

log = logging.getLogger("mqtool.spark")


ROWS_PER_TASK = 65_536


def _partitions(rs: list[QueueRange], min_partitions: int | None) -> list[InputPartition]:
    """Tasks of queue ranges (`liveplan.pack`); a task's value is [(topic, broker, queue id, start,
    end), ...] (Spark hands the reading side a plain InputPartition holding the value)."""
    return [InputPartition([(r.topic, r.broker, r.queue_id, r.start, r.end) for r in group])
            for group in pack(rs, min_partitions, ROWS_PER_TASK)]


def _read(opts: LiveOptions, partition: InputPartition):
    """A task's rows. A batch read with nothing to read still runs one task: Spark turns an empty
    partitions() into [InputPartition(None)]."""
    from mqtool.spark.livereader import read_ranges
    yield from read_ranges(opts, [QueueRange(*r) for r in partition.value or ()])


async def _batch_plan(client, opts: LiveOptions) -> list[QueueRange]:
    st, start = await _starts(client, opts)
    check_named(opts.ending, st, "endingOffsets")
    end = resolve(opts.ending, st, "latest")
    for q, e in end.items():
        if e < start.get(q, 0):
            raise ValueError(f"endingOffsets {e} of {q[0]} {q[1]}:{q[2]} is before its startingOffsets {start[q]}")
        if e > st[q][1]:
            log.warning("endingOffsets %d of %s %s:%d is past its max offset %d: read up to %d", e, *q, st[q][1],
                        st[q][1])
            end[q] = st[q][1]
    return split(ranges(start, end, st, opts.fail_on_data_loss, warn=log.warning), opts.min_partitions)


def plan_batch(opts: LiveOptions) -> list[QueueRange]:
    """The ranges a batch read covers, fixed now (for the CLI to check before a job starts, too)."""
    return cluster.run(_batch_plan, opts)


class BatchReader(DataSourceReader):
    def __init__(self, opts: LiveOptions):
        self.opts = opts

    def partitions(self):
        return _partitions(plan_batch(self.opts), self.opts.min_partitions)

    def read(self, partition):
        yield from _read(self.opts, partition)


async def _latest(client, opts: LiveOptions):
    st = await cluster.states(client, opts)
    return {q: hi for q, (lo, hi) in st.items()}, st


async def _starts(client, opts: LiveOptions):
    """Every queue's (min, max) and where a read starts in it (startingOffsets or startingTimestamp)."""
    names = await cluster.topics(client, opts)
    st = await cluster.states(client, opts, names)
    check_named(opts.starting, st, "startingOffsets")
    if opts.starting_timestamp is not None:
        return st, await cluster.offsets_by_time(client, opts, list(st), opts.starting_timestamp)
    return st, resolve(opts.starting, st, "earliest")


async def _initial(client, opts: LiveOptions):
    return (await _starts(client, opts))[1]


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets: every queue of every matching topic. New queues and topics are picked up at each
    micro-batch and read from offset 0; a topic gone from the cluster keeps its last offset."""

    def __init__(self, opts: LiveOptions):
        self.opts = opts
        self.target = None          # availableNow: the offsets at the query's start
        self.states = None          # the queues' (min, max) as the last latestOffset saw them

    def initialOffset(self) -> dict:
        return offsets_to_json(cluster.run(_initial, self.opts))

    def latestOffset(self, start: dict, limit_: object = None) -> dict:
        begin = offsets_from_json(start)
        latest, self.states = cluster.run(_latest, self.opts)
        if self.target is not None:
            latest = {q: min(v, self.target[q]) for q, v in latest.items() if q in self.target}
        merged = dict(begin)
        for q, v in latest.items():
            merged[q] = max(v, begin.get(q, 0))
        if isinstance(limit_, ReadMaxRows):
            merged = limit(begin, merged, limit_.max_rows)
        return offsets_to_json(merged)

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.opts.max_per_trigger) if self.opts.max_per_trigger else ReadAllAvailable()

    def reportLatestOffset(self):
        """What the last latestOffset saw (for the query's progress; no extra round trips)."""
        if self.states is None:
            return None
        return offsets_to_json({q: hi for q, (_lo, hi) in self.states.items()})

    def prepareForTriggerAvailableNow(self) -> None:
        self.target, _ = cluster.run(_latest, self.opts)

    def partitions(self, start: dict, end: dict):
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        if begin == stop:
            return []
        st = self.states
        if st is None or any(q not in st for q in stop):    # a batch re-planned after a restart
            _, st = cluster.run(_latest, self.opts)
        return _partitions(split(ranges(begin, stop, st, self.opts.fail_on_data_loss, warn=log.warning),
                                 self.opts.min_partitions), self.opts.min_partitions)

    def read(self, partition):
        yield from _read(self.opts, partition)

    def commit(self, end: dict) -> None:
        if self.opts.group:
            cluster.run(cluster.commit, self.opts, offsets_from_json(end))


class SentCount(WriterCommitMessage):
    def __init__(self, sent: int):
        self.sent = sent


def _fields(schema) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in schema.fields}


class Writer(DataSourceArrowWriter):
    def __init__(self, opts: LiveOptions):
        self.opts = opts

    def write(self, iterator):
        from mqtool.spark.livesink import send_batches
        return SentCount(send_batches(self.opts, iterator))

    def commit(self, messages) -> None:
        pass

    def abort(self, messages) -> None:
        log.warning("a write to rocketmq failed: rows of the tasks that had finished were sent (at-least-once)")


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: LiveOptions):
        self.opts = opts

    def write(self, iterator):
        from mqtool.spark.livesink import send_batches
        return SentCount(send_batches(self.opts, iterator))

    def commit(self, messages, batchId) -> None:
        pass

    def abort(self, messages, batchId) -> None:
        log.warning("micro-batch %s to rocketmq failed: rows of the tasks that had finished were sent", batchId)


class RocketMQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self):
        return LIVE_SCHEMA_DDL

    def reader(self, schema):
        return BatchReader(parse_options(self.options))

    def streamReader(self, schema):
        return StreamReader(parse_options(self.options))

    def _sink_options(self, schema) -> LiveOptions:
        from mqtool.spark.livesink import check_columns
        opts = parse_options(self.options, writing=True)
        check_columns(_fields(schema), opts)
        return opts

    def writer(self, schema, overwrite: bool):
        return Writer(self._sink_options(schema))

    def streamWriter(self, schema, overwrite: bool):
        return StreamWriter(self._sink_options(schema))
