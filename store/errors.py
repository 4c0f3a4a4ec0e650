"""Every error the store package raises. The CLI maps these to one-line messages."""
from __future__ import annotations


class StoreError(Exception):
    """Base class. `path` and `offset` say where, when known."""

    def __init__(self, message: str, path: str | None = None, offset: int | None = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.offset = offset
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path
            if self.offset is not None:
                where += f" at offset {self.offset}"
            where += ": "
        return where + self.message


class FormatError(StoreError):
    """Bytes that are not what the format says they must be."""


class WrongKindError(StoreError):
    """A path is not a file or directory of the kind asked for."""


class NotFoundError(StoreError):
    """A path or an entry does not exist."""


class ReplicationError(StoreError):
    """Replicated bytes that cannot go where they are said to belong (HA offsets out of step)."""


class StoreLockedError(StoreError):
    """Another process holds the store's lock."""


class CompressionUnavailable(StoreError):
    """A body is compressed with a codec whose library is not installed."""
