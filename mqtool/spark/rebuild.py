"""`spark rebuild-index`: consume queues and index files rebuilt from the commitlog.

Records are decoded in parallel (one task per split); each queue's units are written by one
task, in commitlog order, with the store engine's own consume queue writer, so the files are
byte-identical to the broker's. The index is one chain of files in commitlog order, so the driver
writes it with the engine's index writer from the (small) key list the tasks return.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from mqtool.spark.export import Split, plan_splits
from store.codes import TRANSACTION_TYPE_MASK, TransactionType
from store.cqwriter import ConsumeQueue
from store.delaylevels import expected_tags_code, parse_delay_levels
from store.errors import StoreError, StoreLockedError
from store.indexwriter import IndexService
from store.layout import StorePaths
from store.lockfile import is_locked
from store.logscan import RecordIterator
from store.mappedfiles import ReadOnlyMap

NOT_DISPATCHED = (TransactionType.TRANSACTION_PREPARED_TYPE, TransactionType.TRANSACTION_ROLLBACK_TYPE)


def units_of_split(split: Split, levels_text: str):
    """(("cq", topic, qid), (offset, size, tags_code, queue_offset)) and ("idx", phys, store_ts, topic, keys)."""
    levels = parse_delay_levels(levels_text)
    with ReadOnlyMap(split.path) as m:
        for pos, rec in RecordIterator(m.buf, split.start, split.end):
            phys = split.file_start + pos
            tx = rec.sys_flag & TRANSACTION_TYPE_MASK
            if tx not in NOT_DISPATCHED:
                code = expected_tags_code(rec.topic, rec.properties, rec.store_timestamp, levels)
                yield (("cq", rec.topic, rec.queue_id), (phys, rec.total_size, code, rec.queue_offset))
            keys = ([rec.uniq_key] if rec.uniq_key else []) + rec.keys
            if keys and tx != TransactionType.TRANSACTION_ROLLBACK_TYPE:
                yield (("idx",), (phys, rec.store_timestamp, rec.topic, keys))


def write_queue(out_root: str, cq_file_size: int, topic: str, qid: int, units: list) -> int:
    cq = ConsumeQueue(Path(out_root) / "consumequeue" / topic / str(qid), topic, qid, cq_file_size)
    cq.files.dir.mkdir(parents=True, exist_ok=True)
    for phys, size, code, qoff in sorted(units):
        cq.put(phys, size, code, qoff)
    cq.flush()
    cq.close()
    return len(units)


def prepare_output(store: Path, out: Path | None, in_place: bool) -> Path:
    """A new store root beside the store (commitlog hard-linked), or the store itself (stopped only)."""
    paths = StorePaths.of(store)
    if in_place:
        if is_locked(store):
            raise StoreLockedError("the store's lock is held: stop the broker first", path=paths.lock)
        if paths.abort.exists():
            raise StoreError("the store was not shut down cleanly (abort file present): run "
                             "`mqtool store recover --apply` first", path=paths.abort)
        backup = store / f"rebuild-backup-{time.strftime('%Y%m%d-%H%M%S')}"
        backup.mkdir()
        for name in ("consumequeue", "index"):
            if (store / name).exists():
                shutil.move(str(store / name), str(backup / name))
        return store
    out = out or store.parent / f"{store.name}-rebuilt-{time.strftime('%Y%m%d-%H%M%S')}"
    if out.exists() and any(out.iterdir()):
        raise StoreError("the output directory exists and is not empty", path=out)
    (out / "commitlog").mkdir(parents=True, exist_ok=True)
    for f in sorted(paths.commitlog.iterdir()):
        if f.is_file():
            try:
                os.link(f, out / "commitlog" / f.name)
            except OSError:
                shutil.copy2(f, out / "commitlog" / f.name)
    for name in ("checkpoint",):
        if (store / name).exists():
            shutil.copy2(store / name, out / name)
    if paths.config.is_dir():
        shutil.copytree(paths.config, out / "config")
    return out


def run_rebuild(spark, store_root, out=None, in_place=False, cq_file_size=6_000_000, slots=5_000_000,
                entries=20_000_000, delay_levels="1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
                split_bytes=64 * 1024 * 1024) -> dict:
    store = Path(store_root)
    splits = plan_splits(store, split_bytes)
    target = prepare_output(store, Path(out) if out else None, in_place)
    sc = spark.sparkContext
    pairs = sc.parallelize(splits, max(1, len(splits))).flatMap(lambda s: units_of_split(s, delay_levels)).cache()
    out_str = str(target)
    queues = (pairs.filter(lambda kv: kv[0][0] == "cq").map(lambda kv: ((kv[0][1], kv[0][2]), kv[1]))
              .groupByKey().map(lambda kv: (kv[0], write_queue(out_str, cq_file_size, kv[0][0], kv[0][1],
                                                               list(kv[1])))).collect())
    keys = sorted(pairs.filter(lambda kv: kv[0][0] == "idx").map(lambda kv: kv[1]).collect())
    pairs.unpersist()
    index = IndexService(target / "index", slots, entries)
    index.load()
    for phys, ts, topic, ks in keys:
        index.put(topic, ks, phys, ts)
    index.close()
    return {"out": str(target), "queues": len(queues), "units": sum(n for _, n in queues),
            "index_keys": sum(len(k[3]) for k in keys), "index_files": len(index.files)}
