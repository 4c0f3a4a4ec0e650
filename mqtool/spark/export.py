"""`spark export`: commitlog records to Parquet, split by file and record-aligned ranges."""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from store.codes import SYSTEM_TOPICS
from store.commitlog import MESSAGE_MAGIC, MESSAGE_MAGIC_V2
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


def arrow_schema():
    import pyarrow as pa
    types = {"string": pa.string(), "int": pa.int32(), "long": pa.int64(), "binary": pa.binary(),
             "boolean": pa.bool_(), "array<string>": pa.list_(pa.string()),
             "map<string,string>": pa.map_(pa.string(), pa.string())}
    return pa.schema([(n, types[t]) for n, t in COLUMNS])


def split_batches(split: Split, topics, since, until, include_system, batch_rows: int = 20000):
    """The rows of one split as pyarrow RecordBatches (the columnar twin of decode_split)."""
    import pyarrow as pa
    schema = arrow_schema()
    names = schema.names
    rows = []
    for row in decode_split(split, topics, since, until, include_system):
        if row[0] == "__stop__":
            continue
        rows.append(row)
        if len(rows) >= batch_rows:
            yield _batch(pa, schema, names, rows)
            rows = []
    if rows:
        yield _batch(pa, schema, names, rows)


def _batch(pa, schema, names, rows):
    cols = list(zip(*rows))
    arrays = []
    for i, (name, field) in enumerate(zip(names, schema)):
        data = cols[i]
        if name == "properties":
            data = [list(p.items()) for p in data]
        arrays.append(pa.array(data, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def prescan(split: Split, topics, since, until, include_system) -> tuple[dict, int, list[dict]]:
    """Header-only pass over a split: rows per topic and bytes that the export will write, and
    where the split's records stop early because of bad bytes."""
    from store.logscan import header_table, walk, classify_end
    with ReadOnlyMap(split.path) as m:
        positions, end = walk(m.buf, split.start, split.end)
        table, n_valid = header_table(m.buf, positions, split.end)
        counts: dict[str, int] = {}
        size = 0
        names: dict[bytes, str] = {}
        for i in range(n_valid):
            a, ln = int(table["topic_pos"][i]), int(table["topic_len"][i])
            raw = bytes(m.buf[a:a + ln])
            topic = names.get(raw) or names.setdefault(raw, raw.decode("utf-8", "replace"))
            ts = int(table["store_timestamp"][i])
            if not include_system and is_system_topic(topic):
                continue
            if topics and not any(fnmatch.fnmatchcase(topic, t) for t in topics):
                continue
            if (since is not None and ts < since) or (until is not None and ts > until):
                continue
            counts[topic] = counts.get(topic, 0) + 1
            size += int(table["total_size"][i])
        stops = []
        if n_valid < len(positions):
            stop = int(positions[n_valid])
            end = classify_end(m.buf, stop, split.end, "record does not match its fields")
            if int(table["magic"][n_valid]) in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2) and end.reason != "corrupt":
                end = type(end)(stop, "corrupt", "record does not match its fields", 1)
        del table
        if end.reason == "corrupt" and end.position < split.end:
            stops.append({"file": split.path, "position": end.position, "detail": end.detail or "bad record",
                          "invalid_bytes": end.invalid_bytes})
    return counts, size, stops


def run_export(spark, root, out: str, topics=None, since=None, until=None, include_system=False,
               partition_by=None, mode="errorifexists", skip_corrupt=False, split_bytes=SPLIT_BYTES) -> dict:
    splits = plan_splits(root, split_bytes)
    sc = spark.sparkContext
    scans = sc.parallelize(splits, max(1, len(splits))).map(
        lambda sp: prescan(sp, topics, since, until, include_system)).collect()
    stops = [c for _, _, cs in scans for c in cs]
    if stops and not skip_corrupt:
        return {"corrupt": stops, "written": False}
    per_topic: dict[str, int] = {}
    for counts, _, _ in scans:
        for t, n in counts.items():
            per_topic[t] = per_topic.get(t, 0) + n
    total_bytes = sum(b for _, b, _ in scans)
    split_df = spark.createDataFrame([(s.path, s.file_start, s.start, s.end) for s in splits],
                                     "path string, file_start long, start long, end long").repartition(
                                         max(1, len(splits)))

    def decode(batches):
        for b in batches:
            for path, fs, st, en in zip(*(b.column(i).to_pylist() for i in range(4))):
                yield from split_batches(Split(path, fs, st, en), topics, since, until, include_system)
    df = split_df.mapInArrow(decode, SCHEMA_DDL)
    writer = df.write.mode(mode)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(out)
    return {"messages": sum(per_topic.values()), "bytes": int(total_bytes), "files": len({s.path for s in splits}),
            "splits": len(splits), "per_topic": dict(sorted(per_topic.items())), "out": out, "written": True,
            "corrupt": stops}
