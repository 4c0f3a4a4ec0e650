"""The store's `lock` file (one process per store) and `abort` marker (DefaultMessageStore)."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import StoreLockedError


class StoreLock:
    """fcntl lock on byte 0 of `lock`: the same lock Java's FileChannel.tryLock(0, 1) takes."""

    def __init__(self, root: Path):
        self.path = Path(root) / "lock"
        self.fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:
            os.close(fd)
            raise StoreLockedError("Lock failed, MQ already started: another process holds this store's lock",
                                   path=self.path) from None
        os.pwrite(fd, b"lock", 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self.fd)
                self.fd = None


def is_locked(root: Path) -> bool:
    """Whether another process holds the store's lock (this process does not take it)."""
    path = Path(root) / "lock"
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)
        return False
    finally:
        os.close(fd)


def create_abort(root: Path) -> None:
    p = Path(root) / "abort"
    p.touch()
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_abort(root: Path) -> None:
    (Path(root) / "abort").unlink(missing_ok=True)
