"""Benchmark: topic and group metadata at thousands of entries (issue 28).

A `mqtool namesrv` process and a `mqtool broker` process (ASYNC_FLUSH, metricsPort set) on
127.0.0.1. One client, one request at a time, as mqadmin's updateTopic sends them:

- topic creates (UPDATE_AND_CREATE_TOPIC, 8 queues) up to T topics, then deletes of them all
  (DELETE_TOPIC_IN_BROKER); group creates (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) up to G, then
  deletes: per-change latency percentiles, total time of the first 2,000 creates beside Java
  4.9.8's 7.7 s (issue 28's figure, not measured here), and the per-change ratio of the last 100
  creates (table near T) to the first 100 (table near 100), measured in the same run;
- G x 2 offset commits (UPDATE_CONSUMER_OFFSET), one topic per group;
- at T topics and G groups: the broker's start-up (SIGTERM, start again on the same store, until
  "boot success"), `/metrics` scrapes, GET_ALL_TOPIC_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
  GET_CONSUME_STATS, the broker's anonymous memory per topic; `mqtool topic list`, `group list`,
  `cluster list`, `top --once` (wall time of the command); one `mqtool top` sample (ClusterWatch.step,
  in this process) with the broker's GET_ALL_TOPIC_OFFSETS and with the path a 4.9.8 broker takes
  (and every broker took before: GET_TOPIC_STATS_INFO per topic), each beside one GET_ALL_TOPIC_CONFIG
  round trip measured just before;
- the name server (a second, fresh process): B brokers registering N topics each (distinct
  topics, full bodies, plain and compressed), then again with the same data version every 30 s
  (here: back to back); route look-ups of random topics (round trip, an upper bound of the server
  time) alone and while the registrations run; GET_ALL_TOPIC_LIST_FROM_NAMESERVER and
  GET_TOPICS_BY_CLUSTER over B x N topics.

    python benchmarks/metadata_scale.py [--topics 10000] [--groups 5000] [--ns-brokers 8]
                                        [--ns-topics 10000] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mqtool_remoting import jsonbody  # noqa: E402
from mqtool_remoting.bodies import (DataVersion, RegisterBrokerBody, TopicConfig,  # noqa: E402
                                    TopicConfigSerializeWrapper)
from mqtool_remoting.codes import RequestCode  # noqa: E402
from mqtool_remoting.command import RemotingCommand  # noqa: E402
from mqtool_remoting.transport import RemotingClient  # noqa: E402

from brokerproc import die_with_parent, free_port, free_port_pair, rss_anon_kib  # noqa: E402

JAVA_2000_CREATES_S = 7.7      # issue 28: Apache RocketMQ 4.9.8 on this machine, same client


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 3) if s else 0.0


def summary(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": pct(ms, 0.5), "p90_ms": pct(ms, 0.9), "p99_ms": pct(ms, 0.99),
            "max_ms": round(max(ms), 3) if ms else 0.0, "mean_ms": round(statistics.fmean(ms), 3) if ms else 0.0}


class Server:
    """`python -m mqtool ...` until its line `ready`; stopped by its PID."""

    def __init__(self, args: list[str], ready: str = "boot success", timeout: float = 300):
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "mqtool", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent())
        deadline = time.monotonic() + timeout
        while True:
            line = self.proc.stderr.readline()
            if ready in line:
                break
            if (not line and self.proc.poll() is not None) or time.monotonic() > deadline:
                raise SystemExit(f"{args[0]} did not start (exit {self.proc.poll()})")
        self.boot_s = time.perf_counter() - t0
        import threading
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def topic_cmd(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})


def group_cmd(group: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=jsonbody.dumps({
        "groupName": group, "brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True,
        "consumeFromMinEnable": True, "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 16,
        "retryQueueNums": 1, "whichBrokerWhenConsumeSlowly": 1}))


async def timed(client: RemotingClient, addr: str, cmd: RemotingCommand, timeout: float = 30) -> float:
    t0 = time.perf_counter()
    resp = await client.invoke(addr, cmd, timeout)
    if resp.code != 0:
        raise SystemExit(f"request {cmd.code} failed: {resp.code} {resp.remark}")
    return (time.perf_counter() - t0) * 1000


async def http_get_ms(port: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    data = await reader.read()
    writer.close()
    return (time.perf_counter() - t0) * 1000, len(data)


# ---------------------------------------------------------------------- the broker

async def changes(addr: str, topics: int, groups: int) -> dict:
    client = RemotingClient()
    try:
        create = [await timed(client, addr, topic_cmd(f"ScaleTopic{i:05d}")) for i in range(topics)]
        out = {"topic_create": summary(create), "topic_create_first_100": summary(create[:100]),
               "topic_create_last_100": summary(create[-100:])}
        first = create[:2000]
        out["first_2000_creates_s"] = round(sum(first) / 1000, 3)
        out["first_2000_creates_n"] = len(first)
        out["ratio_last_100_to_first_100"] = round(statistics.fmean(create[-100:]) / statistics.fmean(create[:100]), 2)
        out["median_ratio_last_100_to_first_100"] = round(statistics.median(create[-100:]) / statistics.median(create[:100]), 2)
        gcreate = [await timed(client, addr, group_cmd(f"ScaleGroup{i:05d}")) for i in range(groups)]
        out["group_create"] = summary(gcreate)
        out["group_create_first_100"], out["group_create_last_100"] = summary(gcreate[:100]), summary(gcreate[-100:])
        out["group_create_ratio_last_100_to_first_100"] = round(
            statistics.fmean(gcreate[-100:]) / statistics.fmean(gcreate[:100]), 2)
        out["group_create_median_ratio_last_100_to_first_100"] = round(
            statistics.median(gcreate[-100:]) / statistics.median(gcreate[:100]), 2)
        # every group commits an offset on one topic (as its consumers would): consumerOffset.json's table
        commits = [await timed(client, addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": f"ScaleGroup{i:05d}", "topic": f"ScaleTopic{i % max(topics, 1):05d}", "queueId": q,
            "commitOffset": 0})) for i in range(groups) for q in range(2)]
        out["offset_commit"] = summary(commits)
        return out
    finally:
        await client.close()


async def reads(addr: str, metrics_port: int, groups: int) -> dict:
    client = RemotingClient()
    out = {}
    try:
        for name, code in (("get_all_topic_config", RequestCode.GET_ALL_TOPIC_CONFIG),
                           ("get_all_group_config", RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)):
            out[name] = summary([await timed(client, addr, RemotingCommand.request(code)) for _ in range(5)])
        stats = RemotingCommand.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "ScaleGroup00000",
                                                                         "topic": "ScaleTopic00000"})
        out["consume_stats"] = summary([await timed(client, addr, stats) for _ in range(20)])
        out["broker_runtime"] = summary([await timed(client, addr, RemotingCommand.request(
            RequestCode.GET_BROKER_RUNTIME_INFO)) for _ in range(5)])
    finally:
        await client.close()
    scrapes = [await http_get_ms(metrics_port) for _ in range(5)]
    out["metrics_scrape"] = dict(summary([s[0] for s in scrapes]), bytes=scrapes[-1][1])
    return out


async def top_samples(namesrv: str, addr: str, samples: int = 5) -> dict:
    """One `mqtool top` sample, as the command takes it every refresh: with the broker's one-request
    offsets, and topic by topic (the broker marked as one without GET_ALL_TOPIC_OFFSETS, as 4.9.8's)."""
    from mqtool.client.admin import Admin
    from mqtool.client.top import ClusterWatch, Sample
    admin, client = Admin(namesrv), RemotingClient()
    out = {}
    try:
        baseline = summary([await timed(client, addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
                            for _ in range(5)])
        out["top_baseline_get_all_topic_config"] = baseline
        for name, per_topic in (("top_sample_one_request", False), ("top_sample_per_topic", True)):
            watch = ClusterWatch(admin)
            if per_topic:
                watch.per_topic.add(addr)
            await watch.step()                 # connections made, a first sample to rate against
            ms = []
            for _ in range(samples):
                t0 = time.perf_counter()
                view = await watch.step()
                ms.append((time.perf_counter() - t0) * 1000)
            out[name] = dict(summary(ms), topics=len(view["topics"]), groups=len(view["groups"]))
            part = []                          # the topics' share alone: what the two ways differ in
            for _ in range(samples):
                t0 = time.perf_counter()
                await watch._topics(addr, Sample(0.0), set(), set())
                part.append((time.perf_counter() - t0) * 1000)
            out[f"{name}_topics_part"] = summary(part)
            out[f"{name}_ratio_to_baseline"] = round(out[name]["p50_ms"] / baseline["p50_ms"], 1)
        out["top_sample_per_topic_to_one_request"] = round(
            out["top_sample_per_topic"]["p50_ms"] / out["top_sample_one_request"]["p50_ms"], 1)
    finally:
        await admin.close()
        await client.close()
    return out


async def deletes(addr: str, topics: int, groups: int) -> dict:
    client = RemotingClient()
    try:
        d = [await timed(client, addr, RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER,
                                                               {"topic": f"ScaleTopic{i:05d}"})) for i in range(topics)]
        g = [await timed(client, addr, RemotingCommand.request(RequestCode.DELETE_SUBSCRIPTIONGROUP,
                                                               {"groupName": f"ScaleGroup{i:05d}", "removeOffset": True}))
             for i in range(groups)]
        return {"topic_delete": summary(d), "topic_delete_first_100": summary(d[:100]),
                "topic_delete_last_100": summary(d[-100:]), "group_delete": summary(g)}
    finally:
        await client.close()


CLI = {"topic_list": ["topic", "list"], "group_list": ["group", "list"], "cluster_list": ["cluster", "list"],
       "top_once": ["top", "--once", "-i", "0.5"]}


def cli_times(ns: str) -> dict:
    """Wall seconds of each command (`--json`, the Python start included), as an operator runs it."""
    out = {}
    for name, argv in CLI.items():
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "mqtool", *argv, "-n", ns, "--json"], cwd=REPO,
                              capture_output=True, timeout=600)
        out[name] = round(time.perf_counter() - t0, 3) if proc.returncode == 0 else f"exit {proc.returncode}"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mqtool", "--version"], cwd=REPO, capture_output=True, timeout=60)
    out["python_start"] = round(time.perf_counter() - t0, 3)
    return out


