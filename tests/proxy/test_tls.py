"""TLS on the gRPC port (grpcTlsCertPath + grpcTlsKeyPath): the official client with tls_enable=True
sends, trusting the broker's self-signed certificate; a plaintext client is not served there."""
from __future__ import annotations

import os
import shutil
import subprocess

import grpc
import pytest

from mqtool.proxy.descriptors import pb
from tests.proxy.conftest import Raw, consume_all, mqtool, run_client
from tests.servers import free_port, start_broker, start_namesrv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the test certificate")
    tmp = tmp_path_factory.mktemp("tls")
    key, cert = tmp / "rocketmq.key", tmp / "rocketmq.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    ns, ns_addr = start_namesrv(tmp)
    port = free_port()
    broker, _ = start_broker(tmp, ns_addr, extra=f"enableProxy=true\ngrpcServerPort={port}\n"
                                                 f"grpcTlsCertPath={cert}\ngrpcTlsKeyPath={key}\n")
    mqtool("topic", "create", "-n", ns_addr, "-t", "TLS_TOPIC", "-r", "2", "-w", "2")
    yield {"namesrv": ns_addr, "grpc": f"127.0.0.1:{port}", "cert": cert}
    assert broker.stop() == 0
    assert ns.stop() == 0


def test_tls_client_sends(rmq5_python, tls_cluster):
    untrusted = run_client(rmq5_python, "send", tls_cluster["grpc"], {"topic": "TLS_TOPIC", "tls": True})
    assert untrusted[0]["ok"] is False           # the certificate is checked: without it as a root, no send
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tls_cluster["cert"])}
    sent = run_client(rmq5_python, "send", tls_cluster["grpc"], {"topic": "TLS_TOPIC", "tls": True, "body": "sealed"},
                      env=env)
    assert sent[0]["ok"] is True
    assert sent[0]["message_id"] in {m["msg_id"] for m in consume_all(tls_cluster["namesrv"], "TLS_TOPIC")}


def test_plaintext_is_not_served_on_a_tls_port(tls_cluster):
    raw = Raw(tls_cluster["grpc"])
    try:
        with pytest.raises(grpc.RpcError) as err:
            raw.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="TLS_TOPIC")), pb.QueryRouteResponse)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        raw.close()
