"""SYNC_FLUSH sends wait on the broker's event loop, not in threads.

A send's put returns at once (`MessageStore.put(..., wait_flush=False)`), and the send waits on a
future for the group commit round that covers its bytes. The flusher thread tells the loop once
per round (`GroupCommitService.listeners`, one call_soon_threadsafe); every future whose offset the
round covers is then released. Before, each waiting put held one of the loop's few executor
threads, so at most that many puts shared an fsync, and the threads fought over the GIL.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools


class FlushWaiters:
    def __init__(self, loop: asyncio.AbstractEventLoop, flusher):
        self.loop = loop
        self.flusher = flusher
        self._heap: list[tuple[int, int, asyncio.Future]] = []     # (end offset, seq, future)
        self._seq = itertools.count()
        self._scheduled = False
        flusher.listeners.append(self._round_done)

    async def wait(self, end: int, timeout_s: float) -> bool:
        """True once the commit log is synced up to `end`; False after `timeout_s`. The put asked
        the flusher for it (`MessageStore.put(..., wait_flush=False)` calls `flusher.request`)."""
        if self.flusher.flushed >= end:
            return True
        fut = self.loop.create_future()
        heapq.heappush(self._heap, (end, next(self._seq), fut))
        if self.flusher.flushed >= end:     # a round ended between the first look and the push
            self._release(self.flusher.flushed)
        timer = self.loop.call_later(timeout_s, _expire, fut)
        try:
            return await fut
        finally:
            timer.cancel()

    def close(self) -> None:
        """At shutdown: every waiter gets its answer (synced or not) now."""
        self._release(self.flusher.flushed)
        while self._heap:
            _, _, fut = heapq.heappop(self._heap)
            if not fut.done():
                fut.set_result(False)
        if self._round_done in self.flusher.listeners:
            self.flusher.listeners.remove(self._round_done)

    def _round_done(self, flushed: int) -> None:
        """The flusher thread, after a round."""
        if self._heap and not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._on_round)
            except RuntimeError:            # the loop is closed: nobody waits any more
                self._scheduled = False

    def _on_round(self) -> None:
        self._scheduled = False
        self._release(self.flusher.flushed)

    def _release(self, flushed: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= flushed:
            _, _, fut = heapq.heappop(heap)
            if not fut.done():
                fut.set_result(True)


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)
