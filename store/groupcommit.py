"""Group commit for SYNC_FLUSH (CommitLog.GroupCommitService): one fsync covers every put waiting.

A put registers the commit log offset its records end at and sleeps on its own lock. The
flusher thread takes a snapshot of what is written (under the store's put lock), syncs it with
fdatasync, which releases the GIL so the next puts are written while the disk works, and then
releases exactly the waiters that snapshot covers; later puts wait for the next round.
"""
from __future__ import annotations

import threading
import time


class GroupCommitService:
    def __init__(self, snapshot, sync, stop: threading.Event):
        """`snapshot()` -> (work, commit log offset it ends at), work None when nothing is
        unflushed; `sync(work)` makes it durable; `stop` ends `run`."""
        self._snapshot = snapshot
        self._sync = sync
        self._stop = stop
        self._mutex = threading.Lock()
        self._waiters: list[tuple[int, threading.Lock]] = []
        self._work = threading.Event()
        self._idle = True         # the flusher sleeps on _work until a waiter comes
        self._gathering = False   # the flusher waits (gather_s at most) until _cohort waiters are in
        self._cohort = 1
        self.gather_s = 0.002
        self.flushed = 0          # every commit log byte below it is on disk
        self.rounds = 0           # fsync rounds done (tests, benchmarks)
        self.released = 0         # waiters released by those rounds
        # Called from the flusher thread after each round with `flushed`: how waiters that are not
        # threads (the broker's sends, futures on its event loop) learn of it. See `request`.
        self.listeners: list = []

    def wake(self) -> None:
        self._work.set()

    def release_all(self) -> None:
        """At shutdown: nobody is left hanging (each sees whether its bytes were flushed)."""
        with self._mutex:
            waiters, self._waiters = self._waiters, []
        for _, lk in waiters:
            lk.release()

    def request(self, end: int) -> None:
        """Ask for a flush up to `end` without waiting (a slave's appended data, or a waiter that
        is not a thread: it learns of the round that covers `end` through `listeners`)."""
        if end > self.flushed:
            self._work.set()

    def wait(self, end: int, timeout: float) -> bool:
        """Block until the bytes below `end` are on disk; False after `timeout` seconds."""
        if self.flushed >= end or self._stop.is_set():     # nobody flushes any more: answer now
            return self.flushed >= end
        lk = threading.Lock()
        lk.acquire()
        with self._mutex:
            if self.flushed >= end:
                return True
            self._waiters.append((end, lk))
            wake = self._idle or (self._gathering and len(self._waiters) >= self._cohort)
            if wake:
                self._idle = self._gathering = False
        if wake:            # a busy flusher looks at the waiters again after its fsync anyway
            self._work.set()
        if lk.acquire(timeout=timeout):
            return self.flushed >= end
        with self._mutex:
            try:
                self._waiters.remove((end, lk))
            except ValueError:
                pass             # released between the timeout and here
        return self.flushed >= end

    def run(self) -> None:
        while not self._stop.is_set():
            with self._mutex:
                n = len(self._waiters)
                self._idle = n == 0
                # Fewer waiters than the last round released: most writers are still putting.
                # Give them a moment, so one fsync covers them all rather than every other one.
                self._gathering = 0 < n < self._cohort
            if self._idle:
                self._work.wait(0.1)
                self._work.clear()
            elif self._gathering:
                self._work.wait(self.gather_s)
                self._work.clear()
            if self._stop.is_set():
                break
            work, end = self._snapshot()
            try:
                if work is not None:
                    self._sync(work)
            except OSError:
                time.sleep(0.01)     # the waiters time out as FLUSH_DISK_TIMEOUT if the disk keeps failing
                continue
            with self._mutex:
                self.flushed = max(self.flushed, end)
                self.rounds += work is not None
                keep, go = [], []
                for w in self._waiters:
                    (go if w[0] <= self.flushed else keep).append(w)
                self._waiters = keep
                self.released += len(go)
                self._cohort = len(go)
            for _, lk in go:
                lk.release()
            for listener in self.listeners:
                listener(self.flushed)
