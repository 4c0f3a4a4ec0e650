"""Benchmark: 5.x timer messages on `mqtool broker` (issue 45), as ratios measured in one run.

Starts `mqtool broker` (embedded name server, ASYNC_FLUSH) on 127.0.0.1 and, with mqtool's Python
producer (128 sends in flight, 128-byte bodies):
  1. put throughput: N plain sends, then N timer sends due in an hour (none delivered during the run);
     msg/s and the broker's CPU per message of each, and their ratios (timer / plain);
  2. delivery lateness: `--rate` timer messages a second for `--seconds`, sent ahead of time, due one
     after the other at that rate from a start a little after the last send; a pull consumer reads
     them as they come. Lateness = the broker's TIMER_DEQUEUE_MS - the due time (what the broker
     adds), and the consumer's arrival - the due time (what an application sees, polling included);
     p50/p99/max in ms and as a fraction of timerPrecisionMs; early deliveries counted (must be 0).

    python benchmarks/timer_messages.py [--messages 20000] [--rate 10000] [--seconds 5] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokerproc import broker_process, cpu_seconds  # noqa: E402 - this folder's scripts share it

PLAIN, TIMED, LATE = "TimerBenchPlain", "TimerBenchTimed", "TimerBenchLate"


async def send_many(ns: str, topic: str, count: int, due=None, inflight: int = 128) -> float:
    """Seconds to send `count` messages (`due(i)`: TIMER_DELIVER_MS of message i, or plain)."""
    from mqtool.client.producer import OutMessage, Producer
    p = Producer(ns, "PID_TIMER_BENCH")
    body = b"x" * 128
    nxt = [0]

    async def sender():
        while nxt[0] < count:
            i = nxt[0]
            nxt[0] += 1
            await p.send(OutMessage(topic, body, deliver_time_ms=due(i) if due else 0))
    try:
        await p.send(OutMessage(topic, body, deliver_time_ms=due(0) if due else 0))      # route, connection
        t0 = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(inflight)))
        return time.perf_counter() - t0
    finally:
        await p.close()


def put_phase(broker, count: int) -> dict:
    out = {}
    far = int(time.time() * 1000) + 3_600_000
    for name, topic, due in (("plain", PLAIN, None), ("timer", TIMED, lambda i: far + i)):
        cpu0 = cpu_seconds(broker.pid)
        secs = asyncio.run(send_many(broker.namesrv, topic, count, due))
        cpu = cpu_seconds(broker.pid) - cpu0
        out[name] = {"msg_per_s": round(count / secs), "broker_cpu_us_per_msg": round(cpu / count * 1e6, 1)}
    out["ratio_throughput_timer_over_plain"] = round(out["timer"]["msg_per_s"] / out["plain"]["msg_per_s"], 3)
    out["ratio_cpu_timer_over_plain"] = round(out["timer"]["broker_cpu_us_per_msg"] /
                                              max(out["plain"]["broker_cpu_us_per_msg"], 0.1), 3)
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def lateness_phase(ns: str, rate: int, seconds: float, precision: int, send_rate: float) -> dict:
    from mqtool.client.consumer import Consumer
    total = int(rate * seconds)
    # Sent ahead: due times start after the sends are done (at the put phase's timer rate, with room
    # to spare), one every 1/rate s.
    start = int(time.time() * 1000) + int(total / send_rate * 1000 * 1.5) + 2000
    due_of = lambda i: start + i * 1000 // rate        # noqa: E731
    send_s = await send_many(ns, LATE, total, due_of)
    assert time.time() * 1000 < start, f"sending took {send_s:.1f} s: the first messages were due before the end"
    c = Consumer(ns, "CID_TIMER_BENCH")
    queues = await c.queues(LATE)
    pos = {q: 0 for q in queues}
    broker_late, seen_late, early = [], [], 0
    deadline = time.monotonic() + seconds + (start - time.time() * 1000) / 1000 + 30
    try:
        async def chain(q):
            nonlocal early
            while len(broker_late) < total and time.monotonic() < deadline:
                res = await c.pull(q, pos[q], 32, suspend_ms=200)
                now = time.time() * 1000
                for m in res.messages:
                    due = int(m.properties["TIMER_DELIVER_MS"])
                    broker_late.append(int(m.properties["TIMER_DEQUEUE_MS"]) - due)
                    seen_late.append(now - due)
                    early += now < due
                pos[q] = res.next_offset
        await asyncio.gather(*(chain(q) for q in queues))
    finally:
        await c.close()
    return {"messages": total, "received": len(broker_late), "rate_per_s": rate, "send_s": round(send_s, 2),
            "early": early,
            "broker_lateness_ms": {"p50": pct(broker_late, 0.5), "p99": pct(broker_late, 0.99),
                                   "max": max(broker_late, default=None)},
            "consumer_lateness_ms": {"p50": round(pct(seen_late, 0.5)), "p99": round(pct(seen_late, 0.99)),
                                     "max": round(max(seen_late, default=0))},
            "ratio_p99_over_precision": round(pct(broker_late, 0.99) / precision, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--rate", type=int, default=10000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--precision", type=int, default=1000, help="timerPrecisionMs")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.messages, args.rate, args.seconds = 2000, 2000, 1.0
    conf = Path(tempfile.mkdtemp(prefix="mqtool-timer-bench-")) / "broker.conf"
    conf.write_text(f"timerPrecisionMs={args.precision}\n")
    result = {"benchmark": "timer_messages", "python": platform.python_version(), "cpus": os.cpu_count(),
              "precision_ms": args.precision}
    with broker_process("-c", str(conf)) as broker:
        for topic in (PLAIN, TIMED, LATE):
            broker.create_topic(topic)
        result["put"] = put_phase(broker, args.messages)
        result["lateness"] = asyncio.run(lateness_phase(broker.namesrv, args.rate, args.seconds, args.precision,
                                                        result["put"]["timer"]["msg_per_s"]))
    conf.unlink()
    conf.parent.rmdir()
    result["baseline"] = "plain puts of the same run (put.plain); lateness against the due time and timerPrecisionMs"
    if args.json:
        print(json.dumps(result))
        return
    put, late = result["put"], result["lateness"]
    print(f"puts: plain {put['plain']['msg_per_s']:,} msg/s ({put['plain']['broker_cpu_us_per_msg']} µs CPU/msg), "
          f"timer {put['timer']['msg_per_s']:,} msg/s ({put['timer']['broker_cpu_us_per_msg']} µs CPU/msg): "
          f"throughput x{put['ratio_throughput_timer_over_plain']}, CPU x{put['ratio_cpu_timer_over_plain']}")
    print(f"delivery of {late['received']:,}/{late['messages']:,} at {late['rate_per_s']:,}/s, P={args.precision} ms: "
          f"broker lateness p50 {late['broker_lateness_ms']['p50']} ms, p99 {late['broker_lateness_ms']['p99']} ms "
          f"(x{late['ratio_p99_over_precision']} P); consumer p50 {late['consumer_lateness_ms']['p50']} ms, "
          f"p99 {late['consumer_lateness_ms']['p99']} ms; early: {late['early']}")


if __name__ == "__main__":
    main()
