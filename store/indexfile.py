"""Index files: a hash table from `topic#key` to commitlog offsets (IndexFile.java).

    region    offset                     size
    header    0                          40
    slots     40                         maxHashSlotNum * 4     int: newest entry number, 0 = empty
    entries   40 + maxHashSlotNum*4      maxIndexNum * 20

    header:  0 beginTimestamp(8)  8 endTimestamp(8)  16 beginPhyOffset(8)  24 endPhyOffset(8)
             32 hashSlotCount(4)  36 indexCount(4)   (starts at 1; entry 0 is never used)
    entry:   0 keyHash(4)  4 phyOffset(8)  12 timeDiff seconds(4)  16 prevIndex(4)

keyHash = abs(String.hashCode(topic#key)), Integer.MIN_VALUE -> 0; slot = keyHash % slots.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from .codes import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from .errors import FormatError
from .javahash import index_key_hash
from .lazyschema import on_first_use


def _schemas() -> dict:
    from construct import Int32sb, Int64sb, Struct
    return {
        "IndexHeaderSchema": Struct(
            "begin_timestamp" / Int64sb,
            "end_timestamp" / Int64sb,
            "begin_phy_offset" / Int64sb,
            "end_phy_offset" / Int64sb,
            "hash_slot_count" / Int32sb,
            "index_count" / Int32sb,
        ),
        "IndexEntrySchema": Struct(
            "key_hash" / Int32sb,
            "phy_offset" / Int64sb,
            "time_diff" / Int32sb,
            "prev_index" / Int32sb,
        ),
    }


__getattr__ = on_first_use(globals(), _schemas, "IndexHeaderSchema", "IndexEntrySchema")

ENTRY_DTYPE = np.dtype([("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff", ">i4"),
                        ("prev_index", ">i4")])
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_SLOT = struct.Struct(">i")


@dataclass
class IndexHeader:
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1

    def encode(self) -> bytes:
        return _HEADER.pack(self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                            self.end_phy_offset, self.hash_slot_count, self.index_count)


def index_file_size(max_hash_slot_num: int, max_index_num: int) -> int:
    return INDEX_HEADER_SIZE + max_hash_slot_num * INDEX_SLOT_SIZE + max_index_num * INDEX_ENTRY_SIZE


def infer_geometry(file_size: int) -> tuple[int, int]:
    """(maxHashSlotNum, maxIndexNum) from a file size, assuming RocketMQ's 1:4 ratio.

    Both the defaults (5,000,000 / 20,000,000) and any config that keeps the ratio match.
    """
    body = file_size - INDEX_HEADER_SIZE
    per_slot = INDEX_SLOT_SIZE + 4 * INDEX_ENTRY_SIZE
    if body <= 0 or body % per_slot:
        raise FormatError(
            f"index file size {file_size} does not fit maxIndexNum = 4 x maxHashSlotNum; "
            "pass the broker's maxHashSlotNum")
    slots = body // per_slot
    return slots, 4 * slots


class IndexFile:
    """Read view of one index file over a buffer (an mmap)."""

    def __init__(self, buf, path=None, max_hash_slot_num: int | None = None,
                 max_index_num: int | None = None):
        self.buf = buf
        self.path = path
        if len(buf) < INDEX_HEADER_SIZE:
            raise FormatError(f"index file is {len(buf)} bytes, shorter than its 40-byte header", path=path)
        if max_hash_slot_num is None:
            try:
                max_hash_slot_num, max_index_num = infer_geometry(len(buf))
            except FormatError as exc:
                raise FormatError(exc.message, path=path) from None
        elif max_index_num is None:
            max_index_num = (len(buf) - INDEX_HEADER_SIZE - max_hash_slot_num * INDEX_SLOT_SIZE) // INDEX_ENTRY_SIZE
        if index_file_size(max_hash_slot_num, max_index_num) != len(buf):
            raise FormatError(f"index file size {len(buf)} does not match maxHashSlotNum="
                              f"{max_hash_slot_num}, maxIndexNum={max_index_num}", path=path)
        self.slot_num = max_hash_slot_num
        self.index_num = max_index_num
        self.header = IndexHeader(*_HEADER.unpack_from(buf, 0))
        self.entries_at = INDEX_HEADER_SIZE + max_hash_slot_num * INDEX_SLOT_SIZE

    @property
    def used_entries(self) -> int:
        """Entries written: indexCount - 1 (a count <= 0 is read as 1, as Java does)."""
        count = min(max(self.header.index_count, 1), self.index_num)
        return count - 1

    def slots(self) -> np.ndarray:
        return np.frombuffer(self.buf, dtype=">i4", count=self.slot_num, offset=INDEX_HEADER_SIZE)

    def entries(self) -> np.ndarray:
        """Entries 1..indexCount-1 as a structured array (entry 0 is never used)."""
        return np.frombuffer(self.buf, dtype=ENTRY_DTYPE, count=self.used_entries,
                             offset=self.entries_at + INDEX_ENTRY_SIZE)

    def entry(self, n: int) -> tuple[int, int, int, int]:
        return _ENTRY.unpack_from(self.buf, self.entries_at + n * INDEX_ENTRY_SIZE)

    def select_offsets(self, key: str, begin: int = 0, end: int = 2**63 - 1,
                       max_num: int = 2**31) -> list[int]:
        """IndexFile.selectPhyOffset for the full key `topic#key`: newest first, by hash only."""
        found: list[int] = []
        h = self.header
        index_count = h.index_count
        if index_count <= 1:
            return found
        key_hash = index_key_hash(key)
        slot_value = _SLOT.unpack_from(self.buf, INDEX_HEADER_SIZE + (key_hash % self.slot_num) * 4)[0]
        if slot_value <= 0 or slot_value > index_count:
            return found
        cur = slot_value
        steps = 0
        while len(found) < max_num and steps < index_count:    # a damaged chain may loop: bounded
            steps += 1
            if cur > self.index_num - 1 or cur <= 0:
                break
            ehash, phy, diff, prev = self.entry(cur)
            if diff < 0:
                break
            t = h.begin_timestamp + diff * 1000
            if ehash == key_hash and begin <= t <= end:
                found.append(phy)
            if prev <= 0 or prev > index_count or prev == cur or t < begin:
                break
            cur = prev
        return found


def encode_entry(key_hash: int, phy_offset: int, time_diff: int, prev_index: int) -> bytes:
    return _ENTRY.pack(key_hash, phy_offset, time_diff, prev_index)
