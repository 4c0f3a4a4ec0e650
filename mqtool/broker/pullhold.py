"""Long polling (PullRequestHoldService): pulls that found nothing wait for a message or a timeout.

Each held pull is an asyncio future keyed by topic and queue. The store's dispatch calls
`notify_threadsafe` once per dispatched unit of a queue a pull is held on (`waits_on`, the store's
`listened`: units of other queues cost no call): on the loop's own thread (the broker drains the
dispatch there, once per loop turn) it notifies at once; from the store's dispatch thread it hops
onto the loop first; for a queue nobody waits on it does nothing (a hop per message, a pipe write
each, cost a few µs per message whenever any consumer was long-polling).
"""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field


@dataclass
class _Hold:
    offset: int                 # the queue offset the pull asked for
    matches: object             # callable(tags_code) -> bool, or None for everything
    future: asyncio.Future = field(repr=False, default=None)


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)


class PullHoldService:
    def __init__(self, loop: asyncio.AbstractEventLoop | None = None):
        self.loop = loop
        self.holds: dict[tuple[str, int], list[_Hold]] = {}
        self._loop_thread: int | None = None     # the thread `wait` last ran on: the loop's

    def _key(self, topic: str, queue_id: int) -> tuple[str, int]:
        return (topic, queue_id)

    async def wait(self, topic: str, queue_id: int, offset: int, timeout_s: float, matches=None) -> bool:
        """Wait until a message at or past `offset` arrives (True) or the timeout passes (False)."""
        loop = asyncio.get_running_loop()
        self.loop = loop
        self._loop_thread = threading.get_ident()
        hold = _Hold(offset, matches, loop.create_future())
        key = self._key(topic, queue_id)
        self.holds.setdefault(key, []).append(hold)
        # The deadline is a timer on the hold's own future, not asyncio.timeout: the transport runs a
        # handler up to its first wait inside the connection's reader task (Connection._dispatch),
        # and a timeout entered there cancelled that task when it fired, closing the connection.
        timer = loop.call_later(max(timeout_s, 0), _expire, hold.future)
        try:
            return await asyncio.shield(hold.future)
        finally:
            timer.cancel()
            waiting = self.holds.get(key)
            if waiting is not None:
                if hold in waiting:
                    waiting.remove(hold)
                if not waiting:
                    del self.holds[key]

    def waits_on(self, topic: str, queue_id: int) -> bool:
        """Whether a pull is held on the queue (the store's `listened`: units of others are not told)."""
        return (topic, queue_id) in self.holds

    def notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> int:
        """A unit was dispatched: wake holds whose offset is now readable and whose filter matches."""
        waiting = self.holds.get(self._key(topic, queue_id))
        woken = 0
        if not waiting:
            return 0
        for hold in list(waiting):
            if hold.future.done() or max_offset <= hold.offset:
                continue
            if tags_code is not None and hold.matches is not None and not hold.matches(tags_code):
                continue
            hold.future.set_result(True)
            woken += 1
        return woken

    def notify_threadsafe(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> None:
        if self._key(topic, queue_id) not in self.holds:
            return
        if threading.get_ident() == self._loop_thread:
            self.notify(topic, queue_id, max_offset, tags_code)
            return
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.notify, topic, queue_id, max_offset, tags_code)

    def wake_all(self) -> None:
        """At shutdown: release every hold so pending pulls answer."""
        for waiting in self.holds.values():
            for hold in waiting:
                if not hold.future.done():
                    hold.future.set_result(False)
