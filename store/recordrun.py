"""A run of records put at once: a batch's messages of one topic and queue (CommitLog.putMessages).

The messages of a SEND_BATCH_MESSAGE share their topic, queue, sysflag, hosts and born time; only
the body, the properties and the flag differ. `prepare_run` gathers those per-record columns
(bodies, encoded properties, CRCs, sizes) before the put lock, with numpy where it can; under
the lock `place` fills in the positions and the store time, and `write` joins headers, bodies
and properties into the mapped file with one copy (os.pwritev of the pieces, which copies
without the GIL, measured slower inside the store: 4.5-5.1 against 3.4-3.6 µs per 1 KiB record
in batches of 512, with the pre-write and dispatch threads running). The bytes are exactly
those of `write_record_v4` record by record (tests/store/test_recordrun.py compares whole stores).

With the compiled kernel (kernel.py) a run is a `KernelRun`: the checks, sizes and CRCs in one C
pass before the lock, and under it one C loop that writes every record into the map (headers
filled in place); same bytes, same answers.

Anything outside that shape (IPv6 hosts, a long topic, any transaction flag, a delayed message,
an oversized body or properties, messages that differ in a shared field) is not a run: the caller
puts those one by one, with the checks and answers of the general path.
"""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from .codes import MSG_FIXED_SIZE_V4, SCHEDULE_TOPIC, TRANSACTION_TYPE_MASK, Prop
from .commitlog import BORN_V6, FIXED_V4, MESSAGE_MAGIC, STORE_V6
from .crc import crc32
from .kernel import kernel
from .properties import format_properties, parse_properties

GENERAL_PATH_FLAGS = TRANSACTION_TYPE_MASK | BORN_V6 | STORE_V6     # a run's shared sysFlag with any of these: not a run

RUN_MIN = 32             # fewer messages than this: the general loop measured as fast or faster
KERNEL_RUN_MIN = 8       # ... with the kernel (1 KiB: 8 per batch 4.7-5.0 against 5.4-7.0 µs per message; 4: slower)
PIECES = 4               # per record: header, body, topic + properties length, properties

# The fixed part of a V1 record with IPv4 hosts, TOTALSIZE .. BODYLENGTH (88 bytes, big-endian):
# the same fields as commitlog.FIXED_V4.
HEADER_V4 = np.dtype([
    ("size", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
    ("queue_offset", ">i8"), ("physical_offset", ">i8"), ("sys_flag", ">i4"), ("born_timestamp", ">i8"),
    ("born_ip", "S4"), ("born_port", ">i4"), ("store_timestamp", ">i8"), ("store_ip", "S4"),
    ("store_port", ">i4"), ("reconsume_times", ">i4"), ("prepared_transaction_offset", ">i8"),
    ("body_len", ">i4")])
assert HEADER_V4.itemsize == FIXED_V4.size

_SHARED = attrgetter("topic", "queue_id", "sys_flag", "born_host", "born_timestamp", "reconsume_times",
                     "prepared_transaction_offset")


@dataclass(slots=True)
class RecordRun:
    """What does not depend on where the run lands: per-record columns and the shared fields."""
    topic: str
    queue_id: int
    sys_flag: int
    bodies: list
    raws: list              # the properties as stored, encoded
    props: list             # ... parsed (the dispatch reads TAGS, KEYS, UNIQ_KEY)
    sizes: np.ndarray       # int64 record sizes
    header: np.ndarray      # HEADER_V4 rows with every field but positions and store time
    middle: bytes           # per record: TOPICLENGTH + TOPIC + PROPERTIESLENGTH
    total: int
    offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.bodies)

    def place(self, phys: int, queue_offset: int, store_ts: int) -> None:
        """Fill the run's positions and store time in (the put lock is held)."""
        self.offsets = offsets = np.cumsum(self.sizes) - self.sizes + phys
        h = self.header
        h["queue_offset"] = np.arange(queue_offset, queue_offset + len(self), dtype=np.int64)
        h["physical_offset"] = offsets
        h["store_timestamp"] = store_ts

    def write(self, buf, pos: int) -> None:
        """Copy the placed run to `pos` of a writable buffer (the mapped file): its pieces joined
        at C speed, then one slice assignment."""
        n = len(self)
        heads = memoryview(self.header.tobytes())
        w = HEADER_V4.itemsize
        mids = memoryview(self.middle)
        m = len(self.middle) // n
        pieces = [None] * (PIECES * n)
        pieces[0::PIECES] = [heads[i:i + w] for i in range(0, w * n, w)]
        pieces[1::PIECES] = self.bodies
        pieces[2::PIECES] = [mids[i:i + m] for i in range(0, m * n, m)]
        pieces[3::PIECES] = self.raws
        buf[pos:pos + self.total] = b"".join(pieces)

    def msg_ids(self, prefix: str) -> list[str]:
        """Each placed record's message id: the store host prefix + its offset in hex."""
        hexes = self.offsets.astype(">i8").tobytes().hex().upper()
        return [prefix + hexes[i:i + 16] for i in range(0, len(hexes), 16)]


