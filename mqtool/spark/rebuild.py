"""`spark rebuild-index`: every consume queue and the index files, rebuilt from the commitlog.

The plan is export's (`source.plan`); then one task per split decodes its records into
consume-queue units and index keys (the pure builders below, which follow
`CommitLog.checkMessageAndReturnSize` and `IndexService.buildIndex`; `store/` has no dispatch
module offering them). Units are grouped by queue and each queue is written by one task, in
commitlog order, with the engine's `store.cqwriter.ConsumeQueue`, so the files are
byte-identical to the broker's. The index is one chain of files in commitlog order: the driver
streams the keys (`toLocalIterator`, partitions in split order) into `store.indexwriter.IndexService`.
The output root must be on a filesystem every executor can write (local mode, one machine, NFS).
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from mqtool.spark.progress import describe
from mqtool.spark.source import SPLIT_BYTES, Split, is_uri, open_range, plan
from mqtool_store.codes import DEFAULT_MESSAGE_DELAY_LEVEL, TRANSACTION_TYPE_MASK, TransactionType
from mqtool_store.commitlog import MessageRecord
from mqtool_store.cqwriter import ConsumeQueue
from mqtool_store.delaylevels import expected_tags_code, parse_delay_levels
from mqtool_store.errors import NotFoundError, StoreError, StoreLockedError, WrongKindError
from mqtool_store.indexwriter import IndexService
from mqtool_store.layout import StorePaths
from mqtool_store.lockfile import is_locked
from mqtool_store.logscan import RecordIterator

NOT_DISPATCHED = (TransactionType.TRANSACTION_PREPARED_TYPE, TransactionType.TRANSACTION_ROLLBACK_TYPE)


# ---------------------------------------------------------------- pure builders

def cq_unit(rec: MessageRecord, phys: int, levels: dict[int, int]):
    """((topic, queue id), (offset, size, tagsCode, queue offset)), or None when not dispatched."""
    if rec.sys_flag & TRANSACTION_TYPE_MASK in NOT_DISPATCHED:
        return None
    code = expected_tags_code(rec.topic, rec.properties, rec.store_timestamp, levels)
    return (rec.topic, rec.queue_id), (phys, rec.total_size, code, rec.queue_offset)


def index_keys(rec: MessageRecord) -> list[str]:
    """IndexService.buildIndex's keys in its order: UNIQ_KEY, then each KEYS token; none for rollbacks."""
    if rec.sys_flag & TRANSACTION_TYPE_MASK == TransactionType.TRANSACTION_ROLLBACK_TYPE:
        return []
    return ([rec.uniq_key] if rec.uniq_key else []) + rec.keys


def dispatch_split(split: Split, levels_text: str):
    """("cq", key, unit) and ("idx", (offset, store time, topic, keys)) for each record of a split."""
    levels = parse_delay_levels(levels_text)
    with open_range(split.path, split.start, split.end) as (buf, base):
        for pos, rec in RecordIterator(buf, split.start - base, split.end - base):
            phys = split.file_start + base + pos
            unit = cq_unit(rec, phys, levels)
            if unit is not None:
                yield ("cq", unit[0], unit[1])
            keys = index_keys(rec)
            if keys:
                yield ("idx", None, (phys, rec.store_timestamp, rec.topic, keys))


def write_queue(out_root: str, cq_file_size: int, topic: str, qid: int, units) -> int:
    """One queue's files from its units (ConsumeQueue.putMessagePositionInfo in commitlog order)."""
    cq = ConsumeQueue(Path(out_root) / "consumequeue" / topic / str(qid), topic, qid, cq_file_size)
    cq.files.dir.mkdir(parents=True, exist_ok=True)
    n = 0
    for phys, size, code, qoff in sorted(units):
        n += cq.put(phys, size, code, qoff)
    cq.flush()
    cq.close()
    return n


# ---------------------------------------------------------------- output root

def check_in_place(store: Path) -> None:
    paths = StorePaths.of(store)
    if is_locked(store):
        raise StoreLockedError("the store's lock is held: stop the broker first", path=paths.lock)
    if paths.abort.exists():
        raise StoreError("the store was not shut down cleanly (abort file present): run "
                         "`mqtool store recover --apply` first", path=paths.abort)


