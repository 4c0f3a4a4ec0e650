"""RocketMQ 5's timer files: `timerlog/` units, `timerwheel` slots, `config/timercheck` (spec rocketmq5.md §1.5).

timerlog unit (TimerLog.UNIT_SIZE = 52, big-endian), written by TimerMessageStore.doEnqueue:

    off  size  field
      0     4  size = 52
      4     8  prevPos: timerlog offset of the previous unit of the same slot (-1: the first)
     12     4  magic: 1 DEFAULT always, |2 ROLL, |4 DELETE
     16     8  currWriteTime: the wheel's write time (ms, a multiple of P) at enqueue
     24     4  delayedTime - currWriteTime (ms); the slot time is currWriteTime + this
     28     8  offsetPy: commit log offset of the record in rmq_sys_wheel_timer
     36     4  sizePy
     40     4  String.hashCode() of REAL_TOPIC (0: none)
     44     8  reserved, 0

A file ends with a 16-byte blank (int bytesLeft, long 0, int BLANK_MAGIC_CODE) where a unit and a
blank no longer fit. timerwheel slot (Slot.SIZE = 32), one flat file of 2 x 604800 slots:

    off  size  field
      0     8  slot time / P (seconds at P = 1000)
      8     8  firstPos (timerlog offset of the slot's first unit)
     16     8  lastPos (its last unit: dequeue walks prevPos from here)
     24     4  num: units (+1 a message, -1 a delete marker)
     28     4  magic, unused (0)

The slot of time T is index (T / P) mod 1209600; it holds T only if its stored time is T / P.
timercheck (TimerCheckpoint.flush), one 4 KiB page of big-endian longs:

    off  field
      0  lastReadTimeMs            (the dequeue pointer)
      8  lastTimerLogFlushPos
     16  lastTimerQueueOffset      (min(commitQueueOffset, masterTimerQueueOffset))
     24  masterTimerQueueOffset    (the enqueue pointer into rmq_sys_wheel_timer/0)
     32  dataVersion.stateVersion
     40  dataVersion.timestamp
     48  dataVersion.counter
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .codes import (TIMER_CHECK_FILE_SIZE, TIMER_SLOT_SIZE, TIMER_SLOTS_TOTAL, TIMER_UNIT_SIZE, MagicCode,
                    TimerMagic)
from .errors import FormatError
from .lazyschema import on_first_use


def _schemas() -> dict:
    """The construct schemas, built on first use (store/lazyschema.py: no command reads through them)."""
    from construct import Const, Int32sb, Int64sb, Padding, Struct
    TimerUnitSchema = Struct(
        "size" / Const(TIMER_UNIT_SIZE, Int32sb),
        "prev_pos" / Int64sb,
        "magic" / Int32sb,
        "write_time" / Int64sb,
        "delay" / Int32sb,
        "offset_py" / Int64sb,
        "size_py" / Int32sb,
        "topic_hash" / Int32sb,
        "reserved" / Int64sb,
    )
    TimerSlotSchema = Struct(
        "time" / Int64sb,
        "first_pos" / Int64sb,
        "last_pos" / Int64sb,
        "num" / Int32sb,
        "magic" / Int32sb,
    )
    TimerCheckSchema = Struct(
        "last_read_time_ms" / Int64sb,
        "last_timer_log_flush_pos" / Int64sb,
        "last_timer_queue_offset" / Int64sb,
        "master_timer_queue_offset" / Int64sb,
        "state_version" / Int64sb,
        "timestamp" / Int64sb,
        "counter" / Int64sb,
        Padding(TIMER_CHECK_FILE_SIZE - 56),
    )
    return {"TimerUnitSchema": TimerUnitSchema, "TimerSlotSchema": TimerSlotSchema, "TimerCheckSchema": TimerCheckSchema}


__getattr__ = on_first_use(globals(), _schemas, "TimerUnitSchema", "TimerSlotSchema", "TimerCheckSchema")


# The fast twins (tests hold them to the schemas).
UNIT = struct.Struct(">iqiqiqiiq")
SLOT = struct.Struct(">qqqii")
CHECK = struct.Struct(">7q")
BLANK = struct.Struct(">iqi")
WHEEL_SLOTS = TIMER_SLOTS_TOTAL * 2
WHEEL_FILE_SIZE = WHEEL_SLOTS * TIMER_SLOT_SIZE       # 38707200
BLANK_MAGIC = int(MagicCode.BLANK_MAGIC_CODE)
PRECISIONS = (100, 200, 500, 1000)
_DELETE, _ROLL = int(TimerMagic.MAGIC_DELETE), int(TimerMagic.MAGIC_ROLL)   # (IntFlag's & is Python code)


def snap_precision(value: int) -> int:
    """MessageStoreConfig.setTimerPrecisionMs: the largest of 100/200/500/1000 not above `value` (100 below)."""
    return max([p for p in PRECISIONS if p <= value] or [100])


@dataclass(frozen=True)
class TimerUnit:
    prev_pos: int
    magic: int
    write_time: int
    delay: int
    offset_py: int
    size_py: int
    topic_hash: int = 0

    @property
    def slot_time(self) -> int:
        return self.write_time + self.delay

    @property
    def is_delete(self) -> bool:
        return bool(self.magic & _DELETE)

    @property
    def is_roll(self) -> bool:
        return bool(self.magic & _ROLL)

    def encode(self) -> bytes:
        return UNIT.pack(TIMER_UNIT_SIZE, self.prev_pos, self.magic, self.write_time, self.delay, self.offset_py,
                         self.size_py, self.topic_hash, 0)


def decode_unit(buf, pos: int = 0) -> TimerUnit:
    size, prev, magic, write, delay, off, sz, h, _ = UNIT.unpack_from(buf, pos)
    if size != TIMER_UNIT_SIZE:
        raise FormatError(f"timerlog unit at {pos}: size {size}, not {TIMER_UNIT_SIZE}")
    return TimerUnit(prev, magic, write, delay, off, sz, h)


def magic_ok(magic: int) -> bool:
    """TimerLog isMagicOK: no bit above 0xF."""
    return (magic | 0xF) == 0xF


@dataclass(frozen=True)
class Slot:
    time_ms: int = -1         # -1: the slot holds nothing for the time asked
    first_pos: int = -1
    last_pos: int = -1
    num: int = 0
    magic: int = 0


EMPTY_SLOT = Slot()


def slot_index(time_ms: int, precision: int) -> int:
    return (time_ms // precision) % WHEEL_SLOTS


def encode_slot(time_ms: int, precision: int, first: int, last: int, num: int, magic: int = 0) -> bytes:
    return SLOT.pack(time_ms // precision, first, last, num, magic)


def decode_slot(buf, time_ms: int, precision: int) -> Slot:
    """The slot for `time_ms` in a whole wheel's bytes (EMPTY_SLOT when it holds another time)."""
    stored, first, last, num, magic = SLOT.unpack_from(buf, slot_index(time_ms, precision) * TIMER_SLOT_SIZE)
    if stored != time_ms // precision:
        return EMPTY_SLOT
    return Slot(stored * precision, first, last, num, magic)


@dataclass
class TimerCheck:
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def encode(self) -> bytes:
        return CHECK.pack(self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
                          self.master_timer_queue_offset, self.state_version, self.timestamp, self.counter)


def decode_check(buf, path=None) -> TimerCheck:
    """TimerCheckpoint.decode: 56 bytes, or 32 from an older broker (the rest reads as 0)."""
    if len(buf) < 32:
        raise FormatError(f"timercheck is {len(buf)} bytes, needs at least 32", path=path)
    return TimerCheck(*CHECK.unpack(bytes(buf[:56]).ljust(56, b"\0")))
