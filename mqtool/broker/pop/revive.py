"""Redelivery of what POP consumers did not ack (5.x PopReviveService; rocketmq5.md 2.8, 2.9), on a master.

Each revive queue is read in order as group CID_RMQ_SYS_REVIVE_GROUP. A checkpoint is held in memory
until its invisible time is over; acks read after it set its bits. Then every message it names that
is not acked is put to the group's POP retry topic (`%RETRY%<group>_<topic>`, queue 0) with
reconsumeTimes + 1, or, past the group's retryMaxTimes, to `%DLQ%<group>`. The group's revive offset
is committed only up to the oldest checkpoint still held, so after a restart (a kill -9 too) the
scan starts where no checkpoint is lost: an ack is always behind its checkpoint in its queue, so
nothing acked comes back. A revived checkpoint is closed by a batch ack of what was put back (a
record 5.3.3 does not write), so a rescan does not revive it twice; only a crash between the re-put
and that ack does (at least once). On that first scan the POP groups' offsets are also brought up to every checkpoint seen
(they advance at pop time, and a kill -9 can lose the last ones written to consumerOffset.json).
"""
from __future__ import annotations

import asyncio
import logging
import time

from mqtool_store.codes import Prop
from mqtool_store.commitlog import decode_record
from mqtool_store.messagestore import GetStatus, Message
from mqtool_store.poprecords import REVIVE_GROUP, AckMsg, CheckPoint, decode_revive_body
from mqtool_store.properties import format_properties

from mqtool.broker.background import cancel

log = logging.getLogger("mqtool.broker.pop")
TICK_S = 0.1
BATCH = 32
FIRST_POP_TIME = "1ST_POP_TIME"
RETRY_BACKOFF_MS = 1000         # a failed re-put is tried again this much later


def _now() -> int:
    return time.time_ns() // 1_000_000


