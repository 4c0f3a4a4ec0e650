"""`spark export`: commitlog records to Parquet, split by file and record-aligned ranges."""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from store.codes import SYSTEM_TOPICS
from store.compression import decompress
from store.errors import NotFoundError, WrongKindError
from store.layout import StorePaths, is_store_root
from store.logscan import RecordIterator, walk
from store.mappedfiles import ReadOnlyMap, list_mapped_files

SPLIT_BYTES = 64 * 1024 * 1024

COLUMNS = [
    ("topic", "string"), ("queue_id", "int"), ("queue_offset", "long"), ("commitlog_offset", "long"),
    ("store_size", "int"), ("body", "binary"), ("body_crc", "int"), ("crc_ok", "boolean"), ("flag", "int"),
    ("sys_flag", "int"), ("born_timestamp", "long"), ("born_host", "string"), ("store_timestamp", "long"),
    ("store_host", "string"), ("reconsume_times", "int"), ("prepared_transaction_offset", "long"),
    ("tags", "string"), ("keys", "array<string>"), ("msg_id", "string"), ("uniq_key", "string"),
    ("properties", "map<string,string>"), ("store_date", "string"),
]
SCHEMA_DDL = ", ".join(f"{n} {t}" for n, t in COLUMNS)


@dataclass(frozen=True)
class Split:
    path: str
    file_start: int
    start: int       # byte position in the file, on a record boundary
    end: int         # exclusive; the last split of a file runs to the file's end


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(("%RETRY%", "%DLQ%", "RMQ_SYS_"))


def plan_splits(root: str | os.PathLike, split_bytes: int = SPLIT_BYTES) -> list[Split]:
    """Whole files, and large files cut at record boundaries every ~split_bytes."""
    p = Path(root)
    if not p.exists():
        raise NotFoundError("no such store", path=p)
    if not is_store_root(p):
        raise WrongKindError("not a store root (no commitlog, consumequeue or checkpoint inside)", path=p)
    cl = StorePaths.of(p).commitlog
    files = list_mapped_files(cl) if cl.is_dir() else []
    splits = []
    for f in files:
        if f.size <= split_bytes:
            splits.append(Split(str(f.path), f.start, 0, f.size))
            continue
        with ReadOnlyMap(f.path) as m:
            positions, _ = walk(m.buf)
        cuts = [0]
        for pos in positions:
            if pos - cuts[-1] >= split_bytes:
                cuts.append(pos)
        bounds = cuts + [f.size]
        splits += [Split(str(f.path), f.start, a, b) for a, b in zip(bounds, bounds[1:])]
    return splits


def decode_split(split: Split, topics: list[str] | None, since: int | None, until: int | None,
                 include_system: bool):
    """Rows of one split (tuples in COLUMNS order); a final ("__stop__", ...) row reports corruption."""
    with ReadOnlyMap(split.path) as m:
        it = RecordIterator(m.buf, split.start, split.end)
        for pos, rec in it:
            if not include_system and is_system_topic(rec.topic):
                continue
            if topics and not any(fnmatch.fnmatchcase(rec.topic, t) for t in topics):
                continue
            if (since is not None and rec.store_timestamp < since) or (until is not None and rec.store_timestamp > until):
                continue
            try:
                body = decompress(rec.body, rec.sys_flag)
            except Exception:  # noqa: BLE001 - keep the stored bytes when a codec is missing
                body = rec.body
            date = datetime.fromtimestamp(rec.store_timestamp / 1000, timezone.utc).strftime("%Y-%m-%d")
            yield (rec.topic, rec.queue_id, rec.queue_offset, split.file_start + pos, rec.total_size, body,
                   rec.body_crc, rec.crc_ok, rec.flag, rec.sys_flag, rec.born_timestamp, rec.born_host,
                   rec.store_timestamp, rec.store_host, rec.reconsume_times, rec.prepared_transaction_offset,
                   rec.tags, rec.keys, rec.msg_id, rec.uniq_key, rec.properties, date)
        end = it.end
    if end is not None and end.reason == "corrupt" and split.file_start + end.position < split.file_start + split.end:
        yield ("__stop__", split.path, end.position, end.detail, end.invalid_bytes)


def run_export(spark, root, out: str, topics=None, since=None, until=None, include_system=False,
               partition_by=None, mode="errorifexists", skip_corrupt=False, split_bytes=SPLIT_BYTES) -> dict:
    splits = plan_splits(root, split_bytes)
    sc = spark.sparkContext
    rdd = sc.parallelize(splits, max(1, len(splits))).flatMap(
        lambda s: decode_split(s, topics, since, until, include_system)).cache()
    stops = rdd.filter(lambda r: r[0] == "__stop__").collect()
    if stops and not skip_corrupt:
        rdd.unpersist()
        return {"corrupt": [{"file": s[1], "position": s[2], "detail": s[3], "invalid_bytes": s[4]} for s in stops],
                "written": False}
    rows = rdd.filter(lambda r: r[0] != "__stop__")
    df = spark.createDataFrame(rows, SCHEMA_DDL)
    writer = df.write.mode(mode)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(out)
    per_topic = {r["topic"]: r["count"] for r in df.groupBy("topic").count().collect()}
    total_bytes = df.agg({"store_size": "sum"}).collect()[0][0] or 0
    rdd.unpersist()
    return {"messages": sum(per_topic.values()), "bytes": int(total_bytes), "files": len({s.path for s in splits}),
            "splits": len(splits), "per_topic": dict(sorted(per_topic.items())), "out": out, "written": True,
            "corrupt": [{"file": s[1], "position": s[2], "detail": s[3], "invalid_bytes": s[4]} for s in stops]}
