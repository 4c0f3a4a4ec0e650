"""Soak benchmark: a broker under steady mixed load for a long time, its memory sampled.

Starts `mqtool broker` (embedded name server, ASYNC_FLUSH) as a process on 127.0.0.1, then for
`--minutes` (default 10) runs 4 producers (mqtool's Python client, sync sends at `--rate` messages/s
each) and two consumer groups (group A: two consumers sharing the queues, group B: one) on the same
topic. Every 10 s it samples the broker's VmRSS and RssAnon (/proc/<pid>/status). At the end it
stops the producers, lets the groups drain, and reports: RSS first/last/max and the last/first
ratio, send errors, and per group every acknowledged message consumed (missing, duplicates).

    python benchmarks/soak.py [--minutes 10] [--rate 100] [--quick] [--json]

RssAnon is the figure for leaks: VmRSS also counts the commitlog pages the broker has mapped and
touched, which grow with the data written (file-backed, reclaimable) and are reported apart.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from brokerproc import broker_process  # noqa: E402 - this folder's scripts share it

TOPIC = "SoakTopic"
QUEUES = 8
PRODUCERS = 4


def memory_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(rest.split()[0])
    return out


class Tally:
    def __init__(self):
        self.acked: set[str] = set()
        self.send_errors: Counter = Counter()
        self.consume_errors: Counter = Counter()
        self.error_times: list[float] = []
        self.consumed: dict[str, Counter] = {"A": Counter(), "B": Counter()}


async def produce(ns: str, n: int, rate: float, stop: asyncio.Event, tally: Tally) -> None:
    from mqtool.client.producer import OutMessage, Producer
    p = Producer(ns, f"PID_SOAK_{n}", instance=f"soak-p{n}")
    seq, t0 = 0, time.monotonic()
    try:
        while not stop.is_set():
            mid = f"p{n}-{seq}"
            seq += 1
            try:
                res = await p.send(OutMessage(TOPIC, mid.encode() + b"|" + b"x" * 100, keys=[mid], tags=f"T{n}"))
                if res.status == "SEND_OK":
                    tally.acked.add(mid)
                else:
                    tally.send_errors[res.status] += 1
            except Exception as exc:  # noqa: BLE001 - counted and reported, the soak goes on
                tally.send_errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
                tally.error_times.append(round(time.monotonic() - t0, 1))
                await asyncio.sleep(0.1)      # a failing send may not suspend: leave the loop to the others
                continue
            delay = t0 + seq / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
    finally:
        await p.close()


async def consume(ns: str, group: str, instance: str, stop: asyncio.Event, seen: Counter, ready: list,
                  tally: Tally) -> None:
    """One consumer of the group; if it fails (the error is counted) a new one takes over, as a Java
    client's rebalance service would keep going."""
    from mqtool.client.consumer import GroupConsumer
    t0 = time.monotonic()
    while not stop.is_set():
        c = GroupConsumer(ns, f"CID_SOAK_{group}", TOPIC, start="first", instance=instance)
        ready.append(c)
        try:
            async for _mq, rec in c.messages(poll_ms=200, stop=stop):
                seen[rec.body.split(b"|", 1)[0].decode()] += 1
        except Exception as exc:  # noqa: BLE001 - counted and reported, the soak goes on
            tally.consume_errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
            tally.error_times.append(round(time.monotonic() - t0, 1))
            await asyncio.sleep(1.0)
        finally:
            ready.remove(c)
            await c.close()


def group_report(acked: set[str], seen: Counter) -> dict:
    return {"consumed": sum(seen.values()), "missing": len(acked - seen.keys()),
            "duplicates": sum(n - 1 for m, n in seen.items() if n > 1 and m in acked),
            "unacknowledged_seen": len(seen.keys() - acked)}