def broker_phase(args, tmp: Path) -> dict:
    ns_port = free_port()
    ns = Server(["namesrv", "start", "--listen", f"127.0.0.1:{ns_port}", "--kv-config", str(tmp / "kv.json")])
    port, metrics_port = free_port_pair(), free_port()
    conf = tmp / "broker.conf"
    conf.write_text(f"brokerClusterName=ScaleCluster\nbrokerName=scale-a\nmetricsPort={metrics_port}\n")
    cmd = ["broker", "start", "-n", f"127.0.0.1:{ns_port}", "-c", str(conf), "--listen", f"127.0.0.1:{port}",
           "--store-dir", str(tmp / "store")]
    addr = f"127.0.0.1:{port}"
    out = {}
    broker = Server(cmd)
    try:
        out["start_empty_s"] = round(broker.boot_s, 3)
        rss0 = rss_anon_kib(broker.proc.pid)
        out.update(asyncio.run(changes(addr, args.topics, args.groups)))
        rss1 = rss_anon_kib(broker.proc.pid)
        out["rss_anon_kib_per_topic_and_group"] = round((rss1 - rss0) / (args.topics + args.groups), 2)
        out["rss_anon_mib_at_scale"] = round(rss1 / 1024, 1)
        broker.stop()
        broker = Server(cmd)
        out["start_at_scale_s"] = round(broker.boot_s, 3)
        out.update(asyncio.run(reads(addr, metrics_port, args.groups)))
        out.update(asyncio.run(top_samples(f"127.0.0.1:{ns_port}", addr)))
        out["cli_s"] = cli_times(f"127.0.0.1:{ns_port}")
        out.update(asyncio.run(deletes(addr, args.topics, args.groups)))
    finally:
        broker.stop()
        ns.stop()
    return out


