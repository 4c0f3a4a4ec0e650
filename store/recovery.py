"""Recovery on open (DefaultMessageStore.recover), and the same plan offline for `store recover`.

`compute_plan` only reads: where valid commitlog data ends (normal: from the last 3 files;
abnormal: from the newest file whose first message the checkpoint guarantees), which bytes
past it would be cut, which consume queue units point past it, which index files are newer
than the checkpoint. `apply_plan` first copies every byte it will cut into
ROOT/recovery-backup-<time>/, so nothing stored is lost; `recover_store` then re-dispatches.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .checkpoint import Checkpoint, decode_checkpoint
from .codes import CQ_UNIT_SIZE, INT32_MAX
from .commitlog import MESSAGE_MAGIC, MESSAGE_MAGIC_V2
from .consumequeue import list_queues, queue_files, read_units, valid_prefix
from .delaylevels import expected_tags_code
from .indexfile import IndexFile
from .layout import StorePaths
from .logscan import RecordIterator, last_nonzero
from .mappedfiles import ReadOnlyMap, guess_mapped_size, list_mapped_files
from .query import index_files

RECOVER_LAST_FILES = 3


@dataclass
class Cut:
    path: str
    position: int       # first byte cut within the file
    length: int         # bytes from `position` to the last non-zero byte
    reason: str


@dataclass
class RecoveryPlan:
    root: str
    abnormal: bool
    start_file: str | None = None
    valid_end: int = 0                      # processOffset: commitlog offset where valid data ends
    records_scanned: int = 0
    stop_reason: str = ""
    commitlog_cuts: list[Cut] = field(default_factory=list)
    commitlog_files_removed: list[str] = field(default_factory=list)
    cq_cuts: list[Cut] = field(default_factory=list)
    index_files_rebuilt: list[str] = field(default_factory=list)
    redispatch_from: int = 0
    index_rebuild_from: int | None = None
    backup_dir: str | None = None

    @property
    def changes(self) -> bool:
        return bool(self.commitlog_cuts or self.commitlog_files_removed or self.cq_cuts or self.index_files_rebuilt)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["changes"] = self.changes
        return d


def _read_checkpoint(paths: StorePaths) -> Checkpoint:
    if not paths.checkpoint.is_file():
        return Checkpoint()
    with ReadOnlyMap(paths.checkpoint) as m:
        try:
            return decode_checkpoint(m.buf, paths.checkpoint)
        except Exception:  # noqa: BLE001 - a damaged checkpoint means: trust nothing, scan everything
            return Checkpoint()


def _first_store_ts(buf) -> int:
    if len(buf) < 92:
        return 0
    magic = int.from_bytes(buf[4:8], "big", signed=True)
    if magic not in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2):
        return 0
    sys_flag = int.from_bytes(buf[36:40], "big")
    at = 56 + (12 if sys_flag & 0x10 else 0)
    return int.from_bytes(buf[at:at + 8], "big", signed=True)


def compute_plan(root, commitlog_dir=None, file_size: int | None = None, abnormal: bool | None = None,
                 check_crc: bool = True, index_geometry: tuple[int, int] | None = None,
                 index_safe: bool = False) -> RecoveryPlan:
    """What recovery would do. `index_safe` (messageIndexEnable and messageIndexSafe): an abnormal
    recovery starts early enough for the index too (CommitLog.isMappedFileMatchedRecover with
    StoreCheckpoint.getMinTimestampIndex)."""
    paths = StorePaths.of(root, commitlog_dir)
    if abnormal is None:
        abnormal = paths.abort.exists()
    plan = RecoveryPlan(str(paths.root), abnormal)
    cp = _read_checkpoint(paths)
    files = list_mapped_files(paths.commitlog) if paths.commitlog.is_dir() else []
    file_size = file_size or guess_mapped_size(files)
    if not files:
        return plan
    if abnormal:
        start_index = 0
        for i in range(len(files) - 1, -1, -1):
            with ReadOnlyMap(files[i].path) as m:
                ts = _first_store_ts(m.buf)
            if ts and ts <= (cp.min_timestamp_index if index_safe else cp.min_timestamp):
                start_index = i
                break
    else:
        start_index = max(0, len(files) - RECOVER_LAST_FILES)
    plan.start_file = files[start_index].path.name
    end = files[start_index].start
    stopped = False
    for i in range(start_index, len(files)):
        f = files[i]
        if stopped:
            with ReadOnlyMap(f.path) as m:
                if last_nonzero(m.buf, 0, len(m.buf)) >= 0:
                    plan.commitlog_files_removed.append(str(f.path))
            continue
        if f.start != end and i != start_index:
            stopped = True
            plan.stop_reason = f"{f.path.name} does not start where the previous file ends"
            plan.commitlog_files_removed.append(str(f.path))
            continue
        with ReadOnlyMap(f.path) as m:
            it = RecordIterator(m.buf, 0, check_crc=check_crc)
            for _pos, _rec in it:
                plan.records_scanned += 1
            fe = it.end
            if fe.reason == "blank" and i + 1 < len(files):
                end = f.end
                continue
            end = f.start + fe.position
            stopped = True
            if fe.reason == "corrupt":
                plan.stop_reason = f"{f.path.name} at {fe.position}: {fe.detail}"
                plan.commitlog_cuts.append(Cut(str(f.path), fe.position, fe.invalid_bytes, fe.detail))
            elif fe.reason == "blank":
                end = f.end
    plan.valid_end = end
    _plan_queues(paths, plan)
    _plan_index(paths, plan, cp, index_geometry)
    plan.redispatch_from = files[start_index].start if abnormal else plan.redispatch_from
    return plan


def _plan_queues(paths: StorePaths, plan: RecoveryPlan) -> None:
    if not paths.consumequeue.is_dir():
        return
    max_phys = -1
    lowest_damage = None
    for q in list_queues(paths.consumequeue):
        for f in queue_files(q):
            with ReadOnlyMap(f.path) as m:
                units = read_units(m.buf)
                n = valid_prefix(units)
                real = (units["size"][:n] != INT32_MAX)
                past = np.flatnonzero(real & (units["offset"][:n] >= plan.valid_end))
                keep = int(past[0]) if past.size else n
                if keep:
                    last = units[keep - 1]
                    if last["size"] != INT32_MAX:
                        max_phys = max(max_phys, int(last["offset"]) + int(last["size"]))
                tail = last_nonzero(m.buf, keep * CQ_UNIT_SIZE, len(m.buf))
                if tail >= keep * CQ_UNIT_SIZE:
                    why = "units point past the end of valid commitlog data" if past.size else "torn or invalid units"
                    plan.cq_cuts.append(Cut(str(f.path), keep * CQ_UNIT_SIZE, tail - keep * CQ_UNIT_SIZE + 1, why))
                    if not past.size and keep:
                        last_ok = int(units["offset"][keep - 1]) + int(units["size"][keep - 1])
                        lowest_damage = last_ok if lowest_damage is None else min(lowest_damage, last_ok)
                del units
    plan.redispatch_from = max(max_phys, 0)
    if lowest_damage is not None:
        plan.redispatch_from = min(plan.redispatch_from, lowest_damage)


def _plan_index(paths: StorePaths, plan: RecoveryPlan, cp: Checkpoint, geometry) -> None:
    for p in index_files(paths.root):
        with ReadOnlyMap(p) as m:
            try:
                h = IndexFile(m.buf, p, *(geometry or (None, None))).header
            except Exception:  # noqa: BLE001 - unreadable index: rebuild it
                plan.index_files_rebuilt.append(str(p))
                continue
        stale = plan.abnormal and h.end_timestamp > cp.index_msg_timestamp
        points_past = h.index_count > 1 and h.end_phy_offset >= plan.valid_end
        if stale or points_past:
            plan.index_files_rebuilt.append(str(p))
            begin = h.begin_phy_offset if h.index_count > 1 else h.end_phy_offset
            plan.index_rebuild_from = begin if plan.index_rebuild_from is None else min(plan.index_rebuild_from, begin)


def backup(plan: RecoveryPlan) -> Path | None:
    """Copy every byte the plan cuts into ROOT/recovery-backup-<time>/ (kept paths, .at-<offset> suffix)."""
    if not plan.changes:
        return None
    root = Path(plan.root)
    dest = root / f"recovery-backup-{time.strftime('%Y%m%d-%H%M%S')}-{int(time.time() * 1000) % 1000:03d}"
    for cut in plan.commitlog_cuts + plan.cq_cuts:
        src = Path(cut.path)
        target = dest / src.relative_to(root) if src.is_relative_to(root) else dest / src.name
        target = target.with_name(f"{target.name}.at-{cut.position}")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(src, "rb") as f:
            f.seek(cut.position)
            target.write_bytes(f.read(cut.length))
    for p in plan.commitlog_files_removed + plan.index_files_rebuilt:
        src = Path(p)
        target = dest / src.relative_to(root) if src.is_relative_to(root) else dest / src.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    plan.backup_dir = str(dest)
    return dest


def recover_store(store, abnormal: bool) -> RecoveryPlan:
    """Run on the store's own files before it starts taking writes."""
    cfg = store.cfg
    plan = compute_plan(store.root, cfg.commitlog_dir, cfg.mappedFileSizeCommitLog, abnormal,
                        cfg.checkCRCOnRecover, (cfg.maxHashSlotNum, cfg.maxIndexNum),
                        cfg.messageIndexEnable and cfg.messageIndexSafe)
    # Load everything first: a file the store cannot open must fail before anything changes.
    store.commitlog.load()
    paths = StorePaths.of(store.root, cfg.commitlog_dir)
    queues = []
    if paths.consumequeue.is_dir():
        for q in list_queues(paths.consumequeue):
            cq = store.queue(q.topic, q.queue_id)
            cq.load()
            queues.append(cq)
    backup(plan)
    for p in plan.index_files_rebuilt:
        Path(p).unlink(missing_ok=True)
    removed = set(plan.commitlog_files_removed)
    for f in list(store.commitlog.files):
        if str(f.path) in removed or f.start > plan.valid_end:
            store.commitlog.files.remove(f)
            f.destroy()
    store.commitlog.truncate(plan.valid_end)
    last = store.commitlog.find(plan.valid_end)
    if last is not None:
        last.zero_from(plan.valid_end - last.start)
    torn_from = None
    for cq in queues:
        cq.recover()
        cq.truncate_from_physic(plan.valid_end)
        if not store.commitlog.files:
            cq.truncate_from_physic(0)
        elif abnormal:
            at = _torn_last_unit(store, cq)
            if at is not None:
                cq.truncate_from_physic(at)
                torn_from = at if torn_from is None else min(torn_from, at)
    store.index.load(store.checkpoint.index_msg_timestamp if abnormal else None)
    start = plan.redispatch_from
    if plan.index_rebuild_from is not None:
        start = min(start, plan.index_rebuild_from)
    if torn_from is not None:
        start = min(start, torn_from)
    _redispatch(store, max(start, store.commitlog.min_offset))
    for (topic, qid), cq in store.queues.items():
        cq.correct_min_offset(store.commitlog.min_offset)
        store.topic_queue_table[(topic, qid)] = cq.max_offset
    _sanitize_checkpoint(store)
    return plan


