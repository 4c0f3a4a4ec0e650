"""`mqtool store recover ROOT`: the store's recovery, offline: a plan by default, `--apply` to carry it out."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.errors import UsageError
from mqtool.cli.output import console, count, emit_json, fmt_time


def recover(
    root: Annotated[Path, typer.Argument(help="The store root (storePathRootDir) of a stopped broker.")],
    apply: Annotated[bool, typer.Option("--apply", help="Carry the plan out (cut bytes are saved first).")] = False,
    mapped_file_size_commitlog: Annotated[Optional[int], typer.Option(
        "--mapped-file-size-commitlog", min=1, help="mappedFileSizeCommitLog (default: the files' size).")] = None,
    mapped_file_size_consume_queue: Annotated[Optional[int], typer.Option(
        "--mapped-file-size-consume-queue", min=20, help="mappedFileSizeConsumeQueue (default: the files' size).")] = None,
    max_hash_slot_num: Annotated[Optional[int], typer.Option("--max-hash-slot-num", min=1)] = None,
    max_index_num: Annotated[Optional[int], typer.Option("--max-index-num", min=1)] = None,
    normal: Annotated[bool, typer.Option("--normal/--abnormal", help="Force the recovery mode "
                                         "(default: abnormal when the abort file exists).")] = None,
    config: Annotated[Optional[Path], typer.Option(
        "-c", "--config", help="The broker's broker.conf: its store sizes, checkCRCOnRecover and "
                               "messageIndexSafe, so the plan is the one the broker would run.")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Plan (or with --apply, run) crash recovery on a stopped broker's store."""
    from mqtool_store.errors import StoreLockedError
    from mqtool_store.layout import is_store_root
    from mqtool_store.lockfile import is_locked
    from mqtool_store.messagestore import MessageStore
    from mqtool_store.recovery import compute_plan
    from mqtool_store.storeconfig import MessageStoreConfig, apply_store_properties
    if not root.exists():
        raise UsageError(f"{root}: no such directory")
    if not is_store_root(root):
        raise UsageError(f"{root}: not a store root (no commitlog, consumequeue or checkpoint inside)")
    if is_locked(root):
        raise StoreLockedError("the store's lock is held: stop the broker first", path=root / "lock")
    conf = broker_conf_settings(config, RECOVERY_KEYS)     # broker.conf's, then the options given here
    for key, value in (("mappedFileSizeCommitLog", mapped_file_size_commitlog),
                       ("mappedFileSizeConsumeQueue", mapped_file_size_consume_queue),
                       ("maxHashSlotNum", max_hash_slot_num), ("maxIndexNum", max_index_num)):
        if value is not None:
            conf[key] = str(value)
    if "maxIndexNum" in conf and "maxHashSlotNum" not in conf:
        if max_index_num is not None:
            raise UsageError("--max-index-num needs --max-hash-slot-num (without both, they are read from the "
                             "index files)")
        conf["maxHashSlotNum"] = str(MessageStoreConfig().maxHashSlotNum)   # beside broker.conf's: the default
    checks = MessageStoreConfig()
    try:
        apply_store_properties(checks, conf)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    abnormal = None if normal is None else not normal
    slots_given = "maxHashSlotNum" in conf
    geometry = (checks.maxHashSlotNum, checks.maxIndexNum if "maxIndexNum" in conf else None) if slots_given else None
    index_safe = checks.messageIndexEnable and checks.messageIndexSafe
    plan = compute_plan(root, None, checks.mappedFileSizeCommitLog if "mappedFileSizeCommitLog" in conf else None,
                        abnormal, checks.checkCRCOnRecover, geometry, index_safe, checks.recoveryBackupKeep,
                        checks.fileReservedTime)
    if apply:
        cfg = MessageStoreConfig(storePathRootDir=str(root))
        props = {**conf, "mappedFileSizeCommitLog": conf.get("mappedFileSizeCommitLog", str(_commitlog_size(root))),
                 "mappedFileSizeConsumeQueue": conf.get("mappedFileSizeConsumeQueue", str(_cq_size(root)))}
        if geometry:
            props.update(maxHashSlotNum=str(geometry[0]), maxIndexNum=str(geometry[1] or 4 * geometry[0]))
        else:
            slots = _index_slots(root)
            if slots:
                props.update(maxHashSlotNum=str(slots[0]), maxIndexNum=str(slots[1]))
        apply_store_properties(cfg, props)
        if abnormal is not None:
            (root / "abort").touch() if abnormal else (root / "abort").unlink(missing_ok=True)
        store = MessageStore(cfg).start()
        plan = store.recovery_report
        store.shutdown()
    if json_out:
        emit_json(plan.to_dict() | {"applied": apply})
        return
    _print(plan, apply)


