"""The controller's request handlers and leader duties (5.3.0 ControllerRequestProcessor, ControllerManager,
DLedgerController; controller.md 2.2, 2.3, 3, 4.1).

`await Controller(config).start()` listens on this node's address in controllerDLegerPeers (or the
address given) and joins the Raft group. Heartbeats, metadata and config requests are answered by
any node from its memory; the others only by the leader (else CONTROLLER_NOT_LEADER), one at a
time: the answer is computed against the state, its events committed through Raft, then sent.
"""
from __future__ import annotations

import asyncio
import logging

from mqtool.common.conffile import keep_in_conf
from mqtool.common.javakeys import check_keys
from mqtool.common.controllerbodies import ElectMasterResponseBody, SyncStateSet
from mqtool.controller.config import CONFIG_BLACK_LIST, CONTROLLER_KEYS, ControllerConfig, ControllerConfigError
from mqtool.controller.liveness import LivenessTable, wall_ms
from mqtool.controller.raft import CommitError, RaftBindError, RaftNode
from mqtool.controller.state import Result
from mqtool_remoting import javaprops, jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode, code_name
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.controllerheaders import (AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader,
                                               BrokerHeartbeatRequestHeader, CleanControllerBrokerDataRequestHeader,
                                               ElectMasterRequestHeader, GetMetaDataResponseHeader,
                                               GetNextBrokerIdRequestHeader, GetReplicaInfoRequestHeader,
                                               NotifyBrokerRoleChangedRequestHeader,
                                               RegisterBrokerToControllerRequestHeader)
from mqtool_remoting.errors import HeaderError, RemotingError
from mqtool_remoting.extfields import from_ext_fields, to_ext_fields
from mqtool_remoting.transport import Connection, RemotingClient, Server, parse_addr

log = logging.getLogger("mqtool.controller")
NOT_LEADER = "The controller is not in leader state"
ELECT_RETRY_WAIT_S = 3.0


