"""aclEnable=true: gRPC requests are checked by the plain ACL (the 5.x client's HMAC-SHA1 signature of
x-mq-date-time, then PUB on the topic), with the official client's credentials."""
from __future__ import annotations

import json

import pytest

from tests.proxy.conftest import mqtool, run_client
from tests.servers import free_port, start_broker, start_namesrv

pytestmark = pytest.mark.slow

PLAIN = """\
accounts:
  - {accessKey: grpcadmin, secretKey: "12345678", admin: true}
  - accessKey: grpcuser
    secretKey: "87654321"
    defaultTopicPerm: DENY
    topicPerms: [AclGrpc=PUB|SUB]
"""


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grpcacl")
    (tmp / "home" / "conf").mkdir(parents=True)
    (tmp / "home" / "conf" / "plain_acl.yml").write_text(PLAIN)
    ns, ns_addr = start_namesrv(tmp)
    port = free_port()
    broker, _ = start_broker(tmp, ns_addr, extra=f"enableProxy=true\ngrpcServerPort={port}\naclEnable=true\n"
                                                 f"rocketmqHome={tmp / 'home'}\n")
    for topic in ("AclGrpc", "AclGrpcDenied"):
        mqtool("topic", "create", "-n", ns_addr, "-t", topic, "-r", "2", "-w", "2", "--access-key", "grpcadmin",
               "--secret-key", "12345678")
    yield {"namesrv": ns_addr, "grpc": f"127.0.0.1:{port}"}
    assert broker.stop() == 0
    assert ns.stop() == 0


def test_signed_sends_pass_and_others_are_refused(rmq5_python, acl_cluster):
    ep = acl_cluster["grpc"]
    ok = run_client(rmq5_python, "send", ep, {"topic": "AclGrpc", "ak": "grpcuser", "sk": "87654321", "body": "signed"})
    assert ok[0]["ok"] is True
    denied = run_client(rmq5_python, "send", ep, {"topic": "AclGrpcDenied", "ak": "grpcuser", "sk": "87654321"})
    assert denied[0]["ok"] is False and "40300" in denied[0]["text"]          # Forbidden: no PUB on the topic
    wrong = run_client(rmq5_python, "send", ep, {"topic": "AclGrpc", "ak": "grpcuser", "sk": "wrong-secret"})
    assert wrong[0]["ok"] is False
    anonymous = run_client(rmq5_python, "send", ep, {"topic": "AclGrpc"})
    assert anonymous[0]["ok"] is False
    stored = [m["body"] for m in consume_all_as_admin(acl_cluster["namesrv"], "AclGrpc")]
    assert stored == ["signed"]


def consume_all_as_admin(ns: str, topic: str) -> list[dict]:
    return [json.loads(line) for line in mqtool("consume", "-n", ns, "-t", topic, "-e", "--json", "--access-key",
                                                "grpcadmin", "--secret-key", "12345678").splitlines()
            if line.startswith("{")]