# ---------------------------------------------------------------------- the name server

def register_cmd(b: int, topics: int, counter: int, compressed: bool) -> RemotingCommand:
    table = {f"NsTopic{b}_{i:05d}": TopicConfig(f"NsTopic{b}_{i:05d}", 8, 8) for i in range(topics)}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1_700_000_000_000, counter)), [])
    data = body.encode(compressed)
    ext = {"brokerName": f"ns-broker-{b}", "brokerAddr": f"127.0.0.{b + 2}:10911", "clusterName": "NsCluster",
           "haServerAddr": f"127.0.0.{b + 2}:10912", "brokerId": 0, "compressed": compressed,
           "bodyCrc32": zlib.crc32(data) & 0x7FFFFFFF}
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, data, language="JAVA")


async def namesrv_bench(addr: str, brokers: int, topics: int, lookups: int) -> dict:
    client = RemotingClient()
    out = {}
    try:
        for compressed in (False, True):
            key = "compressed" if compressed else "plain"
            cmds = [register_cmd(b, topics, 1 + compressed, compressed) for b in range(brokers)]
            out[f"register_{key}_changed"] = summary([await timed(client, addr, c) for c in cmds])
            out[f"register_{key}_unchanged"] = summary([await timed(client, addr, c) for c in cmds])
            out[f"register_{key}_body_bytes"] = len(cmds[0].body)
        names = [f"NsTopic{random.randrange(brokers)}_{random.randrange(topics):05d}" for _ in range(lookups)]

        def route(t):
            return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t})
        out["route_lookup"] = summary([await timed(client, addr, route(t)) for t in names])
        out["all_topic_list"] = summary([await timed(client, addr, RemotingCommand.request(
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)) for _ in range(5)])
        out["topics_by_cluster"] = summary([await timed(client, addr, RemotingCommand.request(
            RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "NsCluster"})) for _ in range(5)])
        # every broker's periodic registration (a new data version: the worst case) while a client
        # looks routes up and another lists every topic
        regs = [register_cmd(b, topics, 10, True) for b in range(brokers)]
        during: list[float] = []
        busy = True

        async def looker():
            c = RemotingClient()
            try:
                while busy:
                    during.append(await timed(c, addr, route(random.choice(names))))
            finally:
                await c.close()

        async def lister():
            c = RemotingClient()
            try:
                while busy:
                    await timed(c, addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
            finally:
                await c.close()
        tasks = [asyncio.ensure_future(looker()), asyncio.ensure_future(lister())]
        t0 = time.perf_counter()
        reg_ms = await asyncio.gather(*(timed(client, addr, c) for c in regs))
        out["register_8_at_once_wall_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        busy = False
        await asyncio.gather(*tasks)
        out["register_during_lookups"] = summary(list(reg_ms))
        out["route_lookup_during_registrations"] = summary(during)
    finally:
        await client.close()
    return out


def namesrv_phase(args, tmp: Path) -> dict:
    port = free_port()
    ns = Server(["namesrv", "start", "--listen", f"127.0.0.1:{port}", "--kv-config", str(tmp / "kv2.json")])
    try:
        out = asyncio.run(namesrv_bench(f"127.0.0.1:{port}", args.ns_brokers, args.ns_topics, args.lookups))
        out["rss_anon_mib"] = round(rss_anon_kib(ns.proc.pid) / 1024, 1)
        return out
    finally:
        ns.stop()


def run(args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-bench-metadata-"))
    try:
        broker = broker_phase(args, tmp)
        namesrv = namesrv_phase(args, tmp)
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    baseline = {"java_4_9_8_2000_creates_s": JAVA_2000_CREATES_S, "note": "from issue 28, not measured here",
                "per_change_at_100_ms": broker["topic_create_first_100"]["mean_ms"]}
    return {"machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}",
            "mode": "quick" if args.quick else "full", "topics": args.topics, "groups": args.groups,
            "ns_brokers": args.ns_brokers, "ns_topics": args.ns_topics, "baseline": baseline,
            "broker": broker, "namesrv": namesrv}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=10000)
    ap.add_argument("--groups", type=int, default=5000)
    ap.add_argument("--ns-brokers", type=int, default=8)
    ap.add_argument("--ns-topics", type=int, default=10000)
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.topics, args.groups, args.ns_brokers, args.ns_topics, args.lookups = 300, 200, 2, 500, 100
    result = run(args)
    if args.json:
        print(json.dumps(result))
        return 0
    b, n = result["broker"], result["namesrv"]
    print(f"{args.topics} topic creates one at a time: p50 {b['topic_create']['p50_ms']} ms, p99 "
          f"{b['topic_create']['p99_ms']} ms; first 100 mean {b['topic_create_first_100']['mean_ms']} ms, last 100 "
          f"{b['topic_create_last_100']['mean_ms']} ms: {b['ratio_last_100_to_first_100']}x (medians: "
          f"{b['median_ratio_last_100_to_first_100']}x)")
    print(f"first {b['first_2000_creates_n']} creates: {b['first_2000_creates_s']} s (Java 4.9.8: "
          f"{JAVA_2000_CREATES_S} s for 2,000, from the issue)")
    print(f"{args.groups} group creates: p50 {b['group_create']['p50_ms']} ms, p99 {b['group_create']['p99_ms']} ms "
          f"({b['group_create_ratio_last_100_to_first_100']}x last/first 100)")
    print(f"deletes: topics p50 {b['topic_delete']['p50_ms']} ms p99 {b['topic_delete']['p99_ms']} ms; groups p50 "
          f"{b['group_delete']['p50_ms']} ms")
    print(f"start-up at scale {b['start_at_scale_s']} s (empty {b['start_empty_s']} s); /metrics p50 "
          f"{b['metrics_scrape']['p50_ms']} ms; GET_ALL_TOPIC_CONFIG p50 {b['get_all_topic_config']['p50_ms']} ms; "
          f"memory {b['rss_anon_kib_per_topic_and_group']} KiB per topic or group")
    print(f"mqtool top, one sample at {args.topics} topics and {args.groups} groups: p50 "
          f"{b['top_sample_one_request']['p50_ms']} ms ({b['top_sample_one_request_ratio_to_baseline']}x one "
          f"GET_ALL_TOPIC_CONFIG, {b['top_baseline_get_all_topic_config']['p50_ms']} ms); topic by topic (4.9.8's "
          f"path, and before) {b['top_sample_per_topic']['p50_ms']} ms "
          f"({b['top_sample_per_topic_to_one_request']}x); the topics' part alone "
          f"{b['top_sample_one_request_topics_part']['p50_ms']} ms against {b['top_sample_per_topic_topics_part']['p50_ms']} ms")
    print(f"name server, {args.ns_brokers} x {args.ns_topics} topics: register plain changed p50 "
          f"{n['register_plain_changed']['p50_ms']} ms, unchanged {n['register_plain_unchanged']['p50_ms']} ms; "
          f"compressed changed {n['register_compressed_changed']['p50_ms']} ms, unchanged "
          f"{n['register_compressed_unchanged']['p50_ms']} ms")
    print(f"route look-up p50 {n['route_lookup']['p50_ms']} ms p99 {n['route_lookup']['p99_ms']} ms; during "
          f"registrations p99 {n['route_lookup_during_registrations']['p99_ms']} ms max "
          f"{n['route_lookup_during_registrations']['max_ms']} ms; all topics p50 {n['all_topic_list']['p50_ms']} ms; "
          f"by cluster p50 {n['topics_by_cluster']['p50_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
