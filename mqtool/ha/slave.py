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

from mqtool.ha.master import READ_CHUNK, Rate, now_ms
from store.errors import ReplicationError
from store.ha.protocol import HA_CONNECT_RETRY_S, FrameReader, encode_report
from store.messagestore import MessageStore
from store.storeconfig import MessageStoreConfig

log = logging.getLogger("mqtool.ha")
CONNECT_TIMEOUT_S = 3.0


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
        self._writer: asyncio.StreamWriter | None = None

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

    def set_master(self, addr: str) -> None:
        """updateHaMasterAddress: a new address closes the current connection and connects there."""
        if addr and addr != self.master_addr:
            log.info("HA master address is now %s (was %s)", addr, self.master_addr or "none")
            self.master_addr = addr
            self._changed.set()
            if self._writer is not None:
                self._writer.close()

    async def _run(self) -> None:
        while True:
            if not self.master_addr:
                await self._changed.wait()
            self._changed.clear()
            addr = self.master_addr
            try:
                await self._follow(addr)
            except (ConnectionError, OSError, asyncio.TimeoutError) as exc:
                self._note(f"connection to master {addr} failed: {exc or type(exc).__name__}")
            except ReplicationError as exc:
                self._note(f"closing the connection to master {addr}: {exc}")
            self._drop()
            if self._changed.is_set():
                continue
            try:
                await asyncio.wait_for(self._changed.wait(), HA_CONNECT_RETRY_S)
            except asyncio.TimeoutError:
                pass

    def _note(self, text: str) -> None:
        if text != self.last_error:
            log.warning("%s", text)
        self.last_error = text

    def _drop(self) -> None:
        self.connected = False
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def _follow(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)),
                                                CONNECT_TIMEOUT_S)
        self._writer, self.connected = writer, True
        self.last_read_ms = now_ms()
        log.info("connected to master %s for replication, reporting offset %d", addr,
                 self.store.commitlog_max_offset)
        self.last_error = ""
        self._report(force=True)
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeats())
        frames = FrameReader()
        idle_s = self.cfg.haHousekeepingInterval / 1000
        try:
            while True:
                try:
                    data = await asyncio.wait_for(reader.read(READ_CHUNK), idle_s)
                except asyncio.TimeoutError:
                    raise ReplicationError(f"nothing from the master for {idle_s:g} s") from None
                if not data:
                    raise ConnectionError("the master closed the connection")
                self.last_read_ms = now_ms()
                for frame in frames.feed(data):
                    here = self.store.commitlog_max_offset
                    if here != 0 and frame.offset != here:
                        raise ReplicationError(f"master sent offset {frame.offset}, the slave's max offset is {here}")
                    if frame.data:
                        self.store.append_data(frame.offset, frame.data)
                        self.rate.add(len(frame.data))
                self._report()
                if writer.transport.get_write_buffer_size():
                    await writer.drain()
        finally:
            heartbeat.cancel()

    def _report(self, force: bool = False) -> None:
        offset = self.store.commitlog_max_offset
        if (force or offset > self.reported) and self._writer is not None:
            self._writer.write(encode_report(offset))
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
