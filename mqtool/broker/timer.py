"""Timer messages (5.x TimerMessageStore, spec rocketmq5.md §1.6-1.8, 1.11): rmq_sys_wheel_timer queue 0
into timerlog and the wheel (enqueue), due slots back to their real topics (dequeue), the checkpoint,
and recovery after a crash. Master only: the controller starts and stops it with the role.

One task on the broker's loop does a round every 100 ms x P/1000: the write time moves to now
floored to P, new wheel-topic records are enqueued, then every slot before the write time is
dequeued. Enqueue and dequeue never run at once, so no slot is read while a unit is added to it.
A message costs one unit append and one slot write to store, and one unit read to deliver.
"""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import time

import numpy as np

from mqtool.broker.background import cancel
from mqtool.broker.timerhook import may_be_timer, timer_hook
from mqtool_store.codes import TIMER_BLANK_SLOTS, TIMER_SLOTS_TOTAL, TIMER_TOPIC, Prop, TimerMagic
from mqtool_store.configfiles import dumps_fastjson, load_config, write_config
from mqtool_store.javahash import java_string_hash
from mqtool_store.messagestore import Message, PutStatus
from mqtool_store.properties import format_properties
from mqtool_store.timerlog import TimerCheck, TimerUnit, snap_precision
from mqtool_store.timerstore import TimerCheckFile, TimerLog, TimerWheel

log = logging.getLogger("mqtool.broker.timer")
LONG_MAX = (1 << 63) - 1
ENQUEUE_BATCH = 256               # wheel-topic records read at once
ENQUEUE_BUDGET_S = 0.05           # enqueue's share of a round when it is behind; then dequeue's turn
YIELD_EVERY = 256                 # messages delivered between yields to the loop
CQ_WALK_BACK = 20_000             # recovery: CQ entries searched for the last unit's record
CLEAN_EVERY_S = 30                # timerlog files whose records retention removed go (TimerMessageStore's 30 s)
PRUNE_METRICS_EVERY_S = 180       # timingCount entries of deleted topics dropped (TimerMetrics' 3 minutes)
DROPPED = (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED, PutStatus.WHEEL_TIMER_MSG_ILLEGAL,
           PutStatus.WHEEL_TIMER_FLOW_CONTROL, PutStatus.WHEEL_TIMER_NOT_ENABLE)
PERM_RW = 6


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@functools.lru_cache(maxsize=4096)
def _topic_hash(topic: str) -> int:
    return java_string_hash(topic)