def _torn_last_unit(store, cq) -> int | None:
    """A kill during a consume queue write can leave its last unit torn: units are written in
    order, field by field, over zeros, so only the last one can be, and a unit whose offset and
    size made it but whose tags code did not looks valid. Check it against its record: the record's
    commit log offset when it does not match (drop it and dispatch again from there), else None."""
    if cq.max_offset <= cq.min_offset:
        return None
    units = cq.units(cq.max_offset - 1, 1)
    if not len(units):
        return None
    offset, size, tags = int(units["offset"][0]), int(units["size"][0]), int(units["tags_code"][0])
    if size == INT32_MAX:
        return None
    rec = store.read(offset)
    if rec is None:
        return offset
    want = expected_tags_code(rec.topic, rec.properties, rec.store_timestamp, store.levels)
    return None if (rec.total_size, want) == (size, tags) else offset


def _sanitize_checkpoint(store) -> None:
    """A checkpoint time past the newest record (or garbage) would make a later abnormal
    recovery start too late: clamp every field to what the store really holds."""
    newest = store._last_dispatched_ts
    cp = store.checkpoint
    limit = int(time.time() * 1000) + 86_400_000
    for name in ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp"):
        v = getattr(cp, name)
        if v < 0 or v > limit or (newest and v > newest):
            setattr(cp, name, min(max(v, 0), newest) if 0 <= v <= limit else 0)
    if cp.master_flushed_offset < 0 or cp.confirm_phy_offset < 0:
        cp.master_flushed_offset = cp.confirm_phy_offset = 0
    store.write_checkpoint()


def _redispatch(store, start: int) -> None:
    for f in store.commitlog.files:
        if f.end <= start:
            continue
        pos = max(0, start - f.start)
        if pos:
            from .logscan import walk
            positions, _ = walk(f.mm, 0, f.write_pos)
            pos = next((p for p in positions if p >= pos), f.write_pos)
        for _p, rec in RecordIterator(f.mm, pos, f.write_pos):
            store.dispatch(rec)
            store._last_dispatched_ts = max(store._last_dispatched_ts, rec.store_timestamp)