RECOVERY_KEYS = ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum",
                 "checkCRCOnRecover", "messageIndexEnable", "messageIndexSafe", "recoveryBackupKeep",
                 "fileReservedTime")


def broker_conf_settings(config: Path | None, keys=None) -> dict[str, str]:
    """The given keys (all when None) of a broker.conf, for an offline tool that should act as that
    broker would; {} without one."""
    if config is None:
        return {}
    from mqtool.broker.config import load_broker_conf
    if not config.is_file():
        raise UsageError(f"{config}: no such broker config file")
    return {k: v for k, v in load_broker_conf(config).items() if keys is None or k in keys}


def _commitlog_size(root: Path) -> int:
    from mqtool_store.mappedfiles import guess_mapped_size, list_mapped_files
    d = root / "commitlog"
    return guess_mapped_size(list_mapped_files(d)) if d.is_dir() else 1024 * 1024 * 1024


def _cq_size(root: Path) -> int:
    """The size the broker's consume queue files have (6,000,000 by default)."""
    from mqtool_store.codes import DEFAULT_MAPPED_FILE_SIZE_CONSUME_QUEUE
    from mqtool_store.storesizes import consume_queue_file_size
    return consume_queue_file_size(root) or DEFAULT_MAPPED_FILE_SIZE_CONSUME_QUEUE


def _index_slots(root: Path):
    from mqtool_store.indexfile import infer_geometry
    d = root / "index"
    files = sorted(d.iterdir()) if d.is_dir() else []
    return infer_geometry(files[0].stat().st_size) if files else None


def _print(plan, applied: bool) -> None:
    console.print(f"recovery mode: {'abnormal' if plan.abnormal else 'normal'} ({plan.mode_reason}); "
                  f"scanning from {plan.start_file or '-'}", markup=False)
    console.print(f"valid commitlog data ends at offset {plan.valid_end} ({count(plan.records_scanned, 'record')} checked"
                  f"{', stopped: ' + plan.stop_reason if plan.stop_reason else ''})", markup=False)
    if plan.abnormal:
        console.print(f"the checkpoint vouches for records stored before {fmt_time(plan.checkpoint.get('vouches_before'))}: "
                      f"unvouched tail from commitlog offset {plan.vouched_until}")
    verb = "cut" if applied else "would cut"
    for c in plan.commitlog_cuts + plan.cq_cuts:
        console.print(f"  {verb} {count(c.length, 'byte')} of {c.path} from {c.position}: {c.reason}", markup=False)
    for p in plan.commitlog_files_removed:
        console.print(f"  {'removed' if applied else 'would remove'} {p} (after the end of valid data)", markup=False)
    for p in plan.index_files_rebuilt:
        console.print(f"  {'rebuilt' if applied else 'would rebuild'} index file {p}", markup=False)
    for p in plan.index_files_kept:
        console.print(f"  {'kept' if applied else 'would keep'} index file {p} (written past the checkpoint; "
                      "filled from where it stops)", markup=False)
    were = "were" if applied else "would be"
    console.print(f"consume queues and index {were} re-dispatched from commitlog offset {plan.redispatch_from}"
                  + (f", the index alone from {plan.index_rebuild_from}" if plan.index_rebuild_from is not None
                     else "")
                  + (f": {count(plan.records_redispatched, 'record')}" if applied else ""))
    if plan.backup_bytes:
        console.print(f"{'kept' if applied else 'would keep'} {count(plan.backup_bytes, 'byte')} cut from the commit log "
                      f"under {plan.backup_dir} (consume queues and index are rebuilt, not copied)", markup=False)
    for p in plan.backups_removed:
        console.print(f"  {'removed' if applied else 'would remove'} old backup {p} (recoveryBackupKeep "
                      f"{plan.backup_keep}, or older than fileReservedTime)", markup=False)
    for p in plan.backup_copies_removed:
        console.print(f"  {'removed' if applied else 'would remove'} {p} (a copy of rebuilt files)", markup=False)
    if not plan.changes:
        console.print("nothing to cut: the store is consistent" + ("" if applied else "; run with --apply to "
                                                                   "re-dispatch anyway"))
    elif not applied:
        console.print("run again with --apply to carry this out (cut commit log bytes are saved first)")
