"""The master's side of replication (HAService, HAConnection, GroupTransferService of 4.9.8).

It listens on the HA port (listenPort + 1). Each slave connection has a reader (8-byte offset
reports) and a writer (12-byte header + raw commit log bytes, one file at a time, heartbeats
when idle). SYNC_MASTER puts wait in `wait_replicated`: futures ordered by the offset they need,
all completed by the one ack that covers them (group commit), each bounded by slaveTimeout.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import threading
import time

from mqtool_store.ha.protocol import (MASTER_IDLE_WAIT_S, HAProtocolError, ReportReader, encode_frame_header)
from mqtool_store.messagestore import MessageStore
from mqtool_store.storeconfig import MessageStoreConfig

log = logging.getLogger("mqtool.ha")
READ_CHUNK = 1 << 20          # ReadSocketService's 1 MiB buffer
WRITE_HIGH_WATER = 1 << 20    # bytes queued on a socket before the writer waits for it to drain
RATE_WINDOW_S = 1.0


def now_ms() -> int:
    return int(time.time() * 1000)


async def read_from_replica(conn, idle_s: float, quiet: str, who: str, on_data) -> None:
    """A master's read side of one replica connection (ReadSocketService): `on_data(bytes)` for
    everything the replica sends, `conn.last_read_ms` kept; `conn.close(reason)` once it closes,
    stays quiet for `idle_s` ("<quiet> for N s"), breaks the protocol, or `on_data` returns a reason."""
    try:
        while True:
            try:
                async with asyncio.timeout(idle_s):
                    data = await conn.reader.read(READ_CHUNK)
            except TimeoutError:
                conn.close(f"{quiet} for {idle_s:g} s")
                return
            if not data:
                conn.close(f"{who} closed the connection")
                return
            conn.last_read_ms = now_ms()
            reason = on_data(data)
            if reason:
                conn.close(reason)
                return
    except HAProtocolError as exc:
        conn.close(str(exc))
    except (ConnectionError, OSError) as exc:
        conn.close(f"read failed: {exc}")


class Rate:
    """Bytes per second over the last completed second (transferredByteInSecond)."""

    def __init__(self):
        self.total = 0
        self._mark, self._mark_total, self.per_second = time.monotonic(), 0, 0

    def add(self, n: int) -> None:
        self.total += n
        t = time.monotonic()
        if t - self._mark >= RATE_WINDOW_S:
            self.per_second = int((self.total - self._mark_total) / (t - self._mark))
            self._mark, self._mark_total = t, self.total

    def current(self) -> int:
        return 0 if time.monotonic() - self._mark > 2 * RATE_WINDOW_S else self.per_second


class SlaveConnection:
    """One slave (HAConnection): `ack` is what it has confirmed, `request` where it asked to start."""

    def __init__(self, service: "HAMaster", reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.service, self.reader, self.writer = service, reader, writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.addr = f"{peer[0]}:{peer[1]}"
        self.request_offset = -1
        self.ack_offset = -1
        self.next_transfer = -1
        self.rate = Rate()
        self.last_read_ms = self.last_write_ms = now_ms()
        self.closed_reason = ""
        self._started = asyncio.Event()
        self._tasks = [asyncio.get_running_loop().create_task(self._read_loop()),
                       asyncio.get_running_loop().create_task(self._write_loop())]

    async def _read_loop(self) -> None:
        reports = ReportReader()
        await read_from_replica(self, self.service.cfg.haHousekeepingInterval / 1000, "no offset report",
                                "the slave", lambda data: self._report(reports.feed(data)))

    def _report(self, offset: int | None) -> str | None:
        if offset is None:
            return None
        master_max = self.service.store.commitlog_max_offset
        if offset > master_max:
            return f"slave reported offset {offset} beyond the master's max offset {master_max}"
        if self.request_offset < 0:
            self.request_offset = offset
            self._started.set()
            log.info("slave %s asks for the commit log from offset %d", self.addr, offset)
        self.ack_offset = offset
        self.service.notify_transfer_some(offset)
        return None

    def _start_point(self) -> int:
        """An empty slave starts at the master's last file, not at 0 (WriteSocketService)."""
        if self.request_offset == 0:
            top = self.service.store.commitlog_max_offset
            return top - top % self.service.cfg.mappedFileSizeCommitLog
        return self.request_offset

    async def _write_loop(self) -> None:
        cfg = self.service.cfg
        heartbeat_ms = cfg.haSendHeartbeatInterval
        try:
            await self._started.wait()
            self.next_transfer = self._start_point()
            log.info("sending the commit log to slave %s from offset %d", self.addr, self.next_transfer)
            while True:
                data = self.service.store.transfer_slice(self.next_transfer, cfg.haTransferBatchSize)
                if data is None:
                    self.close(f"offset {self.next_transfer} is no longer in the master's commit log")
                    return
                if data:
                    self.writer.writelines((encode_frame_header(self.next_transfer, len(data)), data))
                    self.next_transfer += len(data)
                    self.rate.add(len(data))
                    self.last_write_ms = now_ms()
                    if self.writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                        await self.writer.drain()
                    continue
                if now_ms() - self.last_write_ms > heartbeat_ms:
                    self.writer.write(encode_frame_header(self.next_transfer, 0))
                    self.last_write_ms = now_ms()
                await self.writer.drain()
                await self.service.wait_for_data(self.next_transfer, MASTER_IDLE_WAIT_S)
        except (ConnectionError, OSError) as exc:
            self.close(f"write failed: {exc}")

    def close(self, reason: str) -> None:
        if self.closed_reason:
            return
        self.closed_reason = reason
        log.warning("HA connection to slave %s closed: %s", self.addr, reason)
        for t in self._tasks:
            if t is not asyncio.current_task():
                t.cancel()
        self.writer.close()
        self.service.connections.discard(self)

    def info(self, master_max: int) -> dict:
        """An HAConnectionRuntimeInfo (5.x GET_BROKER_HA_STATUS)."""
        ack = max(self.ack_offset, 0)
        diff = master_max - ack
        return {"addr": self.addr, "slaveAckOffset": self.ack_offset, "diff": diff,
                "inSync": self.ack_offset >= 0 and diff < self.service.cfg.haSlaveFallbehindMax,
                "transferredByteInSecond": self.rate.current(), "transferFromWhere": self.next_transfer}


