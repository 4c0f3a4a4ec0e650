"""TLS on the gRPC port (grpcTlsCertPath + grpcTlsKeyPath). By default (tlsServerMode permissive, as
5.3.3's `tls.server.mode`) one port serves both: the official client with tls_enable=True (trusting the
broker's self-signed certificate) and plaintext clients send there, and a message keeps its client's
address as born host. With tlsServerMode=enforcing a plaintext client is not served."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import grpc
import pytest

from mqtool.proxy.descriptors import pb
from tests.proxy.conftest import REPO, Raw, consume_all, mqtool, run_client
from tests.proxy.test_grpc_raw import message, send
from tests.servers import free_port, start_broker, start_namesrv

pytestmark = pytest.mark.slow


def tls_broker(tmp_path_factory, pem, mode_line: str):
    """A name server and a broker with the certificate, its TMPDIR its own (to see it leaves nothing there)."""
    key, cert = pem
    tmp = tmp_path_factory.mktemp("tls")
    ns, ns_addr = start_namesrv(tmp)
    port = free_port()
    broker_tmp = tmp / "t"
    broker_tmp.mkdir()
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(broker_tmp)
    try:
        broker, _ = start_broker(tmp, ns_addr, extra=f"enableProxy=true\ngrpcServerPort={port}\n"
                                                     f"grpcTlsCertPath={cert}\ngrpcTlsKeyPath={key}\n{mode_line}")
    finally:
        if before is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = before
    mqtool("topic", "create", "-n", ns_addr, "-t", "TLS_TOPIC", "-r", "2", "-w", "2")
    return {"namesrv": ns_addr, "grpc": f"127.0.0.1:{port}", "cert": cert, "broker": broker, "ns": ns,
            "tmpdir": broker_tmp}


def stop(cluster):
    assert cluster["broker"].stop() == 0
    assert cluster["ns"].stop() == 0


@pytest.fixture(scope="module")
def permissive(tmp_path_factory, pem):
    cluster = tls_broker(tmp_path_factory, pem, "")               # no tlsServerMode: 5.3.3's default
    yield cluster
    stop(cluster)
    assert os.listdir(cluster["tmpdir"]) == []                    # nothing of the endpoint left in TMPDIR


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory, pem):
    cluster = tls_broker(tmp_path_factory, pem, "tlsServerMode=enforcing\n")
    yield cluster
    stop(cluster)


def tls_raw(cluster):
    return Raw(cluster["grpc"], grpc.ssl_channel_credentials(root_certificates=cluster["cert"].read_bytes()))


def born_host(cluster, offset_msg_id: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "mqtool", "message", "query", "-n", cluster["namesrv"], "-i",
                           offset_msg_id, "--json"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[0])["born_host"]


def test_permissive_serves_the_official_client_with_and_without_tls_on_one_port(rmq5_python, permissive):
    """§4 item 1."""
    untrusted = run_client(rmq5_python, "send", permissive["grpc"], {"topic": "TLS_TOPIC", "tls": True})
    assert untrusted[0]["ok"] is False           # the certificate is checked: without it as a root, no send
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(permissive["cert"])}
    sealed = run_client(rmq5_python, "send", permissive["grpc"], {"topic": "TLS_TOPIC", "tls": True,
                                                                  "body": "sealed"}, env=env)
    plain = run_client(rmq5_python, "send", permissive["grpc"], {"topic": "TLS_TOPIC", "body": "plain"})
    assert sealed[0]["ok"] is True and plain[0]["ok"] is True
    stored = {m["msg_id"]: m["body"] for m in consume_all(permissive["namesrv"], "TLS_TOPIC")}
    assert (stored[sealed[0]["message_id"]], stored[plain[0]["message_id"]]) == ("sealed", "plain")


def test_permissive_keeps_the_clients_address(permissive):
    """Raw sends (no born_host of their own) over plaintext and TLS: the stored born host is the
    client's 127.0.0.1 and its port; 1 MiB bodies, past HTTP/2's first windows."""
    ids = {}
    for how, raw in (("plain", Raw(permissive["grpc"])), ("tls", tls_raw(permissive))):
        try:
            msg_id = f"01{os.getpid():08X}{len(ids):024X}"
            resp = send(raw, message("TLS_TOPIC", how.encode() * (1 << 18), message_id=msg_id))
            assert resp.status.code == 20000, resp.status
            ids[how] = msg_id
        finally:
            raw.close()
    stored = {m["msg_id"]: m for m in consume_all(permissive["namesrv"], "TLS_TOPIC")}
    for how, msg_id in ids.items():
        assert stored[msg_id]["properties"]["__BORNHOST"] == "127.0.0.1", how
        host, _, port = born_host(permissive, stored[msg_id]["offset_msg_id"]).rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0, how


def test_enforcing_serves_tls_only(enforcing):
    raw = tls_raw(enforcing)
    try:
        route = raw.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="TLS_TOPIC")),
                          pb.QueryRouteResponse)
        assert route.status.code == 20000 and route.message_queues
    finally:
        raw.close()
    raw = Raw(enforcing["grpc"])
    try:
        with pytest.raises(grpc.RpcError) as err:
            raw.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="TLS_TOPIC")), pb.QueryRouteResponse)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        raw.close()
    assert os.listdir(enforcing["tmpdir"]) == []                  # TLS needs no files of its own


def test_a_mode_the_broker_cannot_have_is_refused_in_one_line(tmp_path):
    conf = tmp_path / "b.conf"
    conf.write_text("brokerName=b\nenableProxy=true\ntlsServerMode=strict\n")
    proc = subprocess.run([sys.executable, "-m", "mqtool", "broker", "start", "-c", str(conf), "-n", "127.0.0.1:1",
                           "--listen", "127.0.0.1:0", "--store-dir", str(tmp_path / "s")], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.strip() == ("mqtool: error: tlsServerMode must be permissive, enforcing or disabled, "
                                   "not 'strict'")
