"""Benchmark: what a gRPC call costs the server itself, mqtool's HTTP/2 server (mqtool/proxy/h2server.py)
beside grpcio's grpc.aio server (the peer), in the same run. Each serves SendMessage with a canned answer
(no broker); one grpcio client process sends `--calls` synchronous SendMessage calls of 128 B with the
seven metadata headers the official RocketMQ 5 Python client sends. The figure is the server process's
CPU time per call (getrusage, user + system), the engines alternated over `--rounds`.

    python benchmarks/grpc_server.py [--calls 3000] [--rounds 2] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENGINES = ("grpc.aio", "mqtool")

SERVER = r"""
import asyncio, resource, sys
from mqtool.proxy.descriptors import SERVICE, pb
ANSWER = pb.SendMessageResponse(status=pb.Status(code=20000, message="OK"), entries=[pb.SendResultEntry(
    status=pb.Status(code=20000, message="OK"), message_id="01" + "A" * 32, offset=12)])

async def send(request, context):
    context.invocation_metadata(), context.peer()
    return ANSWER

async def main(engine):
    if engine == "grpc.aio":
        import grpc
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
            "SendMessage": grpc.unary_unary_rpc_method_handler(send, pb.SendMessageRequest.FromString,
                                                               pb.SendMessageResponse.SerializeToString)}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
    else:
        from mqtool.proxy.h2server import UNARY, GrpcServer, Method
        server = GrpcServer({f"/{SERVICE}/SendMessage".encode(): Method(
            UNARY, send, pb.SendMessageRequest.FromString, pb.SendMessageResponse.SerializeToString)}, 4 << 20)
        port = await server.listen("127.0.0.1", 0)
    print(port, flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):      # a line: report the CPU time so far
        usage = resource.getrusage(resource.RUSAGE_SELF)
        print(usage.ru_utime + usage.ru_stime, flush=True)

asyncio.run(main(sys.argv[1]))
"""

CLIENT = r"""
import sys, time, grpc
from mqtool.proxy.descriptors import SERVICE, pb
port, calls = sys.argv[1], int(sys.argv[2])
send = grpc.insecure_channel(f"127.0.0.1:{port}").unary_unary(
    f"/{SERVICE}/SendMessage", pb.SendMessageRequest.SerializeToString, pb.SendMessageResponse.FromString)
request = pb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="BenchTopic"), body=b"x" * 128,
    system_properties=pb.SystemProperties(message_id="01" + "B" * 32, body_encoding=1, message_type=1))])
for i in range(calls):
    metadata = (("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"), ("x-mq-client-version", "5.1.2"),
                ("x-mq-date-time", time.strftime("%Y%m%dT%H%M%SZ")), ("x-mq-request-id", f"{i:032x}"),
                ("x-mq-client-id", "bench@1@0@abcdefgh"), ("x-mq-namespace", ""))
    assert send(request, metadata=metadata, timeout=10).status.code == 20000
"""


def one_round(engine: str, calls: int) -> float:
    """The server's CPU milliseconds per call (after 200 warm-up calls)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen([sys.executable, "-c", SERVER, engine], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        port = server.stdout.readline().strip()
        if not port.isdigit():
            raise SystemExit(f"the {engine} server did not start")
        subprocess.run([sys.executable, "-c", CLIENT, port, "200"], check=True, env=env)

        def cpu() -> float:
            server.stdin.write("\n")
            server.stdin.flush()
            return float(server.stdout.readline())
        before = cpu()
        subprocess.run([sys.executable, "-c", CLIENT, port, str(calls)], check=True, env=env)
        return 1000 * (cpu() - before) / calls
    finally:
        server.stdin.close()
        server.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.calls, args.rounds = 100, 1
    try:
        import grpc  # noqa: F401
    except ImportError:
        print(json.dumps({"skipped": "grpcio (the peer and the client) is not installed"}))
        return 0
    runs: dict[str, list[float]] = {engine: [] for engine in ENGINES}
    for _ in range(args.rounds):
        for engine in ENGINES:
            runs[engine].append(round(one_round(engine, args.calls), 4))
    best = {engine: min(got) for engine, got in runs.items()}
    result = {"machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                          "load_average": os.getloadavg()},
              "mode": {"calls": args.calls, "rounds": args.rounds, "request_bytes": 128,
                       "client": "one grpcio process, synchronous unary calls, 7 metadata headers"},
              "server_cpu_ms_per_call": runs,
              "baseline": {"peer": "grpc.aio", "mqtool_over_grpc_aio_cpu": round(best["mqtool"] / best["grpc.aio"], 2)}}
    if args.json:
        print(json.dumps(result))
    else:
        for engine, got in runs.items():
            print(f"{engine:9} server CPU ms a call {got}")
        print(result["machine"], result["baseline"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
