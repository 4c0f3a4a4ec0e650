"""Controller-mode JSON bodies (5.3.0 `protocol/body/*`; shared/spec/controller.md 3.4), pure.

fastjson writes bean fields alphabetically and drops nulls; map keys that are Long are bare
(`{1:"10.0.0.1:10911"}`), which `jsonbody` writes with `bare_int_keys` and reads either way.
The broker, the controller and the admin client share these.
"""
from __future__ import annotations

from dataclasses import dataclass

from mqtool_remoting import jsonbody


@dataclass(frozen=True)
class SyncStateSet:
    """`{"syncStateSet":[1,2],"syncStateSetEpoch":3}`: controller ids that may be elected."""
    members: frozenset[int]
    epoch: int

    def to_json(self) -> bytes:
        return jsonbody.dumps({"syncStateSet": sorted(self.members), "syncStateSetEpoch": self.epoch})

    @classmethod
    def from_json(cls, body: bytes | None) -> "SyncStateSet":
        d = jsonbody.loads(body) if body else {}
        return cls(frozenset(int(x) for x in d.get("syncStateSet") or ()), int(d.get("syncStateSetEpoch") or 0))


def _int_keys(d) -> dict[int, str]:
    return {int(k): v for k, v in (d or {}).items()}


@dataclass(frozen=True)
class BrokerMemberGroup:
    """`{"brokerAddrs":{1:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}`."""
    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str]

    def to_dict(self) -> dict:
        return {"brokerAddrs": dict(sorted(self.brokerAddrs.items())), "brokerName": self.brokerName,
                "cluster": self.cluster}

    @classmethod
    def from_dict(cls, d: dict) -> "BrokerMemberGroup":
        return cls(d.get("cluster") or "", d.get("brokerName") or "", _int_keys(d.get("brokerAddrs")))

    def to_json(self) -> bytes:
        return jsonbody.dumps(self.to_dict(), bare_int_keys=True)

    @classmethod
    def from_json(cls, body: bytes | None) -> "BrokerMemberGroup":
        return cls.from_dict(jsonbody.loads(body) if body else {})


@dataclass(frozen=True)
class ElectMasterResponseBody:
    """The answer to CONTROLLER_ELECT_MASTER: the set's members (absent on MASTER_STILL_EXIST) and the
    new SyncStateSet's members."""
    brokerMemberGroup: BrokerMemberGroup | None
    syncStateSet: frozenset[int]

    def to_json(self) -> bytes:
        d = {"syncStateSet": sorted(self.syncStateSet)}
        if self.brokerMemberGroup is not None:
            d = {"brokerMemberGroup": self.brokerMemberGroup.to_dict(), **d}
        return jsonbody.dumps(d, bare_int_keys=True)

    @classmethod
    def from_json(cls, body: bytes | None) -> "ElectMasterResponseBody":
        d = jsonbody.loads(body) if body else {}
        group = d.get("brokerMemberGroup")
        return cls(BrokerMemberGroup.from_dict(group) if group else None,
                   frozenset(int(x) for x in d.get("syncStateSet") or ()))


@dataclass(frozen=True)
class ReplicaIdentity:
    brokerName: str
    brokerId: int
    brokerAddress: str | None
    alive: bool

    def to_dict(self) -> dict:
        d = {"alive": self.alive, "brokerAddress": self.brokerAddress, "brokerId": self.brokerId,
             "brokerName": self.brokerName}
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict) -> "ReplicaIdentity":
        return cls(d.get("brokerName") or "", int(d.get("brokerId") or 0), d.get("brokerAddress"),
                   bool(d.get("alive")))


@dataclass(frozen=True)
class ReplicasInfo:
    """One broker-set in BrokerReplicasInfo: every registered id is in exactly one of the two lists."""
    masterBrokerId: int | None
    masterAddress: str | None
    masterEpoch: int
    syncStateSetEpoch: int
    inSyncReplicas: tuple[ReplicaIdentity, ...]
    notInSyncReplicas: tuple[ReplicaIdentity, ...]

    def to_dict(self) -> dict:
        d = {"inSyncReplicas": [r.to_dict() for r in self.inSyncReplicas], "masterAddress": self.masterAddress,
             "masterBrokerId": self.masterBrokerId, "masterEpoch": self.masterEpoch,
             "notInSyncReplicas": [r.to_dict() for r in self.notInSyncReplicas],
             "syncStateSetEpoch": self.syncStateSetEpoch}
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict) -> "ReplicasInfo":
        master = d.get("masterBrokerId")
        return cls(None if master is None else int(master), d.get("masterAddress"), int(d.get("masterEpoch") or 0),
                   int(d.get("syncStateSetEpoch") or 0),
                   tuple(ReplicaIdentity.from_dict(r) for r in d.get("inSyncReplicas") or ()),
                   tuple(ReplicaIdentity.from_dict(r) for r in d.get("notInSyncReplicas") or ()))


@dataclass(frozen=True)
class BrokerReplicasInfo:
    """The answer to CONTROLLER_GET_SYNC_STATE_DATA: `{"replicasInfoTable":{"broker-a":{...}}}`."""
    replicasInfoTable: dict[str, ReplicasInfo]

    def to_json(self) -> bytes:
        return jsonbody.dumps({"replicasInfoTable": {k: v.to_dict() for k, v in sorted(self.replicasInfoTable.items())}},
                              bare_int_keys=True)

    @classmethod
    def from_json(cls, body: bytes | None) -> "BrokerReplicasInfo":
        d = jsonbody.loads(body) if body else {}
        return cls({k: ReplicasInfo.from_dict(v) for k, v in (d.get("replicasInfoTable") or {}).items()})


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    startOffset: int
    endOffset: int

    def to_dict(self) -> dict:
        return {"endOffset": self.endOffset, "epoch": self.epoch, "startOffset": self.startOffset}


@dataclass(frozen=True)
class EpochEntryCache:
    """The answer to GET_BROKER_EPOCH_CACHE (a broker's): `brokerId` is the name server id (0 on the master)."""
    clusterName: str
    brokerName: str
    brokerId: int
    epochList: tuple[EpochEntry, ...]
    maxOffset: int

    def to_json(self) -> bytes:
        return jsonbody.dumps({"brokerId": self.brokerId, "brokerName": self.brokerName,
                               "clusterName": self.clusterName, "epochList": [e.to_dict() for e in self.epochList],
                               "maxOffset": self.maxOffset}, bare_int_keys=True)

    @classmethod
    def from_json(cls, body: bytes | None) -> "EpochEntryCache":
        d = jsonbody.loads(body) if body else {}
        return cls(d.get("clusterName") or "", d.get("brokerName") or "", int(d.get("brokerId") or 0),
                   tuple(EpochEntry(int(e.get("epoch") or 0), int(e.get("startOffset") or 0),
                                    int(e.get("endOffset") or 0)) for e in d.get("epochList") or ()),
                   int(d.get("maxOffset") or 0))
