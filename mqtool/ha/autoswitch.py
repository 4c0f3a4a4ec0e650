"""Replication in controller mode (5.3.0 AutoSwitchHAService, -Connection, -Client; controller.md §5.5-§6).

Every broker listens on the HA port (listenPort + 1) whatever its role. While master it serves
replicas: each connection starts with a handshake (the replica's controller id, the master's epoch
entries), then the replica reports offsets and the master sends the commit log in frames that never
cross an epoch boundary nor a file, each carrying its epoch and the master's confirmOffset. While
slave it follows the master the name server named: it finds the consistent point of the two epoch
histories, cuts its own divergent tail there, then appends what comes.

The master keeps the SyncStateSet (the controller's, `local`; a proposal on its way, `remote`):
acks are counted against their union while a proposal is pending, a replica joins once it holds
everything up to confirmOffset and the current epoch's start, and leaves after
haMaxTimeSlaveNotCatchup without catching up. The proposals themselves go to the controller through
`propose` (the ReplicasManager's ALTER_SYNC_STATE_SET).
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging

from mqtool.ha.master import Rate, now_ms, read_from_replica
from mqtool.ha.slave import HASlave
from mqtool_store.epochfile import EpochFile, find_consistent_point, with_ends
from mqtool_store.errors import ReplicationError
from mqtool_store.ha.autoswitch import (MasterFrameReader, MasterHandshake, SlaveFrameReader, SlaveHandshake,
                                        master_handshake, slave_handshake, slave_report, transfer_header)
from mqtool_store.ha.protocol import MASTER_IDLE_WAIT_S, HAProtocolError
from mqtool_store.messagestore import MessageStore
from mqtool_store.storeconfig import MessageStoreConfig

log = logging.getLogger("mqtool.ha")
READ_CHUNK = 1 << 20
WRITE_HIGH_WATER = 1 << 20


class ReplicaConnection:
    """One replica on the master (AutoSwitchHAConnection)."""

    def __init__(self, ha: "AutoSwitchHA", reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.ha, self.reader, self.writer = ha, reader, writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.addr = f"{peer[0]}:{peer[1]}"
        self.slave_id: int | None = None
        self.async_learner = False
        self.sync_from_last_file = False
        self.request_offset = -1
        self.ack_offset = -1
        self.next_transfer = -1
        self.last_master_max = 0
        self.last_transfer_ms = 0
        self.rate = Rate()
        self.last_read_ms = self.last_write_ms = now_ms()
        self.closed_reason = ""
        self._started = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read_loop()), loop.create_task(self._write_loop())]

    async def _read_loop(self) -> None:
        frames = SlaveFrameReader()

        def on_data(data: bytes) -> None:
            for frame in frames.feed(data):
                if isinstance(frame, SlaveHandshake):
                    self._handshake(frame)
                else:
                    self._report(frame)
        await read_from_replica(self, self.ha.cfg.haHousekeepingInterval / 1000, "nothing from the replica",
                                "the replica", on_data)

    def _handshake(self, h: SlaveHandshake) -> None:
        self.slave_id, self.async_learner, self.sync_from_last_file = h.broker_id, h.async_learner, h.sync_from_last_file
        entries = [(e.epoch, e.start) for e in self.ha.epochs.entries]
        self.writer.write(master_handshake(self.ha.store.commitlog_max_offset, entries))
        log.info("replica %s (controller id %d) handshake: sent %d epoch entries", self.addr, h.broker_id, len(entries))

    def _report(self, offset: int) -> None:
        if self.slave_id is None:
            raise HAProtocolError("a replica reported an offset before its handshake")
        top = self.ha.store.commitlog_max_offset
        if offset > top:        # DefaultHAConnection's rule: never an ack of this master's data
            raise HAProtocolError(f"replica reported offset {offset} beyond the master's max offset {top}")
        if self.request_offset < 0:
            self.request_offset = offset
            self._started.set()
            log.info("replica %s asks for the commit log from offset %d", self.addr, offset)
        self.ack_offset = offset
        self.ha.acked(self, offset)

    def _start_point(self) -> int:
        store = self.ha.store
        if self.request_offset == 0:
            if self.sync_from_last_file:
                top = store.commitlog_max_offset
                return top - top % self.ha.cfg.mappedFileSizeCommitLog
            return store.commitlog_min_offset
        return self.request_offset

    async def _write_loop(self) -> None:
        cfg, ha = self.ha.cfg, self.ha
        try:
            await self._started.wait()
            self.next_transfer = self._start_point()
            while True:
                epoch, start, end = ha.epoch_of(self.next_transfer)
                top = ha.store.commitlog_max_offset
                if self.next_transfer < top:
                    limit = min(cfg.haTransferBatchSize, end - self.next_transfer)
                    data = ha.store.transfer_slice(self.next_transfer, limit)
                    if data is None:
                        self.close(f"offset {self.next_transfer} is no longer in the master's commit log")
                        return
                    if data:
                        self.last_master_max, self.last_transfer_ms = top, now_ms()
                        self.writer.writelines((transfer_header(self.next_transfer, len(data), epoch, start,
                                                                ha.confirm_offset), data))
                        self.next_transfer += len(data)
                        self.rate.add(len(data))
                        self.last_write_ms = now_ms()
                        if self.writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                            await self.writer.drain()
                        continue
                if self.next_transfer >= top and self.ack_offset >= top:
                    ha.caught_up(self, now_ms())        # nothing left to send, all acknowledged
                if now_ms() - self.last_write_ms > cfg.haSendHeartbeatInterval:
                    last = ha.epochs.last
                    self.writer.write(transfer_header(self.next_transfer, 0, last.epoch if last else -1,
                                                      last.start if last else -1, ha.confirm_offset))
                    self.last_write_ms = now_ms()
                await self.writer.drain()
                await ha.wait_for_data(self.next_transfer, MASTER_IDLE_WAIT_S)
        except (ConnectionError, OSError) as exc:
            self.close(f"write failed: {exc}")

    def close(self, reason: str) -> None:
        if self.closed_reason:
            return
        self.closed_reason = reason
        log.warning("HA connection to replica %s closed: %s", self.addr, reason)
        for t in self._tasks:
            if t is not asyncio.current_task():
                t.cancel()
        self.writer.close()
        self.ha.removed(self)

    def info(self, master_max: int) -> dict:
        ack = max(self.ack_offset, 0)
        diff = master_max - ack
        return {"addr": self.addr, "slaveAckOffset": self.ack_offset, "diff": diff, "brokerId": self.slave_id,
                "inSync": self.slave_id in self.ha.sync_state_set, "transferredByteInSecond": self.rate.current(),
                "transferFromWhere": self.next_transfer}


class AutoSwitchHA:
    """The HA port of a controller-mode broker: a master's replicas or a slave's client."""

    def __init__(self, store: MessageStore, cfg: MessageStoreConfig, epochs: EpochFile, my_id=lambda: None,
                 propose=None, on_confirm=None):
        self.store, self.cfg, self.epochs = store, cfg, epochs
        self.my_id = my_id               # this broker's controller id (known after registration)
        self.propose = propose or (lambda members: None)   # a SyncStateSet change for the controller
        self.on_confirm = on_confirm or (lambda: None)     # confirmOffset moved (dispatch what it frees)
        self.is_master = False
        self.connections: set[ReplicaConnection] = set()
        self.local: frozenset[int] = frozenset()     # the controller's SyncStateSet
        self.local_epoch = 0
        self.remote: frozenset[int] | None = None    # being proposed
        self.unsure: frozenset[int] = frozenset()     # members of proposals that got no yes (proposal_failed)
        self.caught_up_ms: dict[int, int] = {}
        self._confirm = store.commitlog_max_offset
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.client: ReplicaClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._data = asyncio.Event()
        self._idle_writers = 0
        self._waiters: list = []
        self._seq = itertools.count()

    # ---------------------------------------------------------------- lifecycle

    async def start(self, host: str, port: int) -> "AutoSwitchHA":
        self._loop = asyncio.get_running_loop()
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
        self.close_connections("the broker is shutting down")
        if self.client is not None:
            await self.client.stop()
            self.client = None
        self._release_waiters()

    async def _accept(self, reader, writer) -> None:
        if not self.is_master:
            writer.close()          # a replica of this broker's old term: it finds the new master by itself
            return
        conn = ReplicaConnection(self, reader, writer)
        self.connections.add(conn)
        log.info("replica %s connected to the HA port", conn.addr)

    def close_connections(self, reason: str) -> None:
        for conn in list(self.connections):
            conn.close(reason)

    def epoch_of(self, offset: int) -> tuple[int, int, int]:
        """(epoch, its start, its end) of the data at `offset`; data older than every epoch (written
        before controller mode) goes as epoch -1 up to the first epoch's start."""
        entry = self.epochs.find_by_offset(offset)
        if entry is not None:
            return entry.epoch, entry.start, entry.end
        first = self.epochs.entries[0] if self.epochs.entries else None
        return -1, 0, first.start if first is not None and offset < first.start else 2 ** 63 - 1

    # ---------------------------------------------------------------- roles

    def change_to_master(self) -> None:
        """Close every HA connection and the client: replicas reconnect and handshake again."""
        self.close_connections("this broker's role changed")
        if self.client is not None:
            self._loop.create_task(self.client.stop())
            self.client = None
        self.is_master = True
        self.caught_up_ms.clear()
        self.confirm_offset = self.store.commitlog_max_offset

    def change_to_slave(self, master_ha_addr: str = "") -> None:
        """changeToSlave: follow the new master at once. `master_ha_addr` is where the controller's
        master listens for replicas (an empty one: learnt from a name server's answer later, as
        5.3.0 learns it). The connection to the old master closes here, so a deposed master that
        comes back is never followed (no bytes of its old epoch appended). Its epoch history cannot
        tell it apart: a master re-elected with nothing written since its last epoch entry keeps that
        entry (appendEntry refuses an equal start offset), so epoch files may end below the master epoch."""
        self.is_master = False
        self.close_connections("this broker is a replica now")
        self._release_waiters()
        if self.client is None:
            self.client = ReplicaClient(self).start()
        self.client.set_master(master_ha_addr, force=True)

    def set_master_address(self, ha_addr: str) -> None:
        if self.client is not None:
            self.client.set_master(ha_addr)

    # ---------------------------------------------------------------- SyncStateSet

    @property
    def sync_state_set(self) -> frozenset[int]:
        """What acks are counted against: the union while a proposal is pending or got no yes
        (controller.md §5.5)."""
        members = self.local | self.unsure if self.unsure else self.local
        return members | self.remote if self.remote is not None else members

    @property
    def in_sync_replicas(self) -> int:
        return max(len(self.local), len(self.remote or ()))

    def set_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        """The controller's answer (or what a poll found): proposals end, confirmOffset recomputed."""
        self.local, self.local_epoch, self.remote, self.unsure = frozenset(members), epoch, None, frozenset()
        self._update_confirm()
        self._check_waiters()

    def _propose(self, members: frozenset[int]) -> None:
        if self.remote is not None or members == self.local:
            return
        self.remote = members
        log.info("proposing SyncStateSet %s (now %s)", sorted(members), sorted(self.local))
        self.propose(members)

    def proposal_failed(self) -> None:
        """The controller said no, or nothing (a timeout, a connection lost): it may have applied the
        proposal all the same (its answer lost with the connection, as when this broker was paused), so
        the proposal's members stay counted for acks (`sync_state_set`) until the controller's set is
        known again (an alter's answer or a poll): Java keeps synchronizing with the union then (its
        errors are only logged, controller.md §5.5). A later proposal may be made meanwhile."""
        if self.remote is not None:
            self.unsure |= self.remote
        self.remote = None

    def check_shrink(self, now: int | None = None) -> None:
        """maybeShrinkSyncStateSet: members behind haMaxTimeSlaveNotCatchup (or gone) leave."""
        if not self.is_master:
            return
        now = now_ms() if now is None else now
        me = self.my_id()
        keep = {m for m in self.local if m == me or
                (m in self.caught_up_ms and now - self.caught_up_ms[m] <= self.cfg.haMaxTimeSlaveNotCatchup)}
        if me is not None:
            keep.add(me)
        if frozenset(keep) != self.local:
            self._propose(frozenset(keep))

    def caught_up(self, conn: ReplicaConnection, at_ms: int) -> None:
        if conn.slave_id is not None and not conn.async_learner:
            self.caught_up_ms[conn.slave_id] = max(self.caught_up_ms.get(conn.slave_id, 0), at_ms)

    def acked(self, conn: ReplicaConnection, offset: int) -> None:
        if offset >= conn.last_master_max and not conn.async_learner:
            self.caught_up(conn, now_ms() if self.store.commitlog_max_offset == offset else conn.last_transfer_ms)
        last = self.epochs.last
        if (self.is_master and not conn.async_learner and conn.slave_id not in self.local
                and offset >= self.confirm_offset and (last is None or offset >= last.start)):
            self._propose(self.local | {conn.slave_id})           # maybeExpandInSyncStateSet
        self._update_confirm()
        self._check_waiters()

    def removed(self, conn: ReplicaConnection) -> None:
        self.connections.discard(conn)
        if self.is_master and conn.slave_id is not None and not any(
                c.slave_id == conn.slave_id for c in self.connections):
            self.caught_up_ms.pop(conn.slave_id, None)
            if conn.slave_id in self.local:
                self._propose(self.local - {conn.slave_id})

    # ---------------------------------------------------------------- confirmOffset and acks

    @property
    def confirm_offset(self) -> int:
        """getConfirmOffset. A master whose acks count only itself (a SyncStateSet of one, or
        allAckInSyncStateSet=false) has confirmed everything it holds: its max offset, read now (a
        value kept from the last ack was stale by every put acknowledged alone since, and a replica
        that acked past it joined the SyncStateSet without that tail). Otherwise, and on a slave,
        the value last computed or received."""
        if self.is_master and (not self.cfg.allAckInSyncStateSet or not self.sync_state_set - {self.my_id()}):
            return self.store.commitlog_max_offset
        return self._confirm

    @confirm_offset.setter
    def confirm_offset(self, value: int) -> None:
        self._confirm = value

    def _update_confirm(self) -> None:
        """computeConfirmOffset: the master's max alone or without all-ack; else the smallest ack
        of the connected SyncStateSet members, kept as it was while a member has no connection."""
        if not self.is_master:
            return
        top = self.store.commitlog_max_offset
        members = self.sync_state_set - {self.my_id()}
        if not self.cfg.allAckInSyncStateSet or not members:
            new = None
        else:
            acks = {}
            for c in self.connections:
                if c.slave_id in members and c.ack_offset > 0:
                    acks[c.slave_id] = max(acks.get(c.slave_id, 0), c.ack_offset)
            if len(acks) < len(members):
                return
            new = min([top, *acks.values()])
        self.confirm_offset = top if new is None else new
        self.store.set_dispatch_limit(new)
        self.on_confirm()

    def replicated(self, end: int) -> bool:
        """GroupTransferService's test for a put ending at `end`."""
        if self.cfg.allAckInSyncStateSet:
            members = self.sync_state_set
            if len(members) <= 1:
                return True
            acked = {c.slave_id for c in self.connections if c.slave_id in members and c.ack_offset >= end}
            return 1 + len(acked) >= len(members)
        need = self.cfg.inSyncReplicas
        return need <= 1 or 1 + sum(1 for c in self.connections if c.ack_offset >= end) >= need

    def needs_wait(self) -> bool:
        return self.cfg.allAckInSyncStateSet or self.cfg.inSyncReplicas > 1

    async def wait_replicated(self, end: int) -> bool:
        """True once `end` is replicated as the put rule asks; False after slaveTimeout."""
        if self.replicated(end):
            return True
        fut = self._loop.create_future()
        timer = self._loop.call_later(self.cfg.slaveTimeout / 1000, _expire, fut)
        heapq.heappush(self._waiters, (end, next(self._seq), fut, timer))
        return await fut

    def _check_waiters(self) -> None:
        while self._waiters and (self._waiters[0][2].done() or self.replicated(self._waiters[0][0])):
            _end, _seq, fut, timer = heapq.heappop(self._waiters)
            timer.cancel()
            if not fut.done():
                fut.set_result(True)

    def _release_waiters(self) -> None:
        for _end, _seq, fut, timer in self._waiters:
            timer.cancel()
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

    # ---------------------------------------------------------------- new data

    def _appended(self, _end: int) -> None:
        if self._idle_writers and self._loop is not None:
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

    # ---------------------------------------------------------------- status

    def runtime_info(self) -> dict:
        top = self.store.commitlog_max_offset
        conns = [c.info(top) for c in sorted(self.connections, key=lambda c: c.addr)]
        return {"master": self.is_master, "masterCommitLogMaxOffset": top,
                "inSyncSlaveNums": sum(1 for c in conns if c["inSync"]), "haConnectionInfo": conns,
                "confirmOffset": self.confirm_offset, "syncStateSet": sorted(self.sync_state_set)}


