"""ROOT/recovery-backup-<time>/: what recovery cuts that nothing can rebuild, and its pruning.

Only commit log bytes are kept (a torn or corrupt tail, files after a gap): consume queues and
index files are rebuilt from the commit log, so copies of them are never made, and ones an older
mqtool left are removed. Backups go after `fileReservedTime` hours or beyond the newest
`recoveryBackupKeep` (an mqtool key; RocketMQ keeps no such copies).
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "recovery-backup-"
DERIVED = ("consumequeue", "index")      # rebuilt by recovery: never worth a copy


def new_backup_name(now: float | None = None) -> str:
    now = time.time() if now is None else now
    return f"{PREFIX}{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}-{int(now * 1000) % 1000:03d}"


def _target(root: Path, dest: Path, src: Path) -> Path:
    return dest / src.relative_to(root) if src.is_relative_to(root) else dest / src.name


def save_cut_bytes(root: Path, dest: Path, cuts, removed_files) -> int:
    """Copy each cut's bytes (as FILE.at-<position>) and each removed commit log file under
    `dest`, paths kept relative to the root; returns the bytes written."""
    written = 0
    for cut in cuts:
        src = Path(cut.path)
        target = _target(root, dest, src)
        target = target.with_name(f"{target.name}.at-{cut.position}")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(src, "rb") as f:
            f.seek(cut.position)
            data = f.read(cut.length)
        target.write_bytes(data)
        written += len(data)
    for p in removed_files:
        src = Path(p)
        target = _target(root, dest, src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        written += src.stat().st_size
    return written


@dataclass
class Pruning:
    kept: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)              # whole backups: too old or too many
    derived_removed: list[str] = field(default_factory=list)      # copies of queues / index an older mqtool made


def list_backups(root: Path) -> list[Path]:
    """The root's backups, oldest first (their names sort by time)."""
    return sorted(p for p in Path(root).glob(PREFIX + "*") if p.is_dir())


def plan_pruning(root: Path, keep: int, reserved_hours: int, extra: int = 0, now: float | None = None) -> Pruning:
    """Which backups would go: older than `reserved_hours` (by modification time), or beyond the
    newest `keep` counting `extra` new ones about to be made; and derived copies inside the rest."""
    now = time.time() if now is None else now
    out = Pruning()
    backups = list_backups(root)
    limit = max(0, keep - extra)
    for i, b in enumerate(backups):
        too_many = len(backups) - i > limit
        too_old = reserved_hours >= 0 and now - b.stat().st_mtime > reserved_hours * 3600
        if too_many or too_old:
            out.removed.append(str(b))
            continue
        out.kept.append(str(b))
        out.derived_removed += [str(b / d) for d in DERIVED if (b / d).exists()]
    return out


def prune(pruning: Pruning) -> None:
    for p in pruning.removed + pruning.derived_removed:
        shutil.rmtree(p, ignore_errors=True)
