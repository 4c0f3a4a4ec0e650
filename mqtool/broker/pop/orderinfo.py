"""Orderly POP's per-queue state (5.x ConsumerOrderInfoManager; rocketmq5.md 2.10), kept in
`config/consumerOrderInfo.json`: the last batch popped from each queue by each group, which of its
messages are acked, and how often each was delivered. A queue is blocked while its last batch has an
un-acked message that is still invisible, unless the POP carries that batch's attempt id.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from mqtool_store.configfiles import dumps_fastjson, load_config, write_config
from mqtool_store.poprecords import (
    ORDER_INFO_FILE,
    OrderInfo,
    order_table_from_json,
    order_table_json,
)

CLEAN_AFTER_MS = 24 * 3600 * 1000
NOT_IN_BATCH, STALE = -1, -2


def _now() -> int:
    return time.time_ns() // 1_000_000


def _acked(info: OrderInfo, i: int) -> bool:
    return bool(info.cm >> i & 1)


def next_offset(info: OrderInfo) -> int:
    """OrderInfo.getNextOffset: the first un-acked offset of the batch, or the last + 1."""
    offsets = info.offsets
    if not offsets:
        return STALE
    for i, off in enumerate(offsets):
        if not _acked(info, i):
            return off
    return offsets[-1] + 1


def blocks(info: OrderInfo, attempt_id: str | None, invisible_time: int, now: int) -> bool:
    """OrderInfo.needBlock."""
    if not info.o or (info.a is not None and info.a == attempt_id):
        return False
    invisible = info.i if info.i > 0 else invisible_time
    for i, off in enumerate(info.offsets):
        if not _acked(info, i) and now < info.ot.get(off, info.popTime + invisible):
            return True
    return False


class ConsumerOrderInfoManager:
    def __init__(self, config_dir: Path):
        self.path = Path(config_dir) / ORDER_INFO_FILE
        self.lock = threading.Lock()
        self.table: dict[str, dict[int, OrderInfo]] = order_table_from_json(load_config(self.path).data)
        self.dirty = False

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(f"{topic}@{group}", {}).get(queue_id)

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int) -> bool:
        info = self.get(topic, group, queue_id)
        return info is not None and blocks(info, attempt_id, invisible_time, _now())

    def update(self, attempt_id: str | None, topic: str, group: str, queue_id: int, pop_time: int,
               invisible_time: int, offsets: list[int]) -> tuple[dict[int, int], int]:
        """A batch popped: the new OrderInfo (counts carried over for offsets the previous batch had,
        +1 each, unless the attempt id is the same); (count per re-delivered offset, the batch's least count)."""
        old = self.get(topic, group, queue_id)
        deltas = [offsets[0]] + [o - offsets[0] for o in offsets[1:]] if offsets else []
        counts: dict[int, int] = {}
        if old is not None:
            if old.a is not None and old.a == attempt_id:
                counts = dict(old.oc)
            else:
                before = set(old.offsets)
                counts = {o: old.oc.get(o, 0) + 1 for o in offsets if o in before}
        info = OrderInfo(pop_time, invisible_time, deltas, _now(), attempt_id, 0, counts)
        with self.lock:
            self.table.setdefault(f"{topic}@{group}", {})[queue_id] = info
            self.dirty = True
        least = min(counts.values()) if counts and len(counts) == len(offsets) else 0
        return counts, least

    def commit_and_next(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int) -> int:
        """commitAndNext: the offset's bit set; the group's next offset, NOT_IN_BATCH or STALE."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return offset + 1
        if info.popTime != pop_time:
            return STALE
        offsets = info.offsets
        if offset not in offsets:
            return NOT_IN_BATCH
        info.cm |= 1 << offsets.index(offset)
        self.dirty = True
        return next_offset(info)

    def update_next_visible(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int,
                            next_visible: int) -> None:
        info = self.get(topic, group, queue_id)
        if info is None or info.popTime != pop_time:
            return
        info.ot[offset] = next_visible
        self.dirty = True

    def clean(self, now: int | None = None) -> None:
        now = now or _now()
        with self.lock:
            for key in list(self.table):
                queues = self.table[key]
                for q in [q for q, info in queues.items() if now - info.l > CLEAN_AFTER_MS]:
                    del queues[q]
                    self.dirty = True
                if not queues:
                    del self.table[key]

    def persist(self) -> None:
        with self.lock:
            text = dumps_fastjson(order_table_json(self.table))
            self.dirty = False
        write_config(self.path, text)
