"""A pull's answer body in one piece: the records of a run of consume queue units, joined.

`MessageStore.get` returns a list of records (a bytes object per message) that the broker then
joins; `joined_get` makes the joined body directly, for the common pull: no SQL92 test on the
records, tags codes or no filter, every unit up to the count a readable record of one commit log
file. The kernel's `pull_body` (csrc/pull.c) does the unit loop and the copies; `_pull_body` here
is its pure-Python twin, byte for byte (the tests run both). Anything else returns None, and the
caller takes `MessageStore.get`, which decides it unit by unit.

    consume queue unit (20 bytes):  offset int64 | size int32 | tags code int64     (spec/consumequeue.md)

Every unit taken is checked against the record it points at (`unit_holds`): its first 36 bytes
must say that a message of this size, queue and queue offset starts at this commit log offset.
A unit that fails (a truncation's leftover, a torn write) makes the joined path decline, and
`MessageStore.get` steps over that unit alone with one log line (`stepped_over`), so a pull never
answers FOUND without the valid messages that follow it.
"""
from __future__ import annotations

import logging
import struct

from .codes import CQ_UNIT_SIZE
from .commitlog import MESSAGE_MAGIC, MESSAGE_MAGIC_V2
from .kernel import kernel

log = logging.getLogger("mqtool.store")
_UNIT = struct.Struct(">qiq")
# totalSize | magic | bodyCRC | queueId | flag | queueOffset | physicalOffset: a record's first 36 bytes
_HEAD = struct.Struct(">iiiiiqq")
HEAD_SIZE = _HEAD.size
_MAGICS = (MESSAGE_MAGIC, MESSAGE_MAGIC_V2)
_REPORTED_MAX = 10_000


def unit_holds(log_buf, pos: int, size: int, queue_id: int, queue_offset: int, offset: int) -> bool:
    """The record at `pos` of its commit log file (`offset` in the log) is the one the unit names:
    its size, a message magic, the queue id, the queue offset and its own offset (the caller has
    checked that `size` bytes from `pos` are written)."""
    if size < HEAD_SIZE:
        return False
    total, magic, _crc, qid, _flag, qoff, phys = _HEAD.unpack_from(log_buf, pos)
    return total == size and magic in _MAGICS and qid == queue_id and qoff == queue_offset and phys == offset


def stepped_over(reported: set, topic: str, queue_id: int, queue_offset: int, offset: int, size: int) -> None:
    """One log line per unit a pull steps over: `reported` (the store's) keeps the units already
    told of, as pulls read the same range again."""
    key = (topic, queue_id, queue_offset, offset)
    if key in reported:
        return
    if len(reported) >= _REPORTED_MAX:
        reported.clear()
    reported.add(key)
    log.warning("consume queue %s/%d unit %d points at commit log offset %d (size %d), where no record of this "
                "queue starts: the pull steps over it (store verify names it)", topic, queue_id, queue_offset,
                offset, size)
_BLANK_SIZE = 0x7FFFFFFF        # a blank unit: size INT_MAX at offset 0
_CODE = struct.Struct("=i")


def codes_bytes(codes) -> bytes:
    """A subscription's tags codes (Java ints) as the native int32 array `pull_body` takes."""
    return b"".join(_CODE.pack(c) for c in sorted(codes))


def _java_int(code: int) -> int:
    code &= 0xFFFFFFFF
    return code - (1 << 32) if code & 0x80000000 else code


def _pull_body(cq, lo: int, hi: int, log, log_start: int, log_written: int, log_min: int, max_count: int,
               max_bytes: int, codes: bytes | None, queue_id: int, queue_offset: int):
    """csrc/pull.c's pull_body in Python: (body, count, scanned) or None. `queue_offset` is the
    queue offset of the unit at `lo`."""
    wanted = None if codes is None else {c for (c,) in _CODE.iter_unpack(codes)}
    log_size = len(log)
    taken, total, scanned = [], 0, 0
    for off, size, code in _UNIT.iter_unpack(cq[lo:hi - (hi - lo) % CQ_UNIT_SIZE]):
        if len(taken) >= max_count or total >= max_bytes:
            break
        scanned += 1
        if (size == _BLANK_SIZE and off == 0) or off < log_min:
            return None
        if wanted is not None and _java_int(code) not in wanted:
            continue
        pos = off - log_start
        if not 0 <= pos < log_size or size <= 0 or pos + size > log_written:
            return None
        if not unit_holds(log, pos, size, queue_id, queue_offset + scanned - 1, off):
            return None
        taken.append(log[pos:pos + size])
        total += size
    if not taken:
        return None
    return b"".join(taken), len(taken), scanned


def joined_get(store, topic: str, queue_id: int, offset: int, max_count: int, codes: bytes | None,
               physical_memory: int):
    """`store.get(topic, queue_id, offset, max_count, matches)` where it finds messages the common
    way (matches: a unit's tags code in `codes`, from codes_bytes; None: every unit), its answer as
    (body, count, next_begin_offset, min_offset, max_offset, suggest_slave), the body the found
    records joined; else None."""
    cq = store.queues.get((topic, queue_id))
    if cq is None:
        return None
    lo_off, hi_off = cq.min_offset, cq.max_offset
    if not lo_off <= offset < hi_off:
        return None
    scan = max(max_count, 1) * 4 if codes is not None else max_count
    pos = offset * CQ_UNIT_SIZE
    qf = cq.files.find(pos)
    if qf is None:
        return None
    lo = pos - qf.start
    hi = min(qf.write_pos, lo + scan * CQ_UNIT_SIZE)
    if hi - lo < CQ_UNIT_SIZE:
        return None
    commitlog = store.commitlog
    try:
        cq_mm = qf.mm
        first, _, _ = _UNIT.unpack_from(cq_mm, lo)
        f = commitlog.find(first)
        if f is None:
            return None
        n_units = (hi - lo) // CQ_UNIT_SIZE
        last, _, _ = _UNIT.unpack_from(cq_mm, lo + (min(n_units, max_count) - 1) * CQ_UNIT_SIZE)
        join = kernel.pull_body if kernel is not None else _pull_body
        got = join(cq_mm, lo, hi, f.mm, f.start, f.write_pos, commitlog.min_offset, max_count,
                   store.cfg.maxTransferBytesOnMessageInMemory, codes, queue_id, offset)
    except ValueError:                  # a map closed by retention meanwhile
        return None
    if got is None:
        return None
    body, count, scanned = got
    behind = commitlog.max_offset - last
    return (body, count, offset + scanned, lo_off, hi_off,
            behind > physical_memory * store.cfg.accessMessageInMemoryMaxRatio // 100)
