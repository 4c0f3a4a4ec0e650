"""Recovery on open (DefaultMessageStore.recover), and the same plan offline for `store recover`.

`compute_plan` only reads: where valid commitlog data ends (normal: from the last 3 files;
abnormal: from the newest file whose first message the checkpoint guarantees), the first record
the checkpoint does not vouch for (stored after its time less 3 s: the unvouched tail), which bytes
past the end would be cut, which consume queue units point past it, which index files cannot be
kept. `recover_store` saves the commit log bytes it cuts under ROOT/recovery-backup-<time>/
(backups.py: queues and index are rebuilt, never copied), then re-dispatches (redispatch.py):
consume queues from the unvouched tail, the index from where it stops, and logs what it did.

Where mqtool differs from 4.9.8 (each checked against its source): Java re-dispatches the whole
start file; mqtool starts at the file's first unvouched record (the checkpoint's logics time is
only ever taken after every record up to it is in its queue, see messagestore._flush_queues).
After a crash Java deletes the index file written since the last full one (IndexService.load);
mqtool keeps it when its header and last entry agree, mends hash slots a kill left pointing past
the header's count, and fills it from where it stops.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .backups import new_backup_name, plan_pruning, prune, save_cut_bytes
from .checkpoint import Checkpoint, decode_checkpoint
from .codes import CQ_UNIT_SIZE, INT32_MAX
from .commitlog import MESSAGE_MAGIC, MESSAGE_MAGIC_V2
from .consumequeue import list_queues, queue_files, read_units, valid_prefix_in
from .crc import crc32
from .delaylevels import expected_tags_code
from .indexfile import IndexFile
from .layout import StorePaths
from .logscan import FileEnd, HeaderScan, last_nonzero, last_nonzero_in
from .mappedfiles import ReadOnlyMap, guess_mapped_size, list_mapped_files
from .query import index_files

RECOVER_LAST_FILES = 3
PROGRESS_EVERY_S = 5.0
log = logging.getLogger("mqtool.store.recovery")


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
    mode_reason: str = ""
    start_file: str | None = None
    valid_end: int = 0                      # processOffset: commitlog offset where valid data ends
    records_scanned: int = 0
    stop_reason: str = ""
    checkpoint: dict = field(default_factory=dict)
    vouched_until: int = 0                  # first record stored after the checkpoint's time less 3 s
    commitlog_cuts: list[Cut] = field(default_factory=list)
    commitlog_files_removed: list[str] = field(default_factory=list)
    cq_cuts: list[Cut] = field(default_factory=list)
    index_files_rebuilt: list[str] = field(default_factory=list)
    index_files_kept: list[str] = field(default_factory=list)   # written past the checkpoint, kept (Java drops them)
    redispatch_from: int = 0                # consume queues (and index) re-dispatched from here
    queues_end: int = 0                     # where the furthest queue's last kept unit ends
    confirm_offset: int | None = None       # controller mode: re-dispatch stops here (confirmOffset)
    index_rebuild_from: int | None = None   # the index alone from here, when it stops before the queues
    backup_bytes: int = 0                   # commit log bytes kept: cut tails and removed files
    backup_dir: str | None = None           # where they go (the name is the time it is made)
    backup_keep: int = 3
    backups_removed: list[str] = field(default_factory=list)
    backup_copies_removed: list[str] = field(default_factory=list)   # queue / index copies older mqtools made
    records_redispatched: int = 0
    index_only_redispatched: int = 0
    seconds: float = 0.0

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


def _check_file(buf, check_crc: bool, threshold: int | None, end: int | None = None,
                tick=None) -> tuple[FileEnd, int, int | None]:
    """checkMessageAndReturnSize over a file, 64k records a table: (where valid records end,
    how many, position of the first stored after `threshold` or None). Records lie below `end`
    (where the file's written part ends): the scan goes no further."""
    count = 0
    first_new = None
    scan = HeaderScan(buf, end)
    tables = iter(scan)
    with memoryview(buf) as mv:
        for t in tables:
            k = len(t["position"])
            stop = None
            if check_crc:
                bodies = (mv[p:p + n] for p, n in zip(t["body_pos"].tolist(), t["body_len"].tolist()))
                ok = (np.fromiter(map(crc32, bodies), np.int64, k) & 0x7FFFFFFF) == t["body_crc"]
                bad = np.flatnonzero(~ok)
                stop = int(bad[0]) if bad.size else None
            good = k if stop is None else stop
            if first_new is None and threshold is not None and good:
                new = np.flatnonzero(t["store_timestamp"][:good] > threshold)
                first_new = int(t["position"][new[0]]) if new.size else None
            count += good
            if tick is not None:
                tick(count)
            if stop is not None:
                pos, crc = int(t["position"][stop]), int(t["body_crc"][stop])
                del t
                tables.close()
                tail = max(1, last_nonzero(buf, pos, scan.limit) - pos + 1)
                return FileEnd(pos, "corrupt", f"body CRC mismatch (stored {crc})", tail), count, first_new
            del t
    return scan.end, count, first_new


def compute_plan(root, commitlog_dir=None, file_size: int | None = None, abnormal: bool | None = None,
                 check_crc: bool = True, index_geometry: tuple[int, int] | None = None,
                 index_safe: bool = False, backup_keep: int = 3, reserved_hours: int = 72,
                 progress=None) -> RecoveryPlan:
    """What recovery would do. `index_safe` (messageIndexEnable and messageIndexSafe): an abnormal
    recovery starts early enough for the index too (CommitLog.isMappedFileMatchedRecover with
    StoreCheckpoint.getMinTimestampIndex). `progress(file name, records checked)` is called
    every PROGRESS_EVERY_S seconds of a long scan."""
    paths = StorePaths.of(root, commitlog_dir)
    aborted = paths.abort.exists()
    abnormal = aborted if abnormal is None else abnormal
    if abnormal == aborted:
        why = ("abort file present: the last run did not shut down cleanly" if abnormal
               else "no abort file: the last run shut down cleanly")
    else:
        why = "mode forced"
    plan = RecoveryPlan(str(paths.root), abnormal, why, backup_keep=backup_keep)
    cp = _read_checkpoint(paths)
    threshold = (cp.min_timestamp_index if index_safe else cp.min_timestamp) if abnormal else None
    plan.checkpoint = {"physicMsgTimestamp": cp.physic_msg_timestamp, "logicsMsgTimestamp": cp.logics_msg_timestamp,
                       "indexMsgTimestamp": cp.index_msg_timestamp, "vouches_before": threshold}
    files = list_mapped_files(paths.commitlog) if paths.commitlog.is_dir() else []
    file_size = file_size or guess_mapped_size(files)
    if not files:
        _plan_backups(paths, plan, reserved_hours)
        return plan
    if abnormal:
        start_index = 0
        for i in range(len(files) - 1, -1, -1):
            with ReadOnlyMap(files[i].path) as m:
                ts = _first_store_ts(m.buf)
            if ts and ts <= threshold:
                start_index = i
                break
    else:
        start_index = max(0, len(files) - RECOVER_LAST_FILES)
    plan.start_file = files[start_index].path.name
    end = files[start_index].start
    vouched = None
    stopped = False
    shown = time.monotonic()
    for i in range(start_index, len(files)):
        f = files[i]
        if stopped:
            with ReadOnlyMap(f.path) as m:
                if last_nonzero(m.buf, 0, m.written_end()) >= 0:
                    plan.commitlog_files_removed.append(str(f.path))
            continue
        if f.start != end and i != start_index:
            stopped = True
            plan.stop_reason = f"{f.path.name} does not start where the previous file ends"
            plan.commitlog_files_removed.append(str(f.path))
            continue
        def tick(n, name=f.path.name, before=plan.records_scanned):
            nonlocal shown
            if progress is not None and time.monotonic() - shown >= PROGRESS_EVERY_S:
                shown = time.monotonic()
                progress(name, before + n)
        with ReadOnlyMap(f.path) as m:
            fe, n, first_new = _check_file(m.buf, check_crc, threshold if vouched is None else None, m.written_end(),
                                           tick)
        if fe.reason == "full" and fe.position < f.size:      # records up to the written end: zeros after it
            fe = FileEnd(fe.position, "unwritten")
        plan.records_scanned += n
        if vouched is None and first_new is not None:
            vouched = f.start + first_new
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
    plan.vouched_until = end if vouched is None else min(vouched, end)
    max_phys, damaged_from = _plan_queues(paths, plan)
    plan.queues_end = max(max_phys, 0)
    if abnormal:   # the queues hold every record the checkpoint vouches for, unless none ends that far
        cq_from = min(plan.vouched_until, max(max_phys, 0))
    else:          # ReputMessageService: from where the furthest queue ends
        cq_from = max(max_phys, 0)
    if damaged_from is not None:
        cq_from = min(cq_from, damaged_from)
    plan.redispatch_from = cq_from
    _plan_index(paths, plan, cp, index_geometry)
    _plan_backups(paths, plan, reserved_hours)
    return plan


def _plan_queues(paths: StorePaths, plan: RecoveryPlan) -> tuple[int, int | None]:
    """(where the furthest queue's last kept unit ends or -1, where the lowest damaged queue
    stops or None); the units to cut go into the plan."""
    if not paths.consumequeue.is_dir():
        return -1, None
    max_phys = -1
    lowest_damage = None
    for q in list_queues(paths.consumequeue):
        for f in queue_files(q):
            with ReadOnlyMap(f.path) as m:
                units = read_units(m.buf)
                ranges = m.data_ranges()                 # holes read as zeros: not scanned
                n = valid_prefix_in(units, ranges)
                real = (units["size"][:n] != INT32_MAX)
                past = np.flatnonzero(real & (units["offset"][:n] >= plan.valid_end))
                keep = int(past[0]) if past.size else n
                if keep:
                    last = units[keep - 1]
                    if last["size"] != INT32_MAX:
                        max_phys = max(max_phys, int(last["offset"]) + int(last["size"]))
                tail = last_nonzero_in(m.buf, ranges, keep * CQ_UNIT_SIZE, len(m.buf))
                if tail >= keep * CQ_UNIT_SIZE:
                    why = "units point past the end of valid commitlog data" if past.size else "torn or invalid units"
                    plan.cq_cuts.append(Cut(str(f.path), keep * CQ_UNIT_SIZE, tail - keep * CQ_UNIT_SIZE + 1, why))
                    if not past.size and keep:
                        last_ok = int(units["offset"][keep - 1]) + int(units["size"][keep - 1])
                        lowest_damage = last_ok if lowest_damage is None else min(lowest_damage, last_ok)
                del units
    return max_phys, lowest_damage


def _index_tail_ok(reader: IndexFile, valid_end: int) -> bool:
    """The header and the last entry it counts agree, and point below the valid end: what a kill
    leaves of the file being written (entries past the count are written over later)."""
    h = reader.header
    if h.index_count <= 1:
        return h.index_count == 1
    if h.index_count > reader.index_num or not 0 <= h.begin_phy_offset <= h.end_phy_offset < valid_end:
        return False
    return reader.entry(h.index_count - 1)[1] == h.end_phy_offset


def _plan_index(paths: StorePaths, plan: RecoveryPlan, cp: Checkpoint, geometry) -> None:
    found = index_files(paths.root)
    kept_end = 0          # where the index files before the current one end
    rebuild = []
    for i, p in enumerate(found):
        with ReadOnlyMap(p) as m:
            try:
                reader = IndexFile(m.buf, p, *(geometry or (None, None)))
                h = reader.header
                tail_ok = i == len(found) - 1 and _index_tail_ok(reader, plan.valid_end)
            except Exception:  # noqa: BLE001 - unreadable index: rebuild it
                rebuild.append((str(p), kept_end))
                continue
        stale = plan.abnormal and h.end_timestamp > cp.index_msg_timestamp
        points_past = h.index_count > 1 and h.end_phy_offset >= plan.valid_end
        if points_past or (stale and not tail_ok):
            begin = h.begin_phy_offset if h.index_count > 1 else h.end_phy_offset
            rebuild.append((str(p), begin if 0 <= begin <= plan.valid_end else kept_end))
            continue
        if stale:
            plan.index_files_kept.append(str(p))
            if h.end_phy_offset < plan.redispatch_from:      # the index stops before the queues (its last
                plan.index_rebuild_from = h.end_phy_offset   # record's keys go in again, as Java's buildIndex does)
        kept_end = max(kept_end, h.end_phy_offset)
    for p, begin in rebuild:
        plan.index_files_rebuilt.append(p)
        if begin < plan.redispatch_from:
            plan.index_rebuild_from = begin if plan.index_rebuild_from is None else min(plan.index_rebuild_from, begin)


def _plan_backups(paths: StorePaths, plan: RecoveryPlan, reserved_hours: int) -> None:
    plan.backup_bytes = sum(c.length for c in plan.commitlog_cuts)
    plan.backup_bytes += sum(Path(p).stat().st_size for p in plan.commitlog_files_removed)
    if plan.backup_bytes:
        plan.backup_dir = str(paths.root / new_backup_name())
    pruning = plan_pruning(paths.root, plan.backup_keep, reserved_hours, extra=1 if plan.backup_bytes else 0)
    plan.backups_removed = pruning.removed
    plan.backup_copies_removed = pruning.derived_removed


def _fmt_ts(ms) -> str:
    if not ms:
        return "0"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def recover_store(store, abnormal: bool) -> RecoveryPlan:
    """Run on the store's own files before it starts taking writes; logs what it does."""
    from .redispatch import redispatch
    cfg = store.cfg
    began = time.monotonic()
    paths = StorePaths.of(store.root, cfg.commitlog_dir)
    cp = store.checkpoint
    log.info("store recovery: %s mode (%s); checkpoint physicMsgTimestamp %s, logicsMsgTimestamp %s, "
             "indexMsgTimestamp %s; recovery backups kept: %d (recoveryBackupKeep), %d h (fileReservedTime)",
             "abnormal" if abnormal else "normal",
             "abort file present: the last run did not shut down cleanly" if abnormal else "clean shutdown",
             _fmt_ts(cp.physic_msg_timestamp), _fmt_ts(cp.logics_msg_timestamp), _fmt_ts(cp.index_msg_timestamp),
             cfg.recoveryBackupKeep, cfg.fileReservedTime)
    plan = compute_plan(store.root, cfg.commitlog_dir, cfg.mappedFileSizeCommitLog, abnormal,
                        cfg.checkCRCOnRecover, (cfg.maxHashSlotNum, cfg.maxIndexNum),
                        cfg.messageIndexEnable and cfg.messageIndexSafe, cfg.recoveryBackupKeep,
                        cfg.fileReservedTime,
                        progress=lambda name, n: log.info("store recovery: checking %s, %d records so far", name, n))
    log.info("store recovery: checked %d records from commit log file %s in %.2f s; valid data ends at offset %d%s",
             plan.records_scanned, plan.start_file or "-", time.monotonic() - began, plan.valid_end,
             f" ({plan.stop_reason})" if plan.stop_reason else "")
    # Load everything first: a file the store cannot open must fail before anything changes.
    store.commitlog.load()
    queues = []
    if paths.consumequeue.is_dir():
        for q in list_queues(paths.consumequeue):
            cq = store.queue(q.topic, q.queue_id)
            cq.load()
            queues.append(cq)
    _keep_cut_bytes(store.root, plan)
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
    for c in plan.cq_cuts:
        log.info("store recovery: consume queue %s cut from %d (%s): rebuilt from the commit log", c.path,
                 c.position, c.reason)
    store.index.load(None)
    if abnormal:
        store.index.repair_tail()
    cq_from = plan.redispatch_from if torn_from is None else min(plan.redispatch_from, torn_from)
    plan.redispatch_from = cq_from
    index_from = plan.index_rebuild_from if cfg.messageIndexEnable else None
    if store.confirm_offsets:
        plan.confirm_offset = _confirm_point(store, cp.confirm_phy_offset, plan)
        log.info("store recovery: controller mode: consume queues and index only up to confirmOffset %d "
                 "(checkpoint %d, queues end at %d, commit log at %d)", plan.confirm_offset,
                 cp.confirm_phy_offset, plan.queues_end, plan.valid_end)
    done = redispatch(store, cq_from, index_from,
                      progress=lambda n, total: log.info("store recovery: re-dispatched %d of %d bytes", n, total),
                      end=plan.confirm_offset)
    plan.records_redispatched, plan.index_only_redispatched = done.records, done.index_only
    for (topic, qid), cq in store.queues.items():
        cq.correct_min_offset(store.commitlog.min_offset)
        store.topic_queue_table[(topic, qid)] = cq.max_offset
    _sanitize_checkpoint(store)
    plan.seconds = round(time.monotonic() - began, 3)
    log.info("store recovery: re-dispatched %d records (%d bytes) into consume queues and index from offset %d"
             "%s%s; done in %.2f s", done.records, done.bytes, cq_from,
             f", {done.index_only} more into the index alone from offset {index_from}" if done.index_only else "",
             f"; index files kept past the checkpoint: {len(plan.index_files_kept)}, rebuilt: "
             f"{len(plan.index_files_rebuilt)}" if plan.index_files_kept or plan.index_files_rebuilt else "",
             plan.seconds)
    return plan


def _confirm_point(store, persisted: int, plan: RecoveryPlan) -> int:
    """Controller mode: where dispatch may go after a restart. The checkpoint's confirmPhyOffset,
    clamped into [min offset, valid end] as 5.x's recovery does; never below what the consume queues
    already hold (dispatch never passed confirmOffset, so they hold only confirmed records; the
    checkpoint is written later than they are). A value that is no record boundary is not used."""
    point = min(max(persisted, store.commitlog.min_offset, plan.queues_end), plan.valid_end)
    if point != plan.queues_end and not store.record_starts_at(point):
        log.warning("store recovery: checkpoint confirmOffset %d is not a record boundary: dispatching up to "
                    "where the consume queues end (%d)", persisted, plan.queues_end)
        return plan.queues_end
    return point


def _keep_cut_bytes(root: Path, plan: RecoveryPlan) -> None:
    """Save the commit log bytes the plan cuts (nothing can rebuild them), then prune old backups."""
    if plan.backup_bytes:
        dest = Path(plan.backup_dir)
        save_cut_bytes(Path(root), dest, plan.commitlog_cuts, plan.commitlog_files_removed)
        for c in plan.commitlog_cuts:
            log.warning("store recovery: cut %d bytes of %s from %d (%s); saved under %s", c.length, c.path,
                        c.position, c.reason, dest)
        for p in plan.commitlog_files_removed:
            log.warning("store recovery: removed commit log file %s (after the end of valid data); saved under %s",
                        p, dest)
    if plan.backups_removed or plan.backup_copies_removed:
        from .backups import Pruning
        prune(Pruning(removed=plan.backups_removed, derived_removed=plan.backup_copies_removed))
        log.info("store recovery: removed %d old recovery backups and %d copies of rebuilt files in them",
                 len(plan.backups_removed), len(plan.backup_copies_removed))


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


def _newest_queued_ts(store) -> int:
    """The store time of the newest record a consume queue points to (0: none): what the store
    holds when this recovery re-dispatched nothing (the queues already held every record left)."""
    newest = -1
    for cq in store.queues.values():
        if cq.max_offset > cq.min_offset:
            units = cq.units(cq.max_offset - 1, 1)
            if len(units):
                newest = max(newest, int(units["offset"][0]))
    rec = store.read(newest) if newest >= 0 else None
    return rec.store_timestamp if rec is not None else 0


def _sanitize_checkpoint(store) -> None:
    """A checkpoint time past the newest record (or garbage) would make a later abnormal
    recovery start too late: clamp every field to what the store really holds."""
    newest = store._last_dispatched_ts or _newest_queued_ts(store)
    cp = store.checkpoint
    limit = int(time.time() * 1000) + 86_400_000
    for name in ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp"):
        v = getattr(cp, name)
        if v < 0 or v > limit or (newest and v > newest):
            setattr(cp, name, min(max(v, 0), newest) if 0 <= v <= limit else 0)
    if cp.master_flushed_offset < 0 or cp.confirm_phy_offset < 0:
        cp.master_flushed_offset = cp.confirm_phy_offset = 0
    store.write_checkpoint()