@dataclass(slots=True)
class KernelRun:
    """A run for the compiled kernel: each record's body, properties text, flag, size and CRC, and the
    shared header row."""
    topic: str
    queue_id: int
    parts: list             # body, properties text of each record
    flags: bytes
    props: list
    sizes: np.ndarray       # int64 record sizes (a view of `raw_sizes`)
    raw_sizes: bytes
    crcs: bytes
    row: bytes              # the fixed part with the shared fields
    topic_part: bytes
    total: int
    placed: tuple = (0, 0, 0)    # commit log offset, queue offset, store time

    def __len__(self) -> int:
        return len(self.props)

    def place(self, phys: int, queue_offset: int, store_ts: int) -> None:
        self.placed = (phys, queue_offset, store_ts)

    def write(self, buf, pos: int) -> None:
        kernel.run_write(self.parts, self.flags, buf, pos, self.row, self.topic_part, self.raw_sizes, self.crcs,
                         *self.placed)

    def msg_ids(self, prefix: str) -> list[str]:
        return kernel.msg_ids(prefix, self.placed[0], self.raw_sizes)

    @property
    def may_wait(self) -> bool:
        """The first message's WAIT allows a SYNC_FLUSH wait (put_batch's rule)."""
        return self.props[0].get(Prop.WAIT, "true") != "false"

    def units(self, prefix: str, phys: int, index_on: bool):
        """The placed run's consume queue units and index keys (what dispatch.py makes of its run item)."""
        return kernel.run_units(self.props, prefix, phys, self.raw_sizes, index_on)


@dataclass(slots=True)
class FrameRun:
    """A producer's batch with ASCII properties as spans of its own frame (kernel.batch_spans): its
    records written (frame_write) and dispatched (frame_units) from the frame's bytes, with no Python
    object per message; the same bytes and units as the KernelRun of the same batch."""
    topic: str
    queue_id: int
    frame: bytes
    spans: bytes            # per record: kernel.batch_spans' int64 fields
    outer: bytes            # the batch's own properties, merged after each entry's
    flags: bytes
    sizes: np.ndarray
    raw_sizes: bytes
    crcs: bytes
    row: bytes
    topic_part: bytes
    total: int
    may_wait: bool
    placed: tuple = (0, 0, 0)

    def __len__(self) -> int:
        return len(self.flags) // 4

    @property
    def props(self):        # dispatch.py's run item carries the run itself in its properties' place
        return self

    def place(self, phys: int, queue_offset: int, store_ts: int) -> None:
        self.placed = (phys, queue_offset, store_ts)

    def write(self, buf, pos: int) -> None:
        kernel.frame_write(self.frame, self.spans, self.outer, self.flags, buf, pos, self.row, self.topic_part,
                           self.raw_sizes, self.crcs, *self.placed)

    def msg_ids(self, prefix: str) -> list[str]:
        return kernel.msg_ids(prefix, self.placed[0], self.raw_sizes)

    def units(self, prefix: str, phys: int, index_on: bool):
        return kernel.frame_units(self.frame, self.spans, self.outer, prefix, phys, self.raw_sizes, index_on)


def _shared_row(queue_id, sys_flag, born_ts, born_ip, born_port, store_host, reconsume, prepared) -> bytes:
    """The fixed part of every record of a run: the shared fields set, the rest zero."""
    return FIXED_V4.pack(0, MESSAGE_MAGIC, 0, queue_id, 0, 0, 0, sys_flag, born_ts, born_ip, born_port, 0,
                         store_host[0], store_host[1], reconsume, prepared, 0)


def prepare_run(msgs, topic_part: bytes, max_body: int, store_host: tuple[bytes, int]):
    """The run of `msgs` (a RecordRun or KernelRun), or None when they are not one (the caller
    takes the general path)."""
    n = len(msgs)
    if n < (RUN_MIN if kernel is None else KERNEL_RUN_MIN) or len(store_host[0]) != 4 or len(topic_part) > 128:
        return None
    if kernel is not None:
        first = msgs[0]
        born_ip, born_port = first.born_host
        if len(born_ip) != 4 or first.sys_flag & GENERAL_PATH_FLAGS or first.topic == SCHEDULE_TOPIC:
            return None
        msgs = list(msgs)
        got = kernel.run_prepare(msgs, max_body, MSG_FIXED_SIZE_V4 - 1 + len(topic_part), crc32)
        if got is not None:
            total, raw_sizes, crcs, props, parts, flags = got
            row = _shared_row(first.queue_id, first.sys_flag, first.born_timestamp, born_ip, born_port, store_host,
                              first.reconsume_times, first.prepared_transaction_offset)
            return KernelRun(first.topic, first.queue_id, parts, flags, props, np.frombuffer(raw_sizes, np.int64),
                             raw_sizes, crcs, row, topic_part, total)
    return _prepare_columns(msgs, topic_part, max_body, store_host)


