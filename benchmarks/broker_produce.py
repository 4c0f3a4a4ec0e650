"""Benchmark: producer.sh-style load on `mqtool broker` (issue 4) with the official C++ client.

Starts `mqtool broker` (embedded name server) as a process on 127.0.0.1, then for a fixed time
runs 1 and 4 sync sending threads (and 4 processes) of 128-byte messages with the C++ client
(rocketmq==0.4.4), and a pull consumer draining the topic. Reports TPS, average/p99/max RT,
failures, the broker's CPU time per message (from /proc), the flush mode, and beside them a raw
loopback round-trip rate (a plain-socket echo of the same frame size) measured in the same run.
The Python client (mqtool's own) is measured the same way for comparison.

    python benchmarks/broker_produce.py [--seconds 10] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokerproc import REPO, broker_process, cpu_seconds, die_with_parent, free_port, free_port_pair  # noqa: E402,F401 - shared

PRODUCER = r"""
import sys, time, json, threading
from rocketmq.client import Producer, Message
ns, topic, threads, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
p = Producer("PID_BENCH_%d" % threading.get_ident()); p.set_namesrv_addr(ns); p.start()
body = "x" * 128
rts, fails, errors = [], [0], {}
stop = time.perf_counter() + seconds
def run():
    while time.perf_counter() < stop:
        m = Message(topic); m.set_body(body)
        t0 = time.perf_counter()
        try:
            p.send_sync(m); rts.append(time.perf_counter() - t0)
        except Exception as e:
            fails[0] += 1
            k = str(e)[:120]
            errors[k] = errors.get(k, 0) + 1
ts = [threading.Thread(target=run) for _ in range(threads)]
[t.start() for t in ts]; [t.join() for t in ts]
p.shutdown()
print(json.dumps({"rts": rts, "fails": fails[0], "errors": errors}))
"""

PULLER = r"""
import sys, time, json
from rocketmq.client import PullConsumer
ns, topic, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = PullConsumer("CID_BENCH"); c.set_namesrv_addr(ns); c.start()
n, t0 = 0, time.perf_counter()
for _ in c.pull(topic):
    n += 1
    if n >= want: break
dt = time.perf_counter() - t0
c.shutdown()
print(json.dumps({"messages": n, "seconds": dt}))
"""


def loopback_rtt_rate(seconds: float) -> float:
    """Round trips per second of a 200-byte request / 100-byte reply over a plain TCP socket."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]

    def echo():
        c, _ = srv.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            d = c.recv(200)
            if not d:
                break
            c.sendall(d[:100])
        c.close()
    threading.Thread(target=echo, daemon=True).start()
    cli = socket.create_connection(("127.0.0.1", port))
    cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    n, stop, msg = 0, time.perf_counter() + seconds, b"x" * 200
    t0 = time.perf_counter()
    while time.perf_counter() < stop:
        cli.sendall(msg)
        got = 0
        while got < 100:
            got += len(cli.recv(100 - got))
        n += 1
    rate = n / (time.perf_counter() - t0)
    cli.close()
    srv.close()
    return rate


def summarize(rts: list[float], fails: int, seconds: float) -> dict:
    rts = sorted(rts)
    if not rts:
        return {"tps": 0, "failures": fails}
    return {"tps": round(len(rts) / seconds), "avg_rt_ms": round(1000 * sum(rts) / len(rts), 3),
            "p99_rt_ms": round(1000 * rts[max(0, int(len(rts) * 0.99) - 1)], 3),
            "max_rt_ms": round(1000 * rts[-1], 3), "failures": fails, "messages": len(rts)}


def run_producers(ns: str, topic: str, threads: int, procs: int, seconds: float, broker_pid: int) -> dict:
    cpu0 = cpu_seconds(broker_pid)
    ps = [subprocess.Popen([sys.executable, "-c", PRODUCER, ns, topic, str(threads), str(seconds)],
                           stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent()) for _ in range(procs)]
    outs = [json.loads(p.communicate(timeout=seconds + 60)[0].strip().splitlines()[-1]) for p in ps]
    cpu = cpu_seconds(broker_pid) - cpu0
    rts = [r for o in outs for r in o["rts"]]
    res = summarize(rts, sum(o["fails"] for o in outs), seconds)
    errors: dict[str, int] = {}
    for o in outs:
        for k, v in o.get("errors", {}).items():
            errors[k] = errors.get(k, 0) + v
    res.update(threads=threads, processes=procs, errors=errors,
               broker_cpu_ms_per_msg=round(1000 * cpu / max(len(rts), 1), 4))
    return res


