"""Writing index files (IndexFile.putKey, IndexService) and querying the live set."""
from __future__ import annotations

import os
import struct
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from .codes import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, INT32_MAX
from .indexfile import _ENTRY, _HEADER, IndexFile, IndexHeader, index_file_size
from .javahash import index_key_hash
from .kernel import kernel
from .layout import is_index_file_name
from .mappedfile import MappedFile

_SLOT = struct.Struct(">i")
_ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("slot", ">i4")])
_MASK = np.uint64(0xFFFFFFFF)
_POW = np.ones(1, np.uint64)        # 31**i mod 2**32, grown on demand
_INV = np.ones(1, np.uint64)        # (31**-1)**i mod 2**32 (31 is odd, so invertible)
_INV31 = pow(31, -1, 1 << 32)


def _grow(n: int) -> None:
    global _POW, _INV
    while len(_POW) < n:
        m = len(_POW)
        _POW = np.concatenate([_POW, (_POW * np.uint64(pow(31, m, 1 << 32))) & _MASK])
        _INV = np.concatenate([_INV, (_INV * np.uint64(pow(_INV31, m, 1 << 32))) & _MASK])


def index_key_hashes(keys: list[str]) -> np.ndarray:
    """index_key_hash of every key at once (int64), for a batch of index entries.

    Java's hash of key i is sum(c_t * 31**(end_i-1-t)) over its UTF-16 units: one weighted sum
    over all keys' units with weights 31**(N-1-t), cut per key (reduceat) and divided by
    31**(N-end_i), which mod 2**32 is a multiplication by the inverse of 31."""
    units = np.frombuffer("".join(keys).encode("utf-16-be"), ">u2").astype(np.uint64)
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    n = len(units)
    if n != int(lengths.sum()):     # characters outside the BMP are two UTF-16 units
        lengths = np.array([len(k.encode("utf-16-be")) // 2 for k in keys], np.int64)
    _grow(n + 1)
    ends = np.cumsum(lengths)
    sums = np.add.reduceat(units * _POW[:n][::-1], ends - lengths) & _MASK
    h = ((sums * _INV[n - ends]) & _MASK).astype(np.int64)
    # abs() of the signed int; Integer.MIN_VALUE (0x80000000) gives 0
    return np.where(h < 0x80000000, h, np.where(h > 0x80000000, (1 << 32) - h, 0))


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

    def put_many(self, keys: list[str], phys: np.ndarray, stamps: np.ndarray) -> None:
        """put_key for each (key, phys[i], stamps[i]) in order, with the same bytes; the caller
        makes sure they fit and that the header's begin fields are set (index_count > 1)."""
        h = self.header
        k = len(keys)
        n0 = h.index_count
        if kernel is not None:
            h.hash_slot_count += kernel.index_put(self.mf.mm, self.slots, self.max_entries, n0, h.begin_timestamp,
                                                  keys, phys.astype(np.int64, copy=False),
                                                  stamps.astype(np.int64, copy=False))
            self._close_batch(k, phys, stamps)
            return
        hashes = index_key_hashes(keys)
        slots = hashes % self.slots
        pos = np.arange(k)
        slot_table = np.frombuffer(self.mf.mm, ">i4", self.slots, INDEX_HEADER_SIZE)
        in_file = slot_table[slots].astype(np.int64)
        # The entry before each one in its slot's chain: an earlier entry of this batch with the
        # same slot, else what the slot held (if valid when that entry is put, as putKey checks).
        order = np.lexsort((pos, slots))
        run = slots[order]
        same = np.zeros(k, bool)
        same[1:] = run[1:] == run[:-1]
        prev = np.full(k, -1, np.int64)
        prev[order[same]] = order[np.flatnonzero(same) - 1]
        valid = (in_file > 0) & (in_file <= n0 + pos)
        chain = np.where(prev >= 0, n0 + prev, np.where(valid, in_file, 0))
        if h.begin_timestamp <= 0:
            diff = np.zeros(k, np.int64)
        else:
            diff = np.clip((stamps - h.begin_timestamp) // 1000, 0, INT32_MAX)
        entries = np.empty(k, _ENTRY_DTYPE)
        entries["hash"], entries["phy"], entries["diff"], entries["slot"] = hashes, phys, diff, chain
        at = self.entries_at + n0 * INDEX_ENTRY_SIZE
        self.mf.mm[at:at + k * INDEX_ENTRY_SIZE] = entries.tobytes()
        last = np.ones(k, bool)
        last[:-1] = run[1:] != run[:-1]
        slot_table[run[last]] = n0 + order[last]
        del slot_table
        h.hash_slot_count += int(np.count_nonzero(chain == 0))
        self._close_batch(k, phys, stamps)

    def _close_batch(self, k: int, phys: np.ndarray, stamps: np.ndarray) -> None:
        h = self.header
        h.index_count += k
        h.end_phy_offset, h.end_timestamp = int(phys[-1]), int(stamps[-1])
        _HEADER.pack_into(self.mf.mm, 0, h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset,
                          h.hash_slot_count, h.index_count)

    def repair_slots(self) -> int:
        """Hash slots a kill left pointing past the header's count (entries written, the header
        not yet): each follows its entries' prevIndex back to one the header counts. Returns how
        many slots changed."""
        count = self.header.index_count
        slots = np.frombuffer(self.mf.mm, ">i4", self.slots, INDEX_HEADER_SIZE)
        bad = np.flatnonzero(slots >= count).tolist()
        for s in bad:
            v = int(slots[s])
            while v >= count:
                prev = _SLOT.unpack_from(self.mf.mm, self.entries_at + v * INDEX_ENTRY_SIZE + 16)[0] \
                    if v < self.max_entries else 0
                v = prev if 0 <= prev < v else 0
            slots[s] = v
        del slots
        return len(bad)

    def cut_from(self, phy_offset: int, ts_of) -> int:
        """Entries of records at or past `phy_offset` removed (a replica's truncation): the header
        counts fewer, the slots that led to a removed entry follow its chain back (repair_slots),
        the removed entries are zeroed, and the end fields name the last kept entry (its store time
        from `ts_of(offset)`). Returns the entries removed."""
        h = self.header
        count = h.index_count
        if count <= 1:
            return 0
        at = self.entries_at + INDEX_ENTRY_SIZE
        phys = np.frombuffer(self.mf.mm, _ENTRY_DTYPE, count - 1, at)["phy"]
        past = np.flatnonzero(phys >= phy_offset)
        if not past.size:
            return 0
        keep = int(past[0]) + 1          # the new index_count: entries 1 .. keep - 1 stay
        last_phy = int(phys[keep - 2]) if keep > 1 else h.begin_phy_offset
        del phys
        h.index_count = keep
        self.repair_slots()
        self.mf.mm[self.entries_at + keep * INDEX_ENTRY_SIZE:self.entries_at + count * INDEX_ENTRY_SIZE] = \
            bytes((count - keep) * INDEX_ENTRY_SIZE)
        slots = np.frombuffer(self.mf.mm, ">i4", self.slots, INDEX_HEADER_SIZE)
        h.hash_slot_count = int(np.count_nonzero(slots))
        del slots
        if keep > 1:
            h.end_phy_offset = last_phy
            h.end_timestamp = ts_of(last_phy) or h.begin_timestamp
        _HEADER.pack_into(self.mf.mm, 0, h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset,
                          h.hash_slot_count, h.index_count)
        return count - keep

    def flush(self) -> None:
        os.fdatasync(self.mf.fd)      # not mmap.flush: that holds the GIL for the whole write-back

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

    def repair_tail(self) -> int:
        """After a kill: mend the hash slots of the file being written (IndexFileWriter.repair_slots)."""
        return self.files[-1].repair_slots() if self.files else 0

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

    def _indexed_through(self) -> int:
        """The offset of the last record indexed (-1: none). IndexService.buildIndex skips records
        below the last file's endPhyOffset; mqtool skips that record too (Java indexes it again when
        a restart or a role change dispatches it twice, and its keys then answer it twice)."""
        if not self.files:
            return -1
        last = self.files[-1]
        if last.header.index_count > 1 or len(self.files) > 1:
            return last.header.end_phy_offset
        return last.header.end_phy_offset - 1

    def put(self, topic: str, keys: list[str], phy_offset: int, store_ts: int) -> None:
        """IndexService.buildIndex for one record; records already indexed are skipped."""
        if phy_offset <= self._indexed_through():
            return
        for key in keys:
            w = self._writable(int(time.time() * 1000))
            if not w.put_key(f"{topic}#{key}", phy_offset, store_ts):
                w = self._writable(int(time.time() * 1000))
                w.put_key(f"{topic}#{key}", phy_offset, store_ts)

    def put_many(self, keys: list[str], phys: list[int], stamps: list[int]) -> None:
        """buildIndex for many records in commit log order: keys are "topic#key" strings, one per
        entry, with the offset and store timestamp of their record."""
        i, k = 0, len(keys)
        if not k:
            return
        phys, stamps = np.asarray(phys, np.int64), np.asarray(stamps, np.int64)    # (once: slices are views)
        if self.files:                    # the leading entries the last file already has: skipped
            after = phys > self._indexed_through()
            i = int(after.argmax()) if after.any() else k
        if not np.all(phys[i + 1:] >= phys[i:k - 1]):    # not in order: one by one
            for j in range(i, k):
                self._put_one(keys[j], int(phys[j]), int(stamps[j]))
            return
        while i < k:
            w = self.files[-1] if self.files else None
            if w is None or w.full or w.header.index_count <= 1 or k - i < 4:
                self._put_one(keys[i], int(phys[i]), int(stamps[i]))
                i += 1
                continue
            j = min(k, i + w.max_entries - w.header.index_count)
            w.put_many(keys[i:j], phys[i:j], stamps[i:j])
            i = j

    def _put_one(self, key: str, phy_offset: int, store_ts: int) -> None:
        w = self.files[-1] if self.files else None
        if w is None or w.full:
            w = self._writable(int(time.time() * 1000))
        w.put_key(key, phy_offset, store_ts)

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

    def truncate(self, phy_offset: int, ts_of) -> int:
        """A replica's truncation: every entry of a record at or past `phy_offset` removed, newest
        file first; a file left without entries is deleted, so the records appended again after
        the cut are indexed (`put` skips records below the last file's end). Returns the entries
        removed."""
        removed = 0
        while self.files:
            w = self.files[-1]
            removed += w.cut_from(phy_offset, ts_of)
            if w.header.index_count > 1 or w.header.end_phy_offset < phy_offset:
                break
            self.files.pop().mf.destroy()
        return removed

    def delete_before(self, phy_offset: int) -> None:
        while len(self.files) > 1 and self.files[0].header.end_phy_offset < phy_offset:
            self.files.pop(0).mf.destroy()

    def close(self) -> None:
        for w in self.files:
            w.flush()
            w.close()
