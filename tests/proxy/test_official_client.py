"""The official RocketMQ 5 Python client (rocketmq-python-client 5.1.2, in a venv of its own) as a
producer against mqtool's gRPC endpoint; what it sends is read back by remoting consumers (mqtool's
and the official C++ client)."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.proxy.conftest import REPO, SCRIPT, consume_all, mqtool, run_client
from tests.servers import wait_until

pytestmark = pytest.mark.slow


def test_normal_send_reaches_remoting_consumers(rmq5_python, proxy_cluster):
    """§4 item 12 with the real client: its 34-char `01...` ids, tags and keys, read by `mqtool consume`
    and by the C++ client's pull consumer."""
    sent = run_client(rmq5_python, "send", proxy_cluster["grpc"],
                      {"topic": "TN", "count": 3, "tag": "TagA", "keys": ["k1", "k2"], "body": "from-grpc"})
    assert [s["ok"] for s in sent] == [True] * 3
    ids = [s["message_id"] for s in sent]
    assert all(len(i) == 34 and i.startswith("01") for i in ids)
    stored = {m["msg_id"]: m for m in consume_all(proxy_cluster["namesrv"], "TN")}
    for i in ids:
        assert stored[i]["tags"] == "TagA" and sorted(stored[i]["keys"]) == ["k1", "k2"] and stored[i]["body"] == "from-grpc"
    from tests.interop.conftest import HAVE_CPP, run_cpp
    if not HAVE_CPP:
        pytest.skip("the C++ client cannot be loaded here")
    got = run_cpp("pull", proxy_cluster["namesrv"], {"topic": "TN", "count": len(stored), "group": "CID_GRPC_READ"})
    assert set(ids) <= {m["id"] for m in got}
    assert {m["body"] for m in got if m["id"] in ids} == {"from-grpc"}


def test_fifo_messages_of_a_group_share_a_queue(rmq5_python, proxy_cluster):
    """§4 item 14: group-a on TF (8 queues) -> queue 7; the client refuses a FIFO message to a NORMAL topic."""
    sent = run_client(rmq5_python, "send", proxy_cluster["grpc"],
                      {"topic": "TF", "count": 3, "group": "group-a", "body": "fifo"})
    ids = [s["message_id"] for s in sent]
    stored = {m["msg_id"]: m for m in consume_all(proxy_cluster["namesrv"], "TF")}
    assert [stored[i]["queue_id"] for i in ids] == [7, 7, 7]
    assert [stored[i]["queue_offset"] for i in ids] == sorted(stored[i]["queue_offset"] for i in ids)
    refused = run_client(rmq5_python, "send", proxy_cluster["grpc"], {"topic": "TN", "group": "group-a"})
    assert refused[0]["ok"] is False and "accept message types" in refused[0]["text"]


def test_delay_message_arrives_after_its_time(rmq5_python, proxy_cluster):
    """A delivery time 2 s ahead: TIMER_DELIVER_MS set (the spec's property) and, until mqtool has a timer
    store, the 4.x delay level above it, so the message is not readable before it is due."""
    sent_at = time.time()
    sent = run_client(rmq5_python, "send", proxy_cluster["grpc"], {"topic": "TD", "delay_s": 2, "body": "later"})
    msg_id = sent[0]["message_id"]
    assert msg_id not in {m["msg_id"] for m in consume_all(proxy_cluster["namesrv"], "TD")} or \
        time.time() - sent_at >= 1.0
    got = wait_until("the delayed message", lambda: [m for m in consume_all(proxy_cluster["namesrv"], "TD")
                                                     if m["msg_id"] == msg_id], timeout=30, every=0.3)[0]
    assert got["store_timestamp"] / 1000 >= sent_at + 1.0        # re-put by the schedule service when due
    deliver_ms = int(got["properties"]["TIMER_DELIVER_MS"])
    assert abs(deliver_ms / 1000 - (sent_at + 2)) < 2


def test_transaction_commit_and_rollback(rmq5_python, proxy_cluster):
    """§4 item 35: a committed half message is consumable, a rolled back one never."""
    committed = run_client(rmq5_python, "transaction", proxy_cluster["grpc"],
                           {"topic": "TX", "end": "commit", "body": "committed"})
    rolled = run_client(rmq5_python, "transaction", proxy_cluster["grpc"],
                        {"topic": "TX", "end": "rollback", "body": "rolled-back"})
    assert committed[0]["transaction_id"] == committed[0]["message_id"] and committed[1] == {"ended": "commit"}
    ids = {m["msg_id"] for m in wait_until("the committed message", lambda: [
        m for m in consume_all(proxy_cluster["namesrv"], "TX") if m["msg_id"] == committed[0]["message_id"]])}
    assert committed[0]["message_id"] in ids
    assert rolled[0]["message_id"] not in {m["msg_id"] for m in consume_all(proxy_cluster["namesrv"], "TX")}


def test_orphaned_transaction_is_recovered_by_the_checker(rmq5_python, proxy_cluster):
    """§4 item 37: a half message left open; the broker's check reaches the producer's checker over
    Telemetry, whose COMMIT (SOURCE_SERVER_CHECK) makes it consumable."""
    out = run_client(rmq5_python, "transaction", proxy_cluster["grpc"],
                     {"topic": "TX", "end": "none", "check": "commit", "body": "orphan", "wait_s": 40})
    msg_id = out[0]["message_id"]
    assert out[1] == {"checked": True, "ids": [msg_id]}
    wait_until("the recovered message", lambda: msg_id in {m["msg_id"] for m in consume_all(
        proxy_cluster["namesrv"], "TX")}, timeout=20, every=0.3)


def test_producer_connections_list_grpc_clients(rmq5_python, proxy_cluster, tmp_path):
    """`mqtool producer connections -g <topic>`: a gRPC producer is in the producer group named as its
    topic, with language PYTHON and version 5.1.2's MQVersion ordinal (437, V5_1_2)."""
    until = tmp_path / "stop"
    proc = subprocess.Popen([rmq5_python, str(SCRIPT), "hold", proxy_cluster["grpc"],
                             json.dumps({"topic": "TN", "until": str(until)})], cwd=SCRIPT.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline())["ok"] is True
        rows = [json.loads(line) for line in mqtool("producer", "connections", "-n", proxy_cluster["namesrv"],
                                                    "-g", "TN", "--json").splitlines()]
        ours = [r for r in rows if r["client_id"].split("@")[1:2] == [str(proc.pid)]]   # host@pid@index@time
        assert [(r["language"], r["version"], r["version_name"]) for r in ours] == [("PYTHON", 437, "V5_1_2")], rows
        assert ours[0]["client_id"].count("@") == 3 and ours[0]["address"].startswith("127.0.0.1:")
    finally:
        until.write_text("")
        proc.communicate(timeout=30)
    gone = ours[0]["client_id"]
    wait_until("the producer gone after NotifyClientTermination", lambda: gone not in subprocess.run(
        [sys.executable, "-m", "mqtool", "producer", "connections", "-n", proxy_cluster["namesrv"], "-g", "TN",
         "--json"], cwd=REPO, capture_output=True, text=True).stdout, timeout=10, every=0.2)
