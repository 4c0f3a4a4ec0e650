"""Benchmark: how fast mqtool's Python consumer drains a topic (issue 11: ≥ 100,000 msg/s).

Starts `mqtool broker` (embedded name server, ASYNC_FLUSH) on 127.0.0.1, fills a 4-queue topic
with 128-byte messages from mqtool's producer (128 sends in flight), waits until every message is
in its consume queue, then drains the topic `--runs` times from the start: one pull chain per
queue, 32 messages a pull, each chain asking again as soon as its answer is in (as the Java
client's PullMessageService does). Reports msg/s per run and their median, the consumer's and the
broker's CPU per message, and beside them a baseline measured in the same run: the consumer's
own decode of the same pull answers from memory (its ceiling without the broker and the socket).

    python benchmarks/consumer_drain.py [--messages 200000] [--runs 5] [--quick] [--json]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokerproc import broker_process, cpu_seconds  # noqa: E402 - this folder's scripts share it

TOPIC = "DrainTopic"


async def fill(ns: str, count: int) -> None:
    from mqtool.client.producer import OutMessage, Producer
    p = Producer(ns, "PID_DRAIN")
    body = b"x" * 128
    left = [count]

    async def sender():
        while left[0] > 0:
            left[0] -= 1
            await p.send(OutMessage(TOPIC, body))
    try:
        await asyncio.gather(*(sender() for _ in range(128)))
    finally:
        await p.close()


async def drain(ns: str, want: int, broker_pid: int) -> dict:
    from mqtool.client.consumer import Consumer
    c = Consumer(ns, "CID_DRAIN")
    try:
        queues = await c.queues(TOPIC)
        for _ in range(600):                       # every message dispatched to its queue
            ends = [await c.max_offset(q) for q in queues]
            if sum(ends) >= want:
                break
            await asyncio.sleep(0.05)
        pos = {q: await c.min_offset(q) for q in queues}
        got = {q: 0 for q in queues}
        bodies: list[bytes] = []

        async def chain(q):
            while True:
                r = await c.pull(q, pos[q], 32)
                if r.next_offset == pos[q]:
                    return
                got[q] += len(r.messages)
                pos[q] = r.next_offset
        cpu0, bcpu0, t0 = time.process_time(), cpu_seconds(broker_pid), time.perf_counter()
        await asyncio.gather(*(chain(q) for q in queues))
        dt, cpu, bcpu = time.perf_counter() - t0, time.process_time() - cpu0, cpu_seconds(broker_pid) - bcpu0
        n = sum(got.values())
        # The baseline's input: raw pull answers of the same queues (a few thousand records).
        for q in queues:
            resp = await c.invoke_queue(q, _pull_cmd(c, q, 0))
            bodies.append(resp.body)
    finally:
        await c.close()
    return {"messages": n, "seconds": round(dt, 3), "msg_per_s": round(n / dt) if dt else 0,
            "consumer_cpu_us_per_msg": round(cpu / max(n, 1) * 1e6, 2),
            "broker_cpu_us_per_msg": round(bcpu / max(n, 1) * 1e6, 2), "_bodies": bodies}


def _pull_cmd(c, q, offset: int):
    from mqtool_remoting.codes import RequestCode
    from mqtool_remoting.command import RemotingCommand
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": c.group, "topic": q.topic, "queueId": q.queue_id, "queueOffset": offset,
        "maxMsgNums": 32, "sysFlag": 0x4, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*",
        "subVersion": 0, "expressionType": "TAG"})


def decode_rate(bodies: list[bytes], seconds: float = 1.0) -> float:
    """Records per second the consumer's decoder reads from pull answers already in memory."""
    from mqtool.client.records import decode_records
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for b in bodies:
            n += len(decode_records(b))
    return n / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="5,000 messages, 2 runs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    count, runs = (5_000, 2) if args.quick else (args.messages, args.runs)
    with broker_process(prefix="mqtool-bench-drain-") as broker:
        broker.create_topic(TOPIC)
        t0 = time.perf_counter()
        asyncio.run(fill(broker.namesrv, count))
        fill_s = time.perf_counter() - t0
        results = [asyncio.run(drain(broker.namesrv, count, broker.pid)) for _ in range(runs)]
    bodies = results[-1].pop("_bodies")
    for r in results:
        r.pop("_bodies", None)
    baseline = decode_rate(bodies)
    median = statistics.median(r["msg_per_s"] for r in results)
    out = {
        "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
        "mode": {"flushDiskType": "ASYNC_FLUSH", "message_bytes": 128, "queues": 4, "pull_batch": 32,
                 "messages": count, "fill_seconds": round(fill_s, 2)},
        "baseline": {"decode_only_msg_per_s": round(baseline)},
        "runs": results, "median_msg_per_s": round(median),
        "ratio_to_decode_only": round(median / baseline, 3) if baseline else None,
    }
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
