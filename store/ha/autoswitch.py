"""The AutoSwitch HA channel of controller mode (5.3.0 AutoSwitchHAClient / AutoSwitchHAConnection;
controller.md §6), as a sans-IO codec. Big-endian; `state` is HAConnectionState's ordinal
(READY 0, HANDSHAKE 1, TRANSFER 2, SUSPEND 3, SHUTDOWN 4).

    slave -> master, handshake (16)      state=1 i32 | syncFromLastFile i16 | asyncLearner i16 | brokerId i64
    slave -> master, report (12)         state=2 i32 | slave max offset i64 (the next byte it needs)
    master -> slave, handshake (20 + 12n) state=1 i32 | bodySize i32 (=12n) | master max offset i64 |
                                          last epoch i32 | n x (epoch i32, startOffset i64), ascending
    master -> slave, transfer (36 + body) state=2 i32 | bodySize i32 | offset i64 | epoch i32 |
                                          epoch start offset i64 | confirmOffset i64 | body

A transfer with bodySize 0 is the master's heartbeat. A transfer never crosses an epoch boundary nor
a commit log file. Readers are fed whatever the socket gave and return the frames that are complete.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .protocol import MAX_FRAME_SIZE, HAProtocolError

HANDSHAKE, TRANSFER = 1, 2
SLAVE_HANDSHAKE = struct.Struct(">ihhq")        # 16
SLAVE_REPORT = struct.Struct(">iq")             # 12
MASTER_HANDSHAKE = struct.Struct(">iiqi")       # 20
EPOCH_ENTRY = struct.Struct(">iq")              # 12
MASTER_TRANSFER = struct.Struct(">iiqiqq")      # 36
MAX_EPOCH_ENTRIES = 1000


def slave_handshake(broker_id: int, sync_from_last_file: bool = False, async_learner: bool = False) -> bytes:
    return SLAVE_HANDSHAKE.pack(HANDSHAKE, int(sync_from_last_file), int(async_learner), broker_id)


def slave_report(offset: int) -> bytes:
    return SLAVE_REPORT.pack(TRANSFER, offset)


def master_handshake(max_offset: int, entries) -> bytes:
    """`entries`: (epoch, start) pairs, ascending."""
    entries = list(entries)[-MAX_EPOCH_ENTRIES:]
    last = entries[-1][0] if entries else -1
    return MASTER_HANDSHAKE.pack(HANDSHAKE, EPOCH_ENTRY.size * len(entries), max_offset, last) + \
        b"".join(EPOCH_ENTRY.pack(e, s) for e, s in entries)


def transfer_header(offset: int, size: int, epoch: int, epoch_start: int, confirm: int) -> bytes:
    return MASTER_TRANSFER.pack(TRANSFER, size, offset, epoch, epoch_start, confirm)


@dataclass(frozen=True)
class SlaveHandshake:
    broker_id: int
    sync_from_last_file: bool
    async_learner: bool


@dataclass(frozen=True)
class MasterHandshake:
    max_offset: int
    last_epoch: int
    entries: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Transfer:
    offset: int
    epoch: int
    epoch_start: int
    confirm: int
    data: bytes


class _Buffered:
    def __init__(self):
        self._buf = bytearray()

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out


class SlaveFrameReader(_Buffered):
    """Master side: the slave's handshakes (16 bytes) and reports (12 bytes)."""

    def feed(self, data) -> list:
        self._buf += data
        out = []
        while len(self._buf) >= 4:
            state = int.from_bytes(self._buf[:4], "big", signed=True)
            if state == HANDSHAKE:
                if len(self._buf) < SLAVE_HANDSHAKE.size:
                    break
                _s, last_file, learner, broker_id = SLAVE_HANDSHAKE.unpack(self._take(SLAVE_HANDSHAKE.size))
                out.append(SlaveHandshake(broker_id, last_file == 1, learner == 1))
            elif state == TRANSFER:
                if len(self._buf) < SLAVE_REPORT.size:
                    break
                offset = SLAVE_REPORT.unpack(self._take(SLAVE_REPORT.size))[1]
                if offset < 0:
                    raise HAProtocolError(f"slave reported a negative offset {offset}")
                out.append(offset)
            else:
                raise HAProtocolError(f"slave frame with state {state}: not HANDSHAKE (1) or TRANSFER (2)")
        return out


class MasterFrameReader(_Buffered):
    """Slave side: the master's handshake and transfers, each once its whole body arrived."""

    def feed(self, data) -> list:
        self._buf += data
        out = []
        while len(self._buf) >= 8:
            state, size = struct.unpack_from(">ii", self._buf)
            if size < 0 or size > MAX_FRAME_SIZE:
                raise HAProtocolError(f"master frame with body size {size}")
            if state == HANDSHAKE:
                if size % EPOCH_ENTRY.size or len(self._buf) < MASTER_HANDSHAKE.size + size:
                    if size % EPOCH_ENTRY.size:
                        raise HAProtocolError(f"master handshake body of {size} bytes is not whole epoch entries")
                    break
                _s, _n, max_offset, last = MASTER_HANDSHAKE.unpack(self._take(MASTER_HANDSHAKE.size))
                body = self._take(size)
                entries = tuple(EPOCH_ENTRY.unpack_from(body, i) for i in range(0, size, EPOCH_ENTRY.size))
                out.append(MasterHandshake(max_offset, last, entries))
            elif state == TRANSFER:
                if len(self._buf) < MASTER_TRANSFER.size + size:
                    break
                _s, _n, offset, epoch, start, confirm = MASTER_TRANSFER.unpack(self._take(MASTER_TRANSFER.size))
                out.append(Transfer(offset, epoch, start, confirm, self._take(size)))
            else:
                raise HAProtocolError(f"master frame with state {state}: not HANDSHAKE (1) or TRANSFER (2)")
        return out
