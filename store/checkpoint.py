"""The `checkpoint` file: one 4 KiB page of big-endian longs (StoreCheckpoint.java).

    off  size  field                 4.x  5.x
      0     8  physicMsgTimestamp     yes  yes
      8     8  logicsMsgTimestamp     yes  yes
     16     8  indexMsgTimestamp      yes  yes
     24     8  masterFlushedOffset    0    yes
     32     8  confirmPhyOffset       0    yes
  40..4095     zeros
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .codes import CHECKPOINT_FILE_SIZE
from .errors import FormatError
from .lazyschema import on_first_use


def _schemas() -> dict:
    from construct import Int64sb, Padding, Struct
    return {"CheckpointSchema": Struct(
        "physic_msg_timestamp" / Int64sb,
        "logics_msg_timestamp" / Int64sb,
        "index_msg_timestamp" / Int64sb,
        "master_flushed_offset" / Int64sb,
        "confirm_phy_offset" / Int64sb,
        Padding(CHECKPOINT_FILE_SIZE - 40),
    )}


__getattr__ = on_first_use(globals(), _schemas, "CheckpointSchema")

_FIELDS = struct.Struct(">qqqqq")


@dataclass
class Checkpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @property
    def min_timestamp(self) -> int:
        """StoreCheckpoint.getMinTimestamp: 3 s before the older of physic and logics."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    @property
    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp, self.index_msg_timestamp)

    @property
    def is_5x(self) -> bool:
        return bool(self.master_flushed_offset or self.confirm_phy_offset)

    def encode(self) -> bytes:
        return _FIELDS.pack(self.physic_msg_timestamp, self.logics_msg_timestamp,
                            self.index_msg_timestamp, self.master_flushed_offset,
                            self.confirm_phy_offset).ljust(CHECKPOINT_FILE_SIZE, b"\0")


# Later than this past the reading machine's clock, a time is not one a broker wrote (clocks drift, a day is plenty).
PLAUSIBLE_AHEAD_MS = 86_400_000


def implausible_fields(cp: Checkpoint, now_ms: int) -> list[tuple[int, str]]:
    """(byte offset, why) for each field no broker writes: a time before 1970 or more than a day
    ahead of now_ms, a negative offset. Random bytes fail here, a real checkpoint never does."""
    out = []
    for offset, name in ((0, "physic_msg_timestamp"), (8, "logics_msg_timestamp"), (16, "index_msg_timestamp")):
        value = getattr(cp, name)
        if value < 0 or value > now_ms + PLAUSIBLE_AHEAD_MS:
            out.append((offset, f"{name} {value} is not a plausible time"))
    for offset, name in ((24, "master_flushed_offset"), (32, "confirm_phy_offset")):
        value = getattr(cp, name)
        if value < 0:
            out.append((offset, f"{name} {value} is negative"))
    return out


def decode_checkpoint(buf, path=None) -> Checkpoint:
    """Java reads the first page whatever the file size; fewer than 24 bytes cannot be a checkpoint."""
    if len(buf) < 24:
        raise FormatError(f"checkpoint is {len(buf)} bytes, needs at least 24", path=path)
    data = bytes(buf[:40]).ljust(40, b"\0")
    return Checkpoint(*_FIELDS.unpack(data))
