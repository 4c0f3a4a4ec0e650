"""The timer files offline: `store dump` rows and `store verify` checks (timerlog, timerwheel, timercheck)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from .codes import TIMER_CHECK_FILE_SIZE, TIMER_SLOT_SIZE, TIMER_UNIT_SIZE, TimerMagic
from .errors import FormatError
from .mappedfiles import ReadOnlyMap, check_sizes, list_mapped_files
from .timerlog import BLANK, BLANK_MAGIC, PRECISIONS, WHEEL_FILE_SIZE, decode_check
from .timerstore import SLOT_DTYPE, UNITS_DTYPE



def magic_names(magic: int) -> list[str]:
    return [m.name for m in TimerMagic if magic & m]


def read_timerlog(directory: Path) -> tuple[np.ndarray, np.ndarray, tuple | None]:
    """(timerlog offsets, units as UNITS_DTYPE, stop) of a timerlog directory, a file at a time in
    numpy: a blank moves on to the next file; a zero unit ends the log, a bad one too with
    stop = (file, offset, "corrupt")."""
    positions, units, stop = [], [], None
    for f in list_mapped_files(directory):
        with ReadOnlyMap(f.path) as m:
            buf = m.buf
            arr = np.frombuffer(buf, UNITS_DTYPE, count=len(buf) // TIMER_UNIT_SIZE)
            bad = np.flatnonzero((arr["size"] != TIMER_UNIT_SIZE) | ((arr["magic"] | 0xF) != 0xF))
            k = int(bad[0]) if len(bad) else len(arr)
            positions.append(f.start + np.arange(k, dtype=np.int64) * TIMER_UNIT_SIZE)
            units.append(arr[:k].copy())
            at = k * TIMER_UNIT_SIZE
            blank = len(buf) - at >= BLANK.size and BLANK.unpack_from(buf, at)[2] == BLANK_MAGIC
            torn = k < len(arr) and (arr["size"][k] != 0 or arr["magic"][k] != 0)
            del arr
        if blank:
            continue                    # the file's end: on to the next file
        if torn:
            stop = (f.path, f.start + at, "corrupt")
        if torn or at + TIMER_UNIT_SIZE <= f.size:
            break                       # the log ends in this file
    if not units:
        return np.zeros(0, np.int64), np.zeros(0, UNITS_DTYPE), None
    return np.concatenate(positions), np.concatenate(units), stop


def dump_timerlog(directory: Path, limit: int | None = None) -> Iterator[dict]:
    positions, units, stop = read_timerlog(directory)
    names = {f.start: str(f.path) for f in list_mapped_files(directory)}
    starts = np.array(sorted(names), np.int64)
    n = len(units) if limit is None else min(limit, len(units))
    for pos, u in zip(positions[:n].tolist(), units[:n].tolist()):
        _, prev, magic, write, delay, off, size, h, _ = u
        file = names[int(starts[np.searchsorted(starts, pos, "right") - 1])]
        yield {"kind": "timer_unit", "file": file, "position": pos, "prev_pos": prev, "magic": magic,
               "flags": magic_names(magic), "write_time": write, "delay": delay, "slot_time": write + delay,
               "offset_py": off, "size_py": size, "topic_hash": h}
    if stop is not None and n == len(units):
        yield {"kind": "stop", "file": str(stop[0]), "position": stop[1], "reason": stop[2], "clean": False,
               "detail": "not a timerlog unit (size or magic wrong)"}


def wheel_slots(path: Path) -> np.ndarray:
    """The wheel's used slots (time != 0) as a structured array with their index."""
    with ReadOnlyMap(path) as m:
        if len(m.buf) != WHEEL_FILE_SIZE:
            raise FormatError(f"Timer wheel length:{len(m.buf)} != expected:{WHEEL_FILE_SIZE}", path=path)
        slots = np.frombuffer(m.buf, SLOT_DTYPE)
        used = np.flatnonzero(slots["time"] != 0)
        return np.array(list(zip(used.tolist(), *(slots[k][used].tolist() for k in SLOT_DTYPE.names))),
                        [("index", np.int64)] + [(k, np.int64) for k in SLOT_DTYPE.names])


