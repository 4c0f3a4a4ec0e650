"""The `rocketmq` sink: rows of a DataFrame sent as messages, batched per task and topic.

Columns: `topic` (or the `topic` option), `body` (binary or string), optional `tags`, `keys`
(string, space-separated as KEYS is, or array of strings) and `properties` (map). Each batch is
one SEND_BATCH_MESSAGE (up to `sendBatchSize` rows and 1 MiB of entries, encoded a column at a
time by `sinkencode`), several in flight; any
answer other than SEND_OK fails the task with the broker's code and remark. RocketMQ 4 has no
idempotent producer, so a retried task sends its rows again: the sink is at-least-once.
"""
from __future__ import annotations

import asyncio

from mqtool.client.producer import Producer
from mqtool.spark.liveoptions import LiveOptions, OptionError
from mqtool_store.codes import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop

IN_FLIGHT = 8
BATCH_BYTES = 1 << 20
SINK_GROUP = "PID_MQTOOL_SPARK"
# Properties the producer or the broker sets: taken from a row's columns or made anew, never copied
# from its `properties` (an export's rows carry them as they were stored).
RESERVED = frozenset({
    Prop.KEYS, Prop.TAGS, Prop.WAIT, Prop.DELAY, Prop.UNIQ_KEY, Prop.RETRY_TOPIC, Prop.REAL_TOPIC, Prop.REAL_QID,
    Prop.TRAN_MSG, Prop.PGROUP, Prop.MIN_OFFSET, Prop.MAX_OFFSET, Prop.CLUSTER, Prop.RECONSUME_TIME,
    Prop.MAX_RECONSUME_TIMES, Prop.TRAN_PREPARED_QUEUE_OFFSET, Prop.TRANSACTION_CHECK_TIMES,
    Prop.CHECK_IMMUNITY_TIME_IN_SECONDS, "CONSUME_START_TIME", "MSG_REGION", "TRACE_ON",
})
TYPES = {"topic": ("string",), "body": ("binary", "string"), "tags": ("string",),
         "keys": ("string", "array<string>"), "properties": ("map<string,string>",)}


def check_columns(fields: dict[str, str], opts: LiveOptions) -> None:
    """fields: column name -> Spark simpleString type. One clear error for a frame the sink cannot send."""
    if "body" not in fields:
        raise OptionError(f"the rocketmq sink needs a body column (binary or string); the columns are "
                          f"{', '.join(fields) or 'none'}")
    if "topic" not in fields and not opts.send_topic:
        raise OptionError("the rocketmq sink needs a topic column or the topic option")
    for name, allowed in TYPES.items():
        if name in fields and fields[name] not in allowed:
            raise OptionError(f"column {name} is {fields[name]}; the rocketmq sink takes {' or '.join(allowed)}")


def rows(batch, default_topic: str | None):
    """(topic, body, properties text without UNIQ_KEY) of each row of one Arrow record batch: the
    reference for `sinkencode.encode`, which the sink runs (tests pin the two together)."""
    cols = {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)
            if name in ("topic", "body", "tags", "keys", "properties")}
    n = batch.num_rows
    topics = cols.get("topic") or [default_topic] * n
    bodies = cols["body"]
    tags = cols.get("tags") or [None] * n
    keys = cols.get("keys") or [None] * n
    props = cols.get("properties") or [None] * n
    kv, sep = NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
    for i in range(n):
        topic = topics[i] or default_topic
        if not topic:
            raise OptionError(f"row {i} of a batch has no topic (null topic column and no topic option)")
        body = bodies[i]
        if body is None:
            raise OptionError(f"row {i} of a batch has a null body")
        if isinstance(body, str):
            body = body.encode("utf-8")
        parts = []
        p = props[i]
        if p:
            parts = [f"{a}{kv}{b}" for a, b in (p.items() if isinstance(p, dict) else p)
                     if a not in RESERVED and b is not None]
        k = keys[i]
        if k:
            words = [w for w in k.split(" ") if w] if isinstance(k, str) else [w for w in k if w]
            if words:
                parts.append(f"KEYS{kv}{' '.join(words)}")
        if tags[i]:
            parts.append(f"TAGS{kv}{tags[i]}")
        yield topic, body, sep.join(parts)


def by_topic(batch, default_topic: str | None):
    """(topic, rows of that topic) of one Arrow record batch; one clear error for a row the sink
    cannot send (a null body, no topic)."""
    import pyarrow.compute as pc
    names = batch.schema.names
    body = batch.column(names.index("body"))
    if body.null_count:
        raise OptionError(f"row {pc.index(body.is_null(), True).as_py()} of a batch has a null body")
    if "topic" not in names:
        if not default_topic:
            raise OptionError("row 0 of a batch has no topic (null topic column and no topic option)")
        yield default_topic, batch
        return
    t = batch.column(names.index("topic"))
    t = pc.if_else(pc.equal(t, ""), None, t)
    if default_topic:
        t = t.fill_null(default_topic)
    if t.null_count:
        raise OptionError(f"row {pc.index(t.is_null(), True).as_py()} of a batch has no topic (null topic column "
                          "and no topic option)")
    found = pc.unique(t).to_pylist()
    if len(found) == 1:
        yield found[0], batch
        return
    for topic in found:
        yield topic, batch.filter(pc.equal(t, topic))


def cuts(offsets, size: int):
    """Row ranges [a, b) of up to `size` rows and BATCH_BYTES of entries (a bigger row goes alone)."""
    import numpy as np
    n, a = len(offsets) - 1, 0
    while a < n:
        b = min(a + size, n)
        if offsets[b] - offsets[a] > BATCH_BYTES:
            b = max(a + 1, int(np.searchsorted(offsets, offsets[a] + BATCH_BYTES, side="right")) - 1)
        yield a, b
        a = b


async def _send_all(opts: LiveOptions, record_batches) -> int:
    from mqtool.spark.sinkencode import encode
    producer = Producer(opts.namesrv, opts.group or SINK_GROUP, credentials=opts.credentials(),
                        timeout_s=min(opts.timeout_s, 10.0))
    sent = 0
    window = asyncio.Semaphore(IN_FLIGHT)
    failures: list[BaseException] = []
    tasks: set[asyncio.Task] = set()

    async def one(topic, body, ids):
        nonlocal sent
        try:
            await producer.send_encoded(topic, body, ids)
            sent += len(ids)
        except BaseException as exc:  # noqa: BLE001 - the first failure fails the task
            failures.append(exc)
        finally:
            window.release()
    try:
        for rb in record_batches:
            for topic, rows_ in by_topic(rb, opts.send_topic):
                ids = producer.ids.take(rows_.num_rows)
                data, offsets = encode(rows_, ids, RESERVED)
                for a, b in cuts(offsets, opts.send_batch):
                    await window.acquire()
                    if failures:
                        raise failures[0]
                    t = asyncio.create_task(one(topic, data[offsets[a]:offsets[b]].tobytes(), ids[a:b]))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
        if failures:
            raise failures[0]
        return sent
    finally:
        for t in tasks:
            t.cancel()
        await producer.close()


def send_batches(opts: LiveOptions, record_batches) -> int:
    """Send every row; returns how many were acknowledged. Raises on the first failed send."""
    return asyncio.run(_send_all(opts, record_batches))
