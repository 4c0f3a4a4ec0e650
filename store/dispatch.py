"""Dispatch: a put record's consume queue unit and index keys (CommitLogDispatcher).

Puts append (topic, queue, properties, offset, size, queue offset, store time, transaction type)
to `_pending` under the put lock; `_dispatch_pending` writes them in batches (one packed run per
queue, the index keys of the batch in one vectorised pass), called by the dispatch thread, by a
put past DISPATCH_BATCH, by the broker once per event loop turn, and by every read first.
A mixin of MessageStore: it uses the store's lock, queues, index and listeners.
"""
from __future__ import annotations

from .codes import SCHEDULE_TOPIC, TRANSACTION_TYPE_MASK, Prop, TransactionType
from .commitlog import MessageRecord
from .delaylevels import expected_tags_code
from .javahash import tags_code

NOT_DISPATCHED = (TransactionType.TRANSACTION_PREPARED_TYPE, TransactionType.TRANSACTION_ROLLBACK_TYPE)
ROLLBACK = TransactionType.TRANSACTION_ROLLBACK_TYPE


class Dispatch:
    def dispatch(self, rec: MessageRecord) -> None:
        """Build the consume queue unit and the index entries of one record (CommitLogDispatcher)."""
        self._dispatch(rec.topic, rec.queue_id, rec.properties, rec.physical_offset, rec.total_size,
                       rec.queue_offset, rec.store_timestamp, rec.sys_flag & TRANSACTION_TYPE_MASK)

    def _dispatch(self, topic: str, queue_id: int, props: dict, phys: int, size: int, queue_offset: int,
                  store_ts: int, tx: int) -> None:
        if tx not in NOT_DISPATCHED:
            if topic == SCHEDULE_TOPIC:
                code = expected_tags_code(topic, props, store_ts, self.levels)
            else:
                tags = props.get(Prop.TAGS)
                if not tags:
                    code = 0
                else:
                    code = self._tags_codes.get(tags)
                    if code is None:
                        if len(self._tags_codes) > 10_000:
                            self._tags_codes.clear()
                        code = self._tags_codes[tags] = tags_code(tags)
            cq = self._queues.get((topic, queue_id)) or self.queue(topic, queue_id)
            if cq.put(phys, size, code, queue_offset):
                self._last_dispatched_ts = store_ts
                for listener in self.listeners:
                    listener(topic, queue_id, queue_offset + 1, code)
        if self.cfg.messageIndexEnable and tx != ROLLBACK:
            uniq = props.get(Prop.UNIQ_KEY)
            keys = props.get(Prop.KEYS)
            if keys:
                keys = [k for k in keys.split(" ") if k]
                if uniq:
                    keys.insert(0, uniq)
            elif uniq:
                keys = [uniq]
            if keys:
                self.index.put(topic, keys, phys, store_ts)

    def drain_dispatch(self) -> None:
        """Dispatch every record put so far (readers call it first, so they see their writes)."""
        if self._pending:
            with self.put_lock:
                self._dispatch_pending()

    def _dispatch_loop(self) -> None:
        while not self._stop.is_set():
            self._dispatch_wake.wait(1.0)
            self._dispatch_wake.clear()
            if self._pending:
                with self.put_lock:
                    self._dispatch_pending()

    def _dispatch_pending(self) -> None:
        """Put the pending records' units into their consume queues (one packed run per queue)
        and their keys into the index (one vectorised pass); the put lock is held."""
        batch = self._pending
        if not batch:
            return
        self._pending = []
        runs: dict[tuple[str, int], list] = {}
        keys, key_phys, key_ts = [], [], []
        index_on = self.cfg.messageIndexEnable
        codes = self._tags_codes
        for topic, queue_id, props, phys, size, queue_offset, store_ts, tx in batch:
            if tx not in NOT_DISPATCHED:
                if topic == SCHEDULE_TOPIC:
                    code = expected_tags_code(topic, props, store_ts, self.levels)
                else:
                    tags = props.get(Prop.TAGS)
                    code = codes.get(tags) if tags else 0
                    if code is None:
                        if len(codes) > 10_000:
                            codes.clear()
                        code = codes[tags] = tags_code(tags)
                run = runs.get((topic, queue_id))
                if run is None:
                    run = runs[(topic, queue_id)] = []
                run.append((phys, size, code, queue_offset))
            if index_on and tx != ROLLBACK:
                uniq = props.get(Prop.UNIQ_KEY)
                if uniq:
                    keys.append(f"{topic}#{uniq}")
                    key_phys.append(phys)
                    key_ts.append(store_ts)
                more = props.get(Prop.KEYS)
                if more:
                    for key in more.split(" "):
                        if key:
                            keys.append(f"{topic}#{key}")
                            key_phys.append(phys)
                            key_ts.append(store_ts)
        listeners = self.listeners
        for (topic, queue_id), units in runs.items():
            cq = self._queues.get((topic, queue_id)) or self.queue(topic, queue_id)
            if cq.put_many(units):
                done = units
            else:
                done = [u for u in units if cq.put(*u)]
            if done:
                self._last_dispatched_ts = max(self._last_dispatched_ts, batch[-1][6])
                for listener in listeners:
                    for _, _, code, queue_offset in done:
                        listener(topic, queue_id, queue_offset + 1, code)
        if keys:
            self.index.put_many(keys, key_phys, key_ts)

    @property
    def dispatch_behind_bytes(self) -> int:
        """Bytes of the commit log not yet in consume queues and index: records a master's
        dispatch has not taken yet, or what a slave's reput thread has still to read."""
        if self.cfg.is_slave:
            return max(0, self.commitlog.max_offset - self.reput_from)
        pending = self._pending
        return max(0, self.commitlog.max_offset - pending[0][3]) if pending else 0
