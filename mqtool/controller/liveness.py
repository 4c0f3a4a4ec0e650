"""Which brokers heartbeat this controller node (5.3.0 DefaultBrokerHeartbeatManager; controller.md 2.3).

Per node, never replicated: brokers heartbeat every controller, so a new leader already knows who
lives. The clock is injected (ms); the server's expiry scan and channel closes call back with the
(cluster, brokerName, brokerId) that went inactive.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

DEFAULT_BROKER_CHANNEL_EXPIRED_MS = 10_000
JAVA_INT_MAX = (1 << 31) - 1


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class BrokerLiveInfo:
    clusterName: str
    brokerName: str
    brokerId: int
    brokerAddr: str
    lastUpdateTimestamp: int
    heartbeatTimeoutMillis: int = DEFAULT_BROKER_CHANNEL_EXPIRED_MS
    channel: object = None
    epoch: int = -1
    maxOffset: int = -1
    confirmOffset: int = -1
    electionPriority: int = JAVA_INT_MAX

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.clusterName, self.brokerName, self.brokerId)


class LivenessTable:
    def __init__(self, clock: Callable[[], int] = wall_ms):
        self.clock = clock
        self.table: dict[tuple[str, str, int], BrokerLiveInfo] = {}

    def heartbeat(self, cluster: str, name: str, broker_id: int, addr: str, channel=None,
                  epoch: int | None = None, max_offset: int | None = None, confirm_offset: int | None = None,
                  timeout_ms: int | None = None, priority: int | None = None) -> BrokerLiveInfo:
        """onBrokerHeartbeat: refresh the time, timeout and priority always; epoch, max offset and
        confirm offset only when newer (a higher epoch, or the same epoch and a larger max offset)."""
        now = self.clock()
        epoch = -1 if epoch is None else epoch
        max_offset = -1 if max_offset is None else max_offset
        confirm_offset = -1 if confirm_offset is None else confirm_offset
        timeout_ms = DEFAULT_BROKER_CHANNEL_EXPIRED_MS if timeout_ms is None else timeout_ms
        priority = JAVA_INT_MAX if priority is None else priority
        key = (cluster, name, broker_id)
        info = self.table.get(key)
        if info is None:
            info = self.table[key] = BrokerLiveInfo(cluster, name, broker_id, addr, now, timeout_ms, channel,
                                                    epoch, max_offset, confirm_offset, priority)
            return info
        info.lastUpdateTimestamp, info.heartbeatTimeoutMillis, info.electionPriority = now, timeout_ms, priority
        info.brokerAddr = addr or info.brokerAddr
        if channel is not None:
            info.channel = channel
        if epoch > info.epoch or (epoch == info.epoch and max_offset > info.maxOffset):
            info.epoch, info.maxOffset, info.confirmOffset = epoch, max_offset, confirm_offset
        return info

    def is_active(self, cluster: str, name: str, broker_id: int | None) -> bool:
        info = self.table.get((cluster, name, broker_id))
        return info is not None and info.lastUpdateTimestamp + info.heartbeatTimeoutMillis >= self.clock()

    def info(self, cluster: str, name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.table.get((cluster, name, broker_id))

    def alive_in(self, cluster: str, name: str) -> list[BrokerLiveInfo]:
        return [i for k, i in self.table.items() if k[0] == cluster and k[1] == name and self.is_active(*k)]

    def expire(self) -> list[BrokerLiveInfo]:
        """scanNotActiveBroker: remove and return the entries whose heartbeat timed out."""
        now = self.clock()
        gone = [i for i in self.table.values() if i.lastUpdateTimestamp + i.heartbeatTimeoutMillis < now]
        for i in gone:
            del self.table[i.key]
        return gone

    def channel_closed(self, channel) -> list[BrokerLiveInfo]:
        """onBrokerChannelClose: the entries that heartbeat on `channel` go at once."""
        gone = [i for i in self.table.values() if i.channel is channel]
        for i in gone:
            del self.table[i.key]
        return gone
