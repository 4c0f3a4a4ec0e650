"""RouteInfoManager: brokers, clusters and topic queues, pure (no I/O; time is passed in)."""
from __future__ import annotations

from dataclasses import dataclass, field

BROKER_CHANNEL_EXPIRED_MS = 120_000
PERM_WRITE = 0x2
MASTER_ID = 0


@dataclass
class QueueData:
    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicSysFlag: int = 0

    def to_json(self) -> dict:
        return {"brokerName": self.brokerName, "perm": self.perm, "readQueueNums": self.readQueueNums,
                "topicSysFlag": self.topicSysFlag, "writeQueueNums": self.writeQueueNums}


@dataclass
class BrokerData:
    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"brokerAddrs": dict(sorted(self.brokerAddrs.items())), "brokerName": self.brokerName,
                "cluster": self.cluster}


@dataclass
class BrokerLive:
    last_update: int
    data_version: dict
    channel: object
    ha_server_addr: str


class RouteTable:
    def __init__(self):
        self.topic_queues: dict[str, dict[str, QueueData]] = {}     # topic -> brokerName -> QueueData
        self.brokers: dict[str, BrokerData] = {}                    # brokerName -> BrokerData
        self.clusters: dict[str, set[str]] = {}                     # cluster -> brokerNames
        self.live: dict[str, BrokerLive] = {}                       # brokerAddr -> liveness

    def register(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int, ha_server_addr: str,
                 topic_configs: dict[str, dict] | None, data_version: dict, channel, now_ms: int) -> dict:
        """registerBroker: returns {"masterAddr", "haServerAddr"} for a slave whose master is known."""
        self.clusters.setdefault(cluster, set()).add(broker_name)
        bd = self.brokers.get(broker_name)
        first = bd is None
        if bd is None:
            bd = self.brokers[broker_name] = BrokerData(cluster, broker_name)
        # one address may move to a new id (slave promoted): drop the old entry
        for bid, addr in list(bd.brokerAddrs.items()):
            if addr == broker_addr and bid != broker_id:
                del bd.brokerAddrs[bid]
        first = first or broker_id not in bd.brokerAddrs
        bd.brokerAddrs[broker_id] = broker_addr
        old = self.live.get(broker_addr)
        changed = first or old is None or old.data_version != data_version
        self.live[broker_addr] = BrokerLive(now_ms, data_version, channel, ha_server_addr)
        if broker_id == MASTER_ID and topic_configs is not None and changed:
            self._update_topics(broker_name, topic_configs)
        result = {}
        if broker_id != MASTER_ID:
            master = bd.brokerAddrs.get(MASTER_ID)
            if master and master in self.live:
                result = {"masterAddr": master, "haServerAddr": self.live[master].ha_server_addr}
        return result

    def _update_topics(self, broker_name: str, topic_configs: dict[str, dict]) -> None:
        for topic, queues in list(self.topic_queues.items()):
            if broker_name in queues and topic not in topic_configs:
                del queues[broker_name]
                if not queues:
                    del self.topic_queues[topic]
        for topic, cfg in topic_configs.items():
            self.topic_queues.setdefault(topic, {})[broker_name] = QueueData(
                broker_name, int(cfg.get("readQueueNums", 16)), int(cfg.get("writeQueueNums", 16)),
                int(cfg.get("perm", 6)), int(cfg.get("topicSysFlag", 0)))

    def unregister(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.live.pop(broker_addr, None)
        bd = self.brokers.get(broker_name)
        if bd is not None:
            if bd.brokerAddrs.get(broker_id) == broker_addr:
                del bd.brokerAddrs[broker_id]
            if not bd.brokerAddrs:
                del self.brokers[broker_name]
                names = self.clusters.get(cluster)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self.clusters[cluster]
                for topic in list(self.topic_queues):
                    self.topic_queues[topic].pop(broker_name, None)
                    if not self.topic_queues[topic]:
                        del self.topic_queues[topic]

    def _remove_addr(self, addr: str) -> None:
        for bd in list(self.brokers.values()):
            for bid, a in list(bd.brokerAddrs.items()):
                if a == addr:
                    self.unregister(bd.cluster, addr, bd.brokerName, bid)
                    return
        self.live.pop(addr, None)

    def expire(self, now_ms: int) -> list[str]:
        """scanNotActiveBroker: addresses silent for 120 s are removed."""
        gone = [a for a, live in self.live.items() if now_ms - live.last_update > BROKER_CHANNEL_EXPIRED_MS]
        for addr in gone:
            self._remove_addr(addr)
        return gone

    def channel_closed(self, channel) -> list[str]:
        gone = [a for a, live in self.live.items() if live.channel is channel]
        for addr in gone:
            self._remove_addr(addr)
        return gone

    def route(self, topic: str) -> dict | None:
        """pickupTopicRouteData: None when no broker serves the topic."""
        queues = self.topic_queues.get(topic)
        if not queues:
            return None
        brokers = [self.brokers[name].to_json() for name in sorted(queues) if name in self.brokers]
        if not brokers:
            return None
        return {"brokerDatas": brokers, "filterServerTable": {},
                "queueDatas": [q.to_json() for _, q in sorted(queues.items())]}

    def cluster_info(self) -> dict:
        return {"brokerAddrTable": {n: b.to_json() for n, b in sorted(self.brokers.items())},
                "clusterAddrTable": {c: sorted(n) for c, n in sorted(self.clusters.items())}}

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queues)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        names = self.clusters.get(cluster, set())
        return sorted(t for t, q in self.topic_queues.items() if names & set(q))

    def set_write_perm(self, broker_name: str, allow: bool) -> int:
        """wipe/add write perm: number of topics changed."""
        n = 0
        for queues in self.topic_queues.values():
            q = queues.get(broker_name)
            if q is not None:
                q.perm = (q.perm | PERM_WRITE) if allow else (q.perm & ~PERM_WRITE)
                n += 1
        return n

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        if cluster is None:
            self.topic_queues.pop(topic, None)
            return
        queues = self.topic_queues.get(topic, {})
        for name in self.clusters.get(cluster, set()):
            queues.pop(name, None)
        if not queues:
            self.topic_queues.pop(topic, None)