def dump_timerwheel(path: Path, limit: int | None = None) -> Iterator[dict]:
    for n, s in enumerate(wheel_slots(path)):
        if limit is not None and n >= limit:
            return
        yield {"kind": "timer_slot", "file": str(path), "index": int(s["index"]), "byte_offset":
               int(s["index"]) * TIMER_SLOT_SIZE, "time": int(s["time"]), "first_pos": int(s["first"]),
               "last_pos": int(s["last"]), "num": int(s["num"]), "magic": int(s["magic"])}


def dump_timercheck(path: Path) -> Iterator[dict]:
    with ReadOnlyMap(path) as m:
        check = decode_check(m.buf, path)
    yield {"kind": "timercheck", "file": str(path), **vars(check)}


def verify_timer(root: Path, records, report, commitlog_min: int = 0) -> int:
    """Timer files of a store root against each other and the commit log (`records`: verify's
    columns); problems go to `report` (area "timer"). Returns the units checked."""
    wheel, log_dir, check = root / "timerwheel", root / "timerlog", root / "config" / "timercheck"
    positions, units = np.zeros(0, np.int64), np.zeros(0, UNITS_DTYPE)
    end = 0
    if log_dir.is_dir():
        for msg in check_sizes(list_mapped_files(log_dir), None):
            report.add("timer", log_dir, None, msg)
        positions, units, stop = read_timerlog(log_dir)
        if stop is not None:
            report.add("timer", stop[0], stop[1], "not a timerlog unit (size or magic wrong): the log ends here")
        end = int(positions[-1]) + TIMER_UNIT_SIZE if len(positions) else 0
        if len(units):
            offs = units["offset_py"].astype(np.int64)
            found, ok = records.find(offs)
            if len(records.size):
                ok &= records.size[np.minimum(found, len(records.size) - 1)] == units["size_py"]
            ok |= offs < commitlog_min          # records retention removed: expected until the file goes
            for k in np.flatnonzero(~ok).tolist():
                report.add("timer", log_dir, int(positions[k]), f"unit points at commit log {int(offs[k])} size "
                           f"{int(units['size_py'][k])}: no record starts there")
    if wheel.exists():
        size = wheel.stat().st_size
        if size not in (0, WHEEL_FILE_SIZE):
            report.add("timer", wheel, None, f"Timer wheel length:{size} != expected:{WHEEL_FILE_SIZE}")
        elif size:
            slots = wheel_slots(wheel)
            at = np.searchsorted(positions, slots["last"])
            there = (at < len(positions)) & (positions[np.minimum(at, max(len(positions) - 1, 0))] == slots["last"]) \
                if len(positions) else np.zeros(len(slots), bool)
            unit_time = np.where(there, (units["write"] + units["delay"])[np.minimum(at, max(len(units) - 1, 0))], -1) \
                if len(units) else np.full(len(slots), -1)
            fits = np.zeros(len(slots), bool)
            for p in PRECISIONS:
                fits |= unit_time == slots["time"] * p
            for k in np.flatnonzero(~fits).tolist():
                s = slots[k]
                why = f"its last unit is for time {int(unit_time[k])}" if there[k] else \
                    f"lastPos {int(s['last'])} is no timerlog unit"
                report.add("timer", wheel, int(s["index"]) * TIMER_SLOT_SIZE,
                           f"slot {int(s['index'])} (time {int(s['time'])}): {why}")
    if check.exists():
        if check.stat().st_size != TIMER_CHECK_FILE_SIZE:
            report.add("timer", check, None, f"timercheck is {check.stat().st_size} bytes, not {TIMER_CHECK_FILE_SIZE}")
        else:
            with ReadOnlyMap(check) as m:
                cp = decode_check(m.buf, check)
            if cp.last_timer_log_flush_pos > end and log_dir.is_dir():
                report.add("timer", check, 8, f"lastTimerLogFlushPos {cp.last_timer_log_flush_pos} is past the "
                           f"timerlog's end {end}")
            if cp.last_timer_queue_offset > cp.master_timer_queue_offset:
                report.add("timer", check, 16, f"lastTimerQueueOffset {cp.last_timer_queue_offset} is above "
                           f"masterTimerQueueOffset {cp.master_timer_queue_offset}")
    return len(units)
