"""mqadmin's operator commands in mqtool's CLI against real name server and broker processes (issue 10)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, json_lines, run_cli
from tests.servers import cluster  # noqa: F401

pytestmark = pytest.mark.slow
T = "OpsTopic"


def test_operator_commands(cluster):  # noqa: F811
    ns, broker = cluster["namesrv"], cluster["broker"]
    run_cli("topic", "create", "-n", ns, "-t", T, "-r", "2", "-w", "2", check=True)
    run_cli("send", "-n", ns, "-t", T, "--queue", "0", "--json", input="".join(f"o{i}\n" for i in range(6)), check=True)
    run_cli("consume", "-n", ns, "-t", T, "-g", "GID_OPS", "-e", "--json", check=True)

    stats = json_lines(run_cli("broker", "consume-stats", "-n", ns, "-b", broker, "--json", check=True).stdout)
    mine = [r for r in stats if r["group"] == "GID_OPS" and r["topic"] == T]
    assert [(r["queue_id"], r["broker_offset"], r["consumer_offset"], r["diff"]) for r in mine] == [(0, 6, 6, 0),
                                                                                                    (1, 0, 0, 0)]
    units = json_lines(run_cli("message", "cq", "-n", ns, "-t", T, "-q", "0", "-b", broker, "-i", "2", "-c", "3",
                               "--json", check=True).stdout)
    assert [u["queue_offset"] for u in units] == [2, 3, 4] and units[1]["commitlog_offset"] > units[0]["commitlog_offset"]

    run_cli("group", "clone-offset", "-n", ns, "-s", "GID_OPS", "-d", "GID_OPS2", "-t", T, "--offline", check=True)
    cloned = json_lines(run_cli("group", "progress", "-n", ns, "-g", "GID_OPS2", "-t", T, "--json", check=True).stdout)
    assert sorted(r["consumer_offset"] for r in cloned) == [0, 6]

    stats_all = json_lines(run_cli("cluster", "stats", "-n", ns, "-t", T, "--json", check=True).stdout)
    assert {r["group"] for r in stats_all} >= {"GID_OPS"} and all(r["in_msg_24h"] == 6 for r in stats_all)
    missing = run_cli("cluster", "stats", "-n", ns, "-t", "NoSuchOpsTopic")
    assert missing.returncode == 1 and "TOPIC_NOT_EXIST" in missing.stderr and missing.stdout == ""
    assert missing.stderr.count("\n") == 1 and "docs/faq" not in missing.stderr       # one line
    assert json_lines(run_cli("topic", "clusters", "-n", ns, "-t", T, "--json", check=True).stdout) == [
        {"cluster": "DefaultCluster"}]
    assert run_cli("statsAll", "-n", ns, "-t", T, "--json").returncode == 0        # mqadmin's name

    wiped = json_lines(run_cli("namesrv", "write-perm", "wipe", "-n", ns, "-b", "broker-a", "--json",
                               check=True).stdout)
    assert wiped[0]["topics"] > 0
    route = json_lines(run_cli("topic", "route", "-n", ns, "-t", T, "--json", check=True).stdout)[0]
    assert route["queueDatas"][0]["perm"] & 2 == 0
    run_cli("namesrv", "write-perm", "add", "-n", ns, "-b", "broker-a", check=True)
    route = json_lines(run_cli("topic", "route", "-n", ns, "-t", T, "--json", check=True).stdout)[0]
    assert route["queueDatas"][0]["perm"] & 2

    for cmd in ("clean-expired-cq", "clean-unused-topic", "delete-expired-commitlog"):
        assert run_cli("broker", cmd, "-n", ns, "-b", broker, check=True).returncode == 0
    updated = json_lines(run_cli("namesrv", "update-config", "-n", ns, "orderMessageEnable=true", "--json",
                                 check=True).stdout)
    assert updated == [{"namesrv": ns, "updated": {"orderMessageEnable": "true"}, "ignored": [], "remark": (
        "applied until the name server restarts: it was started without -c, so no config file keeps them")}]
    assert json_lines(run_cli("namesrv", "config", "-n", ns, "--json", check=True).stdout)[0][
        "orderMessageEnable"] == "true"
    run_cli("producer", "list", "-n", ns, "-b", broker, "--json", check=True)


def test_consumer_status_of_an_online_group(cluster):  # noqa: F811
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "OpsLive", "-r", "1", "-w", "1", check=True)
    live = subprocess.Popen([sys.executable, "-m", "mqtool", "consume", "-n", ns, "-t", "OpsLive", "-g", "GID_LIVE",
                             "--idle-timeout", "20"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:      # online first, then its queues once it has rebalanced
            proc = run_cli("group", "status", "-n", ns, "-g", "GID_LIVE", "--json")
            if proc.returncode == 0 and "OpsLive/broker-a/0" in proc.stdout:
                break
            time.sleep(0.3)
        [status] = json_lines(proc.stdout)
        assert status["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
        assert any(k.startswith("OpsLive/broker-a/0") for k in status["mqTable"])
        nobody = run_cli("group", "status", "-n", ns, "-g", "GID_LIVE", "-i", "nobody@nowhere")
        assert nobody.returncode == 1 and "no consumer nobody@nowhere of group GID_LIVE is online" in nobody.stderr
    finally:
        live.terminate()
        live.wait(20)
