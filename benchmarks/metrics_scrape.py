"""Benchmark: scraping the broker's Prometheus endpoint (issue 13).

A `mqtool broker` process (embedded name server, ASYNC_FLUSH, metricsPort set) is given T topics
(8 queues each, one message each) and G consumer groups, each with offsets on one topic and on its
%RETRY% topic (as a push consumer leaves them). Then:

- scrape time: N sequential `GET /metrics` (wall time, whole response read), median and p99,
  beside the same server's `GET /nope` (404: the HTTP round trip without collecting) and the
  100 ms budget;
- cost to sends: the broker's CPU per scrape (from /proc) as a share of one core at the scrape
  interval S (default 15 s, Prometheus's usual scrape_interval); and the pipelined SEND_MESSAGE_V2
  load of broker_capacity.py run without scraping, with a scrape every S seconds, and without again:
  ratio of the scraped run to the mean of the two unscraped ones.

    python benchmarks/metrics_scrape.py [--topics 1000] [--groups 100] [--scrapes 20] [--every 15]
                                        [--seconds 30] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mqtool_remoting.codes import RequestCode  # noqa: E402
from mqtool_remoting.command import RemotingCommand  # noqa: E402
from mqtool_remoting.transport import RemotingClient  # noqa: E402

from broker_capacity import TOPIC, load  # noqa: E402 - this folder's scripts share it
from brokerproc import broker_process, cpu_seconds as cpu_s, free_port_pair  # noqa: E402

BUDGET_MS = 100.0


async def http_get(port: int, target: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    return (time.perf_counter() - t0) * 1000, len(data)


async def populate(addr: str, topics: int, groups: int) -> None:
    client = RemotingClient()
    gate = asyncio.Semaphore(64)

    async def ask(code, ext, body=b""):
        async with gate:
            resp = await client.invoke(addr, RemotingCommand.request(code, ext, body), 30)
            if resp.code != 0:
                raise RuntimeError(f"request {code} failed: {resp.code} {resp.remark}")

    names = [f"MetricsBench{i:04d}" for i in range(topics)]
    try:
        await asyncio.gather(*(ask(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": t, "defaultTopic": "TBW102", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}) for t in names + [TOPIC]))
        await asyncio.gather(*(ask(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": f"%RETRY%GID_METRICS_{g:03d}", "defaultTopic": "TBW102", "readQueueNums": 1,
            "writeQueueNums": 1, "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})
            for g in range(groups)))
        await asyncio.gather(*(ask(RequestCode.SEND_MESSAGE_V2, {
            "a": "PID_METRICS", "b": t, "c": "TBW102", "d": 8, "e": 0, "f": 0, "g": int(time.time() * 1000),
            "h": 0, "i": "", "j": 0, "k": False, "m": False}, b"m" * 128) for t in names))
        # each group consumes one topic, and has offsets on its own retry topic, as a push consumer does
        await asyncio.gather(*(ask(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": f"GID_METRICS_{g:03d}", "topic": topic, "queueId": 0, "commitOffset": 0})
            for g in range(groups) for topic in (names[g % topics], f"%RETRY%GID_METRICS_{g:03d}")))
    finally:
        await client.close()


async def scrape_times(port: int, n: int) -> dict:
    floor = [(await http_get(port, "/nope"))[0] for _ in range(n)]
    times, size = [], 0
    for _ in range(n):
        ms, size = await http_get(port, "/metrics")
        times.append(ms)
    times.sort()
    return {"scrapes": n, "median_ms": round(statistics.median(times), 2),
            "p99_ms": round(times[min(n - 1, int(0.99 * n))], 2), "response_bytes": size,
            "http_404_median_ms": round(statistics.median(floor), 3),
            "ratio_to_budget": round(statistics.median(times) / BUDGET_MS, 3)}


async def load_with_scrapes(port: int, metrics_port: int, every: float, args) -> dict:
    stop = asyncio.Event()
    done = []

    async def scraper():
        while not stop.is_set():
            done.append((await http_get(metrics_port, "/metrics"))[0])
            try:
                await asyncio.wait_for(stop.wait(), every)
            except asyncio.TimeoutError:
                pass
    task = asyncio.create_task(scraper())
    try:
        res = await load(port, args.connections, args.window, 128, args.warmup, args.seconds)
    finally:
        stop.set()
        await task
    res["scrapes_during_load"] = len(done)
    res["scrape_median_ms_under_load"] = round(statistics.median(done), 2) if done else None
    return res


def run(args) -> dict:
    result = {"machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
              "mode": {"flushDiskType": "ASYNC_FLUSH", "topics": args.topics, "queues_per_topic": 8,
                       "groups": args.groups, "topics_per_group": "1 + its retry topic", "scrape_every_s": args.every,
                       "load": {"connections": args.connections, "window": args.window, "body_bytes": 128,
                                "seconds": args.seconds}}}
    metrics_port = free_port_pair()
    with broker_process("--metrics-port", str(metrics_port), prefix="mqtool-bench-metrics-") as broker:
        port = broker.port
        t0 = time.perf_counter()
        asyncio.run(populate(f"127.0.0.1:{port}", args.topics, args.groups))
        result["populate_s"] = round(time.perf_counter() - t0, 2)
        cpu0 = cpu_s(broker.pid)
        result["scrape"] = asyncio.run(scrape_times(metrics_port, args.scrapes))
        cpu_ms = (cpu_s(broker.pid) - cpu0) * 1000 / args.scrapes        # includes the 404s, which cost ~nothing
        result["scrape"]["broker_cpu_ms_per_scrape"] = round(cpu_ms, 1)
        result["scrape"]["core_share_at_interval"] = round(cpu_ms / (args.every * 1000), 4)
        quiet1 = asyncio.run(load(port, args.connections, args.window, 128, args.warmup, args.seconds))
        scraped = asyncio.run(load_with_scrapes(port, metrics_port, args.every, args))
        quiet2 = asyncio.run(load(port, args.connections, args.window, 128, args.warmup, args.seconds))
        base = (quiet1["msg_per_s"] + quiet2["msg_per_s"]) / 2
        result["baseline"] = {"sends_without_scraping": [quiet1, quiet2], "msg_per_s_mean": round(base)}
        result["sends_with_scraping"] = scraped
        result["send_ratio_scraped_to_unscraped"] = round(scraped["msg_per_s"] / max(base, 1), 3)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--every", type=float, default=15.0, help="Seconds between scrapes during the send load.")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.topics, args.groups, args.scrapes, args.seconds, args.warmup, args.every = 50, 5, 3, 1.0, 0.3, 0.3
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        s = result["scrape"]
        print(f"scrape: median {s['median_ms']} ms, p99 {s['p99_ms']} ms ({s['response_bytes']:,} bytes; "
              f"404 round trip {s['http_404_median_ms']} ms; {s['ratio_to_budget']}x the {BUDGET_MS:g} ms budget); "
              f"broker CPU {s['broker_cpu_ms_per_scrape']} ms per scrape = {s['core_share_at_interval']:.2%} of a core "
              f"at one scrape every {args.every:g}s")
        print(f"sends: {result['sends_with_scraping']['msg_per_s']:,} msg/s scraped every {args.every:g}s vs "
              f"{result['baseline']['msg_per_s_mean']:,} unscraped: {result['send_ratio_scraped_to_unscraped']}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
