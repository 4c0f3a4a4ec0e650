"""Retention (CleanCommitLogService / CleanConsumeQueueService / IndexService.deleteExpiredFile).

Commitlog files older than fileReservedTime hours are deleted at the deleteWhen hours (e.g.
"04" or "04;16"), or at any time when the disk holding the commitlog is fuller than
diskMaxUsedSpaceRatio percent (then the oldest files go first, expired or not). The newest file
is never deleted. Consume queue and index files that only point below the new commitlog minimum
follow, and each queue's minimum offset is corrected.
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


def is_delete_hour(delete_when: str, now_s: float) -> bool:
    hour = time.localtime(now_s).tm_hour
    return any(h.strip().isdigit() and int(h) == hour for h in delete_when.split(";"))


def disk_used_ratio(path) -> float:
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    return 0.0 if total == 0 else 100.0 * (total - st.f_bavail * st.f_frsize) / total


def delete_expired(store, now_s: float | None = None, force: bool = False) -> RetentionReport:
    """One cleaning round; `force` deletes expired files whatever the hour (mqadmin deleteExpiredCommitLog)."""
    cfg = store.cfg
    now_s = time.time() if now_s is None else now_s
    report = RetentionReport()
    disk_full = disk_used_ratio(cfg.commitlog_dir) > cfg.diskMaxUsedSpaceRatio
    if not (force or disk_full or is_delete_hour(cfg.deleteWhen, now_s)):
        return report
    report.reason = "disk full" if disk_full else ("forced" if force else f"deleteWhen {cfg.deleteWhen}")
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
            if disk_full and disk_used_ratio(cfg.commitlog_dir) <= cfg.diskMaxUsedSpaceRatio:
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