def check_output(store: Path, out: Path) -> None:
    """A new store root must be a new (or empty) directory outside the store."""
    if out.resolve() == store.resolve() or store.resolve() in out.resolve().parents:
        raise WrongKindError("--out must be outside the store (use --in-place --yes to rebuild the store itself)",
                             path=out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise WrongKindError("the output directory exists and is not empty", path=out)


def default_out(store: Path) -> Path:
    return store.parent / f"{store.name}-rebuilt-{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_output(store: Path, out: Path | None, in_place: bool, copy_commitlog: bool = False) -> Path:
    """A new store root (commitlog hard-linked or copied, checkpoint and config copied), or the
    store itself with its old consume queues and index moved aside."""
    paths = StorePaths.of(store)
    if in_place:
        check_in_place(store)
        backup = store / f"rebuild-backup-{time.strftime('%Y%m%d-%H%M%S')}"
        backup.mkdir()
        for name in ("consumequeue", "index"):
            if (store / name).exists():
                shutil.move(str(store / name), str(backup / name))
        return store
    out = out or default_out(store)
    check_output(store, out)
    (out / "commitlog").mkdir(parents=True, exist_ok=True)
    for f in sorted(paths.commitlog.iterdir()):
        if f.is_file():
            if copy_commitlog:
                shutil.copy2(f, out / "commitlog" / f.name)
                continue
            try:
                os.link(f, out / "commitlog" / f.name)
            except OSError:          # another filesystem: copy
                shutil.copy2(f, out / "commitlog" / f.name)
    if paths.checkpoint.exists():
        shutil.copy2(paths.checkpoint, out / "checkpoint")
    if paths.config.is_dir():
        shutil.copytree(paths.config, out / "config")
    return out


# ---------------------------------------------------------------- the job

def run_rebuild(spark, store_root, out=None, in_place: bool = False, cq_file_size: int = 6_000_000,
                slots: int = 5_000_000, entries: int = 20_000_000, delay_levels: str = DEFAULT_MESSAGE_DELAY_LEVEL,
                split_bytes: int = SPLIT_BYTES, copy_commitlog: bool = False) -> dict:
    if is_uri(str(store_root)):
        raise WrongKindError("rebuild-index writes a store: give a local store root", path=store_root)
    store = Path(store_root)
    parse_delay_levels(delay_levels)          # bad text fails here, not in every task
    if in_place:
        check_in_place(store)
    elif out:
        check_output(store, Path(out))
    scans = plan(spark, str(store), split_bytes)
    if not scans:
        raise NotFoundError("the store has no commitlog files: nothing to rebuild", path=store)
    target = prepare_output(store, Path(out) if out else None, in_place, copy_commitlog)
    splits = [sp for s in scans for sp in s.splits]
    sc = spark.sparkContext
    out_str = str(target)
    describe(sc, f"rebuild-index: decode {len(splits)} splits")
    items = sc.parallelize(splits, max(1, len(splits))).flatMap(lambda s: dispatch_split(s, delay_levels)).cache()
    try:
        describe(sc, "rebuild-index: write consume queues")
        queues = (items.filter(lambda x: x[0] == "cq").map(lambda x: (x[1], x[2]))
                  .groupByKey(max(1, min(64, sc.defaultParallelism * 2)))
                  .map(lambda kv: (kv[0], write_queue(out_str, cq_file_size, kv[0][0], kv[0][1], kv[1])))
                  .collect())
        describe(sc, "rebuild-index: index keys in commitlog order")
        index = IndexService(target / "index", slots, entries)
        index.load()
        n_keys = n_records = 0
        for phys, ts, topic, keys in items.filter(lambda x: x[0] == "idx").map(lambda x: x[2]).toLocalIterator():
            index.put(topic, keys, phys, ts)
            n_keys += len(keys)
            n_records += 1
        n_files = len(index.files)
        index.close()
    finally:
        items.unpersist()
    return {"out": out_str, "in_place": in_place, "files": len(scans), "splits": len(splits),
            "records": sum(s.records for s in scans), "queues": len(queues), "units": sum(n for _, n in queues),
            "index_records": n_records, "index_keys": n_keys, "index_files": n_files,
            "corrupt": [s.bad for s in scans if s.bad]}
