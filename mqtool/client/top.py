"""What `mqtool top` shows: a cluster's brokers, topics and consumer groups, sampled again and again.

Each sample asks every broker its runtime info (GET_BROKER_RUNTIME_INFO: put/get TPS, disk) and every
master, all at once, its topics' queue offsets and every group's progress (GET_BROKER_CONSUME_STATS,
one request). The offsets come in one answer from a broker that has mqtool's GET_ALL_TOPIC_OFFSETS;
a broker that answers it REQUEST_CODE_NOT_SUPPORTED (Java's) is asked GET_ALL_TOPIC_CONFIG, then
GET_TOPIC_STATS_INFO per topic (~0.9 s of a sample at 10,000 topics, against ~45 ms), and not asked
the first again. Topic and group rates are the change of offsets between two samples over the time between
them, so they are live, not last-minute averages.
"""
from __future__ import annotations

import asyncio
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field

from mqtool.client.admin import Admin, _num, timer_fields
from mqtool.client.base import check
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingCommandError, RemotingError

TREND_POINTS = 20                    # samples kept per group for the lag sparkline
SPARKS = "▁▂▃▄▅▆▇█"
SYSTEM_PREFIXES = ("rmq_sys_", "RMQ_SYS_", "%RETRY%", "%DLQ%", "SCHEDULE_TOPIC", "TBW102", "SELF_TEST_TOPIC",
                   "OFFSET_MOVED_EVENT", "BenchmarkTest", "TRANS_CHECK_MAX_TIME_TOPIC")
CONCURRENCY = 32                     # topic stats requests in flight per broker


def sparkline(values: list[int] | deque) -> str:
    """One character per value, scaled between the smallest and the largest."""
    vals = list(values)
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi == lo:
        return SPARKS[0] * len(vals)
    return "".join(SPARKS[int((v - lo) * (len(SPARKS) - 1) / (hi - lo))] for v in vals)


def is_system_topic(topic: str, broker_names: set[str], clusters: set[str]) -> bool:
    return (topic.startswith(SYSTEM_PREFIXES) or topic in broker_names or topic in clusters
            or topic.endswith("_REPLY_TOPIC"))


_MAX_OFFSET = re.compile(rb'"maxOffset":(-?\d+)')


def max_offsets_sum(body: bytes) -> int:
    """The sum of a TopicStatsTable's maxOffset values, read without parsing its MessageQueue keys
    (JSON objects as keys: the general reader's slow path, 1.4 ms a topic; tests hold the two equal)."""
    return sum(int(v) for v in _MAX_OFFSET.findall(body))


_MQ_KEY = re.compile(rb'\{"brokerName":"(?:[^"\\]|\\.)*","queueId":(-?\d+),"topic":"((?:[^"\\]|\\.)*)"\}:')


def consume_stats_list(body: bytes) -> dict:
    """A ConsumeStatsList with each MessageQueue key read as "topic\\0queueId" (top needs the topic):
    the keys, JSON objects, are turned into JSON strings and the rest read by the json module; the
    general reader (which takes any body this does not fit) took seconds at 5,000 groups."""
    try:
        return json.loads(_MQ_KEY.sub(_string_key, body))
    except ValueError:
        return jsonbody.loads(body)


def _string_key(m: re.Match) -> bytes:
    """A MessageQueue key as the string "topic\\u0000queueId" (a function, not a template: re's
    template expansion was half the time of the substitution)."""
    return b'"' + m[2] + b'\\u0000' + m[1] + b'":'


def _topic_of(key) -> str:
    if hasattr(key, "as_dict"):
        return key.as_dict().get("topic", "")
    return str(key).split("\0", 1)[0]


def rate(now: float, before: float | None, dt: float) -> float | None:
    if before is None or dt <= 0:
        return None
    return max(now - before, 0) / dt


@dataclass
class Sample:
    time: float
    brokers: list[dict] = field(default_factory=list)
    topics: dict[str, int] = field(default_factory=dict)                 # topic -> sum of max offsets
    groups: dict[tuple[str, str], dict] = field(default_factory=dict)    # (group, topic) -> offsets, lag


