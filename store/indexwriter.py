"""Writing index files (IndexFile.putKey, IndexService) and querying the live set."""
from __future__ import annotations

import struct
import time
from datetime import datetime
from pathlib import Path

from .codes import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, INT32_MAX
from .indexfile import _ENTRY, _HEADER, IndexFile, IndexHeader, index_file_size
from .javahash import index_key_hash
from .layout import is_index_file_name
from .mappedfile import MappedFile

_SLOT = struct.Struct(">i")


def index_file_name(now_ms: int) -> str:
    """UtilAll.timeMillisToHumanString: yyyyMMddHHmmssSSS in local time."""
    dt = datetime.fromtimestamp(now_ms / 1000)
    return dt.strftime("%Y%m%d%H%M%S") + f"{now_ms % 1000:03d}"


class IndexFileWriter:
    def __init__(self, mf: MappedFile, slots: int, entries: int, header: IndexHeader | None = None):
        self.mf = mf
        self.slots, self.max_entries = slots, entries
        self.reader = IndexFile(mf.mm, mf.path, slots, entries)
        self.header = header or self.reader.header
        if self.header.index_count <= 0:
            self.header.index_count = 1
        self.entries_at = INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE

    @property
    def full(self) -> bool:
        return self.header.index_count >= self.max_entries

    def put_key(self, key: str, phy_offset: int, store_ts: int) -> bool:
        h = self.header
        if self.full:
            return False
        key_hash = index_key_hash(key)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.slots) * INDEX_SLOT_SIZE
        slot_value = _SLOT.unpack_from(self.mf.mm, slot_pos)[0]
        if slot_value <= 0 or slot_value > h.index_count:
            slot_value = 0
        diff = 0 if h.begin_timestamp <= 0 else (store_ts - h.begin_timestamp) // 1000
        diff = 0 if diff < 0 else min(diff, INT32_MAX)
        n = h.index_count
        _ENTRY.pack_into(self.mf.mm, self.entries_at + n * INDEX_ENTRY_SIZE, key_hash, phy_offset, diff, slot_value)
        _SLOT.pack_into(self.mf.mm, slot_pos, n)
        if n <= 1:
            h.begin_phy_offset, h.begin_timestamp = phy_offset, store_ts
        if slot_value == 0:
            h.hash_slot_count += 1
        h.index_count = n + 1
        h.end_phy_offset, h.end_timestamp = phy_offset, store_ts
        _HEADER.pack_into(self.mf.mm, 0, h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset,
                          h.hash_slot_count, h.index_count)
        return True

    def flush(self) -> None:
        self.mf.mm.flush()

    def close(self) -> None:
        self.mf.close()


class IndexService:
    def __init__(self, directory: Path, slots: int, entries: int):
        self.dir = Path(directory)
        self.slots, self.entries = slots, entries
        self.size = index_file_size(slots, entries)
        self.files: list[IndexFileWriter] = []
        self.on_full = None   # callback(end_timestamp) once a full file is flushed

    def load(self, checkpoint_index_ts: int | None = None) -> list[Path]:
        """Open the files; after an abnormal exit, files newer than the checkpoint are removed."""
        self.dir.mkdir(parents=True, exist_ok=True)
        removed = []
        for p in sorted(x for x in self.dir.iterdir() if x.is_file() and is_index_file_name(x.name)):
            mf = MappedFile(p, 0, self.size)
            w = IndexFileWriter(mf, self.slots, self.entries)
            if checkpoint_index_ts is not None and w.header.end_timestamp > checkpoint_index_ts:
                mf.destroy()
                removed.append(p)
                continue
            self.files.append(w)
        return removed

    @property
    def end_phy_offset(self) -> int:
        return self.files[-1].header.end_phy_offset if self.files else 0

    def _writable(self, now_ms: int) -> IndexFileWriter:
        last = self.files[-1] if self.files else None
        if last is not None and not last.full:
            return last
        name = index_file_name(now_ms)
        while (self.dir / name).exists():
            now_ms += 1
            name = index_file_name(now_ms)
        header = IndexHeader()
        if last is not None:
            last.flush()
            if self.on_full:
                self.on_full(last.header.end_timestamp)
            header = IndexHeader(last.header.end_timestamp, last.header.end_timestamp,
                                 last.header.end_phy_offset, last.header.end_phy_offset, 0, 1)
        mf = MappedFile(self.dir / name, 0, self.size, create=True)
        w = IndexFileWriter(mf, self.slots, self.entries, header)
        mf.write_at(0, header.encode())
        self.files.append(w)
        return w

    def put(self, topic: str, keys: list[str], phy_offset: int, store_ts: int) -> None:
        """IndexService.buildIndex for one record; records below the last file's endPhyOffset are skipped."""
        if self.files and phy_offset < self.files[-1].header.end_phy_offset:
            return
        for key in keys:
            w = self._writable(int(time.time() * 1000))
            if not w.put_key(f"{topic}#{key}", phy_offset, store_ts):
                w = self._writable(int(time.time() * 1000))
                w.put_key(f"{topic}#{key}", phy_offset, store_ts)

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[int], int, int]:
        """(offsets, indexLastUpdateTimestamp, indexLastUpdatePhyoffset), newest file first."""
        found: list[int] = []
        last_ts = last_phy = 0
        for w in reversed(self.files):
            h = w.header
            if not last_ts:
                last_ts, last_phy = h.end_timestamp, h.end_phy_offset
            if begin <= h.end_timestamp and h.begin_timestamp <= end:
                w.reader.header = h
                found += w.reader.select_offsets(f"{topic}#{key}", begin, end, max_num - len(found))
            if h.begin_timestamp < begin or len(found) >= max_num:
                break
        return found, last_ts, last_phy

    def flush(self) -> None:
        for w in self.files[-1:]:
            w.flush()

    def delete_before(self, phy_offset: int) -> None:
        while len(self.files) > 1 and self.files[0].header.end_phy_offset < phy_offset:
            self.files.pop(0).mf.destroy()

    def close(self) -> None:
        for w in self.files:
            w.flush()
            w.close()