class ReplicaClient(HASlave):
    """A slave's side (AutoSwitchHAClient): handshake, truncation to the consistent point, appends.
    Connecting, reconnecting and the status are the 4.x client's (mqtool/ha/slave.py)."""

    def __init__(self, ha: AutoSwitchHA):
        super().__init__(ha.store, ha.cfg)
        self.ha = ha
        self.received_epoch = -1

    async def _follow(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        async with asyncio.timeout(3.0):
            reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
        self._transport, self.connected = writer.transport, True
        self.received_epoch = -1
        store, cfg = self.ha.store, self.ha.cfg
        my_id = self.ha.my_id()
        if my_id is None:
            raise ReplicationError("this broker has no controller id yet")
        writer.write(slave_handshake(my_id, cfg.syncFromLastFile, cfg.asyncLearner))
        frames = MasterFrameReader()
        self.last_read_ms = now_ms()
        handshaken = False
        idle_s = cfg.haHousekeepingInterval / 1000
        heartbeat_s = cfg.haSendHeartbeatInterval / 1000
        while True:
            try:
                async with asyncio.timeout(min(idle_s, heartbeat_s)):
                    data = await reader.read(READ_CHUNK)
            except TimeoutError:
                if now_ms() - self.last_read_ms > cfg.haHousekeepingInterval:
                    raise ReplicationError(f"nothing from the master for {idle_s:g} s") from None
                if handshaken:
                    self._report(force=True)
                continue
            if not data:
                raise ConnectionError("the master closed the connection")
            self.last_read_ms = now_ms()
            for frame in frames.feed(data):
                if isinstance(frame, MasterHandshake):
                    await self._truncate(frame)
                    handshaken = True
                    self._report(force=True)
                    continue
                if not handshaken:
                    raise ReplicationError("the master sent data before its handshake")
                here = store.commitlog_max_offset
                if frame.data and here != 0 and frame.offset != here:
                    raise ReplicationError(f"master sent offset {frame.offset}, the replica's max offset is {here}")
                if frame.data and frame.epoch != self.received_epoch and frame.epoch >= 0:
                    self.ha.epochs.append(frame.epoch, frame.epoch_start)
                    self.received_epoch = frame.epoch
                if frame.data:
                    await asyncio.get_running_loop().run_in_executor(None, store.append_data, frame.offset, frame.data)
                    self.rate.add(len(frame.data))
                store.set_dispatch_limit(min(frame.confirm, store.commitlog_max_offset))
                self.ha.confirm_offset = min(frame.confirm, store.commitlog_max_offset)
                self._report()
            if now_ms() - self.last_write_ms > cfg.haSendHeartbeatInterval and handshaken:
                self._report(force=True)

    async def _truncate(self, h: MasterHandshake) -> None:
        """doTruncate: the consistent point of the two epoch histories; everything after it is cut."""
        store, epochs = self.ha.store, self.ha.epochs
        if not epochs.entries:
            log.info("replica has no epoch entries: it reports its max offset %d", store.commitlog_max_offset)
            return
        theirs = with_ends(h.entries)
        # dispatch what whole records arrived; a record cut in half by the last frame stays
        point = find_consistent_point(epochs.entries, store.commitlog_max_offset, theirs, h.max_offset)
        if point < 0:
            raise ReplicationError("no consistent point between this replica's epochs "
                                   f"{[(e.epoch, e.start) for e in epochs.entries]} and the master's "
                                   f"{list(h.entries)}: fix by hand (see controller.md §6.5)")
        if point < store.commitlog_max_offset:
            cut = await asyncio.get_running_loop().run_in_executor(None, store.truncate_files, point)
            log.warning("replica truncated its commit log at %d (%d bytes not on the master, kept in a "
                        "recovery backup)", point, cut)
        epochs.truncate_suffix_by_offset(point)

    def _report(self, force: bool = False) -> None:
        offset = self.store.commitlog_max_offset
        if (force or offset > self.reported) and self._transport is not None and not self._transport.is_closing():
            self._transport.write(slave_report(offset))
            self.reported = offset
            self.last_write_ms = now_ms()


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)

