"""POP long polling (5.x PopLongPollingService; rocketmq5.md 2.11): POP and NOTIFICATION requests that
found nothing wait under `topic@group@queueId` (-1 for a whole-topic POP) for a message on the topic
(or on the group's retry topic), an orderly queue that unblocks, or their deadline.

Waiters are futures on the broker's loop, indexed by topic; the store's dispatch tells `notify` of
each unit (on the loop's thread, or hopped onto it), and does nothing for a topic nobody waits on.
"""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

SUSPENDED, FULL, EXPIRED = "suspended", "full", "expired"


@dataclass(eq=False)
class _Waiter:
    key: str
    group: str
    queue_id: int
    future: asyncio.Future = field(repr=False, default=None)


def polling_key(topic: str, group: str, queue_id: int) -> str:
    """KeyBuilder.buildPollingKey."""
    return f"{topic}@{group}@{queue_id}"


class PopPolling:
    def __init__(self, per_key: int = 1024, total: int = 100_000):
        self.per_key, self.total = per_key, total
        self.by_topic: dict[str, list[_Waiter]] = {}
        self.counts: dict[str, int] = {}
        self.size = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    def can_wait(self, key: str) -> bool:
        return self.counts.get(key, 0) < self.per_key and self.size < self.total

    async def wait(self, topics: list[str], group: str, queue_id: int, key: str, timeout_s: float) -> bool:
        """Wait for a wake-up on any of `topics` (True) or the timeout (False). The caller checks
        `can_wait` first (POLLING_FULL)."""
        loop = asyncio.get_running_loop()
        self.loop, self._loop_thread = loop, threading.get_ident()
        waiter = _Waiter(key, group, queue_id, loop.create_future())
        for topic in topics:
            self.by_topic.setdefault(topic, []).append(waiter)
        self.counts[key] = self.counts.get(key, 0) + 1
        self.size += 1
        # a timer on the future, not asyncio.timeout: see pullhold.PullHoldService.wait
        timer = loop.call_later(max(timeout_s, 0), _expire, waiter.future)
        try:
            return await asyncio.shield(waiter.future)
        finally:
            timer.cancel()
            self.size -= 1
            left = self.counts[key] - 1
            if left:
                self.counts[key] = left
            else:
                del self.counts[key]
            for topic in topics:
                waiting = self.by_topic.get(topic)
                if waiting is not None:
                    if waiter in waiting:
                        waiting.remove(waiter)
                    if not waiting:
                        del self.by_topic[topic]

    def waits_on(self, topic: str, _queue_id: int = -1) -> bool:
        return topic in self.by_topic

    def notify(self, topic: str, queue_id: int, _max_offset: int = 0, _tags_code=None, group: str | None = None) -> int:
        """Wake the waiters on `topic` for this queue or for every queue (of `group` only, if given)."""
        woken = 0
        for waiter in list(self.by_topic.get(topic, ())):
            if waiter.future.done() or (group is not None and waiter.group != group):
                continue
            if queue_id < 0 or waiter.queue_id < 0 or waiter.queue_id == queue_id:
                waiter.future.set_result(True)
                woken += 1
        return woken

    def notify_threadsafe(self, topic: str, queue_id: int, max_offset: int = 0, tags_code=None) -> None:
        if topic not in self.by_topic:
            return
        if threading.get_ident() == self._loop_thread:
            self.notify(topic, queue_id)
            return
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.notify, topic, queue_id)

    def wake_all(self) -> None:
        for waiting in self.by_topic.values():
            for waiter in waiting:
                if not waiter.future.done():
                    waiter.future.set_result(False)


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)
