"""The controller's replicated state (5.3.0 ReplicasInfoManager; shared/spec/controller.md 2, 2.4, 4.2), pure.

Two tables keyed by brokerName: BrokerReplicaInfo (the ids a set has handed out and their
addresses) and SyncStateInfo (master, masterEpoch, syncStateSet, syncStateSetEpoch). A request
handler reads them and returns a `Result`: the events to replicate, the response code, header,
body and remark. Nothing here changes until `apply(event)` runs, in raft log order, on every
controller. Liveness (who heartbeats) is not replicated: handlers are given the node's table.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Protocol

from mqtool.common.controllerbodies import (BrokerMemberGroup, BrokerReplicasInfo, ElectMasterResponseBody,
                                            ReplicaIdentity, ReplicasInfo, SyncStateSet)
from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.controllerheaders import (AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader,
                                               ApplyBrokerIdRequestHeader, ApplyBrokerIdResponseHeader,
                                               CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader,
                                               ElectMasterResponseHeader, GetNextBrokerIdRequestHeader,
                                               GetNextBrokerIdResponseHeader, GetReplicaInfoResponseHeader,
                                               RegisterBrokerToControllerRequestHeader,
                                               RegisterBrokerToControllerResponseHeader)

FIRST_BROKER_CONTROLLER_ID = 1
JAVA_INT_MAX = (1 << 31) - 1


# ---- the two tables ------------------------------------------------------------------------

@dataclass
class BrokerReplicaInfo:
    clusterName: str
    brokerName: str
    nextAssignBrokerId: int = FIRST_BROKER_CONTROLLER_ID
    brokerIdInfo: dict[int, tuple[str, str]] = field(default_factory=dict)   # id -> (address, registerCheckCode)

    def address(self, broker_id: int | None) -> str | None:
        entry = self.brokerIdInfo.get(broker_id) if broker_id is not None else None
        return entry[0] if entry else None


@dataclass
class SyncStateInfo:
    clusterName: str
    brokerName: str
    masterBrokerId: int | None = None
    masterEpoch: int = 0
    syncStateSet: set[int] = field(default_factory=set)
    syncStateSetEpoch: int = 0


# ---- events (EventType ids kept) -------------------------------------------------------------

@dataclass(frozen=True)
class AlterSyncStateSetEvent:
    brokerName: str
    newSyncStateSet: frozenset[int]
    TYPE = 1


@dataclass(frozen=True)
class ApplyBrokerIdEvent:
    clusterName: str
    brokerName: str
    brokerAddress: str
    newBrokerId: int
    registerCheckCode: str
    TYPE = 2


@dataclass(frozen=True)
class ElectMasterEvent:
    newMasterElected: bool
    brokerName: str
    newMasterBrokerId: int | None = None
    TYPE = 3


@dataclass(frozen=True)
class CleanBrokerDataEvent:
    brokerName: str
    brokerIdSetToClean: frozenset[int] | None = None
    TYPE = 5


@dataclass(frozen=True)
class UpdateBrokerAddressEvent:
    clusterName: str
    brokerName: str
    brokerAddress: str
    brokerId: int
    TYPE = 6


EVENT_TYPES = {c.TYPE: c for c in (AlterSyncStateSetEvent, ApplyBrokerIdEvent, ElectMasterEvent,
                                   CleanBrokerDataEvent, UpdateBrokerAddressEvent)}
_SETS = ("newSyncStateSet", "brokerIdSetToClean")


def encode_events(events, guard: dict | None = None) -> str:
    """Events as the text a raft entry carries: {"guard": {brokerName: fingerprint}, "events":
    [{"type": id, field: value...}, ...]}."""
    out = []
    for e in events:
        d = {k: (sorted(v) if k in _SETS and v is not None else v) for k, v in asdict(e).items()}
        out.append({"type": e.TYPE, **d})
    return json.dumps({"guard": guard or {}, "events": out}, separators=(",", ":"))


def decode_entry(text: str) -> tuple[dict, list]:
    """(guard, events) of a raft entry's text."""
    entry = json.loads(text)
    return entry.get("guard") or {}, decode_events(entry["events"])


