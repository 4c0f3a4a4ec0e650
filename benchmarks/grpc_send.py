"""Benchmark: a send and a receive+ack over gRPC (the official RocketMQ 5 Python client,
rocketmq-python-client 5.1.2, to `mqtool broker --enable-proxy`) beside a send and a push-consumer
receive over remoting (the official C++ client, rocketmq==0.4.4), on the same broker in the same run:
msg/s and the broker's CPU time per message (/proc). Target (issue 46): a gRPC send costs the broker at most 2x a remoting send. The remoting
send is also measured on a broker without the gRPC endpoint and on one with it on but idle, so that
what the endpoint costs the remoting fast path shows (it should be nothing). Synchronous
sends of 128 bytes from one client thread; the gRPC client runs in its own venv (tests/proxy/rmq5venv.py,
made on first use), the C++ client in this one.

    python benchmarks/grpc_send.py [--messages 3000] [--seconds 5] [--processes 2] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokerproc import REPO, broker_process, cpu_seconds, free_port  # noqa: E402
from broker_produce import run_producers  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.proxy import rmq5venv  # noqa: E402

SCRIPT = REPO / "tests" / "proxy" / "rmq5_client.py"


def grpc_sends(python: str, endpoint: str, topic: str, messages: int, processes: int, broker_pid: int) -> dict:
    """`processes` clients of `messages` sync sends each; the broker's CPU from when every client has
    warmed up (its first send done) to when the last one is through."""
    procs = [subprocess.Popen([python, str(SCRIPT), "bench", endpoint,
                               json.dumps({"topic": topic, "count": messages + 1, "size": 128})],
                              cwd=SCRIPT.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(processes)]
    for p in procs:                                   # every client past its warm-up send
        line = p.stdout.readline()
        if '"start"' not in line:
            raise SystemExit(f"the gRPC client did not start: {line or p.stderr.read()[-1000:]}")
    cpu0 = cpu_seconds(broker_pid)
    done = [json.loads(p.stdout.readline()) for p in procs]
    cpu = cpu_seconds(broker_pid) - cpu0
    for p in procs:
        p.communicate(timeout=60)
    sent = sum(d["sent"] for d in done)
    seconds = max(d["seconds"] for d in done)
    return {"messages": sent, "processes": processes, "msg_per_s": round(sent / seconds) if seconds else 0,
            "broker_cpu_ms_per_msg": round(1000 * cpu / max(sent, 1), 4)}


def grpc_receives(python: str, endpoint: str, topic: str, count: int, broker_pid: int) -> dict:
    """A SimpleConsumer of a new group receiving and acking `count` messages of `topic` (POP underneath)."""
    p = subprocess.Popen([python, str(SCRIPT), "bench_receive", endpoint,
                          json.dumps({"topic": topic, "count": count, "consumer_group": f"BenchRecv{os.getpid()}"})],
                         cwd=SCRIPT.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if '"start"' not in line:
        raise SystemExit(f"the gRPC consumer did not start: {line or p.stderr.read()[-1000:]}")
    cpu0 = cpu_seconds(broker_pid)
    done = json.loads(p.stdout.readline())
    cpu = cpu_seconds(broker_pid) - cpu0
    p.communicate(timeout=60)
    got, seconds = done["received"], done["seconds"]
    return {"messages": got, "msg_per_s": round(got / seconds) if seconds else 0,
            "broker_cpu_ms_per_msg": round(1000 * cpu / max(got, 1), 4)}


def cpp_receives(namesrv: str, topic: str, count: int, broker_pid: int) -> dict:
    """The C++ client's push consumer (a new group, from the first offset) consuming `count` messages."""
    p = subprocess.Popen([sys.executable, "-m", "tests.interop.cpp_client", "push", namesrv,
                          json.dumps({"topic": topic, "group": f"BenchPush{os.getpid()}", "count": count,
                                      "timeout": 120, "linger": 0.2})],
                         cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if '"started"' not in line:
        raise SystemExit(f"the C++ consumer did not start: {line or p.stderr.read()[-1000:]}")
    import time
    cpu0, start, got = cpu_seconds(broker_pid), time.perf_counter(), 0
    for line in p.stdout:
        if '"body"' in line:
            got += 1
            if got >= count:
                break
    seconds, cpu = time.perf_counter() - start, cpu_seconds(broker_pid) - cpu0
    p.communicate(timeout=60)
    return {"messages": got, "msg_per_s": round(got / seconds) if seconds else 0,
            "broker_cpu_ms_per_msg": round(1000 * cpu / max(got, 1), 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=3000, help="gRPC sends per client process")
    ap.add_argument("--seconds", type=float, default=5.0, help="C++ client run")
    ap.add_argument("--processes", type=int, default=2, help="gRPC client processes (and C++ ones) at once")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    messages, seconds, processes = (200, 1.0, 1) if args.quick else (args.messages, args.seconds, args.processes)
    try:
        import rocketmq.client  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        print(json.dumps({"skipped": f"C++ client not loadable: {exc}"}))
        return 0
    python, why = rmq5venv.ensure()
    if python is None:
        print(json.dumps({"skipped": f"the RocketMQ 5 Python client is not to be had: {why}"}))
        return 0
    grpc_port = free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".conf", prefix="grpc-bench-", delete=False) as conf:
        conf.write(f"enableProxy=true\ngrpcServerPort={grpc_port}\n")
    try:
        with broker_process("-c", conf.name, prefix="mqtool-bench-grpc-") as broker:
            threading.Thread(target=lambda: [None for _ in broker.proc.stderr], daemon=True).start()
            broker.create_topic("BenchTopic")
            endpoint = f"127.0.0.1:{grpc_port}"
            grpc_one = grpc_sends(python, endpoint, "BenchTopic", messages, 1, broker.pid)
            cpp_one = run_producers(broker.namesrv, "BenchTopic", 1, 1, seconds, broker.pid)
            result = {"machine": {"cpu": platform.machine(), "cores": os.cpu_count(),
                                  "python": platform.python_version()},
                      "mode": {"message_bytes": 128, "sends": "synchronous, one thread a client process",
                               "grpc_client": "rocketmq-python-client 5.1.2", "remoting_client": "rocketmq==0.4.4"},
                      "grpc_1_process": grpc_one, "cpp_1_process": cpp_one}
            remoting = cpp_one.get("broker_cpu_ms_per_msg") or 0
            received = min(messages, grpc_one["messages"])
            result["grpc_receive_ack"] = grpc_receives(python, endpoint, "BenchTopic", received, broker.pid)
            result["cpp_push_receive"] = cpp_receives(broker.namesrv, "BenchTopic", received, broker.pid)
            if processes > 1:
                result["grpc_n_processes"] = grpc_sends(python, endpoint, "BenchTopic", messages, processes, broker.pid)
                result["cpp_n_processes"] = run_producers(broker.namesrv, "BenchTopic", 1, processes, seconds,
                                                          broker.pid)
        with broker_process(prefix="mqtool-bench-grpc-off-") as plain:      # the remoting path, gRPC off
            threading.Thread(target=lambda: [None for _ in plain.proc.stderr], daemon=True).start()
            plain.create_topic("BenchTopic")
            result["cpp_1_process_proxy_off"] = run_producers(plain.namesrv, "BenchTopic", 1, 1, seconds, plain.pid)
        with broker_process("-c", conf.name, prefix="mqtool-bench-grpc-on-") as idle:     # gRPC on, idle
            threading.Thread(target=lambda: [None for _ in idle.proc.stderr], daemon=True).start()
            idle.create_topic("BenchTopic")
            result["cpp_1_process_proxy_idle"] = run_producers(idle.namesrv, "BenchTopic", 1, 1, seconds, idle.pid)
        result["baseline"] = {"remoting_broker_cpu_ms_per_msg": remoting,
                              "grpc_over_remoting_cpu": round(grpc_one["broker_cpu_ms_per_msg"] / remoting, 2)
                              if remoting else None, "target": "<= 2.0"}
        push_cpu = result["cpp_push_receive"]["broker_cpu_ms_per_msg"]
        result["baseline"]["grpc_receive_over_remoting_push_cpu"] = \
            round(result["grpc_receive_ack"]["broker_cpu_ms_per_msg"] / push_cpu, 2) if push_cpu else None
    finally:
        os.unlink(conf.name)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