def batch_columns(frame, at: int, outer: str, topic: str, sys_flag: int, born_ip: bytes, topic_part: bytes,
                  max_body: int, store_host: tuple[bytes, int]):
    """The per-record columns prepare_run makes of the messages of a producer's batch body (frame[at:]:
    its entries, each with its own properties and then `outer`, the batch's own, merged), read
    straight from the frame by the kernel; `batch_run` makes the run of them once the queue is
    known. None where prepare_run would make no KernelRun, or the body is not well formed (the
    caller takes the general path, which words the refusal)."""
    if kernel is None or len(store_host[0]) != 4 or len(topic_part) > 128 or len(born_ip) != 4 \
            or sys_flag & GENERAL_PATH_FLAGS or topic == SCHEDULE_TOPIC:
        return None
    fixed = MSG_FIXED_SIZE_V4 - 1 + len(topic_part)
    if topic.isascii():
        raw_outer = outer.encode()
        got = kernel.batch_spans(frame, at, raw_outer, max_body, fixed, crc32, KERNEL_RUN_MIN)
        if got is not None:
            return got + (frame, raw_outer)
    return kernel.batch_run(frame, at, outer, max_body, fixed, crc32, KERNEL_RUN_MIN)


def batch_run(columns, topic: str, queue_id: int, sys_flag: int, born_ts: int, born_host: tuple[bytes, int],
              reconsume: int, topic_part: bytes, store_host: tuple[bytes, int]) -> KernelRun | FrameRun:
    """The run of batch_columns' answer, for the messages' shared fields."""
    row = _shared_row(queue_id, sys_flag, born_ts, born_host[0], born_host[1], store_host, reconsume, 0)
    if len(columns) == _SPAN_COLUMNS:
        total, raw_sizes, crcs, flags, spans, may_wait, frame, outer = columns
        return FrameRun(topic, queue_id, frame, spans, outer, flags, np.frombuffer(raw_sizes, np.int64), raw_sizes,
                        crcs, row, topic_part, total, may_wait)
    total, raw_sizes, crcs, props, parts, flags = columns
    return KernelRun(topic, queue_id, parts, flags, props, np.frombuffer(raw_sizes, np.int64), raw_sizes, crcs,
                     row, topic_part, total)


_SPAN_COLUMNS = 8        # batch_spans' six, the frame and the batch's own properties


def _prepare_columns(msgs, topic_part: bytes, max_body: int, store_host: tuple[bytes, int]) -> RecordRun | None:
    n = len(msgs)
    if n < RUN_MIN:
        return None
    shared = set(map(_SHARED, msgs))
    if len(shared) != 1:
        return None
    topic, queue_id, sys_flag, (born_ip, born_port), born_ts, reconsume, prepared = shared.pop()
    if len(born_ip) != 4 or sys_flag & GENERAL_PATH_FLAGS or topic == SCHEDULE_TOPIC:
        return None       # IPv6 hosts (or their flags), transactions, delayed messages (their tags code): the general path
    bodies = [m.body for m in msgs]
    lengths = np.fromiter(map(len, bodies), np.int64, n)
    if int(lengths.max()) > max_body:
        return None
    texts = [m.properties_text for m in msgs]
    props = [m.properties for m in msgs]
    if None in texts:
        texts = [format_properties(p) if t is None else t for t, p in zip(texts, props)]
    if not all(props):
        props = [p or (parse_properties(t) if t else p) for t, p in zip(texts, props)]
    raws = [t.encode() for t in texts]
    raw_lengths = np.fromiter(map(len, raws), np.int64, n)
    if int(raw_lengths.max()) > 32767:
        return None
    sizes = lengths + raw_lengths + (MSG_FIXED_SIZE_V4 - 1 + len(topic_part))
    # Every record's header starts as one packed row (the shared fields); numpy fills in the rest.
    row = _shared_row(queue_id, sys_flag, born_ts, born_ip, born_port, store_host, reconsume, prepared)
    header = np.frombuffer(bytearray(row * n), HEADER_V4)
    header["size"] = sizes
    header["crc"] = np.fromiter(map(crc32, bodies), np.int64, n) & 0x7FFFFFFF
    header["flag"] = np.fromiter(map(attrgetter("flag"), msgs), np.int64, n)
    header["body_len"] = lengths
    middle = np.frombuffer(bytearray((topic_part + b"\0\0") * n),
                           np.dtype([("topic", f"V{len(topic_part)}"), ("props_len", ">i2")]))
    middle["props_len"] = raw_lengths
    return RecordRun(topic, queue_id, sys_flag, bodies, raws, props, sizes, header, middle.tobytes(),
                     int(sizes.sum()))

