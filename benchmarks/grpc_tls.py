"""Benchmark: what TLS on the gRPC port costs, and what `tlsServerMode=permissive` (plaintext and TLS on one
port, the first bytes of a connection deciding) costs over a port of one kind. The official RocketMQ 5
Python client (rocketmq-python-client 5.1.2, its own venv) sends synchronously to `mqtool broker
--enable-proxy` with the gRPC port in four set-ups: no certificate (plaintext: the default;
tlsServerMode=disabled beside a certificate is the same path and not run); permissive over plaintext and
over TLS; enforcing (TLS only). msg/s and the broker's CPU time per message (/proc), the set-ups
alternated over `--rounds` so that the machine's load falls on all of them alike.

    python benchmarks/grpc_tls.py [--messages 2000] [--size 128] [--rounds 2] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokerproc import REPO, broker_process, cpu_seconds, free_port  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.proxy import rmq5venv  # noqa: E402

SCRIPT = REPO / "tests" / "proxy" / "rmq5_client.py"
SETUPS = {"plaintext, no certificate": ("", False), "permissive, plaintext": ("permissive", False),
          "permissive, TLS": ("permissive", True), "enforcing, TLS": ("enforcing", True)}


def sends(python: str, endpoint: str, messages: int, size: int, tls: bool, cert: Path, broker_pid: int) -> dict:
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(cert)}
    p = subprocess.Popen([python, str(SCRIPT), "bench", endpoint,
                          json.dumps({"topic": "BenchTopic", "count": messages + 1, "size": size, "tls": tls})],
                         cwd=SCRIPT.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline()
    if '"start"' not in line:
        raise SystemExit(f"the gRPC client did not start: {line or p.stderr.read()[-1000:]}")
    cpu0 = cpu_seconds(broker_pid)
    done = json.loads(p.stdout.readline())
    cpu = cpu_seconds(broker_pid) - cpu0
    p.communicate(timeout=60)
    return {"msg_per_s": round(done["sent"] / done["seconds"]), "broker_cpu_ms_per_msg": round(1000 * cpu /
                                                                                                  done["sent"], 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--size", type=int, default=128, help="body bytes")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.messages, args.rounds = 100, 1
    python, why = rmq5venv.ensure()
    if python is None or shutil.which("openssl") is None:
        print(json.dumps({"skipped": why or "openssl is needed for the certificate"}))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="grpc-tls-bench-"))
    key, cert = tmp / "k.pem", tmp / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    runs: dict[str, list[dict]] = {name: [] for name in SETUPS}
    try:
        for _ in range(args.rounds):
            for name, (mode, tls) in SETUPS.items():
                port = free_port()
                conf = tmp / "broker.conf"
                conf.write_text(f"enableProxy=true\ngrpcServerPort={port}\n" + (
                    f"grpcTlsCertPath={cert}\ngrpcTlsKeyPath={key}\ntlsServerMode={mode}\n" if mode else ""))
                with broker_process("-c", str(conf), prefix="mqtool-bench-tls-") as broker:
                    threading.Thread(target=lambda: [None for _ in broker.proc.stderr], daemon=True).start()
                    broker.create_topic("BenchTopic")
                    runs[name].append(sends(python, f"127.0.0.1:{port}", args.messages, args.size, tls, cert,
                                            broker.pid))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {"machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                          "load_average": os.getloadavg()},
              "mode": {"message_bytes": args.size, "messages": args.messages, "rounds": args.rounds,
                       "sends": "synchronous, one client process", "client": "rocketmq-python-client 5.1.2"},
              "runs": runs}

    def cpu(name: str) -> float:
        return min(r["broker_cpu_ms_per_msg"] for r in runs[name])
    result["baseline"] = {   # best of the rounds, against the plaintext port without a certificate
        "permissive_plaintext_over_plaintext_cpu": round(cpu("permissive, plaintext") /
                                                         cpu("plaintext, no certificate"), 2),
        "permissive_tls_over_plaintext_cpu": round(cpu("permissive, TLS") / cpu("plaintext, no certificate"), 2),
        "enforcing_tls_over_plaintext_cpu": round(cpu("enforcing, TLS") / cpu("plaintext, no certificate"), 2)}
    if args.json:
        print(json.dumps(result))
    else:
        for name, got in runs.items():
            print(f"{name:28} msg/s {[r['msg_per_s'] for r in got]}  broker CPU ms/msg "
                  f"{[r['broker_cpu_ms_per_msg'] for r in got]}")
        print(result["machine"], result["mode"], result["baseline"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
