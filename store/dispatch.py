"""Dispatch: a put record's consume queue unit and index keys (CommitLogDispatcher).

Puts append (topic, queue, properties, offset, size, queue offset, store time, transaction type)
to `_pending` under the put lock; `_dispatch_pending` writes them in batches (one packed run per
queue, the index keys of the batch in one vectorised pass), called by the dispatch thread, by a
put past DISPATCH_BATCH, by the broker once per event loop turn, and by every read first.
A mixin of MessageStore: it uses the store's lock, queues, index and listeners.
"""
from __future__ import annotations

import bisect

from itertools import count

import numpy as np

from .codes import SCHEDULE_TOPIC, TRANSACTION_TYPE_MASK, Prop, TransactionType
from .commitlog import MessageRecord
from .consumequeue import _UNIT, CQ_DTYPE
from .delaylevels import expected_tags_code
from .javahash import tags_code
from .kernel import kernel

NOT_DISPATCHED = (TransactionType.TRANSACTION_PREPARED_TYPE, TransactionType.TRANSACTION_ROLLBACK_TYPE)
ROLLBACK = TransactionType.TRANSACTION_ROLLBACK_TYPE


RUN_ITEM = 9     # a pending run: the record tuple's 8 fields (props a list or a FrameRun, size the total) and the sizes
KERNEL_MIN = 8   # pending records from which the kernel dispatches them (fewer: as fast or faster in Python)


def _pending_end(item) -> int:
    return item[3] + item[4]          # a pending record's (or run's) phys + size


def _segments(units: list):
    """A queue's pending units split where a run's array starts or ends: lists of unit tuples
    and (packed units or a unit array, first queue offset) pairs, in put order."""
    tuples = []
    for u in units:
        if len(u) == 4:
            tuples.append(u)
        else:
            if tuples:
                yield tuples
                tuples = []
            yield u
    if tuples:
        yield tuples