def decode_events(items: list) -> list:
    events = []
    for d in items:
        d = dict(d)
        cls = EVENT_TYPES[d.pop("type")]
        for k in _SETS:
            if d.get(k) is not None:
                d[k] = frozenset(d[k])
        events.append(cls(**d))
    return events


@dataclass
class Result:
    """ControllerResult: what a request makes. Events are replicated before the answer is sent."""
    code: int = ResponseCode.SUCCESS
    header: object | None = None
    body: bytes = b""
    remark: str | None = None
    events: list = field(default_factory=list)


# ---- liveness as the handlers see it ---------------------------------------------------------

class Liveness(Protocol):
    def is_active(self, cluster: str, name: str, broker_id: int) -> bool: ...

    def info(self, cluster: str, name: str, broker_id: int): ...     # .epoch, .maxOffset, .electionPriority


def elect_policy(live: Liveness, cluster: str, name: str, isr: set[int], all_ids: set[int] | None,
                 old: int | None, prefer: int | None) -> int | None:
    """DefaultElectPolicy: the syncStateSet first, then (unclean) every registered id."""
    new = _try_elect(live, cluster, name, isr, old, prefer)
    if new is None and all_ids is not None:
        new = _try_elect(live, cluster, name, all_ids, old, prefer)
    return new


def _try_elect(live, cluster, name, candidates, old, prefer) -> int | None:
    alive = [i for i in candidates if live.is_active(cluster, name, i)]
    if not alive:
        return None
    if old in alive and (prefer is None or prefer == old):
        return old
    if prefer is not None:
        return prefer if prefer in alive else None

    def rank(i):  # highest epoch, then largest max offset, then lowest priority; Python ints cannot overflow
        info = live.info(cluster, name, i)
        if info is None:
            return (1, 1, JAVA_INT_MAX, i)
        return (-info.epoch, -info.maxOffset, info.electionPriority, i)
    return min(alive, key=rank)


# ---- the manager ------------------------------------------------------------------------------

