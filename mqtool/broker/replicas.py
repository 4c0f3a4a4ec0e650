"""A controller-mode broker's side of its group (5.3.0 ReplicasManager; shared/spec/controller.md §2.4, §5).

With `enableControllerMode=true` the broker starts fenced: a replica that takes no writes and does
not register with the name servers. It finds the controller leader, gets a controller id (kept in
`brokerIdentity`), registers, heartbeats every controller, and takes the role the controller gives
(electing itself when the group has no live master). Roles then follow the controller: pushed by
NOTIFY_BROKER_ROLE_CHANGED and polled with GET_REPLICA_INFO every syncBrokerMetadataPeriod, acted on
only for a master epoch above its own.

* becoming master: the replica's half-received record is cut, the epoch file gets
  (epoch, commit log end), dispatch catches up to the end, puts are taken, brokerId 0 is registered
  with stateVersion = the master epoch;
* becoming slave: puts stop (SERVICE_NOT_AVAILABLE), the broker registers its controller id and
  learns the master's HA address from the answer; the HA client cuts the divergent tail at the
  handshake (mqtool/ha/autoswitch.py).

The master reports SyncStateSet changes (ALTER_SYNC_STATE_SET) and adopts the controller's answer.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from pathlib import Path

from mqtool.broker.background import cancel
from mqtool.common.controllerbodies import ElectMasterResponseBody, SyncStateSet
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.controllerheaders import (AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
                                               BrokerHeartbeatRequestHeader, ElectMasterRequestHeader,
                                               GetNextBrokerIdRequestHeader, GetReplicaInfoRequestHeader,
                                               NotifyBrokerRoleChangedRequestHeader,
                                               RegisterBrokerToControllerRequestHeader)
from mqtool_remoting.errors import RemotingError
from mqtool_remoting.extfields import from_ext_fields, to_ext_fields
from mqtool_remoting.transport import RemotingClient
from mqtool_store.epochfile import EpochFile
from mqtool_store.storeconfig import SLAVE, SYNC_MASTER

log = logging.getLogger("mqtool.broker.replicas")
RETRY_S = 5.0                 # RETRY_INTERVAL_SECOND: the start-up sequence again, from where it stopped
REQUEST_TIMEOUT_S = 3.0
DISPATCH_POLL_S = 0.1         # changeToMaster waits for dispatch in 100 ms polls


class ControllerError(Exception):
    """A controller answered with an error code, or none answered."""

    def __init__(self, code: int, remark: str):
        super().__init__(f"{code} {remark}")
        self.code = code


class ReplicasManager:
    def __init__(self, ctrl):
        self.ctrl = ctrl
        self.cfg = ctrl.config
        self.store_cfg = ctrl.store_config
        self.client = RemotingClient()
        self.epochs = EpochFile(epoch_file_path(self.store_cfg)).load()
        self.controller_id: int | None = None
        self.master_id: int | None = None
        self.master_addr = ""
        self.master_epoch = 0
        self.ss_epoch = 0
        self.leader = ""
        self.state = "INITIAL"          # INITIAL -> LEADER_KNOWN -> REGISTERED -> RUNNING
        self.last_error = ""
        self.isolated = True
        self.lock = asyncio.Lock()
        self._tasks: list[asyncio.Task] = []
        self._oneoff: set[asyncio.Task] = set()
        self.ha = None                  # the AutoSwitchHA (set by the broker before start)

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._startup()), loop.create_task(self._heartbeats()),
                       loop.create_task(self._sync_metadata()), loop.create_task(self._refresh_leader()),
                       loop.create_task(self._check_sync_state_set())]

    async def stop(self) -> None:
        for t in [*self._tasks, *self._oneoff]:
            await cancel(t)
        await self.client.close()

    async def _startup(self) -> None:
        """ReplicasManager.start: until RUNNING, retried every 5 s from the state reached."""
        while self.state != "RUNNING":
            try:
                await self._start_once()
            except (ControllerError, RemotingError, OSError, ValueError, KeyError) as exc:
                self._note(f"controller mode start-up ({self.state}): {exc}; again in {RETRY_S:g} s")
                await asyncio.sleep(RETRY_S)

    async def _start_once(self) -> None:
        if self.state == "INITIAL":
            await self.find_leader()
            self.state = "LEADER_KNOWN"
        if self.state == "LEADER_KNOWN":
            await self.register()
            self.state = "REGISTERED"
        if self.state == "REGISTERED":
            await self.send_heartbeats()
            if self.master_id is None or not self.master_addr:
                await self.elect()
            if self.master_id is None:
                raise ControllerError(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE, "the group has no master yet")
            self.isolated = False
            self.state = "RUNNING"
            log.info("controller mode: running as %s (controller id %s, master epoch %d)",
                     "master" if self.is_master else "slave", self.controller_id, self.master_epoch)
            self.ctrl.schedule_register()

    def _note(self, text: str) -> None:
        if text != self.last_error:
            log.warning("%s", text)
        self.last_error = text

    @property
    def is_master(self) -> bool:
        return self.controller_id is not None and self.master_id == self.controller_id

    # ---------------------------------------------------------------- requests to controllers

    async def _invoke(self, addr: str, code: RequestCode, header=None, body: bytes = b"") -> RemotingCommand:
        cmd = RemotingCommand.request(code, to_ext_fields(header) if header is not None else None, body,
                                      language="JAVA")
        return await self.client.invoke(addr, cmd, REQUEST_TIMEOUT_S)

    async def _leader_call(self, code: RequestCode, header=None, body: bytes = b"",
                           ok=(ResponseCode.SUCCESS,)) -> RemotingCommand:
        if not self.leader:
            await self.find_leader()
        try:
            resp = await self._invoke(self.leader, code, header, body)
        except RemotingError:
            self.leader = ""
            raise
        if resp.code == ResponseCode.CONTROLLER_NOT_LEADER:
            self.leader = ""
        if resp.code not in ok:
            raise ControllerError(resp.code, resp.remark or "")
        return resp

    async def find_leader(self) -> str:
        """CONTROLLER_GET_METADATA_INFO on each controller until one names the leader."""
        addrs = self.cfg.controller_addrs
        if not addrs:
            raise ValueError("enableControllerMode=true needs controllerAddr (HOST:PORT;HOST:PORT)")
        errors = []
        for addr in addrs:
            try:
                resp = await self._invoke(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
            except RemotingError as exc:
                errors.append(f"{addr}: {exc}")
                continue
            leader = resp.ext_fields.get("controllerLeaderAddress") if resp.code == ResponseCode.SUCCESS else None
            if leader:
                if leader != self.leader:
                    log.info("controller leader: %s", leader)
                self.leader = leader
                return leader
            errors.append(f"{addr}: no leader known")
        raise ControllerError(ResponseCode.CONTROLLER_NOT_LEADER, "no controller leader: " + "; ".join(errors))

    # ---------------------------------------------------------------- broker id (§2.4)

    @property
    def identity_path(self) -> Path:
        """storePathBrokerIdentity, by default {storePathRootDir}/brokerIdentity."""
        cfg = self.store_cfg
        return Path(cfg.storePathBrokerIdentity).expanduser() if cfg.storePathBrokerIdentity \
            else cfg.root / "brokerIdentity"

    def _read_identity(self, path: Path, fields: int) -> list[str] | None:
        try:
            parts = path.read_text(encoding="utf-8").strip().split("#")
        except FileNotFoundError:
            return None
        if len(parts) != fields:
            raise ValueError(f"{path}: not {fields} fields separated by '#'")
        if parts[0] != self.cfg.brokerClusterName or parts[1] != self.cfg.brokerName:
            raise ValueError(f"{path} names {parts[0]}/{parts[1]}, this broker is "
                             f"{self.cfg.brokerClusterName}/{self.cfg.brokerName}: fix the config or the file")
        return parts

    async def register(self) -> None:
        """The persistent controller id (brokerIdentity, or apply for one), then REGISTER_BROKER."""
        names = {"clusterName": self.cfg.brokerClusterName, "brokerName": self.cfg.brokerName}
        temp = self.identity_path.with_name(self.identity_path.name + "-temp")
        for attempt in range(5):
            known = self._read_identity(self.identity_path, 3)
            if known is not None:
                self.controller_id = int(known[2])
                break
            pending = self._read_identity(temp, 4)
            if pending is None:
                resp = await self._leader_call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                                               GetNextBrokerIdRequestHeader(**names))
                next_id = int(resp.ext_fields["nextBrokerId"])
                check = f"{self.cfg.broker_addr};{int(time.time() * 1000)}"
                _write(temp, f"{self.cfg.brokerClusterName}#{self.cfg.brokerName}#{next_id}#{check}")
                pending = [*names.values(), str(next_id), check]
            try:
                await self._leader_call(RequestCode.CONTROLLER_APPLY_BROKER_ID, ApplyBrokerIdRequestHeader(
                    **names, appliedBrokerId=int(pending[2]), registerCheckCode=pending[3]))
            except ControllerError as exc:
                temp.unlink(missing_ok=True)
                if exc.code != ResponseCode.CONTROLLER_BROKER_ID_INVALID:
                    raise
                await asyncio.sleep(random.random())        # another replica took that id: try the next
                continue
            _write(self.identity_path, f"{self.cfg.brokerClusterName}#{self.cfg.brokerName}#{pending[2]}")
            temp.unlink(missing_ok=True)
            self.controller_id = int(pending[2])
            log.info("controller id %d (kept in %s)", self.controller_id, self.identity_path)
            break
        if self.controller_id is None:
            raise ControllerError(ResponseCode.CONTROLLER_BROKER_ID_INVALID, "no broker id after 5 tries")
        resp = await self._leader_call(RequestCode.CONTROLLER_REGISTER_BROKER, RegisterBrokerToControllerRequestHeader(
            **names, brokerId=self.controller_id, brokerAddress=self.cfg.broker_addr))
        await self._apply_replica_info(resp.ext_fields, resp.body)

    # ---------------------------------------------------------------- heartbeats and polls

    def heartbeat_header(self) -> BrokerHeartbeatRequestHeader:
        return BrokerHeartbeatRequestHeader(
            clusterName=self.cfg.brokerClusterName, brokerAddr=self.cfg.broker_addr, brokerName=self.cfg.brokerName,
            brokerId=self.controller_id, epoch=self.epochs.last_epoch, maxOffset=self.ctrl.store.commitlog_max_offset,
            confirmOffset=self.ha.confirm_offset if self.ha is not None else 0,
            heartbeatTimeoutMills=self.cfg.controllerHeartBeatTimeoutMills,
            electionPriority=self.cfg.brokerElectionPriority)

    async def send_heartbeats(self) -> None:
        if self.controller_id is None:
            return
        ext = to_ext_fields(self.heartbeat_header())
        for addr in self.cfg.controller_addrs:
            try:
                async with asyncio.timeout(self.cfg.sendHeartbeatTimeoutMillis / 1000):
                    await self.client.invoke_oneway(addr, RemotingCommand.request(
                        RequestCode.BROKER_HEARTBEAT, ext, oneway=True, language="JAVA"))
            except (RemotingError, OSError, TimeoutError):
                pass              # an unreachable controller is skipped (scanAvailableControllerAddresses)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.brokerHeartbeatInterval / 1000)
            if self.state == "RUNNING" or self.state == "REGISTERED":
                await self.send_heartbeats()

    async def _refresh_leader(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.syncControllerMetadataPeriod / 1000)
            try:
                await self.find_leader()
            except (ControllerError, RemotingError) as exc:
                self._note(f"controller leader unknown: {exc}")

    async def _sync_metadata(self) -> None:
        """schedulingSyncBrokerMetadata: GET_REPLICA_INFO every syncBrokerMetadataPeriod."""
        while True:
            await asyncio.sleep(self.cfg.syncBrokerMetadataPeriod / 1000)
            if self.state != "RUNNING":
                continue
            try:
                await self.poll()
            except ControllerError as exc:
                if exc.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                    self.state = "LEADER_KNOWN"          # the controller lost us: register again
                    self.ctrl_task(self._startup())
                else:
                    self._note(f"replica info from the controller: {exc}")
            except RemotingError as exc:
                self._note(f"replica info from the controller: {exc}")

    def ctrl_task(self, coro) -> None:
        """A one-off task (an alter, a new registration), cancelled at stop, forgotten when done."""
        task = asyncio.get_running_loop().create_task(coro)
        self._oneoff.add(task)
        task.add_done_callback(self._oneoff.discard)

    async def poll(self) -> None:
        resp = await self._leader_call(RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                       GetReplicaInfoRequestHeader(brokerName=self.cfg.brokerName))
        await self._apply_replica_info(resp.ext_fields, resp.body, poll=True)

    async def _apply_replica_info(self, ext: dict, body: bytes, poll: bool = False) -> None:
        epoch = int(ext["masterEpoch"]) if ext.get("masterEpoch") not in (None, "") else 0
        master = ext.get("masterBrokerId")
        master_id = int(master) if master not in (None, "") else None
        ss = SyncStateSet.from_json(body) if body else None
        async with self.lock:
            if epoch > self.master_epoch:
                if master_id is not None and ext.get("masterAddress"):
                    await self._change_role(master_id, ext["masterAddress"], epoch, ss)
                elif poll:
                    await self._elect_locked()
            elif epoch == self.master_epoch and self.is_master and ss is not None and ss.epoch > self.ss_epoch:
                self._adopt(ss)

    async def elect(self) -> None:
        async with self.lock:
            await self._elect_locked()

    async def _elect_locked(self) -> None:
        """brokerElect: ELECT_MASTER for this broker; SUCCESS and MASTER_STILL_EXIST alike."""
        header = ElectMasterRequestHeader(clusterName=self.cfg.brokerClusterName, brokerName=self.cfg.brokerName,
                                          brokerId=self.controller_id)
        resp = await self._leader_call(RequestCode.CONTROLLER_ELECT_MASTER, header,
                                       ok=(ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST))
        ext = resp.ext_fields
        if ext.get("masterBrokerId") in (None, "") or not ext.get("masterAddress"):
            return
        ss = None
        if resp.body:
            members = ElectMasterResponseBody.from_json(resp.body).syncStateSet
            ss = SyncStateSet(members, int(ext.get("syncStateSetEpoch") or 0))
        await self._change_role(int(ext["masterBrokerId"]), ext["masterAddress"], int(ext["masterEpoch"]), ss)

    async def notified(self, cmd: RemotingCommand) -> RemotingCommand:
        """NOTIFY_BROKER_ROLE_CHANGED (1008): acted on for a master epoch above ours."""
        h = from_ext_fields(NotifyBrokerRoleChangedRequestHeader, cmd.ext_fields)
        ss = SyncStateSet.from_json(cmd.body) if cmd.body else None
        if h.masterBrokerId is not None and h.masterEpoch is not None and self.controller_id is not None:
            async with self.lock:
                await self._change_role(h.masterBrokerId, h.masterAddress or "", h.masterEpoch, ss)
        return cmd.response(ResponseCode.SUCCESS)

    # ---------------------------------------------------------------- roles (§5.3, §5.4)

    async def _change_role(self, master_id: int, master_addr: str, epoch: int, ss: SyncStateSet | None) -> None:
        if epoch <= self.master_epoch:
            return
        if epoch < self.epochs.last_epoch:
            log.warning("role change to master epoch %d refused: the epoch file already has epoch %d",
                        epoch, self.epochs.last_epoch)
            return
        if master_id == self.controller_id:
            await self._change_to_master(epoch, ss)
        else:
            await self._change_to_slave(master_id, master_addr, epoch)

    async def _change_to_master(self, epoch: int, ss: SyncStateSet | None) -> None:
        ctrl, store = self.ctrl, self.ctrl.store
        was_master = self.is_master and not ctrl.is_slave
        self.master_epoch = epoch
        if ss is not None:
            self._adopt(ss)
        loop = asyncio.get_running_loop()
        if was_master:
            self.epochs.append(epoch, store.commitlog_max_offset)
        else:
            ctrl.stop_slave_sync()
            store.set_dispatch_limit(None)           # what the replica holds becomes committed here
            await self._wait_dispatch()
            if store.reput_from < store.commitlog_max_offset:      # truncateInvalidMsg: a half-received record
                cut = await loop.run_in_executor(None, store.truncate_files, store.reput_from)
                log.warning("promotion: cut %d bytes of a record the old master did not finish sending", cut)
            if self.epochs.last_epoch >= epoch:
                self.epochs.truncate_suffix_by_epoch(epoch)
            self.epochs.append(epoch, store.commitlog_max_offset)
            self._cover_held_queues()
            store.become_master(SYNC_MASTER)
            ctrl.config.brokerRole = SYNC_MASTER          # what GET_BROKER_CONFIG and runtime info say
            self.ha.change_to_master()
            self.ha.set_sync_state_set(self.ha.local or frozenset({self.controller_id}), self.ss_epoch)
            ctrl.config.brokerId = 0
            ctrl.start_master_services()
        self.master_id, self.master_addr = self.controller_id, self.cfg.broker_addr
        ctrl.topics.data_version.next(state_version=epoch)
        log.info("controller mode: master of %s at epoch %d (commit log ends at %d)", self.cfg.brokerName, epoch,
                 store.commitlog_max_offset)
        if self.state == "RUNNING":
            await ctrl.register_all()

    def _cover_held_queues(self) -> None:
        """No message this replica holds is left out of the route it is about to register: topics and
        queues the old master created since the last metadata sync are added to the topic config
        (4.9.8 and 5.3.0 leave them unlisted until an operator updates the topic; mqtool's choice)."""
        held: dict[str, int] = {}
        for (topic, qid), max_offset in list(self.ctrl.store.topic_queue_table.items()):
            if max_offset > 0:
                held[topic] = max(held.get(topic, 0), qid + 1)
        for topic, before, after in self.ctrl.topics.cover_held_queues(held):
            log.warning("promotion: topic %s has messages in queues its config did not list (the old master's "
                        "config had not reached this replica): %d -> %d queues", topic, before, after)

    async def _wait_dispatch(self) -> None:
        store = self.ctrl.store
        last, since = -1, time.monotonic()
        while not store.dispatch_caught_up():
            if store.reput_from != last:
                last, since = store.reput_from, time.monotonic()
            elif time.monotonic() - since > 1.0:      # only a half-received record is left
                return
            await asyncio.sleep(DISPATCH_POLL_S)

    async def _change_to_slave(self, master_id: int, master_addr: str, epoch: int) -> None:
        ctrl = self.ctrl
        self.master_epoch = epoch
        same = master_id == self.master_id and ctrl.is_slave
        self.master_id, self.master_addr = master_id, master_addr
        if not same:
            await ctrl.stop_master_services()
            ctrl.store.become_slave()
            ctrl.store_config.brokerRole = ctrl.config.brokerRole = SLAVE
            ctrl.config.brokerId = self.controller_id
            # 5.3.0 follows the new master when the role change arrives (its HA address then comes with
            # the name server's answer); mqtool's HA port is always listenPort + 1, so the replica
            # connects at once, and a name server answer naming the same master confirms it
            self.ha.change_to_slave(ha_addr_of(master_addr))
            ctrl.start_slave_sync(master_addr)
        ctrl.topics.data_version.next(state_version=epoch)
        log.info("controller mode: slave of %s (controller id %d) at master epoch %d", master_addr,
                 self.controller_id, epoch)
        if self.state == "RUNNING":
            await ctrl.register_all()
        # the new master may register brokerId 0 after this: the registration loop asks again every
        # few seconds until an answer names the master's HA address
        ctrl.schedule_register()

    # ---------------------------------------------------------------- SyncStateSet (§5.5)

    def _adopt(self, ss: SyncStateSet) -> None:
        self.ss_epoch = ss.epoch
        if self.ha is not None:
            self.ha.set_sync_state_set(ss.members, ss.epoch)

    def propose(self, members: frozenset[int]) -> None:
        """AutoSwitchHA's proposal: ALTER_SYNC_STATE_SET; adopted only when the controller says so."""
        self.ctrl_task(self._alter(members))

    async def _alter(self, members: frozenset[int]) -> None:
        header = AlterSyncStateSetRequestHeader(brokerName=self.cfg.brokerName, masterBrokerId=self.controller_id,
                                                masterEpoch=self.master_epoch)
        body = SyncStateSet(members, self.ss_epoch).to_json()
        try:
            resp = await self._leader_call(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header, body)
        except (ControllerError, RemotingError) as exc:
            self.ha.proposal_failed()
            self._note(f"SyncStateSet {sorted(members)} not accepted by the controller: {exc}")
            return
        ss = SyncStateSet.from_json(resp.body)
        log.info("SyncStateSet is now %s (epoch %d)", sorted(ss.members), ss.epoch)
        self._adopt(ss)

    async def _check_sync_state_set(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.checkSyncStateSetPeriod / 1000)
            if self.state == "RUNNING" and self.is_master and self.ha is not None:
                self.ha.check_shrink()

    # ---------------------------------------------------------------- status

    def epoch_cache(self) -> dict:
        """EpochEntryCache (GET_BROKER_EPOCH_CACHE, 1007)."""
        top = self.ctrl.store.commitlog_max_offset
        entries = [{"endOffset": top if i == len(self.epochs.entries) - 1 else e.end, "epoch": e.epoch,
                    "startOffset": e.start} for i, e in enumerate(self.epochs.entries)]
        return {"brokerId": self.cfg.brokerId, "brokerName": self.cfg.brokerName,
                "clusterName": self.cfg.brokerClusterName, "epochList": entries, "maxOffset": top}


def ha_addr_of(broker_addr: str) -> str:
    """The HA address of an mqtool broker at `broker_addr` (host:listenPort): host:listenPort + 1
    ('' for an address that is not host:port)."""
    host, _, port = broker_addr.rpartition(":")
    return f"{host}:{int(port) + 1}" if host and port.isdigit() else ""


def epoch_file_path(cfg) -> Path:
    """storePathEpochFile, by default {storePathRootDir}/epochFileCheckpoint."""
    return Path(cfg.storePathEpochFile).expanduser() if cfg.storePathEpochFile else cfg.root / "epochFileCheckpoint"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    path.write_text(text, encoding="utf-8")
