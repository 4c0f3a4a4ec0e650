"""`mqtool broker start --enable-proxy`, a taken gRPC port, topic attributes from the CLI (both forms),
and a broker without the endpoint loading none of it."""
from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from mqtool.proxy.descriptors import pb
from tests.conftest import run_cli
from tests.proxy.conftest import REPO, Raw
from tests.servers import Process, free_port, free_port_pair

pytestmark = pytest.mark.slow


def route_types(endpoint: str, topic: str) -> set[tuple]:
    raw = Raw(endpoint)
    try:
        resp = raw.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name=topic)), pb.QueryRouteResponse)
    finally:
        raw.close()
    assert resp.status.code == 20000, resp.status
    return {tuple(q.accept_message_types) for q in resp.message_queues}


def test_enable_proxy_flag_and_topic_attributes(tmp_path):
    grpc_port, port, ns_port = free_port(), free_port_pair(), free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"grpcServerPort={grpc_port}\n")
    broker = Process(["broker", "start", "--enable-proxy", "-c", str(conf), "--listen", f"127.0.0.1:{port}",
                      "--embedded-namesrv", f"127.0.0.1:{ns_port}", "--store-dir", str(tmp_path / "store")],
                     "boot success")
    try:
        assert any("gRPC endpoint" in line and f":{grpc_port} (plaintext)" in line for line in broker.startup)
        ns, endpoint = f"127.0.0.1:{ns_port}", f"127.0.0.1:{grpc_port}"
        made = run_cli("topic", "create", "-n", ns, "-t", "T_FIFO", "-r", "2", "-w", "2", "--message-type", "fifo",
                       "--json", check=True)
        assert json.loads(made.stdout.splitlines()[0])["attributes"] == "+message.type=FIFO"
        run_cli("updateTopic", "-n", ns, "-t", "T_DELAY", "-a", "+message.type=DELAY", check=True)   # mqadmin's form
        run_cli("topic", "create", "-n", ns, "-t", "T_PLAIN", check=True)
        assert route_types(endpoint, "T_FIFO") == {(2,)}
        assert route_types(endpoint, "T_DELAY") == {(3,)}
        assert route_types(endpoint, "T_PLAIN") == {(1,)}
        run_cli("topic", "update", "-n", ns, "-t", "T_FIFO", "-w", "4", check=True)     # attributes kept
        assert route_types(endpoint, "T_FIFO") == {(2,)}
        bad = run_cli("topic", "create", "-n", ns, "-t", "T_BAD", "-a", "+message.type=LOUD")
        assert bad.returncode == 1 and "value is not in set: LOUD" in bad.stderr and "Traceback" not in bad.stderr
        mixed = run_cli("topic", "create", "-n", ns, "-t", "T_MIX", "--message-type", "MIXED")
        assert mixed.returncode == 1 and "MIXED message type is not supported." in mixed.stderr
    finally:
        assert broker.stop() == 0
    topics = json.loads((tmp_path / "store" / "config" / "topics.json").read_text())["topicConfigTable"]
    assert topics["T_FIFO"]["attributes"] == {"message.type": "FIFO"} and topics["T_FIFO"]["writeQueueNums"] == 4
    assert "attributes" not in topics["T_PLAIN"]


def test_a_taken_grpc_port_stops_the_start_with_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        grpc_port = taken.getsockname()[1]
        conf = tmp_path / "broker.conf"
        conf.write_text(f"enableProxy=true\ngrpcServerPort={grpc_port}\n")
        proc = run_cli("broker", "start", "-c", str(conf), "--listen", f"127.0.0.1:{free_port_pair()}",
                       "--embedded-namesrv", f"127.0.0.1:{free_port()}", "--store-dir", str(tmp_path / "store"))
    assert proc.returncode == 1
    assert f"cannot listen on grpcServerPort {grpc_port}" in proc.stderr and "Traceback" not in proc.stderr


def test_a_broker_without_the_endpoint_loads_none_of_it():
    code = ("import sys, mqtool.broker.controller, mqtool.cli.broker; "
            "print(sorted(m for m in sys.modules if m.startswith(('grpc', 'mqtool.proxy', 'google.protobuf'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
