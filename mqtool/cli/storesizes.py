"""Which consume queue file size and index geometry an offline writer uses, and why.

In order: the options given, the -c broker.conf, the store's own files (what its broker wrote), a
broker.conf beside the store that names it (`cluster start`'s broker-a-0/broker.conf beside
broker-a-0/store), RocketMQ's defaults. The index geometry is one choice: both numbers from the
same place.
"""
from __future__ import annotations

from pathlib import Path

CQ_KEY = "mappedFileSizeConsumeQueue"
INDEX_KEYS = ("maxHashSlotNum", "maxIndexNum")
OPTIONS = {CQ_KEY: "--mapped-file-size-consume-queue", "maxHashSlotNum": "--max-hash-slot-num",
           "maxIndexNum": "--max-index-num"}


def conf_beside(root: Path) -> tuple[Path, dict[str, str]] | None:
    """The broker.conf in the store root's parent directory, when it is this store's: its
    storePathRootDir names this root, or it names none."""
    from mqtool.broker.config import load_broker_conf
    path = root.parent / "broker.conf"
    if not path.is_file():
        return None
    try:
        props = load_broker_conf(path)
    except (OSError, UnicodeDecodeError):
        return None
    named = props.get("storePathRootDir")
    if named and Path(named).expanduser().resolve() != root.resolve():
        return None
    return path, props


def choose_sizes(root: Path, options: dict[str, int | None], config: Path | None,
                 conf: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """({key: value} for the consume queue size and the index geometry, {CQ_KEY or "index": why})."""
    from mqtool_store.storeconfig import MessageStoreConfig
    from mqtool_store.storesizes import consume_queue_file_size, index_geometry
    defaults = MessageStoreConfig()
    beside = conf_beside(root)
    chosen: dict[str, str] = {}
    why: dict[str, str] = {}

    def pick(keys, what, from_files, files_reason):
        for source, reason in ((options, f"given with {' and '.join(OPTIONS[k] for k in keys if options.get(k))}"),
                               (conf, f"from {config}")):
            if any(source.get(k) is not None for k in keys):
                for k in keys:
                    v = source.get(k)
                    chosen[k] = str(v) if v is not None else str(conf.get(k, getattr(defaults, k)))
                why[what] = reason
                return
        found = from_files(root)
        if found:
            chosen.update(zip(keys, map(str, found if isinstance(found, tuple) else (found,))))
            why[what] = files_reason
            return
        if beside and any(k in beside[1] for k in keys):
            chosen.update({k: beside[1].get(k, str(getattr(defaults, k))) for k in keys})
            why[what] = f"from {beside[0]}, beside the store"
            return
        chosen.update({k: str(getattr(defaults, k)) for k in keys})
        why[what] = "RocketMQ's default: no such files in the store, no broker.conf beside it"

    pick((CQ_KEY,), CQ_KEY, consume_queue_file_size, "the size of the store's consume queue files")
    pick(INDEX_KEYS, "index", index_geometry, "the size of the store's index files")
    return chosen, why


def sizes_line(settings: dict[str, str], why: dict[str, str]) -> str:
    return (f"consume queue files of {int(settings[CQ_KEY]):,} bytes ({why[CQ_KEY]}); index files of "
            f"{int(settings['maxHashSlotNum']):,} hash slots and {int(settings['maxIndexNum']):,} entries "
            f"({why['index']})")