class TimerService:
    def __init__(self, ctrl):
        self.ctrl = ctrl
        cfg = ctrl.store_config
        self.cfg = cfg
        self.precision = snap_precision(cfg.timerPrecisionMs)
        roll = cfg.timerRollWindowSlot        # clamped as TimerMessageStore does (slotsTotal - TIMER_BLANK_SLOTS)
        self.roll_window = roll if 2 <= roll <= TIMER_SLOTS_TOTAL - TIMER_BLANK_SLOTS else \
            TIMER_SLOTS_TOTAL - TIMER_BLANK_SLOTS
        self.log: TimerLog | None = None
        self.wheel: TimerWheel | None = None
        self.check: TimerCheckFile | None = None
        self.read_ms = 0                  # currReadTimeMs: the next slot to dequeue
        self.write_ms = 0                 # currWriteTimeMs: now floored to P
        self.queue_offset = 0             # currQueueOffset: the next wheel-topic record to enqueue
        self.enqueued = self.dequeued = 0
        self.tps = (0.0, 0.0)             # enqueue, dequeue per second (the last sample)
        self._tps_at = (time.monotonic(), 0, 0)
        self.timing: dict[str, int] = {}  # per real topic: messages waiting (timermetrics' timingCount)
        self.metrics_path = cfg.root / "config" / "timermetrics"
        self._flushed = self._cleaned = self._pruned = time.monotonic()
        self._topic_made = False
        self._task: asyncio.Task | None = None
        self.running = False
        self.behind = False               # enqueue left records for the next round (which comes at once)
        self.replay: tuple[int, int, int] | None = None   # (queue offset, read time, end): recover's replay

    # ------------------------------------------------------------------ put hook

    def hook(self, msg: Message):
        """The put hook on every single-message put (BrokerController.put): a refusal or None."""
        if not may_be_timer(msg):
            return None
        text = msg.properties_text
        if text is not None and "TIMER_OUT_MS\x01" in text and "DELAY\x01" not in text:
            return None                     # delivered already (or rolled): never timed again
        refused = timer_hook(msg, now_ms(), self.cfg.timerWheelEnable, self.precision, self.cfg.timerMaxDelaySec,
                             self.is_reject)
        if refused is None and msg.topic == TIMER_TOPIC and not self._topic_made:
            self.ctrl.topics.create_system(TIMER_TOPIC, 1, PERM_RW)      # (Java creates it at start)
            self._topic_made = True
        return refused

    def is_reject(self, slot_ms: int) -> bool:
        """TimerMessageStore.isReject: the slot holds timerCongestNumEachSlot messages already."""
        limit = self.cfg.timerCongestNumEachSlot
        return self.wheel is not None and limit < 0x7FFFFFFF and self.wheel.get(slot_ms).num >= limit

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if not self.cfg.timerWheelEnable:
            return
        self.running = True
        if self.log is None and (self.cfg.root / "timerwheel").exists():
            self.open()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self.running = False
        await cancel(self._task)
        self._task = None
        if self.log is not None:
            self.flush()
            self.log.close()
            self.wheel.close()
            self.check.close()
            self.log = self.wheel = self.check = None

    def open(self) -> None:
        """The files (made where missing: 5.3.3 makes them at start, mqtool at the first timer
        message) and their recovery."""
        root = self.cfg.root
        self.log = TimerLog(root / "timerlog", self.cfg.mappedFileSizeTimerLog)
        self.wheel = TimerWheel(root / "timerwheel", self.precision)
        self.check = TimerCheckFile(root / "config" / "timercheck")
        loaded = load_config(self.metrics_path)
        self.timing = {k: int(v.get("count", 0)) for k, v in loaded.data.get("timingCount", {}).items()}
        self.recover(self.check.read())
        self._topic_made = self._topic_made or TIMER_TOPIC in self.ctrl.topics.table

    def recover(self, cp: TimerCheck) -> None:
        """TimerMessageStore.recover: units after the checkpoint re-linked into their slots, the
        enqueue pointer after the last unit's record, the read pointer from the checkpoint."""
        size = self.log.file_size
        start = max(0, cp.last_timer_log_flush_pos - size)
        start -= start % size
        positions, units, end = self.log.scan(start)
        self._relink(positions, units)
        self.log.truncate(end)
        self._check_phy_pos(start, end, cp.last_read_time_ms)
        store = self.ctrl.store
        lo, hi = store.min_offset(TIMER_TOPIC, 0), store.max_offset(TIMER_TOPIC, 0)
        offset = cp.last_timer_queue_offset
        if len(units):
            found = self._queue_offset_of(int(units["offset_py"][-1]), hi)
            if found is not None:
                offset = found + 1
        self.queue_offset = min(max(offset, lo), hi)
        self.replay = None
        if not len(units) and not self.log.files.files and cp.last_read_time_ms > 0 and lo < hi:
            # A checkpoint without a timerlog: a promoted slave's copy of its old master's (slave
            # sync), or a master that never needed a unit. What the wheel held is not here: every
            # wheel-topic record is enqueued again but those the checkpoint says were delivered
            # (enqueued before its queue offset, due before its read time) and roll copies (their
            # first record is replayed too).
            self.replay = (cp.master_timer_queue_offset, cp.last_read_time_ms, hi)
            self.queue_offset = lo
        floor = now_ms() // self.precision * self.precision
        self.read_ms = max(cp.last_read_time_ms, floor - (TIMER_SLOTS_TOTAL - TIMER_BLANK_SLOTS) * self.precision)
        self.write_ms = floor
        log.info("timer store recovered: timerlog end %d (%d units rescanned), enqueue from %d, read from %d",
                 end, len(units), self.queue_offset, self.read_ms)

    def _relink(self, positions, units) -> None:
        """reviseSlot(force): each slot's last unit among `units` becomes its lastPos."""
        times = (units["write"] + units["delay"]).astype("int64")
        slot_times, from_end = np.unique(times[::-1], return_index=True)      # each slot's last unit wins
        for t, k in zip(slot_times.tolist(), (len(times) - 1 - from_end).tolist()):
            slot = self.wheel.get(t)
            pos = int(positions[k])
            if slot.time_ms < 0:
                self.wheel.put(t, pos, pos, 1)
            elif slot.last_pos != pos:
                self.wheel.put(t, slot.first_pos, pos, slot.num, slot.magic)

    def _check_phy_pos(self, start: int, end: int, read_ms: int) -> None:
        """TimerWheel.checkPhyPos: a slot still due whose lastPos lies past the recovered end was
        filled before the rescanned range; rescan from its first unit (nothing is cut this time).
        A slot left pointing past the end has no unit before it: it is emptied, and its messages
        are enqueued again from the wheel topic (their queue offsets come after the last unit's)."""
        slots = self.wheel.slots
        p = self.precision

        def past_end():                 # due slots whose last unit lies past the end
            return (slots["time"] >= read_ms // p) & (slots["last"] >= end) & (slots["num"] > 0)
        due = past_end()
        if not due.any():
            return
        first = int(slots["first"][due].min())
        if 0 <= first < start:
            positions, units, _ = self.log.scan(first)
            keep = positions < end
            self._relink(positions[keep], units[keep])
        for idx in np.flatnonzero(past_end()):
            self.wheel.put(int(slots["time"][idx]) * p, -1, -1, 0)
            log.warning("timer recovery: slot %d pointed past the timerlog's end %d; emptied (its messages are "
                        "enqueued again)", int(slots["time"][idx]) * p, end)

    def _queue_offset_of(self, offset_py: int, hi: int) -> int | None:
        cq = self.ctrl.store.queue(TIMER_TOPIC, 0, create=False)
        if cq is None:
            return None
        q = hi
        while q > max(0, hi - CQ_WALK_BACK, cq.min_offset):
            n = min(1024, q - max(0, hi - CQ_WALK_BACK, cq.min_offset))
            units = cq.units(q - n, n)
            hits = (units["offset"] == offset_py).nonzero()[0]
            if len(hits):
                return q - n + int(hits[-1])
            q -= n
        return None

    # ------------------------------------------------------------------ rounds

    async def _run(self) -> None:
        p = self.precision
        while True:
            try:
                await self.round()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep the timer going; the round is tried again
                log.exception("timer round failed")
            # every 100 ms x P/1000 (TimerEnqueueGetService's idle pause), and just after each P
            # boundary, where a slot falls due: delivery is at most P (and a round's work) late
            to_boundary = (p - time.time_ns() // 1_000_000 % p + 1) / 1000
            await asyncio.sleep(0 if self.behind else min(0.1 * p / 1000, to_boundary))

    async def round(self) -> None:
        store = self.ctrl.store
        if self.log is None:
            if store.max_offset(TIMER_TOPIC, 0) == 0:
                return                      # no timer message yet: no files
            self.open()
        self.write_ms = now_ms() // self.precision * self.precision
        self.behind = False
        if not self.cfg.timerStopEnqueue:
            self.behind = await self.enqueue()
        if not self.cfg.timerStopDequeue:
            await self.dequeue()
        mono = time.monotonic()
        # The checkpoint goes into its map every round (a kill -9 keeps the page cache, so a restart
        # repeats at most the slot in progress); the files are made durable every timerFlushIntervalMs.
        self.write_check(durable=False)
        if mono - self._flushed >= self.cfg.timerFlushIntervalMs / 1000:
            self._flushed = mono
            await asyncio.get_running_loop().run_in_executor(None, self.flush_files)
            self.write_check()
            self.persist_metrics()
        if mono - self._pruned >= PRUNE_METRICS_EVERY_S:
            self._pruned = mono
            self.prune_metrics()
        if mono - self._cleaned >= CLEAN_EVERY_S:
            self._cleaned = mono
            gone = self.log.delete_expired(store.commitlog_min_offset)
            if gone:
                log.info("timer: %d timerlog files removed (their records are below the commit log)", gone)
        then, enq, deq = self._tps_at
        if mono - then >= 1:
            self.tps = ((self.enqueued - enq) / (mono - then), (self.dequeued - deq) / (mono - then))
            self._tps_at = (mono, self.enqueued, self.dequeued)

    async def enqueue(self) -> bool:
        """Wheel-topic records into the wheel, for at most ENQUEUE_BUDGET_S (then dequeue has its
        turn: a burst of timer sends must not hold up deliveries); whether some are left."""
        store = self.ctrl.store
        hi = store.max_offset(TIMER_TOPIC, 0)
        cq = store.queue(TIMER_TOPIC, 0, create=False)
        stop = time.monotonic() + ENQUEUE_BUDGET_S
        while self.queue_offset < hi and cq is not None:
            units = cq.units(self.queue_offset, min(ENQUEUE_BATCH, hi - self.queue_offset))
            if not len(units):
                break
            for phys, size in zip(units["offset"].tolist(), units["size"].tolist()):
                rec = store.read(phys)
                if rec is not None:
                    await self._enqueue_one(rec, phys, size)
                self.queue_offset += 1
            if time.monotonic() >= stop:
                break
            await asyncio.sleep(0)
        return self.queue_offset < hi

    async def _enqueue_one(self, rec, phys: int, size: int) -> None:
        props = rec.properties
        try:
            delayed = int(props[Prop.TIMER_OUT_MS])
        except (KeyError, ValueError):
            log.warning("timer: record at %d has no TIMER_OUT_MS, skipped", phys)
            return
        if self.replay is not None and self._replayed(props, delayed):
            return
        write = self.write_ms
        self.enqueued += 1
        real = props.get(Prop.REAL_TOPIC)
        delete = Prop.TIMER_DEL_UNIQKEY in props
        if real and not delete and Prop.TIMER_ROLL_TIMES not in props:
            self.timing[real] = self.timing.get(real, 0) + 1       # waiting from now (a roll is counted once)
        if delayed < write:                 # due already: straight to delivery, no unit
            await self._deliver(rec, LONG_MAX, roll=False)
            return
        magic = TimerMagic.MAGIC_DEFAULT
        slot_ms = delayed
        p, window = self.precision, self.roll_window
        if delayed - write >= window * p:
            magic |= TimerMagic.MAGIC_ROLL
            slot_ms = write + (window // 2 * p if delayed - write - window * p < window // 3 * p else window * p)
        if delete:
            magic |= TimerMagic.MAGIC_DELETE
        slot = self.wheel.get(slot_ms)
        pos = self.log.append(TimerUnit(slot.last_pos, int(magic), write, slot_ms - write, phys, size,
                                        _topic_hash(real) if real else 0).encode())
        self.wheel.put(slot_ms, slot.first_pos if slot.first_pos >= 0 else pos, pos,
                       slot.num - 1 if delete else slot.num + 1, slot.magic)

    def _replayed(self, props, delayed: int) -> bool:
        """In a replay (recover): whether this record was dealt with before (skip it)."""
        delivered_below, read_ms, end = self.replay
        offset = self.queue_offset
        if offset >= end:
            self.replay = None
            return False
        return Prop.TIMER_ROLL_TIMES in props or (offset < delivered_below and delayed < read_ms)

    async def dequeue(self) -> None:
        p = self.precision
        while self.read_ms < self.write_ms and self.running:
            if self.write_ms - self.read_ms > 64 * p:
                self.read_ms = self.wheel.next_used(self.read_ms, self.write_ms)
                if self.read_ms >= self.write_ms:
                    break
            await self._dequeue_slot(self.read_ms)
            self.read_ms += p

    async def _dequeue_slot(self, slot_ms: int) -> None:
        slot = self.wheel.get(slot_ms)
        if slot.time_ms < 0:
            return
        deletes, normals = [], []
        pos = slot.last_pos
        while pos >= 0:
            unit = self.log.read(pos)
            if unit is None:
                log.warning("timer: slot %d names timerlog %d, which holds no unit", slot_ms, pos)
                break
            (deletes if unit.is_delete and not unit.is_roll else normals).append(unit)
            if unit.prev_pos >= pos:
                break
            pos = unit.prev_pos
        normals.reverse()                   # enqueue order
        store = self.ctrl.store
        cancelled = set()
        for unit in deletes:
            rec = store.read(unit.offset_py)
            if rec is not None and rec.properties.get(Prop.TIMER_DEL_UNIQKEY):
                cancelled.add(rec.properties[Prop.TIMER_DEL_UNIQKEY])
        now = str(now_ms())
        for n, unit in enumerate(normals, 1):
            rec = store.read(unit.offset_py)
            if rec is None:
                log.warning("timer: the record at %d (timerlog unit) is gone, skipped", unit.offset_py)
                continue
            props = rec.properties
            if not unit.is_roll and cancelled and \
                    f"{props.get(Prop.REAL_TOPIC)}+{props.get(Prop.UNIQ_KEY)}" in cancelled:
                self._waiting_done(props)
                continue                    # recalled
            msg = self._converted(rec, unit.write_time, unit.is_roll, now)
            if msg is None:
                continue
            # WAIT=false: BrokerController.put would neither wait for a flush or a replica nor run
            # the hook (TIMER_OUT_MS is set), so its synchronous twin stores it
            result = self.ctrl.put_now(msg)
            if not result.ok and result.status not in DROPPED:
                result = await self._retry(msg)
            if result.ok:
                self.dequeued += 1
            else:
                log.error("timer: delivery of %s to %s failed: %s", msg.properties.get(Prop.UNIQ_KEY), msg.topic,
                          result.status.value)
            if n % YIELD_EVERY == 0:
                await asyncio.sleep(0)
                now = str(now_ms())

    def _waiting_done(self, props) -> None:
        real = props.get(Prop.REAL_TOPIC)
        if real and real in self.timing:
            self.timing[real] = max(0, self.timing[real] - 1)

    async def _deliver(self, rec, enqueue_ms: int, roll: bool) -> None:
        """A record due on arrival, delivered without a unit."""
        msg = self._converted(rec, enqueue_ms, roll, str(now_ms()))
        if msg is None:
            return
        result = self.ctrl.put_now(msg)
        if not result.ok and result.status not in DROPPED:
            result = await self._retry(msg)
        if result.ok:
            self.dequeued += 1
        else:
            log.error("timer: delivery of %s to %s failed: %s", msg.properties.get(Prop.UNIQ_KEY), msg.topic,
                      result.status.value)

    def _converted(self, rec, enqueue_ms: int, roll: bool, now: str) -> Message | None:
        """TimerMessageStore.convert: back to the real topic (or the wheel again when rolling); None
        for a delete marker, which is never put (doPut's PUT_NO_RETRY)."""
        props = dict(rec.properties)
        if not roll and Prop.TIMER_DEL_UNIQKEY in props:
            return None
        props[Prop.TIMER_ENQUEUE_MS] = str(enqueue_ms)
        if roll:
            props[Prop.TIMER_ROLL_TIMES] = str(int(props.get(Prop.TIMER_ROLL_TIMES, "0")) + 1)
        props[Prop.TIMER_DEQUEUE_MS] = now
        props[Prop.WAIT] = "false"
        if roll:
            topic, qid = rec.topic, rec.queue_id
        else:
            topic = props.pop(Prop.REAL_TOPIC, rec.topic)
            try:
                qid = int(props.pop(Prop.REAL_QID, "0"))
            except ValueError:
                qid = 0
            if self.timing:
                self._waiting_done(rec.properties)
        return Message(topic, qid, rec.body, props, format_properties(props), rec.flag, rec.sys_flag,
                       rec.born_timestamp, (rec.born_ip, rec.born_port), rec.reconsume_times)

    async def _retry(self, msg: Message):
        """doPut's retries: every 500 ms x P/1000, 3 times (or until it works with
        timerEnableRetryUntilSuccess); a refusal that a retry cannot mend ends them."""
        attempt = 0
        while True:
            attempt += 1
            await asyncio.sleep(0.5 * self.precision / 1000)
            result = self.ctrl.put_now(msg)
            if result.ok or result.status in DROPPED or (attempt >= 3 and not self.cfg.timerEnableRetryUntilSuccess):
                return result

    # ------------------------------------------------------------------ checkpoint and figures

    def flush_files(self) -> None:
        if self.log is not None:
            self.log.flush()
            self.wheel.flush()

    def write_check(self, durable: bool = True) -> None:
        if self.check is None:
            return
        old = self.check.read()
        self.check.write(TimerCheck(self.read_ms, self.log.max_offset, self.queue_offset, self.queue_offset,
                                    old.state_version, now_ms(), old.counter + durable))
        if durable:
            self.check.flush()

    def flush(self) -> None:
        self.flush_files()
        self.write_check()
        self.persist_metrics()

    def prune_metrics(self) -> None:
        """TimerMetrics.cleanMetrics: topics no longer in topics.json dropped (rmq_sys_* and LMQ kept)."""
        table = self.ctrl.topics.table
        self.timing = {t: n for t, n in self.timing.items()
                       if t in table or t.startswith(("rmq_sys_", "%LMQ%"))}

    def metrics(self) -> dict:
        """TimerMetrics' content: per real topic, the messages waiting in the wheel."""
        stamp = now_ms()
        return {"dataVersion": {"counter": self.enqueued + self.dequeued, "stateVersion": 0, "timestamp": stamp},
                "timingCount": {t: {"count": n, "timeStamp": stamp} for t, n in sorted(self.timing.items())}}

    def metrics_json(self) -> str:
        """GET_TIMER_METRICS' body (fastjson without BrowserCompatible: compact)."""
        return json.dumps(self.metrics(), separators=(",", ":"), ensure_ascii=False)

    def persist_metrics(self) -> None:
        """config/timermetrics (TimerMetrics.persist)."""
        if self.timing or self.metrics_path.exists():
            write_config(self.metrics_path, dumps_fastjson(self.metrics()))

    def adopt(self, body: bytes) -> None:
        """A slave's copy of its master's timer checkpoint (GET_TIMER_CHECK_POINT, as 5.3.3's slave
        sync): read time and queue offsets taken, this broker's own timerlog position kept. A
        promoted slave's timer starts from it (recover's replay)."""
        from mqtool_store.timerlog import decode_check
        if self.running:
            return
        theirs = decode_check(body)
        check = self.check or TimerCheckFile(self.cfg.root / "config" / "timercheck")
        try:
            mine = check.read()
            check.write(TimerCheck(theirs.last_read_time_ms, mine.last_timer_log_flush_pos,
                                   theirs.last_timer_queue_offset, theirs.master_timer_queue_offset,
                                   theirs.state_version, theirs.timestamp, theirs.counter))
            check.flush()
        finally:
            if check is not self.check:
                check.close()

    def status(self) -> dict:
        """What GET_BROKER_RUNTIME_INFO and `mqtool timer status` show (AdminBrokerProcessor)."""
        if not self.cfg.timerWheelEnable or not self.running:
            return {"timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
                    "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0"}
        now = now_ms()
        congest, next_due = self.wheel.pending(self.read_ms) if self.wheel is not None else (0, -1)
        behind = self.ctrl.store.max_offset(TIMER_TOPIC, 0) - self.queue_offset
        return {"timerReadBehind": str(max(0, (now - self.read_ms) // 1000) if self.log is not None else 0),
                "timerOffsetBehind": str(behind), "timerCongestNum": str(congest),
                "timerEnqueueTps": f"{self.tps[0]:.1f}", "timerDequeueTps": f"{self.tps[1]:.1f}",
                "timerNextDueMs": str(next_due + self.precision if next_due >= 0 else -1)}