PY_DRAIN = r"""
import asyncio, json, sys, time
from mqtool.client.consumer import Consumer
async def main(ns, topic, want):
    # One pull chain per queue, each asking again as soon as its answer is in (as the Java client's
    # PullMessageService does): the broker serves one queue while the client decodes another.
    c = Consumer(ns, "CID_BENCH_PY")
    queues = await c.queues(topic)
    pos = {q: await c.min_offset(q) for q in queues}
    got = {q: 0 for q in queues}
    async def chain(q):
        while sum(got.values()) < want:
            r = await c.pull(q, pos[q], 32)
            if r.next_offset == pos[q]:
                return
            got[q] += len(r.messages)
            pos[q] = r.next_offset
    t0 = time.perf_counter()
    await asyncio.gather(*(chain(q) for q in queues))
    dt = time.perf_counter() - t0
    await c.close()
    print(json.dumps({"messages": sum(got.values()), "seconds": dt}))
asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def python_drain(ns: str, topic: str, want: int) -> dict:
    out = subprocess.run([sys.executable, "-c", PY_DRAIN, ns, topic, str(want)], cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"messages": r["messages"], "msg_per_s": round(r["messages"] / r["seconds"]) if r["seconds"] else 0}


def python_client(ns: str, topic: str, threads: int, count: int) -> dict:
    out = subprocess.run([sys.executable, "-m", "mqtool", "send", "-n", ns, "-t", topic, "--count", str(count),
                          "--threads", str(threads), "--json"], cwd=REPO, capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    seconds = 1.0 if args.quick else args.seconds
    try:
        import rocketmq.client  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        print(json.dumps({"skipped": f"C++ client not loadable: {exc}"}))
        return 0
    with broker_process(prefix="mqtool-bench-broker-") as broker:
        threading.Thread(target=lambda: [None for _ in broker.proc.stderr], daemon=True).start()
        ns = broker.namesrv
        broker.create_topic("BenchTopic")
        rtt = loopback_rtt_rate(seconds)
        one = run_producers(ns, "BenchTopic", 1, 1, seconds, broker.pid)
        four = run_producers(ns, "BenchTopic", 4, 1, seconds, broker.pid)
        four_procs = run_producers(ns, "BenchTopic", 1, 4, seconds, broker.pid)
        total = one.get("messages", 0) + four.get("messages", 0) + four_procs.get("messages", 0)
        pull = subprocess.run([sys.executable, "-c", PULLER, ns, "BenchTopic", str(total)], capture_output=True,
                              text=True, timeout=300)
        pulled = json.loads(pull.stdout.strip().splitlines()[-1])
        py_count = 500 if args.quick else 5000
        result = {
            "machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
            "mode": {"flushDiskType": "ASYNC_FLUSH", "message_bytes": 128, "seconds_per_run": seconds,
                     "client": "C++ client rocketmq==0.4.4 (sync sends)"},
            "baseline": {"loopback_round_trips_per_s": round(rtt)},
            "cpp_1_thread": one, "cpp_4_threads": four, "cpp_4_processes": four_procs,
            "cpp_pull": {"messages": pulled["messages"],
                         "msg_per_s": round(pulled["messages"] / pulled["seconds"]) if pulled["seconds"] else 0},
            "python_client_1_thread": python_client(ns, "BenchTopic", 1, py_count),
            "python_client_4_tasks": python_client(ns, "BenchTopic", 4, py_count),
            # pipelined: 128 sends in flight on the producer's one connection to the broker
            "python_client_128_in_flight": python_client(ns, "BenchTopic", 128, py_count * 6),
            "python_consumer_drain": python_drain(ns, "BenchTopic", total),
        }
        for k in ("cpp_1_thread", "cpp_4_threads", "cpp_4_processes"):
            result[k]["vs_loopback_rtt"] = round(result[k]["tps"] / rtt, 3) if rtt else None
        print(json.dumps(result) if args.json else json.dumps(result, indent=2))
        return 0


if __name__ == "__main__":
    sys.exit(main())
