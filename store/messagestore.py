"""The message store: commitlog appends, dispatch to consume queues and index, reads, flush, recovery.

Threads, not asyncio: a put takes one lock (queue offsets, commitlog position and the pending
dispatch list stay in step), then under SYNC_FLUSH waits for the group-commit flusher
(groupcommit.py) to cover its bytes. Consume queue units and index entries are written in
batches by a dispatch thread, as Java's ReputMessageService does; every read dispatches what is
pending first, so a reader always sees what was put before it.
"""
from __future__ import annotations

import functools
import os
import shutil
import struct
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from itertools import repeat
from operator import add


from .checkpoint import Checkpoint, decode_checkpoint
from .codes import (CHECKPOINT_FILE_SIZE, CQ_UNIT_SIZE, END_FILE_MIN_BLANK_LENGTH, HOST_V6_EXTRA, MSG_FIXED_SIZE_V4,
                    SCHEDULE_TOPIC, TRANSACTION_TYPE_MASK, Prop)
from .commitlog import (BORN_V6, MESSAGE_MAGIC, STORE_V6, MessageRecord, decode_record, encode_blank, encode_record,
                        topic_field, write_record_v4)
from .cqwriter import ConsumeQueue
from .crc import crc32
from .delaylevels import parse_delay_levels
from .dispatch import NOT_DISPATCHED, Dispatch
from .groupcommit import GroupCommitService
from .indexwriter import IndexService
from .kernel import kernel
from .lockfile import StoreLock, create_abort, remove_abort
from .mappedfile import NOTHING_IN_FLIGHT, PAGE, MappedFile, MappedFileQueue
from .properties import format_properties, parse_properties
from .pullbody import joined_get, stepped_over, unit_holds
from .recordrun import FrameRun, prepare_run
from .threadname import named
from .replication import Replication
from .storeconfig import SLAVE, SYNC_FLUSH, MessageStoreConfig

V6_HOSTS = BORN_V6 | STORE_V6
PREWRITE_AHEAD = 32 << 20  # commit log bytes kept in the page cache ahead of the write position
PREWRITE_CHUNK = 8 << 20   # per turn: the thread waits for the GIL (up to a switch interval) before each one;
                           # 2 MiB turns fell behind batch puts at 500 MB/s (appends into fresh pages: 10x slower)
PREWRITE_IDLE_S = 0.02
PREWRITE_GAP = 2 << 20     # a chunk starts this far ahead at least: puts do not catch up with it
DISPATCH_BATCH = 4096      # pending records a put dispatches itself (the dispatch thread usually comes first)
DISPATCH_RUNS = 128        # ... when the last put was a run (recordrun.py: one pending item for a batch)
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _offsets(first: int, prepared: list) -> list[int]:
    out = []
    for p in prepared:
        out.append(first)
        first += p[1]
    return out


@functools.cache
def total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class PutStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"      # SYNC_MASTER: no slave acknowledged in slaveTimeout
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"      # SYNC_MASTER: no slave, or one too far behind
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"   # controller mode: SyncStateSet < minInSyncReplicas
    WHEEL_TIMER_FLOW_CONTROL = "WHEEL_TIMER_FLOW_CONTROL"       # 5.x timer put hook refusals
    WHEEL_TIMER_MSG_ILLEGAL = "WHEEL_TIMER_MSG_ILLEGAL"
    WHEEL_TIMER_NOT_ENABLE = "WHEEL_TIMER_NOT_ENABLE"


class GetStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass
class Message:
    """What a producer's request becomes before it is stored (MessageExtBrokerInner)."""
    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    properties_text: str | None = None     # stored as given when set (C++ and Java orders differ)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[bytes, int] = (b"\x7f\0\0\x01", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0


# A Message's fields in the order put_quick (the kernel's put_one) takes them as a row.
ROW_FIELDS = ("topic", "queue_id", "sys_flag", "born_host", "born_timestamp", "reconsume_times",
              "prepared_transaction_offset", "body", "properties_text", "properties", "flag")


def message_of_row(row: tuple) -> Message:
    return Message(**dict(zip(ROW_FIELDS, row)))


@dataclass
class PutResult:
    status: PutStatus
    offset: int = -1            # commitlog offset of the (first) record
    size: int = 0
    queue_offset: int = 0
    msg_ids: list[str] = field(default_factory=list)
    store_timestamp: int = 0
    remark: str = ""

    @property
    def ok(self) -> bool:
        """Stored (Java's sendOK): the message is on the master's disk whatever the replica did."""
        status = self.status
        return status is PutStatus.PUT_OK or status in STORED    # (an Enum's hash is Python code)

    @property
    def end(self) -> int:
        return self.offset + self.size


STORED = frozenset({PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT,
                    PutStatus.SLAVE_NOT_AVAILABLE})


@dataclass
class GetResult:
    status: GetStatus
    messages: list[bytes] = field(default_factory=list)
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    suggest_slave: bool = False     # the reader is far behind the head: a slave should serve it


_TIME = time


def _store_ms() -> int:
    """The store time of a put now (ms), through this module's `time` (which tests may replace)."""
    return time.time_ns() // 1_000_000


def _kernel_clock():
    """The kernel's put_quick clock: None (its own real-time clock, the same as time.time_ns) unless
    this module's `time` was replaced."""
    return None if time is _TIME else _store_ms