async def run_load(ns: str, broker_pid: int, seconds: float, sample_s: float, rate: float) -> dict:
    tally, samples = Tally(), []
    stop_p, stop_c = asyncio.Event(), asyncio.Event()
    consumers: list = []
    cons = [asyncio.create_task(consume(ns, g, f"soak-{g}{i}", stop_c, tally.consumed[g], consumers, tally))
            for g, i in (("A", 0), ("A", 1), ("B", 0))]
    # Both A consumers hold their share of the queues before the first send: no rebalance mid-run.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        a = [c for c in consumers if c.group.endswith("_A")]
        if len(a) == 2 and all(c.state.assigned for c in a) and \
                sum(1 for c in a for q in c.state.assigned if q.topic == TOPIC) == QUEUES:
            break
        await asyncio.sleep(0.2)
    prods = [asyncio.create_task(produce(ns, n, rate, stop_p, tally)) for n in range(PRODUCERS)]
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        samples.append({"t_s": round(time.monotonic() - t0, 1), **memory_kib(broker_pid)})
        await asyncio.sleep(min(sample_s, max(0.0, seconds - (time.monotonic() - t0))))
    stop_p.set()
    await asyncio.gather(*prods)
    samples.append({"t_s": round(time.monotonic() - t0, 1), **memory_kib(broker_pid)})
    drain_deadline = time.monotonic() + 120
    while time.monotonic() < drain_deadline and not all(tally.acked <= seen.keys() for seen in tally.consumed.values()):
        await asyncio.sleep(0.5)
    await asyncio.sleep(1.0)           # a late duplicate would show up now
    stop_c.set()
    await asyncio.gather(*cons, return_exceptions=True)
    times = tally.error_times
    return {"samples": samples, "acked": len(tally.acked), "send_errors": dict(tally.send_errors),
            "consume_errors": dict(tally.consume_errors),
            "errors_between_s": [times[0], times[-1]] if times else None,
            "groups": {g: group_report(tally.acked, seen) for g, seen in tally.consumed.items()}}


def summarize_memory(samples: list[dict]) -> dict:
    out = {}
    for key in ("VmRSS", "RssAnon", "RssFile"):
        values = [s[key] for s in samples if key in s]
        if values:
            out[key] = {"first_mib": round(values[0] / 1024, 1), "last_mib": round(values[-1] / 1024, 1),
                        "max_mib": round(max(values) / 1024, 1),
                        "last_over_first": round(values[-1] / values[0], 3) if values[0] else None}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=100.0, help="messages/s per producer (4 producers)")
    ap.add_argument("--quick", action="store_true", help="5 seconds, samples every 1 s (the test suite's run)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--broker-log", help="also write the broker's log lines to this file")
    args = ap.parse_args()
    seconds, sample_s = (5.0, 1.0) if args.quick else (args.minutes * 60, 10.0)
    warnings_logged: list[str] = []
    with broker_process(prefix="mqtool-soak-") as proc:
        broker, ns = proc.proc, proc.namesrv

        def watch():
            log = open(args.broker_log, "a") if args.broker_log else None
            for line in broker.stderr:
                if log:
                    log.write(line)
                    log.flush()
                if " ERROR " in line or " WARNING " in line or "Traceback" in line:
                    warnings_logged.append(line.strip()[:200])
        threading.Thread(target=watch, daemon=True).start()
        proc.create_topic(TOPIC, QUEUES)
        started = time.time()
        load = asyncio.run(run_load(ns, broker.pid, seconds, sample_s, args.rate))
        groups = load["groups"]
        result = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
            "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
            "mode": {"seconds": seconds, "producers": PRODUCERS, "rate_per_producer": args.rate, "queues": QUEUES,
                     "groups": {"A": 2, "B": 1}, "flushDiskType": "ASYNC_FLUSH", "client": "mqtool Python client"},
            "baseline": {"broker_rss_at_start_mib": round(load["samples"][0]["VmRSS"] / 1024, 1)},
            "acked": load["acked"], "msg_per_s": round(load["acked"] / seconds, 1),
            "send_errors": load["send_errors"], "consume_errors": load["consume_errors"],
            "errors_between_s": load["errors_between_s"],
            "broker_warnings_logged": warnings_logged[:10],
            "groups": groups, "memory": summarize_memory(load["samples"]), "samples": load["samples"],
        }
        result["ok"] = (not load["send_errors"] and not load["consume_errors"] and not warnings_logged
                        and load["acked"] > 0
                        and all(g["missing"] == 0 and g["duplicates"] == 0 for g in groups.values()))
        print(json.dumps(result) if args.json else json.dumps(result, indent=2))
        return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
