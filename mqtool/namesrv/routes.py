"""The name server's route table (RouteInfoManager.java, 4.9.8): pure, no I/O, time passed in.

Semantics kept from Java, because brokers and clients rely on them:
* only a master (brokerId 0) registers topics, and only when its DataVersion changed or it is new
  to the table; a re-registration never removes topics (DELETE_TOPIC_IN_NAMESRV does that);
* a broker address leaves when it unregisters, its connection closes, or 120 s pass without a
  registration; a broker name leaves (with its queues) when its last address does;
* lists that Java builds from HashMaps come out in Java's HashMap order, so one-broker and
  two-broker answers are byte-identical to a Java name server's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mqtool_remoting.bodies import (BrokerData, ClusterInfo, DataVersion, QueueData, TopicConfigSerializeWrapper,
                             TopicList, TopicRouteData)
from mqtool_remoting.codes import PermName, RequestCode, TopicSysFlag
from mqtool_remoting.jsonbody import java_order

BROKER_CHANNEL_EXPIRED_MS = 120_000
MASTER_ID = 0


@dataclass
class BrokerLive:
    addr: str
    last_update_ms: int
    data_version: DataVersion
    channel: object
    ha_server_addr: str


@dataclass
class RegisterResult:
    """What a slave learns about its master (both None for a master or an unknown master)."""
    masterAddr: str | None = None
    haServerAddr: str | None = None


@dataclass
class RouteTable:
    topic_queues: dict[str, dict[str, QueueData]] = field(default_factory=dict)   # topic -> brokerName -> queues
    brokers: dict[str, BrokerData] = field(default_factory=dict)                  # brokerName -> addresses
    clusters: dict[str, list[str]] = field(default_factory=dict)                  # cluster -> brokerNames
    live: dict[str, BrokerLive] = field(default_factory=dict)                     # brokerAddr -> liveness
    filter_servers: dict[str, list[str]] = field(default_factory=dict)            # brokerAddr -> filter servers
    generation: int = 0       # counts changes of which brokers serve which topics (the topic lists' cache key)

    # ---------------------------------------------------------------- registration

    def register(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int, ha_server_addr: str,
                 wrapper: TopicConfigSerializeWrapper | None, filter_servers: list[str] | None, channel,
                 now_ms: int) -> RegisterResult:
        names = self.clusters.setdefault(cluster, [])
        if broker_name not in names:
            names.append(broker_name)
        bd = self.brokers.get(broker_name)
        first = bd is None
        if bd is None:
            bd = self.brokers[broker_name] = BrokerData(cluster, broker_name)
        # A slave promoted to master re-registers its address under id 0: one record per address.
        for bid in [b for b, a in bd.brokerAddrs.items() if a == broker_addr and b != broker_id]:
            del bd.brokerAddrs[bid]
        version = wrapper.dataVersion if wrapper is not None else DataVersion()
        if self._outranked(bd, broker_id, broker_addr, version):
            self.live.pop(broker_addr, None)
            self.generation += 1
            return RegisterResult()
        first = first or broker_id not in bd.brokerAddrs
        bd.brokerAddrs[broker_id] = broker_addr
        if first:
            self.generation += 1
        if wrapper is not None and broker_id == MASTER_ID:
            if self.topic_config_changed(broker_addr, version) or first:
                self.put_queues(broker_name, queue_rows(wrapper))
        self.live[broker_addr] = BrokerLive(broker_addr, now_ms, version, channel, ha_server_addr)
        if filter_servers is not None:
            if filter_servers:
                self.filter_servers[broker_addr] = list(filter_servers)
            else:
                self.filter_servers.pop(broker_addr, None)
        if broker_id != MASTER_ID:
            master = bd.brokerAddrs.get(MASTER_ID)
            if master is not None and master in self.live:
                return RegisterResult(master, self.live[master].ha_server_addr)
        return RegisterResult()

    def _outranked(self, bd: BrokerData, broker_id: int, broker_addr: str, version: DataVersion) -> bool:
        """5.x: another live address holds this id with a larger stateVersion (a higher master
        epoch): the registration is ignored, so a returning old master never takes brokerId 0 back
        (controller.md §5.8, apache/rocketmq#6316). 4.9.8 brokers send no stateVersion (0 here)."""
        holder = bd.brokerAddrs.get(broker_id)
        if holder is None or holder == broker_addr or holder not in self.live:
            return False
        theirs = self.live[holder].data_version.stateVersion or 0
        return theirs > (version.stateVersion or 0)

    def put_queues(self, broker_name: str, rows) -> None:
        """The broker's queue data for each (topic, read, write, perm, sysflag) row."""
        table = self.topic_queues
        added = False
        for name, r, w, perm, flag in rows:
            queues = table.get(name)
            if queues is None:
                queues = table[name] = {}
            if broker_name not in queues:
                added = True
            queues[broker_name] = QueueData(broker_name, r, w, perm, flag)
        if added:                 # the topic lists change only when a topic or a broker of it comes
            self.generation += 1

    def takes_topics(self, broker_addr: str, broker_name: str, broker_id: int, version: DataVersion) -> bool:
        """Whether `register` will read the topics of this registration (a master that is new or
        whose data version changed)."""
        if broker_id != MASTER_ID:
            return False
        bd = self.brokers.get(broker_name)
        return bd is None or broker_id not in bd.brokerAddrs or self.topic_config_changed(broker_addr, version)

    def topic_config_changed(self, broker_addr: str, version: DataVersion) -> bool:
        prev = self.live.get(broker_addr)
        return prev is None or prev.data_version != version

    def data_version(self, broker_addr: str) -> DataVersion | None:
        prev = self.live.get(broker_addr)
        return prev.data_version if prev else None

    def touch(self, broker_addr: str, now_ms: int) -> None:
        """QUERY_DATA_VERSION with an unchanged version counts as a heartbeat."""
        if broker_addr in self.live:
            self.live[broker_addr].last_update_ms = now_ms

    def unregister(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.generation += 1
        self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)
        bd = self.brokers.get(broker_name)
        if bd is None:
            return
        bd.brokerAddrs.pop(broker_id, None)        # by id, as Java does
        if not bd.brokerAddrs:
            del self.brokers[broker_name]
            names = self.clusters.get(cluster)
            if names is not None and broker_name in names:
                names.remove(broker_name)
                if not names:
                    del self.clusters[cluster]
            self._remove_queues_of(broker_name)

    def expire(self, now_ms: int) -> list[BrokerLive]:
        """scanNotActiveBroker: remove addresses silent for 120 s; the caller closes their channels."""
        gone = [b for b in self.live.values() if b.last_update_ms + BROKER_CHANNEL_EXPIRED_MS < now_ms]
        for b in gone:
            self._remove_addr(b.addr)
        return gone

    def channel_closed(self, channel, remote_addr: str | None = None) -> list[str]:
        """onChannelDestroy: the broker address registered over `channel` (else `remote_addr`) leaves."""
        found = [a for a, b in self.live.items() if b.channel is channel]
        if not found and remote_addr:
            found = [remote_addr] if any(remote_addr in bd.brokerAddrs.values() for bd in self.brokers.values()) \
                else []
        for addr in found:
            self._remove_addr(addr)
        return found

    def _remove_addr(self, addr: str) -> None:
        self.generation += 1
        self.live.pop(addr, None)
        self.filter_servers.pop(addr, None)
        for name, bd in list(self.brokers.items()):
            ids = [b for b, a in bd.brokerAddrs.items() if a == addr]
            if not ids:
                continue
            del bd.brokerAddrs[ids[0]]
            if not bd.brokerAddrs:
                del self.brokers[name]
                for cluster, names in list(self.clusters.items()):
                    if name in names:
                        names.remove(name)
                        if not names:
                            del self.clusters[cluster]
                        break
                self._remove_queues_of(name)
            return

    def _remove_queues_of(self, broker_name: str) -> None:
        for topic in list(self.topic_queues):
            self.topic_queues[topic].pop(broker_name, None)
            if not self.topic_queues[topic]:
                del self.topic_queues[topic]

    # ---------------------------------------------------------------- queries

    def route(self, topic: str) -> TopicRouteData | None:
        """pickupTopicRouteData: None when no registered broker serves the topic."""
        queues = self.topic_queues.get(topic)
        if not queues:
            return None
        names = java_order(queues)                       # HashMap<brokerName, QueueData> / HashSet order
        brokers = [BrokerData(bd.cluster, bd.brokerName, dict(bd.brokerAddrs))
                   for bd in (self.brokers.get(n) for n in names) if bd is not None]
        if not brokers:
            return None
        filters = {a: list(self.filter_servers[a]) for b in brokers for a in b.brokerAddrs.values()
                   if a in self.filter_servers}
        return TopicRouteData([QueueData(**vars(queues[n])) for n in names], brokers, filters)

    def cluster_info(self) -> ClusterInfo:
        # Java's tables are HashMap(128) and HashMap(32) of HashSets: reproduce their iteration order.
        return ClusterInfo({n: self.brokers[n] for n in java_order(self.brokers, 128)},
                           {c: java_order(self.clusters[c]) for c in java_order(self.clusters, 32)})

    def all_topics(self) -> TopicList:
        return TopicList(sorted(self.topic_queues))

    def topics_of_cluster(self, cluster: str) -> TopicList:
        names = set(self.clusters.get(cluster, ()))
        return TopicList(sorted(t for t, q in self.topic_queues.items() if not names.isdisjoint(q)))

    def system_topics(self) -> TopicList:
        """Cluster and broker names (each is also a topic) plus one broker address to ask."""
        topics = {n for c, names in self.clusters.items() for n in (c, *names)}
        addr = next((next(iter(bd.brokerAddrs.values())) for bd in self.brokers.values() if bd.brokerAddrs), None)
        return TopicList(sorted(topics), addr)

    def unit_topics(self, code: int) -> TopicList:
        """GET_UNIT_TOPIC_LIST / GET_HAS_UNIT_SUB_TOPIC_LIST / GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: Java
        looks at one queue entry per topic only."""
        def pick(flag: int) -> bool:
            unit, sub = bool(flag & TopicSysFlag.FLAG_UNIT), bool(flag & TopicSysFlag.FLAG_UNIT_SUB)
            if code == RequestCode.GET_UNIT_TOPIC_LIST:
                return unit
            if code == RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST:
                return sub
            return sub and not unit
        return TopicList(sorted(t for t, q in self.topic_queues.items() if q and pick(next(iter(q.values())).topicSysFlag)))

    # ---------------------------------------------------------------- admin

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clear PERM_WRITE on the broker's queues; returns the number of topics touched."""
        return self._set_perm(broker_name, lambda p: p & ~PermName.PERM_WRITE)

    def add_write_perm(self, broker_name: str) -> int:
        """Java sets READ|WRITE outright (not just the write bit)."""
        return self._set_perm(broker_name, lambda p: PermName.PERM_READ | PermName.PERM_WRITE)

    def _set_perm(self, broker_name: str, change) -> int:
        n = 0
        for queues in self.topic_queues.values():
            q = queues.get(broker_name)
            if q is not None:
                q.perm = int(change(q.perm))
                n += 1
        return n

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """Remove the topic everywhere, or (with a cluster) only that cluster's brokers' queues."""
        self.generation += 1
        if not cluster:
            self.topic_queues.pop(topic, None)
            return
        queues = self.topic_queues.get(topic)
        if queues is None:
            return
        for name in self.clusters.get(cluster, ()):
            queues.pop(name, None)
        if not queues:
            del self.topic_queues[topic]


def queue_rows(wrapper) -> list[tuple[str, int, int, int, int]]:
    """(topic, readQueueNums, writeQueueNums, perm, topicSysFlag) of each topic a registration carries:
    the name server's lazily read body (registerbody.py) or a TopicConfigSerializeWrapper."""
    rows = getattr(wrapper, "queue_rows", None)
    if rows is not None:
        return rows()
    return [(tc.topicName, tc.readQueueNums, tc.writeQueueNums, int(tc.perm), tc.topicSysFlag)
            for tc in wrapper.topicConfigTable.values()]