class MessageStore(Dispatch, Replication):
    """Dispatch (consume queues and index) is in dispatch.py, a slave's appends in replication.py."""

    def __init__(self, config: MessageStoreConfig, store_host: tuple[bytes, int] = (b"\x7f\0\0\x01", 10911)):
        self.cfg = config
        self.root = config.root
        self.store_host = store_host
        self.levels = parse_delay_levels(config.messageDelayLevel)
        self.commitlog = MappedFileQueue(config.commitlog_dir, config.mappedFileSizeCommitLog)
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.index = IndexService(self.root / "index", config.maxHashSlotNum, config.maxIndexNum)
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.checkpoint = Checkpoint()
        self.lock = StoreLock(self.root)
        self.put_lock = threading.RLock()     # re-entered by readers that first dispatch what is pending
        # Records put but not yet in their consume queue and the index. One list for the store's life,
        # changed in place and never replaced: put_quick's callers take it before the put lock, and a
        # record appended to a list a dispatch had already swapped out was never dispatched (its unit
        # a pre-blank hole, the message invisible to consumers).
        self._pending: list[tuple] = []
        self._dispatching = False             # a dispatch has taken them and is writing (dispatch.py)
        self._dispatch_wake = threading.Event()
        # A caller that drains what is pending itself soon after its puts (the broker: once per event
        # loop turn) turns this off: no thread wake-up per put, which costs a sync sender ~30% of its rate.
        self.wake_dispatcher = True
        self.listeners: list = []        # callables(topic, queue_id, max_offset, tags_code)
        # (topic, queue_id) -> whether a listener waits on that queue (None: all do); the dispatch tells
        # the listeners of the units of those queues only (the broker's: the queues a pull is held on)
        self.listened = None
        self.append_listeners: list = []  # callables(commitlog max offset), after every put or append
        self.reput_from = 0               # slave: commit log offset dispatched up to
        self.truncations = 0              # truncate_files calls: a reput pass that saw one drops its reads
        self.dispatch_limit: int | None = None   # controller mode's confirmOffset: dispatch stops there
        # Controller mode: the checkpoint keeps confirmOffset (byte 32) and recovery dispatches only up to it.
        self.confirm_offsets = False
        self.reput_error: str | None = None
        self.stepped_over: set = set()        # consume queue units a pull stepped over (logged once each)
        self._reput_cond = threading.Condition()
        self.running = False
        self.recovery_report = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._cp_file: MappedFile | None = None
        self._last_dispatched_ts = 0
        self._index_full_ts = 0
        self.last_retention = None
        self.flusher = GroupCommitService(self._flush_snapshot, self._sync, self._stop)
        self._id_host: tuple[bytes, int] | None = None
        self._id_prefix = ""
        self._host_row = b""                  # the store host as put_one writes it (IPv4 only)
        self._topic_fields: dict[str, bytes] = {}
        self._tags_codes: dict[str, int] = {}
        # put_quick's containers (never replaced, only changed in place), handed to the kernel in one tuple
        self._quick = (self.put_lock, self.commitlog.files, self._topic_fields, crc32, self.topic_queue_table,
                       self.append_listeners)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "MessageStore":
        from .recovery import recover_store
        self.root.mkdir(parents=True, exist_ok=True)
        self.lock.acquire()
        try:
            abnormal = (self.root / "abort").exists()
            self._open_checkpoint()
            self.recovery_report = recover_store(self, abnormal)
            create_abort(self.root)
        except BaseException:
            self.lock.release()
            raise
        self.running = True
        self.index.on_full = self._index_full
        if self.cfg.sync_flush:
            self.flusher.flushed = self.commitlog.max_offset
            self._spawn(self.flusher.run, "commitlog-group-commit")
        else:
            self._spawn(self._flush_commitlog_loop, "commitlog-flush")
        self._spawn(self._dispatch_loop, "dispatch")
        if not self.cfg.sync_flush:     # under SYNC_FLUSH every fsync would also write the zeros ahead
            self._spawn(self._prewrite_loop, "commitlog-prewrite")
        self._spawn(self._flush_queues_loop, "consumequeue-flush")
        self._spawn(self._clean_loop, "clean-expired")
        self.reput_from = self.commitlog.max_offset
        confirmed = self.recovery_report.confirm_offset
        if confirmed is not None:             # the rest waits for a master's confirmOffset, or a promotion
            self.reput_from = self.dispatch_limit = self.checkpoint.confirm_phy_offset = confirmed
            self.write_checkpoint()
        if self.cfg.is_slave:
            self._spawn(self._reput_loop, "reput")
        return self

    def _spawn(self, target, name) -> None:
        t = threading.Thread(target=named(target, name), name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _open_checkpoint(self) -> None:
        path = self.root / "checkpoint"
        existed = path.exists()
        if existed and path.stat().st_size < CHECKPOINT_FILE_SIZE:
            with open(path, "r+b") as f:
                f.truncate(CHECKPOINT_FILE_SIZE)
        self._cp_file = MappedFile(path, 0, CHECKPOINT_FILE_SIZE, create=not existed)
        if existed:
            self.checkpoint = decode_checkpoint(self._cp_file.mm, path)

    def write_checkpoint(self) -> None:
        if self.confirm_offsets and self.dispatch_limit is None and not self.cfg.is_slave:
            self.checkpoint.confirm_phy_offset = self.commitlog.max_offset     # a master alone confirms all
        self._cp_file.write_at(0, self.checkpoint.encode()[:40])
        self._cp_file.datasync()

    def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        self._stop.set()
        self.flusher.wake()
        self._dispatch_wake.set()
        with self._reput_cond:
            self._reput_cond.notify_all()
        for t in self._threads:
            t.join(timeout=10)
        self.flusher.release_all()
        with self.put_lock:
            self._flush_all()
            self.commitlog.close()
            for cq in self.queues.values():
                cq.close()
            self.index.close()
            self.write_checkpoint()
            self._cp_file.close()
        remove_abort(self.root)
        self.lock.release()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.shutdown()

    # ------------------------------------------------------------------ queues

    @property
    def queues(self) -> dict[tuple[str, int], ConsumeQueue]:
        """The consume queues, with every record put so far dispatched into them."""
        self.drain_dispatch()
        return self._queues

    def queue(self, topic: str, queue_id: int, create: bool = True) -> ConsumeQueue | None:
        if not create:
            self.drain_dispatch()
        cq = self._queues.get((topic, queue_id))
        if cq is None and create:
            cq = ConsumeQueue(self.root / "consumequeue" / topic / str(queue_id), topic, queue_id,
                              self.cfg.mappedFileSizeConsumeQueue)
            cq.files.dir.mkdir(parents=True, exist_ok=True)
            self._queues[(topic, queue_id)] = cq
        return cq

    # ------------------------------------------------------------------ put

    def put(self, msg: Message, wait_flush: bool = True) -> PutResult:
        """One message: put_batch's work without its lists (the broker's common case); with the
        store kernel one C call checks it, places it, writes it and queues its dispatch."""
        if not self.running or self.cfg.is_slave or self.store_host is not self._id_host:
            return self.put_batch((msg,), batch=False, wait_flush=wait_flush)
        waits = self.cfg.sync_flush and msg.properties.get(Prop.WAIT, "true") != "false"
        if kernel is not None and self._host_row and msg.properties_text is not None:
            got = self._put_kernel(msg, waits)
            if got is not None:
                phys, size, queue_offset, store_ts = got
                return self._put_done(phys, size, queue_offset, store_ts, waits, wait_flush)
        p = self._prepare(msg)
        if type(p) is PutResult:
            return p
        _, size, crc, sys_flag, tail, props, _ = p
        if sys_flag & V6_HOSTS:
            return self.put_batch((msg,), batch=False, wait_flush=wait_flush)
        store_ip, store_port = self.store_host
        with self.put_lock:
            store_ts = time.time_ns() // 1_000_000
            f = self.commitlog.last_for_append()
            pos = f.write_pos
            fits = size + END_FILE_MIN_BLANK_LENGTH <= f.size - pos and pos + size <= f.warm_lo
            if fits:
                tx = sys_flag & TRANSACTION_TYPE_MASK
                if tx not in NOT_DISPATCHED:
                    key = (msg.topic, msg.queue_id)
                    queue_offset = self.topic_queue_table.get(key, 0)
                    self.topic_queue_table[key] = queue_offset + 1
                else:
                    queue_offset = 0
                phys = f.start + pos
                write_record_v4(f.mm, pos, size, crc, msg.queue_id, msg.flag, queue_offset, phys, sys_flag,
                                msg.born_timestamp, msg.born_host[0], msg.born_host[1], store_ts, store_ip, store_port,
                                msg.reconsume_times, msg.prepared_transaction_offset, msg.body, tail)
                f.write_pos = pos + size
                f.store_timestamp = store_ts
                self._pending.append((msg.topic, msg.queue_id, props, phys, size, queue_offset, store_ts, tx))
                self._queued(waits)
        if not fits:     # put_batch rolls the file or waits for the pre-write; not under the put lock: a
            return self.put_batch((msg,), batch=False, wait_flush=wait_flush)   # SYNC_FLUSH wait there held
                                                                                # it from the flusher 5 s
        return self._put_done(phys, size, queue_offset, store_ts, waits, wait_flush)

    def _put_kernel(self, msg, waits: bool):
        """The store kernel's put of one message (a Message or its row, ROW_FIELDS): (commit log
        offset, size, queue offset, store time), or None with nothing written (the Python path
        refuses it, rolls the file or waits)."""
        with self.put_lock:
            files = self.commitlog.files
            f = files[-1] if files and files[-1].write_pos < files[-1].size else self.commitlog.last_for_append()
            pos = f.write_pos
            phys = f.start + pos
            store_ts = time.time_ns() // 1_000_000
            room = f.size - END_FILE_MIN_BLANK_LENGTH
            got = kernel.put_one(msg, f.mm, pos, room if room < f.warm_lo else f.warm_lo, phys, store_ts,
                                 self._topic_fields, self._host_row, crc32, self.cfg.maxMessageSize,
                                 self.topic_queue_table, self._pending)
            if got is None:
                return None
            size, queue_offset = got
            f.write_pos = pos + size
            f.store_timestamp = store_ts
            self._queued(waits)
        return phys, size, queue_offset, store_ts

    def put_quick(self, msg) -> tuple[str, int, int] | None:
        """`put` of a message no put waits for (ASYNC_FLUSH: the broker's send fast path) where the
        store kernel writes it: (message id, size, queue offset), without a PutResult; else None,
        with nothing written (`put` then does it). `msg` is a Message or its row (ROW_FIELDS, a
        tuple: no Message made)."""
        cfg = self.cfg
        if not self._quick_ok(cfg):
            return None
        # _put_kernel, the listeners and the id in one C call (csrc/quick.c)
        got = kernel.put_quick(self._quick, self._pending, msg, self._host_row, self._id_prefix, cfg.maxMessageSize,
                               DISPATCH_BATCH, END_FILE_MIN_BLANK_LENGTH, _kernel_clock())
        if got is None:
            return None
        msg_id, size, queue_offset, dispatch = got
        if dispatch:
            self._quick_queued(dispatch)
        return msg_id, size, queue_offset

    def _quick_ok(self, cfg) -> bool:
        """Whether the kernel's put_quick may put now: built, IPv4 host known, no put waits, a master."""
        return kernel is not None and bool(self._host_row) and cfg.flushDiskType != SYNC_FLUSH \
            and cfg.brokerRole != SLAVE and self.running and self.store_host is self._id_host

    def quick_put_args(self) -> tuple | None:
        """What a compiled caller needs to make put_quick's kernel call itself, where put_quick
        would make it now (else None): (kernel.put_quick, the store's containers, store host
        row, id prefix, max body, dispatch batch, min blank, clock, what to call with a nonzero
        `dispatch` it answers). Good until the store's config or host changes."""
        cfg = self.cfg
        if not self._quick_ok(cfg):
            return None
        return (kernel.put_quick, self._quick, self._host_row, self._id_prefix, cfg.maxMessageSize, DISPATCH_BATCH,
                END_FILE_MIN_BLANK_LENGTH, _kernel_clock(), self._quick_queued)

    def _quick_queued(self, dispatch: int) -> None:
        """As _queued does, once a quick put's record is queued (1: a batch of pending records to
        dispatch, 2: the first one since the last dispatch)."""
        if dispatch == 1:
            with self.put_lock:
                self._dispatch_pending()
        elif self.wake_dispatcher:
            self._dispatch_wake.set()

    def _queued(self, waits: bool) -> None:
        """After a single put joined `_pending` (the put lock is held): dispatch or wake the thread."""
        pending = self._pending
        if len(pending) >= DISPATCH_BATCH:
            self._dispatch_pending()
        elif len(pending) == 1 and not waits and self.wake_dispatcher:   # a waiting put's: by the flusher
            self._dispatch_wake.set()

    def _put_done(self, phys: int, size: int, queue_offset: int, store_ts: int, waits: bool,
                  wait_flush: bool) -> PutResult:
        """A single put's answer, once its record is written: listeners told, the flush waited for."""
        result = PutResult(PutStatus.PUT_OK, phys, size, queue_offset, [f"{self._id_prefix}{phys:016X}"], store_ts)
        for listener in self.append_listeners:
            listener(phys + size)
        if waits:
            if not wait_flush:
                self.flusher.request(phys + size)
            elif not self.flusher.wait(phys + size, self.cfg.syncFlushTimeout / 1000):
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
        return result

    def put_batch(self, msgs, batch: bool = True, wait_flush: bool = True) -> PutResult:
        """Append messages atomically (one lock, one file: a batch never spans files).

        Under SYNC_FLUSH a put whose messages wait (WAIT not "false") returns once the group commit
        has synced it; with `wait_flush=False` it returns at once and the caller waits (the
        broker: on its event loop, told by `flusher.listeners`).

        What does not depend on the position (CRC, sizes, the encoded topic and properties) is
        prepared before the lock; under it each record gets its queue offset and is packed
        straight into the mapped file, and joins the records the dispatch thread puts into
        consume queues and the index in batches (reads dispatch what is pending first).
        """
        refused = self._refusal()
        if refused is not None:
            return refused
        store_host = self.store_host
        topic_part = self._topic_fields.get(msgs[0].topic) if batch else None
        run = prepare_run(msgs, topic_part, self.cfg.maxMessageSize, store_host) if topic_part else None
        if run is not None:
            total = run.total
        else:
            prepared = []
            total = 0
            for m in msgs:
                p = self._prepare(m)
                if type(p) is PutResult:
                    return p
                prepared.append(p)
                total += p[1]
        return self._append(run, None if run is not None else prepared, total, store_host,
                            msgs[0].properties.get(Prop.WAIT, "true") != "false", wait_flush)

    def _refusal(self) -> PutResult | None:
        if not self.running:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="the store is not running")
        if self.cfg.is_slave:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="message store is slave mode, so putMessage is forbidden")
        return None

    def topic_part(self, topic: str) -> bytes | None:
        """The record's TOPICLENGTH + TOPIC of a topic put before (a run needs it), else None."""
        return self._topic_fields.get(topic)

    def put_run(self, run, store_host, wait_flush: bool = True) -> PutResult:
        """put_batch of a run made beforehand (recordrun.batch_run: a producer's batch read straight
        into one, for `store_host`, the store_host it was made with): what put_batch does with the
        run prepare_run makes of the batch's messages."""
        refused = self._refusal()
        if refused is not None:
            return refused
        return self._append(run, None, run.total, store_host, run.may_wait, wait_flush)

    def put_run_quick(self, run) -> tuple[str, int] | None:
        """put_run of a FrameRun no put waits for (the broker's batch fast path), made for the
        store's own store_host, where the store kernel puts it: (its message ids joined by commas,
        its first queue offset), without a PutResult; else None, with nothing written (put_run then
        does it: a roll of the file, a wait for the pre-write, no kernel)."""
        cfg = self.cfg
        if not self._quick_ok(cfg) or type(run) is not FrameRun:
            return None
        got = kernel.put_run_quick(self._quick, self._pending, run, self._id_prefix, DISPATCH_RUNS,
                                   END_FILE_MIN_BLANK_LENGTH, _kernel_clock())
        if got is None:
            return None
        ids, queue_offset, dispatch = got
        if dispatch:
            self._quick_queued(dispatch)
        return ids, queue_offset

    def _append(self, run, prepared, total: int, store_host, may_wait: bool, wait_flush: bool) -> PutResult:
        """put_batch's work under the put lock: `run` (a RecordRun or KernelRun) or `prepared`
        (_prepare's rows), `total` bytes, for `store_host`; `may_wait`: the messages' WAIT allows
        a SYNC_FLUSH wait."""
        store_ip, store_port = store_host
        if store_host is not self._id_host:
            self._id_host = store_host
            self._id_prefix = (store_ip + _I32.pack(store_port)).hex().upper()
            self._host_row = store_ip + _I32.pack(store_port) if len(store_ip) == 4 else b""   # put_one's
        table = self.topic_queue_table
        waits = self.cfg.sync_flush and may_wait
        with self.put_lock:
            store_ts = time.time_ns() // 1_000_000
            f = self.commitlog.last_for_append()
            if total + END_FILE_MIN_BLANK_LENGTH > f.size - f.write_pos:
                f.wait_prewrite(f.write_pos + END_FILE_MIN_BLANK_LENGTH)
                f.write_at(f.write_pos, encode_blank(f.size - f.write_pos))   # the rest of the file stays zeros
                f.write_pos = f.size
                f = self.commitlog.last_for_append()
            mm, start = f.mm, f.start
            pos = f.write_pos
            if pos + total > f.warm_lo:
                f.wait_prewrite(pos + total)
            pending = self._pending
            was_idle = not pending
            if run is not None:
                key = (run.topic, run.queue_id)
                queue_offset = table.get(key, 0)
                table[key] = queue_offset + len(run)
                run.place(start + pos, queue_offset, store_ts)
                run.write(mm, pos)
                first = (start + pos, queue_offset)
                pending.append((run.topic, run.queue_id, run.props, start + pos, total, queue_offset, store_ts,
                                0, run.sizes))
                pos += total
            else:
                first = None
                for m, size, crc, sys_flag, tail, props, text in prepared:
                    if (sys_flag & TRANSACTION_TYPE_MASK) not in NOT_DISPATCHED:
                        key = (m.topic, m.queue_id)
                        queue_offset = table.get(key, 0)
                        table[key] = queue_offset + 1
                    else:
                        queue_offset = 0
                    born_ip, born_port = m.born_host
                    if sys_flag & V6_HOSTS:     # rare: the general encoder
                        mm[pos:pos + size] = encode_record(MessageRecord(
                            size, MESSAGE_MAGIC, crc, m.queue_id, m.flag, queue_offset, start + pos, sys_flag,
                            m.born_timestamp, born_ip, born_port, store_ts, store_ip, store_port, m.reconsume_times,
                            m.prepared_transaction_offset, m.body, m.topic, text))
                    else:
                        write_record_v4(mm, pos, size, crc, m.queue_id, m.flag, queue_offset, start + pos, sys_flag,
                                        m.born_timestamp, born_ip, born_port, store_ts, store_ip, store_port,
                                        m.reconsume_times, m.prepared_transaction_offset, m.body, tail)
                    if first is None:
                        first = (start + pos, queue_offset)
                    pending.append((m.topic, m.queue_id, props, start + pos, size, queue_offset, store_ts,
                                    sys_flag & TRANSACTION_TYPE_MASK))
                    pos += size
            f.write_pos = pos
            f.store_timestamp = store_ts
            end = start + pos
            if len(pending) >= (DISPATCH_BATCH if run is None else DISPATCH_RUNS):
                self._dispatch_pending()
            elif was_idle and not waits and self.wake_dispatcher:   # a waiting put's: by the flusher
                self._dispatch_wake.set()
        prefix = self._id_prefix
        if run is not None:
            ids = run.msg_ids(prefix)
        elif len(prepared) == 1:
            ids = [f"{prefix}{first[0]:016X}"]
        else:
            ids = [f"{prefix}{p:016X}" for p in _offsets(first[0], prepared)]
        result = PutResult(PutStatus.PUT_OK, first[0], total, first[1], ids, store_ts)
        for listener in self.append_listeners:
            listener(end)
        if waits:
            if not wait_flush:
                self.flusher.request(end)
            elif not self.flusher.wait(end, self.cfg.syncFlushTimeout / 1000):
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
        return result

    def _prepare(self, m: Message):
        """(message, size, crc, sysflag, topic+properties tail, properties, text) or the PutResult refusing it."""
        body = m.body
        body_len = len(body)
        if body_len > self.cfg.maxMessageSize:
            return PutResult(PutStatus.MESSAGE_ILLEGAL,
                             remark=f"message body size {body_len} exceeds maxMessageSize {self.cfg.maxMessageSize}")
        topic_part = self._topic_fields.get(m.topic)
        if topic_part is None:
            raw = m.topic.encode()
            if len(raw) > 127:
                return PutResult(PutStatus.MESSAGE_ILLEGAL, remark="topic longer than 127 bytes")
            if len(self._topic_fields) > 10_000:
                self._topic_fields.clear()
            topic_part = self._topic_fields[m.topic] = topic_field(raw)
        text = m.properties_text
        props = m.properties
        if text is None:
            text = format_properties(props)
        elif text and not props:
            props = parse_properties(text)
        raw = text.encode()
        raw_len = len(raw)
        if raw_len > 32767:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, remark="properties longer than 32767 bytes")
        sys_flag = m.sys_flag & ~V6_HOSTS       # set from the hosts themselves: a flag without its 16-byte host is a broken record
        size = MSG_FIXED_SIZE_V4 - 1 + body_len + len(topic_part) + raw_len
        if len(m.born_host[0]) == 16:
            sys_flag |= BORN_V6
            size += HOST_V6_EXTRA
        if len(self.store_host[0]) == 16:
            sys_flag |= STORE_V6
            size += HOST_V6_EXTRA
        return (m, size, crc32(body) & 0x7FFFFFFF, sys_flag, topic_part + _I16.pack(raw_len) + raw,
                props, text)

    # ------------------------------------------------------------------ pre-write

    def _prewrite_loop(self) -> None:
        while not self._stop.is_set():
            if not self._prewrite_some():
                # Idle: look again in 20 ms (32 MiB ahead lasts that long up to 1.6 GB/s of appends);
                # waking every 5 ms took the GIL from a broker serving sync senders 200 times a second.
                self._stop.wait(PREWRITE_IDLE_S)

    def _prewrite_some(self) -> bool:
        """Pre-write one chunk of zeros ahead of the commit log's write position (MappedFile.prewrite)."""
        with self.put_lock:
            f = self.commitlog.last
            if f is None or f.write_pos >= f.size:
                return False
            # The thread needs the GIL back after each chunk (up to a switch interval, 5 ms, while a
            # put loop runs): a chunk right at the write position would make the puts wait for it.
            lo = max(f.warm_to, -(-(f.write_pos + PREWRITE_GAP) // PAGE) * PAGE)
            hi = min(f.size, lo + PREWRITE_CHUNK)
            if lo >= hi or lo - f.write_pos >= PREWRITE_AHEAD:
                return False
            f.warm_lock.acquire()
            f.warm_lo = lo
        try:
            f.prewrite(lo, hi)
        finally:
            f.warm_lo = NOTHING_IN_FLIGHT
            f.warm_lock.release()
        return True

    # ------------------------------------------------------------------ flush

    def _flush_snapshot(self):
        """(what to sync or None, the commit log offset it ends at), taken under the put lock."""
        with self.put_lock:
            if self.cfg.sync_flush:
                # One thread fewer to hand the GIL to per put: the group commit dispatches what it covers.
                self._dispatch_pending()
            files = [(f, f.write_pos) for f in self.commitlog.files if f.flushed_pos < f.write_pos]
            ts = self.commitlog.last.store_timestamp if self.commitlog.last else 0
            end = self.commitlog.max_offset
        return ((files, ts) if files else None), end

    def _sync(self, work) -> None:
        files, ts = work
        for f, pos in files:
            f.sync(pos)
        if ts:
            self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp, ts)

    def _flush_commitlog(self) -> None:
        work, _ = self._flush_snapshot()
        if work is not None:
            self._sync(work)

    def _flush_commitlog_loop(self) -> None:
        interval = self.cfg.flushIntervalCommitLog / 1000
        thorough = self.cfg.flushCommitLogThoroughInterval / 1000
        last_thorough = time.monotonic()
        while not self._stop.is_set():
            self._stop.wait(interval)
            last = self.commitlog.last
            dirty = sum(f.dirty_pages() for f in self.commitlog.files[-2:]) if last else 0
            now = time.monotonic()
            if dirty >= self.cfg.flushCommitLogLeastPages or now - last_thorough >= thorough:
                if now - last_thorough >= thorough:
                    last_thorough = now
                self._flush_commitlog()

    def _flush_queues(self) -> None:
        with self.put_lock:
            ts = self._last_dispatched_ts
            queues = list(self.queues.values())
        for cq in queues:
            cq.flush()
        # logicsMsgTimestamp vouches for the consume queues only (as in Java): written before the
        # index's write-back, which under load can take longer than the queues' and would hold it back.
        if ts:
            self.checkpoint.logics_msg_timestamp = max(self.checkpoint.logics_msg_timestamp, ts)
        self.write_checkpoint()
        self.index.flush()

    def _flush_queues_loop(self) -> None:
        interval = self.cfg.flushIntervalConsumeQueue / 1000
        while not self._stop.wait(interval):
            self._flush_queues()

    def _clean_loop(self) -> None:
        from .retention import delete_expired
        while not self._stop.wait(self.cfg.cleanResourceInterval / 1000):
            report = delete_expired(self)
            if report.commitlog_deleted:
                self.last_retention = report

    def _index_full(self, end_ts: int) -> None:
        self.checkpoint.index_msg_timestamp = end_ts
        self.write_checkpoint()

    def _flush_all(self) -> None:
        for f in self.commitlog.files:
            f.flush()
        if self.commitlog.last and self.commitlog.last.store_timestamp:
            self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp,
                                                       self.commitlog.last.store_timestamp)
        for cq in self.queues.values():
            cq.flush()
        self.index.flush()
        if self._last_dispatched_ts:
            self.checkpoint.logics_msg_timestamp = max(self.checkpoint.logics_msg_timestamp, self._last_dispatched_ts)

    # ------------------------------------------------------------------ reads

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get((topic, queue_id))
        return cq.min_offset if cq else 0

    def in_disk(self, topic: str, queue_id: int, queue_offset: int) -> bool:
        """checkInDiskByConsumeOffset: the message at `queue_offset` is further behind the commit
        log's end than accessMessageInMemoryMaxRatio percent of the machine's memory (False when
        the queue has no such unit)."""
        cq = self.queues.get((topic, queue_id))
        units = cq.units(queue_offset, 1) if cq is not None and queue_offset < cq.max_offset else []
        if not len(units):
            return False
        behind = self.commitlog.max_offset - int(units["offset"][0])
        return behind > total_physical_memory() * self.cfg.accessMessageInMemoryMaxRatio // 100

    def in_memory(self, topic: str, queue_id: int, queue_offset: int) -> bool:
        """5.x checkInMemByConsumeOffset: the record at `queue_offset` is in the page cache (mincore;
        where that cannot be asked, not `in_disk`). False when the queue has no such unit."""
        cq = self.queues.get((topic, queue_id))
        units = cq.units(queue_offset, 1) if cq is not None and cq.min_offset <= queue_offset < cq.max_offset else []
        if not len(units):
            return False
        phys, size = int(units["offset"][0]), int(units["size"][0])
        f = self.commitlog.find(phys)
        if f is None:
            return False
        from mqtool_store.residency import resident
        try:
            answer = resident(f.mm, phys - f.start, size)
        except (ValueError, TypeError):          # the map closed meanwhile (retention)
            return False
        return answer if answer is not None else not self.in_disk(topic, queue_id, queue_offset)

    @property
    def commitlog_min_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def commitlog_max_offset(self) -> int:
        return self.commitlog.max_offset

    def read_bytes(self, offset: int, size: int | None = None) -> bytes | None:
        f = self.commitlog.find(offset)
        if f is None:
            return None
        pos = offset - f.start
        if size is None:
            size = int.from_bytes(f.mm[pos:pos + 4], "big", signed=True)
        if size <= 0 or pos + size > f.write_pos:
            return None
        return f.mm[pos:pos + size]

    def read(self, offset: int) -> MessageRecord | None:
        data = self.read_bytes(offset)
        if data is None:
            return None
        try:
            return decode_record(data)
        except Exception:  # noqa: BLE001 - a bad offset from a client
            return None

    def get(self, topic: str, queue_id: int, offset: int, max_count: int, matches=None, accept=None) -> GetResult:
        """DefaultMessageStore.getMessage: records from `offset`, filtered by tags code (`matches`,
        on the consume queue unit) and by `accept` (on the record's bytes: the broker's SQL92 test),
        scanning at most max(16000, max_count * 20) bytes of consume queue when `accept` is given."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE)
        lo, hi = cq.min_offset, cq.max_offset
        res = GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, [], offset, lo, hi)
        if hi == 0:
            res.next_begin_offset = 0
            return res
        if offset < lo:
            res.status, res.next_begin_offset = GetStatus.OFFSET_TOO_SMALL, lo
            return res
        if offset == hi:
            res.status = GetStatus.OFFSET_OVERFLOW_ONE
            return res
        if offset > hi:
            res.status, res.next_begin_offset = GetStatus.OFFSET_OVERFLOW_BADLY, hi
            return res
        scan = max(800, max_count) if accept is not None else max(max_count, 1) * 4 if matches else max_count
        units = cq.units(offset, scan)
        if not len(units):
            res.status = GetStatus.OFFSET_FOUND_NULL
            res.next_begin_offset = (offset * CQ_UNIT_SIZE // cq.files.file_size + 1) * cq.files.file_size // CQ_UNIT_SIZE
            return res
        scanned, removing, total_bytes = 0, 0, 0
        cl_min = self.commitlog.min_offset
        offsets = units["offset"]
        if len(offsets):
            behind = self.commitlog.max_offset - int(offsets[min(len(offsets), max_count) - 1])
            res.suggest_slave = behind > total_physical_memory() * self.cfg.accessMessageInMemoryMaxRatio // 100
        if matches is None and accept is None:
            plain = self._get_plain(offsets, units["size"], max_count, cl_min, queue_id, offset)
            if plain is not None:               # every unit a readable record of one commit log file
                res.messages = plain
                res.next_begin_offset = offset + len(plain)
                res.status = GetStatus.FOUND
                return res
        f, f_start, f_size = None, 0, 0
        for off, size, code in zip(offsets.tolist(), units["size"].tolist(), units["tags_code"].tolist()):
            if len(res.messages) >= max_count or total_bytes >= self.cfg.maxTransferBytesOnMessageInMemory:
                break
            queue_offset = offset + scanned
            scanned += 1
            if size == 0x7FFFFFFF and off == 0:
                continue
            if off < cl_min:
                removing += 1
                continue
            if matches is not None and not matches(code):
                continue
            pos = off - f_start                  # most records are in the file of the one before
            if not 0 <= pos < f_size:
                f = self.commitlog.find(off)
                if f is None:
                    removing += 1
                    continue
                f_start, f_size = f.start, f.size
                pos = off - f_start
            if size <= 0 or pos + size > f.write_pos:
                removing += 1
                continue
            try:
                if not unit_holds(f.mm, pos, size, queue_id, queue_offset, off):
                    stepped_over(self.stepped_over, topic, queue_id, queue_offset, off, size)
                    continue
                data = f.mm[pos:pos + size]
            except ValueError:                  # deleted by retention meanwhile (its map is closed)
                removing += 1
                continue
            if accept is not None and not accept(data):
                continue
            res.messages.append(data)
            total_bytes += size
        res.next_begin_offset = offset + scanned
        if res.messages:
            res.status = GetStatus.FOUND
        elif removing:
            res.status = GetStatus.MESSAGE_WAS_REMOVING
        else:
            res.status = GetStatus.NO_MATCHED_MESSAGE
        return res

    def get_joined(self, topic: str, queue_id: int, offset: int, max_count: int, codes: bytes | None = None):
        """`get` of a common pull (no record filter; `codes`: pullbody.codes_bytes of the tags codes
        a unit must carry, or None) that finds messages, answered as one joined body (pullbody.py):
        (body, count, next_begin_offset, min_offset, max_offset, suggest_slave); else None."""
        return joined_get(self, topic, queue_id, offset, max_count, codes, total_physical_memory())

    def _get_plain(self, offsets, sizes, max_count: int, cl_min: int, queue_id: int, first: int) -> list | None:
        """`get`'s loop for a pull without filters, in the common case where each unit up to the
        count is a readable record of one commit log file and together they stay under the byte
        limit: its records, checked with a few list-wide builtins instead of a Python step per unit
        (numpy calls cost more than that for a pull's 32 units). None where any unit is otherwise
        (a blank, removed, past the written end, in another file, not its record (unit_holds), the limit
        reached): the loop then decides, unit by unit."""
        offs, szs = offsets[:max_count].tolist(), sizes[:max_count].tolist()
        if not offs or min(szs) <= 0 or sum(szs) - szs[-1] >= self.cfg.maxTransferBytesOnMessageInMemory:
            return None
        f = self.commitlog.find(offs[0])
        if f is None:
            return None
        start = f.start
        if min(offs) < max(cl_min, start) or max(map(add, offs, szs)) - start > f.write_pos:
            return None                         # (a blank unit's size, 0x7FFFFFFF, is past any written end)
        mm = f.mm
        try:
            if not all(map(unit_holds, repeat(mm), [o - start for o in offs], szs, repeat(queue_id),
                           range(first, first + len(offs)), offs)):
                return None
            return [mm[o - start:o - start + size] for o, size in zip(offs, szs)]
        except ValueError:                      # deleted by retention meanwhile (its map is closed)
            return None

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """getOffsetInQueueByTime: first queue offset stored at or after `timestamp` (else the nearest)."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset - 1
        if hi < lo:
            return cq.max_offset
        def ts_at(q):
            u = cq.units(q, 1)
            rec = self.read(int(u["offset"][0])) if len(u) else None
            return rec.store_timestamp if rec else -1
        if ts_at(hi) < timestamp:
            return hi + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if ts_at(mid) < timestamp:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def earliest_time(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get((topic, queue_id))
        if cq is None or cq.max_offset == cq.min_offset:
            return -1
        u = cq.units(cq.min_offset, 1)
        rec = self.read(int(u["offset"][0])) if len(u) else None
        return rec.store_timestamp if rec else -1

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int):
        """(records as bytes, indexLastUpdateTimestamp, indexLastUpdatePhyoffset), re-checked for the key."""
        max_num = min(max_num, self.cfg.maxMsgsNumBatch)
        with self.put_lock:
            self._dispatch_pending()
            offsets, last_ts, last_phy = self.index.query(topic, key, max_num, begin, end)
        out = []
        for off in sorted(set(offsets)):
            data = self.read_bytes(off)
            if data is not None:
                out.append(data)
        return out, last_ts, last_phy

    def topics(self) -> set[str]:
        return {t for t, _ in self.queues}

    def destroy_queues(self, topic: str) -> int:
        """Remove a topic's consume queues (cleanUnusedTopic); the commit log keeps its records."""
        with self.put_lock:
            gone = [(t, q) for t, q in self.queues if t == topic]
            for key in gone:
                self.queues.pop(key).close()
                self.topic_queue_table.pop(key, None)
        shutil.rmtree(self.root / "consumequeue" / topic, ignore_errors=True)
        return len(gone)

    def clean_expired_queues(self) -> int:
        """cleanExpiredConsumerQueue: queues whose last unit ends below the commit log's min offset
        (their messages were deleted by retention) are removed; never the schedule topic's, whose
        positions delayOffset.json keeps."""
        low = self.commitlog.min_offset
        removed = 0
        for (topic, qid), cq in list(self.queues.items()):
            if topic == SCHEDULE_TOPIC:
                continue
            last = cq.max_offset - 1          # its last unit, below min_offset or not (getLastOffset)
            units = cq.units(last, 1) if last >= 0 else []
            if len(units) and int(units["offset"][0]) + int(units["size"][0]) < low:
                with self.put_lock:
                    self.queues.pop((topic, qid)).close()
                    self.topic_queue_table.pop((topic, qid), None)
                shutil.rmtree(self.root / "consumequeue" / topic / str(qid), ignore_errors=True)
                removed += 1
        return removed

