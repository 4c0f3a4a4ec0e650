"""Controller-mode headers (5.3.0 `remoting/.../protocol/header/controller/**`; shared/spec/controller.md 3.3).

Declared as remoting/headers.py declares 4.9.8's: field names are Java's, a field without a default
is @CFNotNull, `Long` is java.lang.Long. Java senders add `invokeTime` where the header has it.
"""
from __future__ import annotations

from dataclasses import dataclass

from mqtool_remoting.extfields import Long


@dataclass(frozen=True)
class BrokerHeartbeatRequestHeader:
    """BROKER_HEARTBEAT (904), broker -> every controller, oneway. `epoch` is the epoch file's last
    epoch (-1: none); `heartbeatTimeoutMills` is the broker's controllerHeartBeatTimeoutMills."""
    clusterName: str
    brokerAddr: str
    brokerName: str
    brokerId: Long | None = None
    epoch: int | None = None
    maxOffset: Long | None = None
    confirmOffset: Long | None = None
    heartbeatTimeoutMills: Long | None = None
    electionPriority: int | None = None


@dataclass(frozen=True)
class AlterSyncStateSetRequestHeader:
    brokerName: str | None = None
    masterBrokerId: Long | None = None
    masterEpoch: int | None = None
    invokeTime: Long | None = None


@dataclass(frozen=True)
class AlterSyncStateSetResponseHeader:
    newSyncStateSetEpoch: int | None = None


@dataclass(frozen=True)
class ElectMasterRequestHeader:
    """`brokerId` -1 (and designateElect false): controller-triggered; a broker sends its own id;
    an admin sends the id it designates with designateElect true."""
    clusterName: str = ""
    brokerName: str = ""
    brokerId: Long = -1
    designateElect: bool = False
    invokeTime: Long | None = None


@dataclass(frozen=True)
class ElectMasterResponseHeader:
    masterBrokerId: Long | None = None
    masterAddress: str | None = None
    masterEpoch: int | None = None
    syncStateSetEpoch: int | None = None


@dataclass(frozen=True)
class RegisterBrokerToControllerRequestHeader:
    clusterName: str | None = None
    brokerName: str | None = None
    brokerId: Long | None = None
    brokerAddress: str | None = None
    invokeTime: Long | None = None


@dataclass(frozen=True)
class RegisterBrokerToControllerResponseHeader:
    """Master fields are absent when the set has no live master."""
    clusterName: str | None = None
    brokerName: str | None = None
    masterBrokerId: Long | None = None
    masterAddress: str | None = None
    masterEpoch: int | None = None
    syncStateSetEpoch: int | None = None


@dataclass(frozen=True)
class GetReplicaInfoRequestHeader:
    brokerName: str | None = None


@dataclass(frozen=True)
class GetReplicaInfoResponseHeader:
    """syncStateSetEpoch travels in the SyncStateSet body."""
    masterBrokerId: Long | None = None
    masterAddress: str | None = None
    masterEpoch: int | None = None


@dataclass(frozen=True)
class GetMetaDataResponseHeader:
    """`peers`: `id:host:port;` repeated, with a trailing `;` (DLedger)."""
    group: str | None = None
    controllerLeaderId: str | None = None
    controllerLeaderAddress: str | None = None
    isLeader: bool | None = None
    peers: str | None = None


@dataclass(frozen=True)
class GetNextBrokerIdRequestHeader:
    clusterName: str | None = None
    brokerName: str | None = None


@dataclass(frozen=True)
class GetNextBrokerIdResponseHeader:
    clusterName: str | None = None
    brokerName: str | None = None
    nextBrokerId: Long | None = None


@dataclass(frozen=True)
class ApplyBrokerIdRequestHeader:
    """`registerCheckCode` is `brokerAddr;currentTimeMillis`."""
    clusterName: str | None = None
    brokerName: str | None = None
    appliedBrokerId: Long | None = None
    registerCheckCode: str | None = None


@dataclass(frozen=True)
class ApplyBrokerIdResponseHeader:
    clusterName: str | None = None
    brokerName: str | None = None


@dataclass(frozen=True)
class CleanControllerBrokerDataRequestHeader:
    """`brokerControllerIdsToClean` is `1;2;3`."""
    brokerName: str
    clusterName: str | None = None
    brokerControllerIdsToClean: str | None = None
    isCleanLivingBroker: bool = False
    invokeTime: Long | None = None


@dataclass(frozen=True)
class NotifyBrokerRoleChangedRequestHeader:
    """NOTIFY_BROKER_ROLE_CHANGED (1008), leader -> broker, oneway; body: SyncStateSet."""
    masterAddress: str | None = None
    masterEpoch: int | None = None
    syncStateSetEpoch: int | None = None
    masterBrokerId: Long | None = None