class HAMaster:
    """HAService on a master: accepts slaves, tracks the best ack, completes SYNC_MASTER waits."""

    def __init__(self, store: MessageStore, cfg: MessageStoreConfig):
        self.store, self.cfg = store, cfg
        self.connections: set[SlaveConnection] = set()
        self.push2slave_max = 0
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._waiters: list = []          # heap of (offset, seq, future, timer)
        self._seq = itertools.count()
        self._data = asyncio.Event()
        self._idle_writers = 0

    async def start(self, host: str, port: int) -> "HAMaster":
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.server = await asyncio.start_server(self._accept, host, port)
        self.port = self.server.sockets[0].getsockname()[1]
        self.store.append_listeners.append(self._appended)
        return self

    async def stop(self) -> None:
        if self._appended in self.store.append_listeners:
            self.store.append_listeners.remove(self._appended)
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        for conn in list(self.connections):
            conn.close("the master is shutting down")
        for _off, _seq, fut, timer in self._waiters:
            timer.cancel()
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    async def _accept(self, reader, writer) -> None:
        conn = SlaveConnection(self, reader, writer)
        self.connections.add(conn)
        log.info("slave %s connected to the HA port", conn.addr)

    # ---------------------------------------------------------------- new data

    def _appended(self, _end: int) -> None:
        """Store listener (any thread): wake writers that are waiting for bytes."""
        if not self._idle_writers:
            return
        if threading.get_ident() == self._loop_thread:
            self._data.set()
        else:
            self._loop.call_soon_threadsafe(self._data.set)

    async def wait_for_data(self, offset: int, timeout_s: float) -> None:
        if self.store.commitlog_max_offset > offset:
            return
        self._idle_writers += 1
        try:
            self._data.clear()
            if self.store.commitlog_max_offset <= offset:
                async with asyncio.timeout(timeout_s):
                    await self._data.wait()
        except TimeoutError:
            pass
        finally:
            self._idle_writers -= 1

    # ---------------------------------------------------------------- SYNC_MASTER

    def is_slave_ok(self, master_put_where: int) -> bool:
        """isSlaveOK: a slave is connected and the best ack is within haSlaveFallbehindMax."""
        return bool(self.connections) and master_put_where - self.push2slave_max < self.cfg.haSlaveFallbehindMax

    def notify_transfer_some(self, offset: int) -> None:
        if offset <= self.push2slave_max:
            return
        self.push2slave_max = offset
        while self._waiters and self._waiters[0][0] <= offset:
            _off, _seq, fut, timer = heapq.heappop(self._waiters)
            timer.cancel()
            if not fut.done():
                fut.set_result(True)

    async def wait_replicated(self, end: int) -> bool:
        """True once some slave has acknowledged `end`; False after slaveTimeout."""
        if self.push2slave_max >= end:
            return True
        if len(self._waiters) > 4096:        # expired waits of a slave that stopped acknowledging
            self._waiters = [w for w in self._waiters if not w[2].done()]
            heapq.heapify(self._waiters)
        fut = self._loop.create_future()
        timer = self._loop.call_later(self.cfg.slaveTimeout / 1000, _expire, fut)
        heapq.heappush(self._waiters, (end, next(self._seq), fut, timer))
        return await fut

    # ---------------------------------------------------------------- status

    def runtime_info(self) -> dict:
        master_max = self.store.commitlog_max_offset
        conns = [c.info(master_max) for c in sorted(self.connections, key=lambda c: c.addr)]
        return {"master": True, "masterCommitLogMaxOffset": master_max,
                "inSyncSlaveNums": sum(1 for c in conns if c["inSync"]), "haConnectionInfo": conns,
                "push2SlaveMaxOffset": self.push2slave_max}


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)
