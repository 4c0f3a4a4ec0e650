"""The sizes a store was written with, read off its own files: the consume queue mapped file size
and the index geometry. Offline tools that write into a store (recovery, a rebuild) use them where
no config says otherwise, so what they write has the sizes the broker's files have."""
from __future__ import annotations

from pathlib import Path

from .consumequeue import list_queues, queue_files
from .errors import FormatError
from .indexfile import infer_geometry
from .layout import StorePaths
from .mappedfiles import guess_mapped_size
from .query import index_files


def consume_queue_file_size(root: str | Path) -> int | None:
    """mappedFileSizeConsumeQueue as the store's consume queue files have it (the common size; a
    queue's one file counts only when it holds whole units), or None when there are none."""
    d = StorePaths.of(root).consumequeue
    if not d.is_dir():
        return None
    sizes = []
    for q in list_queues(d):
        files = queue_files(q)
        if len(files) > 1 or (files and files[0].size % 20 == 0):
            sizes.append(guess_mapped_size(files))
    sizes = [s for s in sizes if s]
    return max(set(sizes), key=sizes.count) if sizes else None


def index_geometry(root: str | Path) -> tuple[int, int] | None:
    """(maxHashSlotNum, maxIndexNum) as the store's index files have them (RocketMQ's 1:4 ratio),
    or None when there are none or their size fits no such geometry."""
    files = index_files(Path(root))
    if not files:
        return None
    try:
        return infer_geometry(files[0].stat().st_size)
    except FormatError:
        return None
