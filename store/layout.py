"""Where things are in a store root, and what kind of store file a path is."""
from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from .codes import CQ_UNIT_SIZE
from .commitlog import BLANK_MAGIC, MESSAGE_MAGIC, MESSAGE_MAGIC_V2
from .configfiles import config_kind
from .errors import NotFoundError, WrongKindError
from .mappedfiles import is_mapped_file_name


class Kind(str, Enum):
    ROOT = "root"
    COMMITLOG_DIR = "commitlog-dir"
    COMMITLOG_FILE = "commitlog"
    CONSUMEQUEUE_DIR = "consumequeue-dir"
    CONSUMEQUEUE_FILE = "consumequeue"
    INDEX_DIR = "index-dir"
    INDEX_FILE = "index"
    CHECKPOINT = "checkpoint"
    CONFIG = "config"
    ABORT = "abort"
    LOCK = "lock"
    TIMERLOG = "timerlog"            # 5.x timer store: timerlog/ (or one of its files)
    TIMERWHEEL = "timerwheel"
    TIMERCHECK = "timercheck"


@dataclass(frozen=True)
class StorePaths:
    """StorePathConfigHelper: the standard layout under storePathRootDir."""
    root: Path
    commitlog: Path

    @classmethod
    def of(cls, root: str | os.PathLike, commitlog: str | os.PathLike | None = None) -> "StorePaths":
        r = Path(root)
        return cls(r, Path(commitlog) if commitlog else r / "commitlog")

    @property
    def consumequeue(self) -> Path:
        return self.root / "consumequeue"

    @property
    def index(self) -> Path:
        return self.root / "index"

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def abort(self) -> Path:
        return self.root / "abort"

    @property
    def lock(self) -> Path:
        return self.root / "lock"


def is_store_root(path: Path) -> bool:
    return path.is_dir() and ((path / "commitlog").is_dir() or (path / "consumequeue").is_dir()
                              or (path / "checkpoint").is_file())


def is_index_file_name(name: str) -> bool:
    return len(name) == 17 and name.isdigit()


def detect_kind(path: str | os.PathLike) -> Kind:
    """The kind of a store path, from its name and place, then its first bytes."""
    p = Path(path)
    if not p.exists():
        raise NotFoundError("no such file or directory", path=p)
    name = p.name
    if p.is_dir():
        if is_store_root(p):
            return Kind.ROOT
        if name == "commitlog" or _holds_commitlog_files(p):
            return Kind.COMMITLOG_DIR
        if name == "consumequeue" or p.parent.name == "consumequeue" or p.parent.parent.name == "consumequeue":
            return Kind.CONSUMEQUEUE_DIR
        if name == "index":
            return Kind.INDEX_DIR
        if name == "timerlog":
            return Kind.TIMERLOG
        raise WrongKindError("not a RocketMQ store directory (no commitlog, consumequeue or checkpoint)", path=p)
    if name == "checkpoint":
        return Kind.CHECKPOINT
    if name in ("timerwheel", "timercheck"):
        return Kind(name)
    if p.parent.name == "timerlog" and is_mapped_file_name(name):
        return Kind.TIMERLOG
    if name == "abort":
        return Kind.ABORT
    if name == "lock":
        return Kind.LOCK
    if config_kind(p) or name.endswith(".json") or name.endswith(".json.bak"):
        return Kind.CONFIG
    if is_index_file_name(name) or p.parent.name == "index":
        return Kind.INDEX_FILE
    if is_mapped_file_name(name):
        if p.parent.name == "commitlog":
            return Kind.COMMITLOG_FILE
        if p.parent.parent.parent.name == "consumequeue":
            return Kind.CONSUMEQUEUE_FILE
        return _sniff_mapped_file(p)
    raise WrongKindError("cannot tell what kind of store file this is; pass --kind", path=p)


def _holds_commitlog_files(p: Path) -> bool:
    names = [e.name for e in os.scandir(p) if e.is_file()]
    return bool(names) and all(is_mapped_file_name(n) for n in names) and \
        _sniff_mapped_file(p / sorted(names)[0]) is Kind.COMMITLOG_FILE


def _sniff_mapped_file(p: Path) -> Kind:
    with open(p, "rb") as f:
        head = f.read(8)
    if len(head) == 8 and int.from_bytes(head[4:8], "big", signed=True) in (
            MESSAGE_MAGIC, MESSAGE_MAGIC_V2, BLANK_MAGIC):
        return Kind.COMMITLOG_FILE
    if p.stat().st_size % CQ_UNIT_SIZE == 0:
        return Kind.CONSUMEQUEUE_FILE
    raise WrongKindError("20-digit file that is neither a commitlog nor a consume queue file; pass --kind", path=p)
