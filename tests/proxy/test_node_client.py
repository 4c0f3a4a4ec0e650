"""The official RocketMQ 5 Node.js client (tests/proxy/nodeclient.py) against `mqtool broker --enable-proxy`:
the one client here whose HTTP/2 is not grpcio's (Node's, Huffman-coded headers), so mqtool's HTTP/2 and
HPACK meet a second implementation."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.proxy import nodeclient
from tests.proxy.conftest import consume_all, mqtool

SCRIPT = Path(__file__).parent / "rmq5_node.js"


@pytest.fixture(scope="module")
def node_client():
    where, why = nodeclient.ensure()
    if where is None:
        pytest.skip(f"the official RocketMQ 5 Node.js client ({nodeclient.PACKAGE}) is not to be had: {why}")
    return where


def test_node_client_sends_and_receives(node_client, proxy_cluster, tmp_path):
    mqtool("topic", "create", "-n", proxy_cluster["namesrv"], "-t", "NODE_T", "-r", "4", "-w", "4")
    env = {**os.environ, "NODE_PATH": str(node_client / "node_modules"), "HOME": str(tmp_path)}  # its logs in HOME
    proc = subprocess.run(["node", str(SCRIPT), proxy_cluster["grpc"], "NODE_T", "NODE_G"], cwd=node_client,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    sent, received = lines[0]["sent"], lines[1]["received"]
    assert len(sent) == 4 and sorted(r["id"] for r in received) == sorted(sent)
    assert {r["tag"] for r in received} == {"NodeTag"} and max(r["size"] for r in received) == 4 + (1 << 20)
    stored = {m["msg_id"]: m for m in consume_all(proxy_cluster["namesrv"], "NODE_T")}
    assert sorted(stored[i]["keys"] for i in sent) == [["nk0"], ["nk1"], ["nk2"], ["nk3"]]
    assert stored[sent[0]]["body"] == "from-node-0" and stored[sent[0]]["tags"] == "NodeTag"