class Controller:
    def __init__(self, config: ControllerConfig, clock=wall_ms):
        self.config = config
        self.config_file = None           # the file it started with (-c): updateControllerConfig keeps changes there
        self.peers = config.peers()
        self.live = LivenessTable(clock)
        self.server = Server(self.handle, on_close=self._channel_closed)
        self.notifier = RemotingClient()
        self.raft: RaftNode | None = None
        self._one_at_a_time = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self._loops: list[asyncio.Task] = []

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def is_leader(self) -> bool:
        return self.raft is not None and self.raft.ready

    async def start(self, listen: tuple[str, int] | None = None) -> "Controller":
        host, port = listen or parse_addr(self.config.self_addr)
        await self.server.start(host, port)
        raft = RaftNode(self.config.controllerDLegerSelfId, self.peers, self.config.store_path,
                        asyncio.get_running_loop(), self._role_changed)
        try:
            await asyncio.get_running_loop().run_in_executor(None, raft.wait_bound)
        except RaftBindError:
            await self.server.stop()
            raise
        self.raft = raft
        loop = asyncio.get_running_loop()
        self._loops = [loop.create_task(self._every(self.config.scanNotActiveBrokerInterval, self.scan_not_active)),
                       loop.create_task(self._every(self.config.scanInactiveMasterInterval, self.scan_inactive_masters))]
        log.info("controller %s of group %s listening on %s:%d, peers %s", self.config.controllerDLegerSelfId,
                 self.config.controllerDLegerGroup, host, self.server.port, self.config.controllerDLegerPeers)
        return self

    async def stop(self) -> None:
        for t in [*self._loops, *self._tasks]:
            t.cancel()
        await asyncio.gather(*self._loops, *self._tasks, return_exceptions=True)
        await self.server.stop()
        await self.notifier.close()
        if self.raft is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.raft.close)
            self.raft = None

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every(self, interval_ms: int, fn) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 100) / 1000)
            try:
                fn()
            except Exception:  # noqa: BLE001 - a scan must not end the loop
                log.exception("controller scan failed")

    def _role_changed(self, leading: bool) -> None:
        if leading:
            self.scan_inactive_masters()

    # ---- requests ------------------------------------------------------------------------

    async def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        handler = _ANY_NODE.get(cmd.code)
        try:
            if handler is not None:
                return handler(self, conn, cmd)
            handler = _LEADER_ONLY.get(cmd.code)
            if handler is None:
                return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                    f" request type {cmd.code} not supported")
            result = await self.scheduled(lambda: handler(self, cmd))
        except (HeaderError, ValueError) as exc:
            log.warning("bad %s from %s: %s", code_name(RequestCode, cmd.code), conn.peer, exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if cmd.code == RequestCode.CONTROLLER_ELECT_MASTER and result.code == ResponseCode.SUCCESS:
            self._notify(result)
        return cmd.response(result.code, result.remark,
                            to_ext_fields(result.header) if result.header is not None else None, result.body or b"")

    async def scheduled(self, compute) -> Result:
        """The leader's EventScheduler: compute against the state, commit the events, answer."""
        if not self.is_leader:
            return Result(ResponseCode.CONTROLLER_NOT_LEADER, remark=NOT_LEADER)
        async with self._one_at_a_time:
            if not self.is_leader:
                return Result(ResponseCode.CONTROLLER_NOT_LEADER, remark=NOT_LEADER)
            with self.raft.lock:
                result = compute()
                guard = self.manager.guard(result.events)
            if result.events:
                try:
                    await self.raft.append(result.events, guard)
                except CommitError as exc:
                    return Result(ResponseCode.SYSTEM_ERROR, remark=str(exc))
            return result

    @property
    def manager(self):
        return self.raft.manager

    def heartbeat(self, conn, cmd):
        h = from_ext_fields(BrokerHeartbeatRequestHeader, cmd.ext_fields)
        if h.brokerId is None:
            return cmd.response(ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
        self.live.heartbeat(h.clusterName, h.brokerName, h.brokerId, h.brokerAddr, conn, h.epoch, h.maxOffset,
                            h.confirmOffset, h.heartbeatTimeoutMills, h.electionPriority)
        return cmd.response(ResponseCode.SUCCESS, "Heart beat success")

    def metadata(self, conn, cmd):
        leader = self.raft.leader_id() if self.raft else None
        header = GetMetaDataResponseHeader(
            self.config.controllerDLegerGroup, leader, self.peers.get(leader) if leader else None, self.is_leader,
            "".join(f"{i}:{a};" for i, a in self.peers.items()))
        return cmd.response(ResponseCode.SUCCESS, None, to_ext_fields(header))

    def get_config(self, conn, cmd):
        return cmd.response(ResponseCode.SUCCESS, None, None,
                            javaprops.dumps(self.config.to_properties()).encode())

    def update_config(self, conn, cmd):
        if not cmd.body:
            return cmd.response(ResponseCode.SUCCESS)
        try:
            props = javaprops.loads(cmd.body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
        if CONFIG_BLACK_LIST & props.keys():
            return cmd.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        fixed = {"controllerDLegerGroup", "controllerDLegerPeers", "controllerDLegerSelfId", "controllerStorePath"}
        if fixed & props.keys():
            return cmd.response(ResponseCode.NO_PERMISSION, f"Can not update {', '.join(sorted(fixed & props.keys()))} "
                                                            "at run time: restart the controller with it")
        known = CONTROLLER_KEYS
        try:
            notes = check_keys({k: v for k, v in props.items() if k not in known}, known, server="controller")
            self.config.update(props)
        except (ControllerConfigError, ValueError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("config updated by %s: %s", conn.peer, props)
        honoured = {k: v for k, v in props.items() if k in known}
        kept = keep_in_conf(self.config_file, honoured, "controller") if honoured else None
        return cmd.response(ResponseCode.SUCCESS, "; ".join(notes + [kept] if kept else notes) or None)

    # scheduled (leader only), run under the state's lock
    def _alter(self, cmd):
        h = from_ext_fields(AlterSyncStateSetRequestHeader, cmd.ext_fields)
        return self.manager.alter_sync_state_set(h, SyncStateSet.from_json(cmd.body), self.live)

    def _elect(self, cmd):
        h = from_ext_fields(ElectMasterRequestHeader, cmd.ext_fields)
        return self.manager.elect_master(h, self.live, self.config.enableElectUncleanMaster)

    def _register(self, cmd):
        return self.manager.register_broker(from_ext_fields(RegisterBrokerToControllerRequestHeader,
                                                            cmd.ext_fields), self.live)

    def _replica_info(self, cmd):
        return self.manager.get_replica_info(from_ext_fields(GetReplicaInfoRequestHeader, cmd.ext_fields).brokerName)

    def _sync_state_data(self, cmd):
        names = jsonbody.loads(cmd.body) if cmd.body else None
        if not names or not isinstance(names, list):
            return Result(ResponseCode.SYSTEM_ERROR, remark="not set any response code")
        return Result(body=self.manager.sync_state_data([str(n) for n in names], self.live).to_json())

    def _clean(self, cmd):
        return self.manager.clean_broker_data(from_ext_fields(CleanControllerBrokerDataRequestHeader,
                                                              cmd.ext_fields), self.live)

    def _next_id(self, cmd):
        return self.manager.get_next_broker_id(from_ext_fields(GetNextBrokerIdRequestHeader, cmd.ext_fields))

    def _apply_id(self, cmd):
        return self.manager.apply_broker_id(from_ext_fields(ApplyBrokerIdRequestHeader, cmd.ext_fields))

    # ---- liveness and controller-triggered elections ------------------------------------------

    def _channel_closed(self, conn: Connection) -> None:
        for info in self.live.channel_closed(conn):
            log.info("broker %s %s id %d at %s: its connection closed", info.clusterName, info.brokerName,
                     info.brokerId, info.brokerAddr)
            self.on_broker_inactive(info.clusterName, info.brokerName, info.brokerId)

    def scan_not_active(self) -> None:
        for info in self.live.expire():
            log.warning("broker %s %s id %d at %s: no heartbeat for %d ms", info.clusterName, info.brokerName,
                        info.brokerId, info.brokerAddr, info.heartbeatTimeoutMillis)
            if isinstance(info.channel, Connection):
                info.channel.shutdown()
            self.on_broker_inactive(info.clusterName, info.brokerName, info.brokerId)

    def on_broker_inactive(self, cluster: str, name: str, broker_id: int | None) -> None:
        if not self.is_leader:
            return
        if broker_id is not None:
            with self.raft.lock:
                sync = self.manager.sync.get(name)
                master = sync.masterBrokerId if sync is not None else None
            if master != broker_id:
                return
        self._spawn(self.trigger_elect(name))

    def scan_inactive_masters(self) -> None:
        """Leader only: a set whose master is dead while some member lives gets an election."""
        if not self.is_leader:
            return
        with self.raft.lock:
            sets = [(s.brokerName, self.manager.replicas[n].clusterName, s.masterBrokerId, set(
                self.manager.replicas[n].brokerIdInfo)) for n, s in self.manager.sync.items()
                if n in self.manager.replicas and s.masterBrokerId is not None]
        for name, cluster, master, ids in sets:
            if not self.live.is_active(cluster, name, master) and any(
                    self.live.is_active(cluster, name, i) for i in ids):
                self._spawn(self.trigger_elect(name))

    async def trigger_elect(self, name: str) -> Result:
        """ofControllerTrigger, retried up to electMasterMaxRetryCount while it fails for want of a
        committed answer (not when it was answered: no candidate, or the master still lives)."""
        h = ElectMasterRequestHeader(brokerName=name)
        result = Result(ResponseCode.SYSTEM_ERROR)
        for _attempt in range(max(self.config.electMasterMaxRetryCount, 1)):
            result = await self.scheduled(lambda: self.manager.elect_master(
                h, self.live, self.config.enableElectUncleanMaster))
            if result.code != ResponseCode.SYSTEM_ERROR:
                break
            await asyncio.sleep(ELECT_RETRY_WAIT_S)
        if result.code == ResponseCode.SUCCESS:
            log.info("broker-set %s: elected broker %s (%s), master epoch %s", name, result.header.masterBrokerId,
                     result.header.masterAddress, result.header.masterEpoch)
            self._notify(result)
        elif result.code != ResponseCode.CONTROLLER_MASTER_STILL_EXIST:
            log.warning("broker-set %s: election failed: %s %s", name, code_name(ResponseCode, result.code),
                        result.remark or "")
        return result

    def _notify(self, result: Result) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED, oneway, to every live member of the set at its registered address."""
        if not self.config.notifyBrokerRoleChanged:
            return
        body = ElectMasterResponseBody.from_json(result.body)
        group, h = body.brokerMemberGroup, result.header
        if group is None:
            return
        header = NotifyBrokerRoleChangedRequestHeader(h.masterAddress, h.masterEpoch, h.syncStateSetEpoch,
                                                      h.masterBrokerId)
        sync_body = SyncStateSet(body.syncStateSet, h.syncStateSetEpoch).to_json()
        for broker_id, addr in sorted(group.brokerAddrs.items()):
            if addr and self.live.is_active(group.cluster, group.brokerName, broker_id):
                self._spawn(self._notify_one(addr, header, sync_body))

    async def _notify_one(self, addr: str, header, body: bytes) -> None:
        cmd = RemotingCommand.request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, to_ext_fields(header), body,
                                      oneway=True)
        try:
            await self.notifier.invoke_oneway(addr, cmd)
        except RemotingError as exc:
            log.warning("notify of role change to %s failed: %s", addr, exc)


_ANY_NODE = {
    RequestCode.BROKER_HEARTBEAT: Controller.heartbeat,
    RequestCode.CONTROLLER_GET_METADATA_INFO: Controller.metadata,
    RequestCode.GET_CONTROLLER_CONFIG: Controller.get_config,
    RequestCode.UPDATE_CONTROLLER_CONFIG: Controller.update_config,
}
_LEADER_ONLY = {
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: Controller._alter,
    RequestCode.CONTROLLER_ELECT_MASTER: Controller._elect,
    RequestCode.CONTROLLER_REGISTER_BROKER: Controller._register,
    RequestCode.CONTROLLER_GET_REPLICA_INFO: Controller._replica_info,
    RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: Controller._sync_state_data,
    RequestCode.CLEAN_BROKER_DATA: Controller._clean,
    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: Controller._next_id,
    RequestCode.CONTROLLER_APPLY_BROKER_ID: Controller._apply_id,
}


async def run_controller(config: ControllerConfig, listen: tuple[str, int] | None = None, ready=None) -> None:
    """Serve until cancelled; `ready(controller)` once listening."""
    controller = await Controller(config).start(listen)
    try:
        if ready:
            ready(controller)
        await asyncio.Event().wait()
    finally:
        await controller.stop()
