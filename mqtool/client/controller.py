"""Asking RocketMQ 5 controllers (controller.md 9): the leader first (CONTROLLER_GET_METADATA_INFO to
any listed controller), then the question to it, as mqadmin's controller commands do.

`ControllerAdmin("127.0.0.1:9878;127.0.0.1:9868")` tries the addresses in order for the leader;
config reads and updates go to each address.
"""
from __future__ import annotations

from dataclasses import dataclass

from mqtool.common.controllerbodies import BrokerReplicasInfo, ElectMasterResponseBody
from mqtool_remoting import javaprops, jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.controllerheaders import (CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader,
                                               ElectMasterResponseHeader, GetMetaDataResponseHeader)
from mqtool_remoting.errors import RemotingCommandError, RemotingError
from mqtool_remoting.extfields import from_ext_fields, to_ext_fields
from mqtool_remoting.transport import RemotingClient

TIMEOUT_S = 3.0
COMMIT_TIMEOUT_S = 6.0      # a request that commits through Raft may take the controller's 5 s


class ControllerError(RemotingError):
    """A controller said no, or none of them could be asked: one line for the operator."""


@dataclass(frozen=True)
class ControllerMetadata:
    addr: str                     # the controller that answered
    group: str | None
    leader_id: str | None
    leader_addr: str | None
    is_leader: bool
    peers: tuple[tuple[str, str], ...]     # (id, host:port)

    def to_json(self) -> dict:
        return {"group": self.group, "controllerLeaderId": self.leader_id,
                "controllerLeaderAddress": self.leader_addr, "askedAddr": self.addr, "isLeader": self.is_leader,
                "peers": [{"id": i, "address": a, "leader": i == self.leader_id} for i, a in self.peers]}


def split_addrs(addrs: str) -> list[str]:
    out = [a.strip() for a in addrs.replace(",", ";").split(";") if a.strip()]
    if not out:
        raise ControllerError("no controller address given")
    return out


def _peers(text: str | None) -> tuple[tuple[str, str], ...]:
    out = []
    for item in (text or "").split(";"):
        if item.strip():
            node, _, addr = item.strip().partition(":")
            out.append((node, addr))
    return tuple(out)


def _check(resp: RemotingCommand, what: str) -> RemotingCommand:
    if resp.code == ResponseCode.CONTROLLER_NOT_LEADER:
        raise ControllerError(f"{what}: the controller asked is not the leader (CONTROLLER_NOT_LEADER 2007); "
                              "ask again, a new leader may be being elected")
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingCommandError(resp.code, resp.remark, what)
    return resp


class ControllerAdmin:
    def __init__(self, addrs: str):
        self.addrs = split_addrs(addrs)
        self.client = RemotingClient()

    async def close(self) -> None:
        await self.client.close()

    async def _invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float = TIMEOUT_S) -> RemotingCommand:
        return await self.client.invoke(addr, cmd, timeout_s)

    async def metadata(self, addr: str | None = None) -> ControllerMetadata:
        """CONTROLLER_GET_METADATA_INFO from `addr`, or from the first listed controller that answers."""
        errors = []
        for a in [addr] if addr else self.addrs:
            try:
                resp = _check(await self._invoke(a, RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO)),
                              f"controller metadata from {a}")
            except RemotingError as exc:
                errors.append(str(exc))
                continue
            h = from_ext_fields(GetMetaDataResponseHeader, resp.ext_fields)
            return ControllerMetadata(a, h.group, h.controllerLeaderId, h.controllerLeaderAddress, bool(h.isLeader),
                                      _peers(h.peers))
        raise ControllerError("no controller answered: " + "; ".join(errors))

    async def leader(self) -> str:
        meta = await self.metadata()
        if not meta.leader_addr:
            raise ControllerError(f"the controllers have no leader now (asked {meta.addr}): no majority, "
                                  "or an election is under way")
        return meta.leader_addr

    async def _leader_call(self, code: int, what: str, header=None,
                           body: bytes = b"") -> tuple[RemotingCommand, str]:
        leader = await self.leader()
        cmd = RemotingCommand.request(code, to_ext_fields(header) if header is not None else None, body)
        return await self._invoke(leader, cmd, COMMIT_TIMEOUT_S), leader

    async def sync_state_sets(self, broker_names: list[str]) -> BrokerReplicasInfo:
        """CONTROLLER_GET_SYNC_STATE_DATA (mqadmin getSyncStateSet); a name the controller does not
        know is an error."""
        resp, leader = await self._leader_call(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, "sync state sets",
                                               body=jsonbody.dumps(list(broker_names)))
        info = BrokerReplicasInfo.from_json(_check(resp, f"sync state sets from {leader}").body)
        missing = [n for n in broker_names if n not in info.replicasInfoTable]
        if missing:
            raise ControllerError(f"broker set {', '.join(missing)} is not known to the controller at {leader}")
        return info

    async def elect_master(self, cluster: str, broker_name: str, broker_id: int | None) -> dict:
        """CONTROLLER_ELECT_MASTER ofAdminTrigger (mqadmin electMaster): with an id, a switchover to
        it; without, the controller's own choice (ofControllerTrigger)."""
        header = ElectMasterRequestHeader(cluster or "", broker_name, -1 if broker_id is None else broker_id,
                                          broker_id is not None)
        resp, leader = await self._leader_call(RequestCode.CONTROLLER_ELECT_MASTER, "elect master", header)
        what = f"elect master of {broker_name} at {leader}"
        if resp.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED:
            raise ControllerError(f"{what}: broker set {broker_name} is not known to the controller")
        _check(resp, what)
        h = from_ext_fields(ElectMasterResponseHeader, resp.ext_fields)
        body = ElectMasterResponseBody.from_json(resp.body)
        group = body.brokerMemberGroup
        return {"clusterName": group.cluster if group else cluster, "brokerName": broker_name,
                "masterBrokerId": h.masterBrokerId, "masterAddress": h.masterAddress, "masterEpoch": h.masterEpoch,
                "syncStateSetEpoch": h.syncStateSetEpoch, "syncStateSet": sorted(body.syncStateSet),
                "brokerAddrs": {str(k): v for k, v in sorted((group.brokerAddrs if group else {}).items())}}

    async def clean_broker_metadata(self, cluster: str | None, broker_name: str, ids: list[int] | None,
                                    clean_living: bool) -> None:
        header = CleanControllerBrokerDataRequestHeader(broker_name, cluster, ";".join(map(str, ids)) if ids else None,
                                                        clean_living)
        resp, leader = await self._leader_call(RequestCode.CLEAN_BROKER_DATA, "clean broker metadata", header)
        _check(resp, f"clean metadata of {broker_name} at {leader}")

    async def config(self, addr: str) -> dict[str, str]:
        resp = _check(await self._invoke(addr, RemotingCommand.request(RequestCode.GET_CONTROLLER_CONFIG)),
                      f"controller config from {addr}")
        return javaprops.loads(resp.body.decode("utf-8")) if resp.body else {}

    async def update_config(self, addr: str, props: dict[str, str]) -> str:
        """The controller's remark: "" when the change is kept in its config file."""
        body = javaprops.dumps(props).encode("utf-8")
        resp = _check(await self._invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONTROLLER_CONFIG, None,
                                                                       body)), f"update controller config at {addr}")
        return resp.remark or ""
