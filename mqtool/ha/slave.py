"""The slave's side of replication (HAClient of 4.9.8).

Connects to the master's HA address, reports its commit log max offset (8 bytes) at once, after
every append that moved it and every haSendHeartbeatInterval, and appends each frame the master
sends at exactly the offset the frame names. A frame for any other offset closes the connection;
the next connection re-reports the real offset, so nothing is ever skipped or written twice.
Java's slave waits up to 5 s before its first report; this one reports at once (same bytes).
"""
from __future__ import annotations

import asyncio
import logging

from mqtool.ha.master import Rate, now_ms
from mqtool_store.errors import ReplicationError
from mqtool_store.ha.protocol import HA_CONNECT_RETRY_S, FrameReader, encode_report
from mqtool_store.messagestore import MessageStore
from mqtool_store.storeconfig import MessageStoreConfig

log = logging.getLogger("mqtool.ha")
CONNECT_TIMEOUT_S = 3.0
RECONNECT_S = 1.0


class HASlave:
    def __init__(self, store: MessageStore, cfg: MessageStoreConfig, master_addr: str = ""):
        self.store, self.cfg = store, cfg
        self.master_addr = master_addr
        self.connected = False
        self.reported = -1
        self.rate = Rate()
        self.last_read_ms = self.last_write_ms = 0
        self.last_error = ""
        self._task: asyncio.Task | None = None
        self._changed = asyncio.Event()
        self._transport: asyncio.Transport | None = None

    def start(self) -> "HASlave":
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._drop()

    def set_master(self, addr: str, force: bool = False) -> None:
        """updateHaMasterAddress: a new address closes the current connection and connects there.
        `force` (a role change): the connection is closed even to the same address, and an empty
        address (not known yet) stops following anyone until one is set."""
        if (addr and addr != self.master_addr) or force:
            if addr != self.master_addr:
                log.info("HA master address is now %s (was %s)", addr or "not known yet", self.master_addr or "none")
            self.master_addr = addr
            self._changed.set()
            if self._transport is not None:
                self._transport.close()

    async def _run(self) -> None:
        while True:
            while not self.master_addr:
                self._changed.clear()
                await self._changed.wait()
            self._changed.clear()
            addr = self.master_addr
            try:
                await self._follow(addr)
            except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
                self._note(f"connection to master {addr} failed: {exc or type(exc).__name__}")
            except ReplicationError as exc:
                self._note(f"closing the connection to master {addr}: {exc}")
            was_connected = self.connected
            self._drop()
            if self._changed.is_set():
                continue
            try:      # a lost connection is re-opened soon (re-reporting the real offset); a refused one in 5 s
                async with asyncio.timeout(RECONNECT_S if was_connected else HA_CONNECT_RETRY_S):
                    await self._changed.wait()
            except TimeoutError:
                pass

    def _note(self, text: str) -> None:
        if text != self.last_error:
            log.warning("%s", text)
        self.last_error = text

    def _drop(self) -> None:
        self.connected = False
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    async def _follow(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        loop = asyncio.get_running_loop()
        receiver = _Receiver(self)
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            transport, _ = await loop.create_connection(lambda: receiver, host.strip("[]"), int(port))
        self._transport, self.connected = transport, True
        self.last_read_ms = now_ms()
        log.info("connected to master %s for replication, reporting offset %d", addr,
                 self.store.commitlog_max_offset)
        self.last_error = ""
        self._report(force=True)
        heartbeat = loop.create_task(self._heartbeats())
        idle_s = self.cfg.haHousekeepingInterval / 1000
        try:
            while True:
                try:
                    async with asyncio.timeout(idle_s / 4):
                        await asyncio.shield(receiver.closed)
                except TimeoutError:
                    if now_ms() - self.last_read_ms > self.cfg.haHousekeepingInterval:
                        raise ReplicationError(f"nothing from the master for {idle_s:g} s") from None
                    continue
                receiver.closed.result()            # raises what ended the connection
                return
        finally:
            heartbeat.cancel()

    def _frames(self, frames, pending: tuple[int, int] | None) -> None:
        """Frames the receiver completed: each appended at exactly the offset it names; and the
        header of the next one, whose offset is checked before its body arrives."""
        for offset, data in frames:
            self._check(offset)
            if data:
                self.store.append_data(offset, data)
                self.rate.add(len(data))
        if pending is not None:
            self._check(pending[0])
        self._report()

    def _check(self, offset: int) -> None:
        here = self.store.commitlog_max_offset
        if here != 0 and offset != here:
            raise ReplicationError(f"master sent offset {offset}, the slave's max offset is {here}")

    def _report(self, force: bool = False) -> None:
        offset = self.store.commitlog_max_offset
        if (force or offset > self.reported) and self._transport is not None and not self._transport.is_closing():
            self._transport.write(encode_report(offset))
            self.reported = offset
            self.last_write_ms = now_ms()

    async def _heartbeats(self) -> None:
        interval = self.cfg.haSendHeartbeatInterval / 1000
        while True:
            await asyncio.sleep(interval)
            self._report(force=True)

    def runtime_info(self) -> dict:
        """An HAClientRuntimeInfo (5.x GET_BROKER_HA_STATUS)."""
        return {"masterAddr": self.master_addr, "transferredByteInSecond": self.rate.current(),
                "maxOffset": self.store.commitlog_max_offset, "lastReadTimestamp": self.last_read_ms,
                "lastWriteTimestamp": self.last_write_ms, "masterFlushOffset": 0, "isActivated": self.connected,
                "dispatchBehindBytes": self.store.dispatch_behind_bytes, "lastError": self.last_error}


class _Receiver(asyncio.BufferedProtocol):
    """Reads the master's stream straight into the frame reader's buffer (no intermediate copies)."""

    def __init__(self, slave: HASlave):
        self.slave = slave
        self.frames = FrameReader()
        self.closed: asyncio.Future = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.writable()

    def buffer_updated(self, nbytes: int) -> None:
        self.slave.last_read_ms = now_ms()
        try:
            frames = self.frames.filled(nbytes)
            self.slave._frames(frames, self.frames.next_header())
        except ReplicationError as exc:
            self._end(exc)

    def eof_received(self):
        self._end(ConnectionError("the master closed the connection"))
        return False

    def connection_lost(self, exc) -> None:
        self._end(exc or ConnectionError("the master closed the connection"))

    def _end(self, exc: BaseException) -> None:
        if not self.closed.done():
            self.closed.set_exception(exc)
        if self.transport is not None:
            self.transport.close()