class ReplicasInfoManager:
    def __init__(self):
        self.replicas: dict[str, BrokerReplicaInfo] = {}
        self.sync: dict[str, SyncStateInfo] = {}

    def contains(self, name: str | None) -> bool:
        return name in self.replicas and name in self.sync

    def fingerprint(self, name: str) -> list | None:
        """What a request's answer about set `name` was computed from. A raft entry carries it and
        applies only if it still holds (`guard_holds`): events computed by a leader that lost its
        term, and forwarded by pysyncobj to the new one, are refused rather than applied on a state
        they were not made for."""
        info, s = self.replicas.get(name), self.sync.get(name)
        return [info.nextAssignBrokerId if info else None, len(info.brokerIdInfo) if info else None,
                s.masterBrokerId if s else None, s.masterEpoch if s else None, s.syncStateSetEpoch if s else None]

    def guard(self, events) -> dict[str, list | None]:
        return {e.brokerName: self.fingerprint(e.brokerName) for e in events}

    def guard_holds(self, guard: dict[str, list | None]) -> bool:
        return all(self.fingerprint(name) == list(fp) for name, fp in guard.items())

    # -- apply (raft log order) --

    def apply(self, event) -> None:
        name = event.brokerName
        if isinstance(event, ApplyBrokerIdEvent):
            info = self.replicas.get(name)
            if info is None or name not in self.sync:
                info = self.replicas[name] = BrokerReplicaInfo(event.clusterName, name)
                self.sync[name] = SyncStateInfo(event.clusterName, name)
            if event.newBrokerId not in info.brokerIdInfo:
                info.brokerIdInfo[event.newBrokerId] = (event.brokerAddress, event.registerCheckCode)
                info.nextAssignBrokerId += 1
        elif isinstance(event, ElectMasterEvent):
            if not self.contains(name):
                return
            s = self.sync[name]
            s.masterEpoch += 1
            if event.newMasterElected:
                s.masterBrokerId = event.newMasterBrokerId
                s.syncStateSet = {event.newMasterBrokerId}
                s.syncStateSetEpoch += 1
            else:
                s.masterBrokerId = None
        elif isinstance(event, AlterSyncStateSetEvent):
            if self.contains(name):
                self.sync[name].syncStateSet = set(event.newSyncStateSet)
                self.sync[name].syncStateSetEpoch += 1
        elif isinstance(event, CleanBrokerDataEvent):
            if not event.brokerIdSetToClean:
                self.replicas.pop(name, None)
                self.sync.pop(name, None)
                return
            info, s = self.replicas.get(name), self.sync.get(name)
            for i in event.brokerIdSetToClean:
                if info is not None:
                    info.brokerIdInfo.pop(i, None)
                if s is not None:
                    s.syncStateSet.discard(i)
            if info is not None and not info.brokerIdInfo:
                del self.replicas[name]
            if s is not None and not s.syncStateSet:
                del self.sync[name]
        elif isinstance(event, UpdateBrokerAddressEvent):
            info = self.replicas.get(name)
            if info is not None and event.brokerId in info.brokerIdInfo:
                info.brokerIdInfo[event.brokerId] = (event.brokerAddress, info.brokerIdInfo[event.brokerId][1])
        else:
            raise TypeError(f"not a controller event: {event!r}")

    # -- broker ids (2.4) --

    def get_next_broker_id(self, h: GetNextBrokerIdRequestHeader) -> Result:
        info = self.replicas.get(h.brokerName)
        nxt = info.nextAssignBrokerId if info is not None else FIRST_BROKER_CONTROLLER_ID
        return Result(header=GetNextBrokerIdResponseHeader(h.clusterName, h.brokerName, nxt))

    def apply_broker_id(self, h: ApplyBrokerIdRequestHeader) -> Result:
        name, wanted, code = h.brokerName, h.appliedBrokerId, h.registerCheckCode or ""
        address = code.split(";")[0]
        event = ApplyBrokerIdEvent(h.clusterName or "", name or "", address, wanted, code)
        ok = ApplyBrokerIdResponseHeader(h.clusterName, name)
        if not self.contains(name):
            if wanted == FIRST_BROKER_CONTROLLER_ID:
                return Result(header=ok, events=[event])
            return Result(ResponseCode.CONTROLLER_BROKER_ID_INVALID, remark=(
                f"Broker-set: {name} hasn't been registered in controller, but broker try to apply brokerId: {wanted}"))
        entry = self.replicas[name].brokerIdInfo.get(wanted)
        if entry is None or entry[1] == code:
            return Result(header=ok, events=[event])
        return Result(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                      remark=f"Fail to apply brokerId: {wanted} in broker-set: {name}")

    def register_broker(self, h: RegisterBrokerToControllerRequestHeader, live: Liveness) -> Result:
        name, bid = h.brokerName, h.brokerId
        if not self.contains(name) or bid not in self.replicas[name].brokerIdInfo:
            return Result(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                          remark=f"BrokerId: {bid} hasn't been registered in broker-set: {name}")
        info, s = self.replicas[name], self.sync[name]
        header = RegisterBrokerToControllerResponseHeader(h.clusterName, name)
        if s.masterBrokerId is not None and live.is_active(info.clusterName, name, s.masterBrokerId):
            header = RegisterBrokerToControllerResponseHeader(h.clusterName, name, s.masterBrokerId,
                                                              info.address(s.masterBrokerId), s.masterEpoch,
                                                              s.syncStateSetEpoch)
        events = []
        if h.brokerAddress and h.brokerAddress != info.address(bid):
            events.append(UpdateBrokerAddressEvent(info.clusterName, name, h.brokerAddress, bid))
        return Result(header=header, body=SyncStateSet(frozenset(s.syncStateSet), s.syncStateSetEpoch).to_json(),
                      events=events)

    # -- reads --

    def get_replica_info(self, name: str | None) -> Result:
        if not self.contains(name):
            return Result(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, remark="Broker metadata is not existed")
        info, s = self.replicas[name], self.sync[name]
        return Result(header=GetReplicaInfoResponseHeader(s.masterBrokerId, info.address(s.masterBrokerId),
                                                          s.masterEpoch),
                      body=SyncStateSet(frozenset(s.syncStateSet), s.syncStateSetEpoch).to_json())

    def sync_state_data(self, names: list[str], live: Liveness) -> BrokerReplicasInfo:
        table = {}
        for name in names:
            if not self.contains(name):
                continue
            info, s = self.replicas[name], self.sync[name]
            ins, outs = [], []
            for bid, (addr, _code) in sorted(info.brokerIdInfo.items()):
                r = ReplicaIdentity(name, bid, addr, live.is_active(info.clusterName, name, bid))
                (ins if bid in s.syncStateSet else outs).append(r)
            table[name] = ReplicasInfo(s.masterBrokerId, info.address(s.masterBrokerId), s.masterEpoch,
                                       s.syncStateSetEpoch, tuple(ins), tuple(outs))
        return BrokerReplicasInfo(table)

    # -- election (4.2) --

    def elect_master(self, h: ElectMasterRequestHeader, live: Liveness, unclean: bool) -> Result:
        name = h.brokerName
        if not self.contains(name):
            return Result(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                          remark=f"Broker {name} hasn't been registered")
        info, s = self.replicas[name], self.sync[name]
        isr, old = set(s.syncStateSet), s.masterBrokerId
        all_ids = set(info.brokerIdInfo) if unclean else None
        new = h.brokerId if s.masterEpoch == 0 else None          # the very first election: the caller wins
        if new is None or new == -1:
            prefer = h.brokerId if h.designateElect else None
            new = elect_policy(live, info.clusterName, name, isr, all_ids, old, prefer)
        if new is not None and new == old:
            return Result(ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                          ElectMasterResponseHeader(old, info.address(old), s.masterEpoch, s.syncStateSetEpoch),
                          ElectMasterResponseBody(None, frozenset(isr)).to_json(),
                          "The old master still exist, no need to elect a new master")
        if new is not None:
            group = BrokerMemberGroup(info.clusterName, name, {i: a for i, (a, _c) in info.brokerIdInfo.items()})
            return Result(ResponseCode.SUCCESS,
                          ElectMasterResponseHeader(new, info.address(new), s.masterEpoch + 1, s.syncStateSetEpoch + 1),
                          ElectMasterResponseBody(group, frozenset({new})).to_json(),
                          events=[ElectMasterEvent(True, name, new)])
        if h.brokerId is None or h.brokerId == -1:                # controller-triggered: the master is cleared
            return Result(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                          remark="Old master has down and failed to elect a new broker master",
                          events=[ElectMasterEvent(False, name)])
        return Result(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, remark="Failed to elect a new master")

    # -- the master's syncStateSet changes --

    def alter_sync_state_set(self, h: AlterSyncStateSetRequestHeader, proposed: SyncStateSet,
                             live: Liveness) -> Result:
        name = h.brokerName
        failed = ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        if not self.contains(name):
            return Result(failed, remark="Broker metadata is not existed")
        info, s = self.replicas[name], self.sync[name]
        new = set(proposed.members)
        if new == s.syncStateSet:
            return Result(failed, remark="The newSyncStateSet is equal with oldSyncStateSet, no needed to update "
                                         "syncStateSet")
        if s.masterBrokerId is None or s.masterBrokerId != h.masterBrokerId:
            return Result(ResponseCode.CONTROLLER_INVALID_MASTER, remark=(
                f"Rejecting alter syncStateSet request because the current leader is:{s.masterBrokerId}, "
                f"not {h.masterBrokerId}"))
        if h.masterEpoch != s.masterEpoch:
            return Result(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH, remark=(
                f"Rejecting alter syncStateSet request because the current master epoch is:{s.masterEpoch}, "
                f"not {h.masterEpoch}"))
        if proposed.epoch != s.syncStateSetEpoch:
            return Result(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, remark=(
                f"Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
                f"{s.syncStateSetEpoch}, not {proposed.epoch}"))
        for bid in sorted(new):
            if bid not in info.brokerIdInfo:
                return Result(ResponseCode.CONTROLLER_INVALID_REPLICAS, remark=(
                    f"Rejecting alter syncStateSet request because the replicas {bid} don't exist"))
            if not live.is_active(info.clusterName, name, bid):
                return Result(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, remark=(
                    f"Rejecting alter syncStateSet request because the replicas {bid} don't alive"))
        if s.masterBrokerId not in new:
            return Result(failed, remark=(f"Rejecting alter syncStateSet request because the newSyncStateSet "
                                          f"don't contains origin leader {s.masterBrokerId}"))
        epoch = s.syncStateSetEpoch + 1
        return Result(header=AlterSyncStateSetResponseHeader(epoch),
                      body=SyncStateSet(frozenset(new), epoch).to_json(),
                      events=[AlterSyncStateSetEvent(name, frozenset(new))])

    # -- admin --

    def clean_broker_data(self, h: CleanControllerBrokerDataRequestHeader, live: Liveness) -> Result:
        name, ids_text = h.brokerName, (h.brokerControllerIdsToClean or "").strip()
        invalid = ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        cluster = self.replicas[name].clusterName if name in self.replicas else (h.clusterName or "")
        ids = None
        if ids_text:
            try:
                ids = frozenset(int(x) for x in ids_text.split(";") if x.strip())
            except ValueError:
                return Result(invalid, remark="Please set the option <brokerControllerIdsToClean> according to the "
                                              "format")
        if not h.isCleanLivingBroker:
            master = self.sync[name].masterBrokerId if name in self.sync else None
            if ids is None and master is not None and live.is_active(cluster, name, master):
                return Result(invalid, remark=f"Broker {name} is still alive, clean up failure")
            for bid in sorted(ids or ()):
                if live.is_active(cluster, name, bid):
                    return Result(invalid, remark=f"Broker [{name},  {bid}] is still alive, clean up failure")
        if self.contains(name):
            return Result(events=[CleanBrokerDataEvent(name, ids)])
        return Result(invalid, remark=f"Broker {name} is not existed,clean broker data failure.")

    # -- the whole state, for raft's snapshots --

    def snapshot(self) -> dict:
        return {"replicas": {n: {"clusterName": r.clusterName, "nextAssignBrokerId": r.nextAssignBrokerId,
                                 "brokerIdInfo": [[i, a, c] for i, (a, c) in sorted(r.brokerIdInfo.items())]}
                             for n, r in sorted(self.replicas.items())},
                "sync": {n: {"clusterName": s.clusterName, "masterBrokerId": s.masterBrokerId,
                             "masterEpoch": s.masterEpoch, "syncStateSet": sorted(s.syncStateSet),
                             "syncStateSetEpoch": s.syncStateSetEpoch} for n, s in sorted(self.sync.items())}}

    @classmethod
    def restore(cls, snap: dict) -> "ReplicasInfoManager":
        m = cls()
        for n, r in (snap.get("replicas") or {}).items():
            m.replicas[n] = BrokerReplicaInfo(r["clusterName"], n, r["nextAssignBrokerId"],
                                              {int(i): (a, c) for i, a, c in r["brokerIdInfo"]})
        for n, s in (snap.get("sync") or {}).items():
            m.sync[n] = SyncStateInfo(s["clusterName"], n, s["masterBrokerId"], s["masterEpoch"],
                                      set(s["syncStateSet"]), s["syncStateSetEpoch"])
        return m