class ReviveService:
    def __init__(self, ctrl, pop):
        self.ctrl, self.pop = ctrl, pop
        self.scanned: dict[int, int] = {}                        # revive qid -> next offset to read
        self.held: dict[int, dict[str, CheckPoint]] = {}         # revive qid -> checkpoint key -> checkpoint
        self.not_before: dict[str, int] = {}                     # a checkpoint whose re-put failed
        self.revived = 0                                         # messages put back (tests, metrics)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """On a master (at start, or promoted): the first scan of every revive queue at once, so the
        POP offsets are caught up (`_catch_up_offset`) before the next POP is served."""
        self.scanned.clear()
        self.held.clear()
        if self.has_topic():
            for qid in range(self.pop.revive_queue_num):
                self.scan(qid)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def has_topic(self) -> bool:
        """The revive topic exists, or its queues do (replicated before the topic's config reached a
        slave that has since been promoted: the config is made again)."""
        topic = self.pop.revive_topic
        if self.ctrl.topics.get(topic) is not None:
            return True
        if any(self.ctrl.store.max_offset(topic, q) > 0 for q in range(self.pop.revive_queue_num)):
            self.pop.ensure_revive_topic()
            return True
        return False

    async def stop(self) -> None:
        await cancel(self._task)
        self._task = None
        self.commit_offsets()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        saved = loop.time()
        while True:
            try:
                await self.step()
            except Exception:
                log.exception("POP revive failed")
            order = self.pop.order
            if order.dirty and loop.time() - saved >= self.ctrl.config.flushConsumerOffsetInterval / 1000:
                saved = loop.time()             # consumerOrderInfo.json, on a thread
                await loop.run_in_executor(None, order.persist)
            await asyncio.sleep(TICK_S)

    async def step(self, now: int | None = None) -> int:
        """One scan of every revive queue and the revive of what is due: the messages put back."""
        if not self.has_topic():
            return 0
        done = 0
        for qid in range(self.pop.revive_queue_num):
            self.scan(qid)
            done += await self.revive_due(qid, now if now is not None else _now())
        self.commit_offsets()
        return done

    # ------------------------------------------------------------------ reading

    def scan(self, qid: int) -> None:
        store, topic = self.ctrl.store, self.pop.revive_topic
        first = qid not in self.scanned
        if first:
            committed = self.ctrl.offsets.query(REVIVE_GROUP, topic, qid)
            self.scanned[qid] = max(committed, store.min_offset(topic, qid))
            self.held.setdefault(qid, {})
        held = self.held[qid]
        while True:
            offset = self.scanned[qid]
            result = store.get(topic, qid, offset, BATCH)
            if result.status is GetStatus.OFFSET_TOO_SMALL:
                self.scanned[qid] = result.next_begin_offset
                continue
            if result.status is not GetStatus.FOUND:
                return
            for data in result.messages:
                rec = decode_record(data)
                item = decode_revive_body(rec.tags, rec.body)
                if isinstance(item, CheckPoint):
                    item.ro = rec.queue_offset
                    held[item.key()] = item
                    if first:
                        self._catch_up_offset(item)
                elif isinstance(item, AckMsg):
                    self._ack(held, item)
            self.scanned[qid] = result.next_begin_offset

    def _ack(self, held: dict[str, CheckPoint], ack: AckMsg) -> None:
        ck = held.get(f"{ack.t}{ack.c}{ack.q}{ack.so}{ack.pt}{ack.bn}")
        if ck is None:
            return                       # revived already, or acked twice: nothing to do
        for offset in ack.offsets:
            i = ck.index_of(offset)
            if i >= 0:
                ck.bm |= 1 << i
        if ck.bm == (1 << ck.n) - 1:
            del held[ck.key()]

    def _catch_up_offset(self, ck: CheckPoint) -> None:
        """A POP group's offset moves at pop time: never behind a checkpoint's last message."""
        last = ck.offset(ck.n - 1) + 1
        if self.ctrl.offsets.query(ck.c, ck.t, ck.q) < last:
            self.ctrl.offsets.commit(ck.c, ck.t, ck.q, last)

    def commit_offsets(self) -> None:
        if self.ctrl.is_slave:
            return
        offsets, topic = self.ctrl.offsets, self.pop.revive_topic
        for qid, offset in self.scanned.items():
            held = self.held.get(qid)
            upto = min((ck.ro for ck in held.values()), default=offset) if held else offset
            if offsets.query(REVIVE_GROUP, topic, qid) != upto:       # (an idle broker rewrites no file)
                offsets.commit(REVIVE_GROUP, topic, qid, upto)

    # ------------------------------------------------------------------ reviving

    async def revive_due(self, qid: int, now: int) -> int:
        held = self.held.get(qid)
        if not held:
            return 0
        due = sorted((ck for ck in held.values() if ck.revive_time <= now
                      and self.not_before.get(ck.key(), 0) <= now), key=lambda ck: ck.ro)
        done = 0
        for ck in due:
            ok, n = await self.revive(ck, qid)
            done += n
            if ok:
                held.pop(ck.key(), None)
                self.not_before.pop(ck.key(), None)
            else:
                self.not_before[ck.key()] = now + RETRY_BACKOFF_MS
        return done

    async def revive(self, ck: CheckPoint, qid: int) -> tuple[bool, int]:
        """Every un-acked message of the checkpoint back (True when all were put, or need not be),
        then a batch ack of what was put back into the revive queue: a scan that starts before the
        checkpoint again (after a kill -9 lost the revive offset) finds it done and puts back
        nothing twice, acked copies included."""
        ctrl = self.ctrl
        group_cfg = ctrl.groups.find(ck.c)
        if ctrl.topics.get(ck.t) is None or group_cfg is None:
            return True, 0              # the topic or the group is gone: skipped, as 5.3.3 does
        done, back = 0, []
        for i in range(ck.n):
            if ck.bm >> i & 1:
                continue
            result = ctrl.store.get(ck.t, ck.q, ck.offset(i), 1)
            if result.status is not GetStatus.FOUND:
                continue                # removed by retention meanwhile
            rec = decode_record(result.messages[0])
            put = await ctrl.put(self.retry_message(rec, ck, group_cfg.retryMaxTimes))
            if not put.ok:
                log.warning("POP revive of %s queue %d offset %d failed: %s", ck.t, ck.q, ck.offset(i), put.status)
                if back:
                    await self.pop.append_ack(AckMsg(-1, ck.so, ck.c, ck.t, ck.q, ck.pt, ck.bn, back), qid)
                return False, done
            ck.bm |= 1 << i             # a retry of this checkpoint skips what is back already
            back.append(ck.offset(i))
            done += 1
            self.revived += 1
        if back:
            await self.pop.append_ack(AckMsg(-1, ck.so, ck.c, ck.t, ck.q, ck.pt, ck.bn, back), qid)
        return True, done

    def retry_message(self, rec, ck: CheckPoint, max_times: int) -> Message:
        """reviveRetry's copy: body, tags, flags, born time and properties kept, reconsumeTimes + 1,
        1ST_POP_TIME the checkpoint's pop time on the first retry; to the DLQ past retryMaxTimes."""
        ctrl = self.ctrl
        props = dict(rec.properties)
        if rec.reconsume_times == 0 or FIRST_POP_TIME not in props:
            props[FIRST_POP_TIME] = str(ck.pt)
        reconsume = rec.reconsume_times + 1
        if reconsume > max_times:
            return self.pop.dlq_message(rec, ck.c, ck.t, reconsume, props)
        topic = ck.t if ck.t.startswith("%RETRY%") else self.pop.retry_topic(ck.t, ck.c)
        if ctrl.topics.get(topic) is None:
            ctrl.topics.create_system(topic, 1)
            if ctrl.offsets.query(ck.c, topic, 0) < 0:
                ctrl.offsets.commit(ck.c, topic, 0, 0)
        props.pop(Prop.WAIT, None)
        return Message(topic, 0, rec.body, props, format_properties(props), rec.flag, rec.sys_flag & ~0x30,
                       rec.born_timestamp, ctrl.store.store_host, reconsume)
