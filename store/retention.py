"""Retention (CleanCommitLogService / CleanConsumeQueueService / IndexService.deleteExpiredFile).

Commitlog files older than fileReservedTime hours are deleted at the deleteWhen hours (e.g.
"04" or "04;16"), or at any hour when the disk holding the commitlog is fuller than
diskMaxUsedSpaceRatio percent; past diskSpaceCleanForciblyRatio (85%, a system property in Java)
with cleanFileForciblyEnable, the oldest files go too, expired or not, until the disk is below
diskMaxUsedSpaceRatio again. The newest file is never deleted. Consume queue and index files
that only point below the new commitlog minimum follow, and each queue's minimum offset is
corrected.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from .consumequeue import read_units, valid_prefix


@dataclass
class RetentionReport:
    commitlog_deleted: list[str] = field(default_factory=list)
    consumequeue_deleted: list[str] = field(default_factory=list)
    index_deleted: list[str] = field(default_factory=list)
    reason: str = ""


DISK_SPACE_CLEAN_FORCIBLY_RATIO = 0.85   # rocketmq.broker.diskSpaceCleanForciblyRatio's default


def is_delete_hour(delete_when: str, now_s: float) -> bool:
    hour = time.localtime(now_s).tm_hour
    return any(h.strip().isdigit() and int(h) == hour for h in delete_when.split(";"))


def disk_used_ratio(path) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent (4.9.8): the share of the partition in use, -1 when
    `path` is missing. Blocks reserved for root count as neither used nor usable, as in `df`'s Use%:
    counting them as used made a disk with root-reserved (or otherwise unavailable) space look full,
    and the cleaner then deleted the oldest commit log files of a store that was nowhere near full."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    return used_ratio(st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize, st.f_bavail * st.f_frsize)


def used_ratio(total: int, free: int, usable: int) -> float:
    """File.getTotalSpace/getFreeSpace/getUsableSpace -> used / (used + usable), rounded up to a percent."""
    if total <= 0:
        return -1.0
    used = total - free
    entire = used + usable
    if entire <= 0:
        return -1.0
    return (used * 100 // entire + (1 if used * 100 % entire else 0)) / 100.0


def delete_expired(store, now_s: float | None = None, force: bool = False,
                   used: float | None = None) -> RetentionReport:
    """One cleaning round; `force` deletes expired files whatever the hour (mqadmin deleteExpiredCommitLog).
    `used`: the disk's used share to act on (default: disk_used_ratio of the commit log's disk)."""
    cfg = store.cfg
    now_s = time.time() if now_s is None else now_s
    report = RetentionReport()
    ratio = cfg.diskMaxUsedSpaceRatio / 100.0
    measured = used is None
    if measured:
        used = disk_used_ratio(cfg.commitlog_dir)
    space_full = used < 0 or used > ratio                 # isSpaceToDelete: unknown counts as full
    disk_full = cfg.cleanFileForciblyEnable and used > DISK_SPACE_CLEAN_FORCIBLY_RATIO   # cleanImmediately
    if not (force or space_full or is_delete_hour(cfg.deleteWhen, now_s)):
        return report
    report.reason = "disk full" if space_full else ("forced" if force else f"deleteWhen {cfg.deleteWhen}")
    keep_s = cfg.fileReservedTime * 3600
    with store.put_lock:
        files = store.commitlog.files
        while len(files) > 1:
            f = files[0]
            expired = now_s - os.stat(f.path).st_mtime >= keep_s
            if not (expired or disk_full):
                break
            files.pop(0)
            report.commitlog_deleted.append(str(f.path))
            f.destroy()
            if disk_full and measured and 0 <= disk_used_ratio(cfg.commitlog_dir) <= ratio:
                disk_full = False
        min_offset = store.commitlog.min_offset
        for cq in store.queues.values():
            qfiles = cq.files.files
            while len(qfiles) > 1:
                units = read_units(qfiles[0].mm, 0, qfiles[0].write_pos)
                n = valid_prefix(units)
                last_end = int(units["offset"][n - 1]) + int(units["size"][n - 1]) if n else -1
                del units
                if last_end > min_offset:
                    break
                gone = qfiles.pop(0)
                report.consumequeue_deleted.append(str(gone.path))
                gone.destroy()
            cq.correct_min_offset(min_offset)
        before = [w.mf.path for w in store.index.files]
        store.index.delete_before(min_offset)
        after = {w.mf.path for w in store.index.files}
        report.index_deleted = [str(p) for p in before if p not in after]
    return report