def _unit_tuples(units, queue_offset: int) -> list:
    """Packed units (20 bytes each) as (offset, size, tags code, queue offset) tuples."""
    return [(offset, size, code, q) for (offset, size, code), q in zip(_UNIT.iter_unpack(units), count(queue_offset))]


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
                if self.listened is None or self.listened(topic, queue_id):
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
        """Dispatch every record put so far (readers call it first, so they see their writes). A
        dispatch under way on another thread has taken the pending records already: its lock is
        waited for too, or a reader would miss the records it is writing."""
        if self._pending or self._dispatching:
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
        """_dispatch_taken, flagged as under way before the pending list empties (drain_dispatch)."""
        if not self._pending:
            return
        self._dispatching = True
        try:
            self._dispatch_taken()
        finally:
            self._dispatching = False

    def _dispatch_taken(self) -> None:
        """Put the pending records' units into their consume queues (one packed run per queue)
        and their keys into the index (one vectorised pass); the put lock is held. A batch put
        as a run (recordrun.py) is one pending item whose units are one array."""
        pending = self._pending       # emptied in place, never replaced: see MessageStore._pending
        if not pending:
            return
        limit = self.dispatch_limit
        if limit is not None and pending[-1][3] + pending[-1][4] > limit:     # confirmOffset (controller mode)
            n = bisect.bisect_right(pending, limit, key=_pending_end)
            if not n:
                return
            batch = pending[:n]
            del pending[:n]
        else:
            batch = pending[:]
            pending.clear()
        index_on = self.cfg.messageIndexEnable
        got = kernel.pending_units(batch, index_on, SCHEDULE_TOPIC) \
            if kernel is not None and len(batch) >= KERNEL_MIN else None
        if got is not None:          # single puts' records, in one C pass: each queue's units packed
            queues, keys, key_phys, key_ts = got
            runs = {key: [(units, first)] for key, (units, first, _) in queues.items()}
            self._write_units(runs, True, batch[-1][6], keys, key_phys, key_ts)
            return
        runs: dict[tuple[str, int], list] = {}    # per queue, in put order: unit tuples and unit arrays
        keys, key_phys, key_ts = [], [], []
        codes = self._tags_codes
        saw_run = False
        for item in batch:
            if len(item) == RUN_ITEM:
                self._gather_run(item, runs, keys, key_phys, key_ts)
                saw_run = True
                continue
            topic, queue_id, props, phys, size, queue_offset, store_ts, tx = item
            if tx not in NOT_DISPATCHED:
                if topic == SCHEDULE_TOPIC:
                    code = expected_tags_code(topic, props, store_ts, self.levels)
                else:
                    tags = props.get(Prop.TAGS)
                    code = codes.get(tags) if tags else 0
                    if code is None:
                        code = self._tags_code(tags)
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
        self._write_units(runs, saw_run, batch[-1][6], keys, key_phys, key_ts)

    def _write_units(self, runs: dict, saw_run: bool, last_ts: int, keys: list, key_phys: list,
                     key_ts: list) -> None:
        """The gathered units into their consume queues (listeners told) and the keys into the index."""
        listeners, listened = self.listeners, self.listened
        for (topic, queue_id), units in runs.items():
            cq = self._queues.get((topic, queue_id)) or self.queue(topic, queue_id)
            told = listeners and (listened is None or listened(topic, queue_id))
            for part in _segments(units) if saw_run else (units,):     # no run: one list of unit tuples
                if type(part) is list:
                    done = part if cq.put_many(part) else [u for u in part if cq.put(*u)]
                else:                  # packed units (bytes) or a CQ_DTYPE array, from queue_offset
                    units, queue_offset = part
                    if type(units) is np.ndarray:
                        units = units.tobytes()
                    if cq.put_packed(units, queue_offset):
                        if not told:
                            self._last_dispatched_ts = max(self._last_dispatched_ts, last_ts)
                            continue
                        done = _unit_tuples(units, queue_offset)
                    else:              # the file ends inside the run, or a re-dispatch: unit by unit
                        tuples = _unit_tuples(units, queue_offset)
                        done = tuples if cq.put_many(tuples) else [u for u in tuples if cq.put(*u)]
                if done:
                    self._last_dispatched_ts = max(self._last_dispatched_ts, last_ts)
                    for listener in listeners if told else ():
                        for _, _, code, queue_offset in done:
                            listener(topic, queue_id, queue_offset + 1, code)
        if keys:
            self.index.put_many(keys, key_phys, key_ts)

    def _tags_code(self, tags: str) -> int:
        codes = self._tags_codes
        if len(codes) > 10_000:
            codes.clear()
        code = codes[tags] = tags_code(tags)
        return code

    def _gather_run(self, item, runs: dict, keys: list, key_phys: list, key_ts: list) -> None:
        """A run's units as one array (queued after what its queue already has) and its index keys."""
        topic, queue_id, props, phys, _, queue_offset, store_ts, _, sizes = item
        if kernel is not None:        # the same units and keys, in one C pass (`props`: the run's, or a FrameRun)
            units, more_keys, more_phys = kernel.run_units(props, topic + "#", phys, sizes,
                                                           self.cfg.messageIndexEnable) \
                if type(props) is list else props.units(topic + "#", phys, self.cfg.messageIndexEnable)
            runs.setdefault((topic, queue_id), []).append((units, queue_offset))
            keys += more_keys
            key_phys += more_phys
            key_ts += [store_ts] * len(more_keys)
            return
        n = len(props)
        block = np.empty(n, CQ_DTYPE)
        offsets = np.cumsum(sizes) - sizes + phys
        block["offset"] = offsets
        block["size"] = sizes
        tags = [p.get(Prop.TAGS) for p in props]
        codes = self._tags_codes
        known = {t: (codes.get(t) if t else 0) for t in set(tags)}
        for t, code in known.items():
            if code is None:
                known[t] = self._tags_code(t)
        block["tags_code"] = next(iter(known.values())) if len(known) == 1 else \
            np.fromiter(map(known.__getitem__, tags), np.int64, n)
        runs.setdefault((topic, queue_id), []).append((block, queue_offset))
        if not self.cfg.messageIndexEnable:
            return
        prefix = topic + "#"
        uniqs = [p.get(Prop.UNIQ_KEY) for p in props]
        more = [p.get(Prop.KEYS) for p in props]
        offsets = offsets.tolist()
        no_uniq = uniqs.count(None) == n
        if no_uniq and more.count(None) == n:
            return
        simple = None not in more and " " not in "".join(more) and all(more)     # one key each
        if no_uniq and simple:
            keys += [prefix + k for k in more]
        elif None not in uniqs and all(uniqs) and (simple or more.count(None) == n):
            if simple:                 # each record's UNIQ_KEY, then its key
                both = [None] * (2 * n)
                both[0::2] = [prefix + u for u in uniqs]
                both[1::2] = [prefix + k for k in more]
                keys += both
                offsets = [p for p in offsets for _ in (0, 1)]
            else:
                keys += [prefix + u for u in uniqs]
        else:                          # the general rule, record by record
            for uniq, more_keys, p in zip(uniqs, more, offsets):
                if uniq:
                    keys.append(prefix + uniq)
                    key_phys.append(p)
                    key_ts.append(store_ts)
                for key in (more_keys.split(" ") if more_keys else ()):
                    if key:
                        keys.append(prefix + key)
                        key_phys.append(p)
                        key_ts.append(store_ts)
            return
        key_phys += offsets
        key_ts += [store_ts] * len(offsets)

    @property
    def dispatch_behind_bytes(self) -> int:
        """Bytes of the commit log not yet in consume queues and index: records a master's
        dispatch has not taken yet, or what a slave's reput thread has still to read."""
        if self.cfg.is_slave:
            return max(0, self.commitlog.max_offset - self.reput_from)
        try:                  # no lock taken: a dispatch may empty the list between a look and a read
            first = self._pending[0]
        except IndexError:
            return 0
        return max(0, self.commitlog.max_offset - first[3])
