"""The CLI's jobs over a live cluster: incremental export into Parquet (Spark's file sink layout and
its `_spark_metadata` log, so each message lands exactly once however often the export is run or
killed), and replay of Parquet rows into a topic."""
from __future__ import annotations

import time

from mqtool.spark import register
from mqtool.spark.liveoptions import offsets_from_json

LIVE_PARTITION_COLUMNS = ("topic", "broker_name", "queue_id", "store_date")


def stream_export(spark, options: dict, out: str, checkpoint: str, partition_by: list[str],
                  interval_s: float | None, on_batch=None, stopping=lambda: False) -> dict:
    """Run the export until it has read everything there is (`interval_s` None: availableNow) or
    until `stopping()` (a micro-batch every interval_s). Returns totals; `on_batch(progress)` is
    called once per finished micro-batch. A local OUT: tasks write Parquet themselves and the
    driver commits each batch by its id (`livelake`); a URI: Spark's file sink."""
    if "://" not in str(out) and "://" not in str(checkpoint):
        from mqtool.spark.livelake import lake_export
        return lake_export(spark, options, str(out), str(checkpoint), partition_by, interval_s, on_batch, stopping)
    register(spark)
    df = spark.readStream.format("rocketmq").options(**options).load()
    writer = (df.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
              .queryName(f"mqtool-export-{int(time.time())}"))
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer = writer.trigger(availableNow=True) if interval_s is None else writer.trigger(
        processingTime=f"{interval_s} seconds")
    query = writer.start()
    counted: set[int] = set()
    rows, last_end = 0, None
    try:
        while True:
            finished = query.awaitTermination(0.2)
            for p in query.recentProgress:
                if ran_a_batch(p) and p["batchId"] not in counted:
                    counted.add(p["batchId"])
                    rows += p["numInputRows"]
                    last_end = p["sources"][0].get("endOffset") or last_end
                    if on_batch:
                        on_batch(p)
            if finished or not query.isActive:
                break
            if stopping():
                query.stop()
                break
    finally:
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        raise query.exception()
    return {"rows": rows, "batches": len(counted), "out": out, "checkpoint": checkpoint,
            "offsets": _parse(last_end)}


def ran_a_batch(progress: dict) -> bool:
    """Whether a progress event reports a micro-batch that ran. An idle trigger reports too (every
    spark.sql.streaming.noDataProgressEventInterval), under the id the next batch will have, and
    without the batch phases (addBatch) in its durations."""
    return "addBatch" in (progress.get("durationMs") or {})


def _parse(end):
    if end is None:
        return {}
    if isinstance(end, str):
        import json
        end = json.loads(end)
    return end


def commit_group(options: dict, offsets: dict) -> int:
    """The group's offsets on the brokers set to what the export committed (Spark commits a
    batch's offsets to the source only when it plans the next one, so the last would trail)."""
    from mqtool.spark import livecluster
    from mqtool.spark.liveoptions import parse_options
    opts = parse_options(options)
    if not opts.group or not offsets:
        return 0
    return livecluster.run(livecluster.commit, opts, offsets_from_json(offsets))


def replay(spark, path: str, options: dict) -> dict:
    """Every row of the Parquet at `path` sent to the options' topic. Returns {"rows": n}. A local
    path: tasks read it with pyarrow (`livereplay`); a URI: Spark's reader and the sink."""
    if "://" not in str(path):
        from mqtool.spark.liveoptions import parse_options
        from mqtool.spark.livereplay import replay_files
        done = replay_files(spark, str(path), parse_options(options, writing=True))
        if done is not None:
            return done
    register(spark)
    df = spark.read.parquet(path)
    keep = [c for c in ("body", "tags", "keys", "properties") if c in df.columns]
    df = df.select(*keep)
    rows = df.count()
    df.write.format("rocketmq").options(**options).mode("append").save()
    return {"rows": rows}
