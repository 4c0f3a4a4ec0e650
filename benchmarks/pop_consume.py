"""Benchmark: POP receive + ack against pull with committed offsets (issue 45), 128-byte messages, as
ratios measured in one run.

Starts `mqtool broker` (embedded name server, ASYNC_FLUSH) on 127.0.0.1, fills a 4-queue topic with
128-byte messages, then drains it `--runs` times each way, alternating, each run as a new group from
the start: pull = one chain per queue, 32 messages a PULL_MESSAGE that carries the commit of the
offset before it (the 4.x push consumer's piggybacked commit); POP = one chain per queue, 32
messages a POP_MESSAGE (a checkpoint written to the revive topic, the offset moved at pop time) and
one BATCH_ACK_MESSAGE per answer (an ack record; the revive service matches it to its checkpoint),
sent while the chain's next POP is out, as the Java client's asynchronous acks go.
Reports msg/s of each run, the consumer's and the broker's CPU per message, and the POP/pull ratios
of the medians.

    python benchmarks/pop_consume.py [--messages 100000] [--runs 3] [--quick] [--json]
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
from consumer_drain import fill  # noqa: E402

TOPIC = "DrainTopic"       # consumer_drain.fill's


async def wait_dispatched(ns: str, want: int) -> None:
    from mqtool.client.consumer import Consumer
    c = Consumer(ns, "CID_BENCH_WAIT")
    try:
        queues = await c.queues(TOPIC)
        for _ in range(600):
            if sum([await c.max_offset(q) for q in queues]) >= want:
                return
            await asyncio.sleep(0.05)
    finally:
        await c.close()


async def pull_run(ns: str, group: str, broker_pid: int) -> dict:
    from mqtool.client.consumer import Consumer
    c = Consumer(ns, group)
    try:
        queues = await c.queues(TOPIC)
        pos = {q: 0 for q in queues}
        got = {q: 0 for q in queues}

        async def chain(q):
            while True:
                r = await c.pull(q, pos[q], 32, commit_offset=pos[q])
                if r.next_offset == pos[q]:
                    await c.commit(q, pos[q])
                    return
                got[q] += len(r.messages)
                pos[q] = r.next_offset
        return await _timed(lambda: asyncio.gather(*(chain(q) for q in queues)), got, broker_pid)
    finally:
        await c.close()


async def pop_run(ns: str, group: str, broker_pid: int) -> dict:
    from mqtool.client.popconsumer import INIT_MIN, PopConsumer
    c = PopConsumer(ns, group, TOPIC, invisible_ms=60_000, init_mode=INIT_MIN)
    try:
        [(name, addr)] = await c.brokers()
        nums = (await c.route(TOPIC)).queues[0]["readQueueNums"]
        got = {q: 0 for q in range(nums)}

        async def chain(q):
            acking = None                  # an answer's ack goes while the next POP is out (Java's acks are async)
            while True:
                msgs = await c.pop_from(name, addr, 32, 0, queue_id=q)
                if acking is not None:
                    await acking
                    acking = None
                if not msgs:
                    return
                acking = asyncio.ensure_future(c.ack_all(msgs))
                got[q] += len(msgs)
        return await _timed(lambda: asyncio.gather(*(chain(q) for q in got)), got, broker_pid)
    finally:
        await c.close()


async def _timed(run, got: dict, broker_pid: int) -> dict:
    cpu0, bcpu0, t0 = time.process_time(), cpu_seconds(broker_pid), time.perf_counter()
    await run()
    dt, cpu, bcpu = time.perf_counter() - t0, time.process_time() - cpu0, cpu_seconds(broker_pid) - bcpu0
    n = sum(got.values())
    return {"messages": n, "seconds": round(dt, 3), "msg_per_s": round(n / dt) if dt else 0,
            "consumer_cpu_us_per_msg": round(cpu / max(n, 1) * 1e6, 2),
            "broker_cpu_us_per_msg": round(bcpu / max(n, 1) * 1e6, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="3,000 messages, 1 run each way")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    count, runs = (3_000, 1) if args.quick else (args.messages, args.runs)
    pulls, pops = [], []
    with broker_process(prefix="mqtool-bench-pop-") as broker:
        broker.create_topic(TOPIC)
        asyncio.run(fill(broker.namesrv, count))
        asyncio.run(wait_dispatched(broker.namesrv, count))
        for i in range(runs):
            pulls.append(asyncio.run(pull_run(broker.namesrv, f"CID_BENCH_PULL_{i}", broker.pid)))
            pops.append(asyncio.run(pop_run(broker.namesrv, f"CID_BENCH_POP_{i}", broker.pid)))
    for r in pulls + pops:
        if r["messages"] != count:
            raise SystemExit(f"a run read {r['messages']} messages of {count}")

    def med(rows, key):
        return statistics.median(r[key] for r in rows)
    out = {
        "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
        "mode": {"flushDiskType": "ASYNC_FLUSH", "message_bytes": 128, "queues": 4, "batch": 32, "messages": count},
        "baseline": {"pull_committed_msg_per_s": round(med(pulls, "msg_per_s"))},
        "pull_runs": pulls, "pop_runs": pops,
        "pop_msg_per_s": round(med(pops, "msg_per_s")),
        "ratio_pop_to_pull_msg_per_s": round(med(pops, "msg_per_s") / med(pulls, "msg_per_s"), 3),
        "ratio_pop_to_pull_broker_cpu": round(med(pops, "broker_cpu_us_per_msg") / max(med(pulls, "broker_cpu_us_per_msg"), 1e-9), 3),
        "ratio_pop_to_pull_consumer_cpu": round(med(pops, "consumer_cpu_us_per_msg") / max(med(pulls, "consumer_cpu_us_per_msg"), 1e-9), 3),
    }
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
