"""updateBrokerConfig keeps its changes in the broker.conf the broker started with (4.9.8's
Configuration.persist writes its -c file), so they hold after a restart."""
from __future__ import annotations

import pytest

from tests.conftest import json_lines, run_cli
from tests.servers import free_port_pair, on_free_ports, start_broker, start_namesrv

pytestmark = pytest.mark.slow


def test_broker_config_set_is_kept_in_broker_conf_across_a_restart(tmp_path):
    ns, ns_addr = start_namesrv(tmp_path)
    broker, addr = start_broker(tmp_path, ns_addr, extra="# retention\ndeleteWhen = 04\n")
    conf = tmp_path / "broker-a.conf"
    before = conf.read_text()
    try:
        out = run_cli("broker", "config", "set", "-n", ns_addr, "-b", addr, "deleteWhen=02",
                      "defaultTopicQueueNums=6", check=True).stdout
        assert out.strip() == f"updated deleteWhen, defaultTopicQueueNums on {addr}"
        lines = conf.read_text().splitlines()
        assert "# retention" in lines and "deleteWhen=02" in lines and "deleteWhen = 04" not in lines
        assert lines[-1] == "defaultTopicQueueNums=6" and lines[:2] == before.splitlines()[:2]
        assert (tmp_path / "broker-a.conf.bak").read_text() == before
        typo = run_cli("broker", "config", "set", "-n", ns_addr, "-b", addr, "deleteWhen=03", "brokerPermision=6",
                       "--json", check=True)
        assert json_lines(typo.stdout) == [{"broker": addr, "updated": {"deleteWhen": "03"},
                                            "ignored": ["brokerPermision"], "remark": json_lines(typo.stdout)[0]["remark"]}]
        assert "did you mean 'brokerPermission'" in json_lines(typo.stdout)[0]["remark"]
        only = run_cli("broker", "config", "set", "-n", ns_addr, "-b", addr, "brokerPermision=6")
        assert only.returncode == 1 and only.stdout == "" and only.stderr.count("\n") == 1
        assert only.stderr.startswith(f"mqtool: error: nothing updated on {addr}: unknown config key 'brokerPermision'")
        assert "brokerPermision" not in conf.read_text()
        refused = run_cli("broker", "config", "set", "-n", ns_addr, "-b", addr, "listenPort=1")
        assert refused.returncode == 1 and "listenPort" in refused.stderr
        assert "listenPort" not in conf.read_text()              # nothing kept from a refused change
    finally:
        assert broker.stop() == 0
    broker, addr = _restart(tmp_path, ns_addr, conf)
    try:
        cfg = json_lines(run_cli("broker", "config", "get", "-n", ns_addr, "-b", addr, "--json", check=True).stdout)[0]
        assert (cfg["deleteWhen"], cfg["defaultTopicQueueNums"]) == ("03", "6")
    finally:
        assert broker.stop() == 0
        assert ns.stop() == 0


def _restart(tmp_path, ns_addr: str, conf):
    """The same broker (its conf file as the update left it, its store) started again."""
    proc, port = on_free_ports(free_port_pair, lambda port: ["broker", "start", "-n", ns_addr, "-c", str(conf),
                                                             "--listen", f"127.0.0.1:{port}",
                                                             "--store-dir", str(tmp_path / "store-broker-a")])
    return proc, f"127.0.0.1:{port}"
