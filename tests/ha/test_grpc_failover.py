"""gRPC clients across a controller-mode failover (issue 46): both replicas serve the gRPC endpoint;
QueryRoute on either names the current master as broker id 0 with its own gRPC port; after a kill -9
of the master the promoted replica is named, takes gRPC sends, and a gRPC consumer group goes on
there with the new messages only (what it acked before the failover does not come back)."""
from __future__ import annotations

import time

import pytest

from mqtool.proxy.descriptors import pb
from tests.conftest import run_cli
from tests.ha.controller_group import ControllerGroup
from tests.ha.test_failover import send_some
from tests.proxy.conftest import Raw
from tests.proxy.test_grpc_consumers import ack, consumer_settings, messages_of, receive
from tests.proxy.test_grpc_raw import message, send
from tests.servers import free_port, wait_until

pytestmark = pytest.mark.slow
TOPIC = "GrpcFO"


@pytest.fixture
def group(tmp_path):
    g = ControllerGroup(tmp_path)
    yield g
    g.close()


def route_master(raw: Raw) -> tuple[int, int]:
    """(broker id, gRPC port) of the writable queues' broker in a QueryRoute answer."""
    resp = raw.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)), pb.QueryRouteResponse)
    assert resp.status.code == 20000, resp.status.message
    masters = {(q.broker.id, q.broker.endpoints.addresses[0].port) for q in resp.message_queues if q.broker.id == 0}
    assert len(masters) == 1, resp
    return masters.pop()


def drain(raw: Raw, group: str, want: int) -> list:
    got, deadline = [], time.monotonic() + 30
    while len(got) < want and time.monotonic() < deadline:
        batch = messages_of(receive(raw, group, TOPIC, poll_s=5, batch=32))
        for m in batch:
            assert ack(raw, group, TOPIC, m).status.code == 20000
        got += batch
    return got


def test_grpc_route_send_and_receive_across_a_kill_9_failover(group):
    ports = {"a": free_port(), "b": free_port()}
    group.start("a", f"enableProxy=true\ngrpcServerPort={ports['a']}\n")
    group.wait_master("a")
    group.start("b", f"enableProxy=true\ngrpcServerPort={ports['b']}\n")
    wait_until("b in the SyncStateSet", lambda: group.in_sync({1, 2}))
    run_cli("topic", "create", "-n", group.ns, "-c", "FOCluster", "-t", TOPIC, "-r", "2", "-w", "2", check=True)
    raw = {who: Raw(f"127.0.0.1:{port}") for who, port in ports.items()}
    try:
        wait_until("the topic routed", lambda: raw["b"].unary(
            "QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)), pb.QueryRouteResponse).status.code
            == 20000)
        assert route_master(raw["a"]) == route_master(raw["b"]) == (0, ports["a"])
        cg = "GrpcFOG"
        consumer_settings(raw["a"], cg, TOPIC)
        before = [f"before-{i}".encode() for i in range(5)]
        for body in before:
            assert send(raw["a"], message(TOPIC, body)).status.code == 20000
        assert sorted(m.body for m in drain(raw["a"], cg, len(before))) == before
        send_some(group.ns, "remoting", 3, topic=TOPIC)            # and a few over remoting
        wait_until("the replica in sync", lambda: group.in_sync({1, 2}))
        group.kill("a")
        group.wait_master("b", timeout=15)
        wait_until("QueryRoute names b", lambda: route_master(raw["b"]) == (0, ports["b"]), timeout=15)
        after = [f"after-{i}".encode() for i in range(4)]
        for body in after:
            assert send(raw["b"], message(TOPIC, body)).status.code == 20000
        consumer_settings(raw["b"], cg, TOPIC)
        got = drain(raw["b"], cg, 3 + len(after))
        bodies = sorted(m.body for m in got)
        assert not set(bodies) & set(before), "acked before the failover, delivered again"
        assert [b for b in bodies if b.startswith(b"after")] == after
    finally:
        for r in raw.values():
            r.close()
