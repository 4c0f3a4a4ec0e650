"""A name server and a broker with the gRPC endpoint (enableProxy) on 127.0.0.1, the topics of the
conformance list (shared/spec/rocketmq5.md §4), raw gRPC calls, and the official Python client 5.1.2
in a venv of its own, made once (skipped with the reason when the package index cannot give it)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.proxy import rmq5venv
from tests.servers import free_port, start_broker, start_namesrv

REPO = Path(__file__).parents[2]
SCRIPT = Path(__file__).parent / "rmq5_client.py"
TOPICS = {"TN": (4, None), "TF": (8, "FIFO"), "TD": (8, "DELAY"), "TX": (8, "TRANSACTION")}


@pytest.fixture(scope="session")
def rmq5_python() -> str:
    """The python of a venv with the official 5.x client, made on first use (tests/proxy/rmq5venv.py)."""
    python, why = rmq5venv.ensure()
    if python is None:
        pytest.skip(f"the official RocketMQ 5 Python client ({rmq5venv.CLIENT}) is not to be had: {why}")
    return python


def run_client(python: str, scenario: str, endpoint: str, args: dict, timeout: float = 90,
               env: dict | None = None) -> list[dict]:
    proc = subprocess.run([python, str(SCRIPT), scenario, endpoint, json.dumps(args)], cwd=SCRIPT.parent,
                          capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def mqtool(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "mqtool", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def consume_all(ns: str, topic: str) -> list[dict]:
    return [json.loads(line) for line in mqtool("consume", "-n", ns, "-t", topic, "-e", "--json").splitlines()
            if line.startswith("{")]


@pytest.fixture(scope="session")
def pem(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1: (key path, certificate path)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the test certificate")
    tmp = tmp_path_factory.mktemp("tlscert")
    key, cert = tmp / "rocketmq.key", tmp / "rocketmq.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return key, cert


@pytest.fixture(scope="module")
def proxy_cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("proxy")
    ns, ns_addr = start_namesrv(tmp)
    grpc_port = free_port()
    broker, broker_addr = start_broker(tmp, ns_addr, extra=f"enableProxy=true\ngrpcServerPort={grpc_port}\n")
    for topic, (queues, kind) in TOPICS.items():
        mqtool("topic", "create", "-n", ns_addr, "-t", topic, "-r", str(queues), "-w", str(queues),
               *(["--message-type", kind] if kind else []))
    yield {"namesrv": ns_addr, "broker": broker_addr, "grpc": f"127.0.0.1:{grpc_port}", "tmp": tmp,
           "broker_proc": broker}
    assert broker.stop() == 0
    assert ns.stop() == 0


class Raw:
    """Hand-built calls through a plain grpc channel with mqtool's own message classes."""

    def __init__(self, endpoint: str, credentials=None):
        import grpc
        from mqtool.proxy.descriptors import SERVICE
        self.grpc = grpc
        self.channel = grpc.insecure_channel(endpoint) if credentials is None else \
            grpc.secure_channel(endpoint, credentials)
        self.service = SERVICE
        self.client_id = f"raw@{os.getpid()}@{uuid.uuid4().hex[:8]}"

    def metadata(self, client_id: str | None = None):
        return [("x-mq-client-id", self.client_id if client_id is None else client_id), ("x-mq-language", "PYTHON"),
                ("x-mq-client-version", "5.1.2"), ("x-mq-protocol", "GRPC_V2")]

    def unary(self, method: str, request, response_class, client_id: str | None = None):
        call = self.channel.unary_unary(f"/{self.service}/{method}", request_serializer=lambda m: m.SerializeToString(),
                                        response_deserializer=response_class.FromString)
        return call(request, metadata=self.metadata(client_id), timeout=10)

    def raw_bytes(self, method: str, stream: bool = False):
        maker = self.channel.unary_stream if stream else self.channel.unary_unary
        call = maker(f"/{self.service}/{method}")
        result = call(b"", metadata=self.metadata(), timeout=10)
        return list(result) if stream else result

    def telemetry(self, commands, client_id: str | None = None):
        from mqtool.proxy.descriptors import pb
        call = self.channel.stream_stream(f"/{self.service}/Telemetry",
                                          request_serializer=lambda m: m.SerializeToString(),
                                          response_deserializer=pb.TelemetryCommand.FromString)
        return call(iter(commands), metadata=self.metadata(client_id), timeout=10)

    def close(self):
        self.channel.close()


@pytest.fixture
def raw(proxy_cluster):
    r = Raw(proxy_cluster["grpc"])
    yield r
    r.close()