class ClusterWatch:
    """Samples one cluster (or all) and turns two consecutive samples into rates."""

    def __init__(self, admin: Admin, cluster: str | None = None, system: bool = False):
        self.admin, self.cluster, self.system = admin, cluster, system
        self.last: Sample | None = None
        self.trends: dict[tuple[str, str], deque] = {}
        self.per_topic: set[str] = set()     # brokers without GET_ALL_TOPIC_OFFSETS (asked topic by topic)

    async def sample(self) -> Sample:
        info = await self.admin.cluster_info()
        clusters = info.get("clusterAddrTable", {})
        if self.cluster and self.cluster not in clusters:
            raise RemotingCommandError(1, f"no cluster named {self.cluster}", "cluster")
        names = set(info.get("brokerAddrTable", {}))
        s = Sample(time.monotonic())
        brokers, masters = [], []
        for cluster_name, members in sorted(clusters.items()):
            if self.cluster not in (None, cluster_name):
                continue
            for name in sorted(members):
                addrs = info["brokerAddrTable"].get(name, {}).get("brokerAddrs", {})
                for bid, addr in sorted(addrs.items(), key=lambda kv: int(kv[0])):
                    brokers.append(self._broker(cluster_name, name, int(bid), addr))
                    if int(bid) == 0:
                        masters.append(addr)
        # every broker at once: a sample takes as long as the slowest broker, not their sum
        s.brokers, *_ = await asyncio.gather(asyncio.gather(*brokers),
                                             *(self._topics(addr, s, names, set(clusters)) for addr in masters),
                                             *(self._groups(addr, s) for addr in masters))
        return s

    async def _broker(self, cluster: str, name: str, bid: int, addr: str) -> dict:
        row = {"cluster": cluster, "broker": name, "broker_id": bid, "address": addr}
        try:
            kv = await self.admin.broker_runtime(addr)
        except (RemotingError, RemotingCommandError, OSError) as exc:
            return dict(row, reachable=False, error=str(exc))
        return dict(row, reachable=True,
                    put_tps=_num((kv.get("putTps") or "0").split(" ")[0], float),
                    get_tps=_num((kv.get("getTransferedTps") or "0").split(" ")[0], float),
                    disk_ratio=_num(kv.get("commitLogDiskRatio"), float),
                    commitlog_max_offset=_num(kv.get("commitLogMaxOffset"), int),
                    put_today=_num(kv.get("msgPutTotalTodayNow"), int) - _num(kv.get("msgPutTotalTodayMorning"), int),
                    get_today=_num(kv.get("msgGetTotalTodayNow"), int) - _num(kv.get("msgGetTotalTodayMorning"), int),
                    **timer_fields(kv))

    async def _topics(self, addr: str, s: Sample, broker_names: set[str], clusters: set[str]) -> None:
        if addr not in self.per_topic:
            try:
                resp = await self.admin.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_OFFSETS))
            except (RemotingError, OSError):
                return
            if resp.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                if resp.code == ResponseCode.SUCCESS:
                    for topic, offsets in json.loads(resp.body).get("maxOffsets", {}).items():
                        if self.system or not is_system_topic(topic, broker_names, clusters):
                            s.topics[topic] = s.topics.get(topic, 0) + sum(offsets)
                return
            self.per_topic.add(addr)
        await self._topics_one_by_one(addr, s, broker_names, clusters)

    async def _topics_one_by_one(self, addr: str, s: Sample, broker_names: set[str], clusters: set[str]) -> None:
        try:
            resp = check(await self.admin.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)),
                         "topic configs")
        except (RemotingError, RemotingCommandError, OSError):
            return
        topics = [t for t in jsonbody.loads(resp.body).get("topicConfigTable", {})
                  if self.system or not is_system_topic(t, broker_names, clusters)]
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(topic: str) -> None:
            async with gate:
                try:
                    r = await self.admin.invoke(addr, RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO,
                                                                              {"topic": topic}))
                except (RemotingError, OSError):
                    return
            if r.code == 0 and r.body:
                s.topics[topic] = s.topics.get(topic, 0) + max_offsets_sum(r.body)
        await asyncio.gather(*(one(t) for t in topics))

    async def _groups(self, addr: str, s: Sample) -> None:
        try:
            resp = check(await self.admin.invoke(addr, RemotingCommand.request(
                RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": False}), 10), "broker consume stats")
        except (RemotingError, RemotingCommandError, OSError):
            return
        now_ms = int(time.time() * 1000)
        for entry in consume_stats_list(resp.body).get("consumeStatsList", []):
            for group, per_topic in entry.items():
                for stats in per_topic:
                    for key, w in stats.get("offsetTable", {}).items():
                        topic = _topic_of(key)
                        g = s.groups.setdefault((group, topic), {"broker_offset": 0, "consumer_offset": 0,
                                                                 "lag": 0, "behind_ms": 0})
                        g["broker_offset"] += w["brokerOffset"]
                        g["consumer_offset"] += w["consumerOffset"]
                        lag = max(w["brokerOffset"] - w["consumerOffset"], 0)
                        g["lag"] += lag
                        last = w.get("lastTimestamp") or 0
                        if lag and last:
                            g["behind_ms"] = max(g["behind_ms"], now_ms - last)

    async def step(self) -> dict:
        """Take a sample and return the view: rates against the previous sample (None on the first)."""
        s = await self.sample()
        before = self.last
        dt = s.time - before.time if before else 0.0
        topics = []
        for topic, offset in s.topics.items():
            prev = before.topics.get(topic) if before else None
            topics.append({"topic": topic, "max_offset": offset, "put_tps": rate(offset, prev, dt)})
        groups = []
        for (group, topic), g in s.groups.items():
            trend = self.trends.setdefault((group, topic), deque(maxlen=TREND_POINTS))
            trend.append(g["lag"])
            prev = before.groups.get((group, topic)) if before else None
            groups.append(dict(g, group=group, topic=topic, trend=list(trend),
                               consume_tps=rate(g["consumer_offset"], prev["consumer_offset"] if prev else None, dt)))
        self.last = s
        return {"time": int(time.time() * 1000), "interval_s": round(dt, 3) if before else None,
                "brokers": s.brokers, "topics": topics, "groups": groups}
