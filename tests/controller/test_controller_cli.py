"""`mqtool controller start` and the name server's embedded controller as real processes; the admin
commands' output (table, --json, mqadmin aliases) and their one-line errors."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from mqtool_remoting.codes import RequestCode as Q
from mqtool_remoting.codes import ResponseCode as R
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import connect
from tests.servers import REPO, Process, drain, free_port, free_port_pair, wait_until

C, A = "DefaultCluster", "broker-a"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mqtool", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def leader_ready(addr: str) -> dict | None:
    out = cli("controller", "status", "-a", addr, "--json")
    meta = json.loads(out.stdout) if out.returncode == 0 else {}
    return meta if meta.get("controllerLeaderId") and meta.get("isLeader") else None


async def two_brokers(addr: str) -> None:
    """Ids 1 and 2 applied, 1 elected: what two brokers' starts leave in the controller."""
    conns = []
    for i in (1, 2):
        conn = await connect(addr)
        conns.append(conn)
        for code, ext in ((Q.CONTROLLER_APPLY_BROKER_ID, {"clusterName": C, "brokerName": A, "appliedBrokerId": i,
                                                           "registerCheckCode": f"127.0.0.1:{i};{i}"}),
                          (Q.CONTROLLER_REGISTER_BROKER, {"clusterName": C, "brokerName": A, "brokerId": i,
                                                          "brokerAddress": f"127.0.0.1:{1000 + i}"})):
            r = await conn.request(RemotingCommand.request(code, ext), 6)
            assert r.code == R.SUCCESS, r.remark
    r = await conns[0].request(RemotingCommand.request(Q.CONTROLLER_ELECT_MASTER,
                                                       {"clusterName": C, "brokerName": A, "brokerId": 1}), 6)
    assert r.code == R.SUCCESS
    for conn in conns:
        await conn.close()


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("controller")
    port = free_port_pair()
    conf = tmp / "controller.conf"
    conf.write_text(f"controllerDLegerGroup=g1\ncontrollerDLegerPeers=n0-127.0.0.1:{port}\n"
                    f"controllerDLegerSelfId=n0\ncontrollerStorePath={tmp / 'store'}\n"
                    "controllerThreadPoolNums=16\nenableElectUnclenMaster=true\n")
    proc = Process(["controller", "start", "-c", str(conf)], "boot success")
    drain(proc)
    addr = f"127.0.0.1:{port}"
    wait_until("a controller leader", lambda: leader_ready(addr), 20)
    asyncio.run(two_brokers(addr))
    yield {"addr": addr, "proc": proc, "conf": conf}
    assert proc.stop() == 0


def test_start_warns_once_per_key_it_does_not_take(controller):
    startup = "".join(controller["proc"].startup)
    assert startup.count("mqtool: warning:") == 2
    assert "controllerThreadPoolNums ignored: a RocketMQ 5.3.0 key mqtool does not implement" in startup
    assert "unknown config key 'enableElectUnclenMaster' ignored: not a RocketMQ 5.3.0 controller key; " \
           "did you mean 'enableElectUncleanMaster'?" in startup


def test_status_table_json_and_alias(controller):
    addr = controller["addr"]
    meta = json.loads(cli("controller", "status", "-a", addr, "--json").stdout)
    assert meta == {"group": "g1", "controllerLeaderId": "n0", "controllerLeaderAddress": addr, "askedAddr": addr,
                    "isLeader": True, "peers": [{"id": "n0", "address": addr, "leader": True}]}
    table = cli("controller", "status", "-a", addr)
    assert table.returncode == 0
    assert f"leader  n0 {addr}" in table.stdout and "leader" in table.stdout.splitlines()[-1]
    assert cli("getControllerMetaData", "-a", addr).stdout == table.stdout


def test_sync_state_and_elect(controller):
    addr = controller["addr"]
    rows = json.loads(cli("controller", "sync-state", "-a", addr, "-b", A, "--json").stdout)
    assert (rows["brokerName"], rows["masterBrokerId"], rows["masterAddress"]) == (A, 1, "127.0.0.1:1001")
    assert [r["brokerId"] for r in rows["inSyncReplicas"]] == [1]
    assert [r["brokerId"] for r in rows["notInSyncReplicas"]] == [2]
    table = cli("getSyncStateSet", "-a", addr, "-b", A).stdout
    assert "127.0.0.1:1001" in table and "127.0.0.1:1002" in table
    # a designated replica outside the syncStateSet: refused in one line, exit 1
    refused = cli("ha", "elect", "-a", addr, "-b", A, "--broker-id", "2")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "CONTROLLER_ELECT_MASTER_FAILED (2012)" in refused.stderr
    dead = cli("electMaster", "-a", addr, "-b", A, "--broker-id", "1")     # the master, silent: not alive
    assert dead.returncode == 1 and "(2012): Failed to elect a new master" in dead.stderr
    unknown = cli("ha", "elect", "-a", addr, "-b", "nope", "--json")
    assert unknown.returncode == 1 and unknown.stderr.strip().endswith("broker set nope is not known to the controller")


def test_sync_state_of_a_whole_cluster_through_the_name_server(controller, tmp_path):
    from tests.namesrv.test_namesrv_codes import register
    port = free_port()
    ns = Process(["namesrv", "start", "--listen", f"127.0.0.1:{port}", "--kv-config", str(tmp_path / "kv.json")],
                 "boot success")
    try:
        ns_addr, addr = f"127.0.0.1:{port}", controller["addr"]

        async def registered_then(*args):         # the name server forgets a broker whose channel closes
            conn = await connect(ns_addr)
            try:
                assert (await conn.request(register(A, "127.0.0.1:1001", C, {"T": 0}))).code == R.SUCCESS
                return await asyncio.get_running_loop().run_in_executor(None, lambda: cli(*args))
            finally:
                await conn.close()
        out = asyncio.run(registered_then("controller", "sync-state", "-a", addr, "-n", ns_addr, "-c", C, "--json"))
        assert out.returncode == 0, out.stderr
        rows = [json.loads(line) for line in out.stdout.splitlines()]
        assert [(r["brokerName"], r["masterBrokerId"]) for r in rows] == [(A, 1)]
        table = asyncio.run(registered_then("getSyncStateSet", "-a", addr, "-n", ns_addr, "-c", C)).stdout
        assert A in table and "127.0.0.1:1002" in table
        nope = cli("controller", "sync-state", "-a", addr, "-n", ns_addr, "-c", "Nope")
        assert nope.returncode != 0 and nope.stderr.strip() == \
            f"mqtool: error: cluster 'Nope' has no broker on name server {ns_addr}"
        neither = cli("controller", "sync-state", "-a", addr)
        assert neither.returncode != 0 and "give -b BROKER_NAME (repeatable) or -c CLUSTER" in neither.stderr
    finally:
        assert ns.stop() == 0


def test_elect_switches_over_to_a_live_in_sync_replica(controller):
    addr = controller["addr"]

    async def go():
        conns = [await connect(addr) for _ in range(2)]
        try:
            for i, conn in enumerate(conns, 1):      # both brokers heartbeat (and stay connected)
                await conn.oneway(RemotingCommand.request(Q.BROKER_HEARTBEAT, {
                    "clusterName": C, "brokerName": A, "brokerAddr": f"127.0.0.1:{1000 + i}", "brokerId": i,
                    "heartbeatTimeoutMills": 60_000}))
                await conn.request(RemotingCommand.request(Q.CONTROLLER_GET_METADATA_INFO))   # heartbeat taken
            from mqtool.common.controllerbodies import SyncStateSet
            alter = await conns[0].request(RemotingCommand.request(
                Q.CONTROLLER_ALTER_SYNC_STATE_SET, {"brokerName": A, "masterBrokerId": 1, "masterEpoch": 1},
                SyncStateSet(frozenset({1, 2}), 1).to_json()), 6)
            assert alter.code == R.SUCCESS, alter.remark

            async def run(*args):
                p = await asyncio.create_subprocess_exec(sys.executable, "-m", "mqtool", *args, cwd=REPO,
                                                         stdout=asyncio.subprocess.PIPE,
                                                         stderr=asyncio.subprocess.PIPE)
                out, err = await p.communicate()
                return p.returncode, out.decode(), err.decode()
            return await run("ha", "elect", "-a", addr, "-b", A, "--broker-id", "2"), \
                await run("ha", "elect", "-a", addr, "-b", A, "--json")
        finally:
            for conn in conns:
                await conn.close()
    (code, out, err), (again, _, still) = asyncio.run(go())
    assert code == 0, err
    assert out.splitlines()[:5] == ["#ClusterName:\tDefaultCluster", "#BrokerName:\tbroker-a",
                                    "#BrokerMasterAddr:\t127.0.0.1:1002", "#MasterEpoch:\t2",
                                    "#SyncStateSetEpoch:\t3"]
    assert again == 1 and "CONTROLLER_MASTER_STILL_EXIST (2011)" in still     # 2 lives: nothing to do


def test_config_get_and_set(controller):
    addr = controller["addr"]
    before = json.loads(cli("controller", "config", "-a", addr, "--json").stdout)
    assert before["addr"] == addr and before["config"]["enableElectUncleanMaster"] == "false"
    assert before["config"]["controllerDLegerGroup"] == "g1"
    ok = cli("updateControllerConfig", "-a", addr, "-k", "electMasterMaxRetryCount", "-v", "5")
    assert ok.returncode == 0 and "update controller config success!" in ok.stdout
    assert json.loads(cli("controller", "config", "-a", addr, "--json").stdout)["config"][
        "electMasterMaxRetryCount"] == "5"
    assert ok.stderr == "" and "electMasterMaxRetryCount=5\n" in controller["conf"].read_text()   # kept in its -c file
    typo = cli("controller", "config-set", "-a", addr, "-k", "electMasterMaxRetryCnt", "-v", "4")
    assert typo.returncode == 1 and "update controller config success" not in typo.stdout
    assert typo.stderr.count("\n") == 1 and typo.stderr.startswith(f"mqtool: error: nothing updated on {addr}: ")
    assert "did you mean 'electMasterMaxRetryCount'" in typo.stderr
    assert "electMasterMaxRetryCnt" not in json.loads(cli("controller", "config", "-a", addr, "--json").stdout)["config"]
    assert "electMasterMaxRetryCnt" not in controller["conf"].read_text()
    black = cli("controller", "config-set", "-a", addr, "-k", "configStorePath", "-v", "/x")
    assert black.returncode == 1 and "NO_PERMISSION (16): Can not update config in black list." in black.stderr


def test_unreachable_controller_is_one_line():
    out = cli("controller", "status", "-a", f"127.0.0.1:{free_port()}")
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("mqtool: error: no controller answered: cannot connect to 127.0.0.1:")


def test_bad_peers_are_a_usage_error(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("controllerDLegerPeers=n0-127.0.0.1:9878\ncontrollerDLegerSelfId=n5\n")
    out = cli("controller", "start", "-c", str(conf))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "controllerDLegerSelfId 'n5' is not one of controllerDLegerPeers' ids (n0)" in out.stderr


def test_a_raft_port_in_use_is_one_line(tmp_path):
    import socket
    port = free_port_pair()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen()
        out = cli("controller", "start", "--listen", f"127.0.0.1:{port}", "-c", str(_store_conf(tmp_path)))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.splitlines()[-1] == (f"mqtool: error: cannot listen on 127.0.0.1:{port + 1} (the controller's "
                                           "Raft port: its peer port + 1): address in use or not local")


def _store_conf(tmp_path):
    conf = tmp_path / "store.conf"
    conf.write_text(f"controllerStorePath={tmp_path / 'store'}\n")
    return conf


@pytest.mark.slow
def test_a_name_server_with_enable_controller_in_namesrv(tmp_path):
    ns_port, ctl_port = free_port(), free_port_pair()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={ns_port}\nkvConfigPath={tmp_path / 'kv.json'}\nenableControllerInNamesrv=true\n"
                    f"controllerDLegerPeers=n0-127.0.0.1:{ctl_port}\ncontrollerStorePath={tmp_path / 'ctl'}\n"
                    "serverWorkerThreads=8\n")
    proc = Process(["namesrv", "start", "-c", str(conf)], "The Controller boot success")
    try:
        startup = "".join(proc.startup)
        assert startup.count("mqtool: warning:") == 1 and "serverWorkerThreads ignored" in startup
        addr = f"127.0.0.1:{ctl_port}"
        assert wait_until("a controller leader", lambda: leader_ready(addr), 20)["controllerLeaderAddress"] == addr

        async def ask_namesrv():
            conn = await connect(f"127.0.0.1:{ns_port}")
            try:
                return await conn.request(RemotingCommand.request(Q.CONTROLLER_GET_METADATA_INFO))
            finally:
                await conn.close()
        assert asyncio.run(ask_namesrv()).code == R.REQUEST_CODE_NOT_SUPPORTED   # not on the name server's port
    finally:
        assert proc.stop() == 0


def test_ctrl_c_stops_it_cleanly_and_says_so(tmp_path):
    """Issue 44: a Ctrl-C left no line; the stop is logged, as the broker and the name server log theirs."""
    import os
    import signal
    port = free_port_pair()
    (tmp_path / "c.conf").write_text(f"controllerStorePath={tmp_path / 'store'}\n")
    proc = Process(["controller", "start", "--listen", f"127.0.0.1:{port}", "-c", str(tmp_path / "c.conf")],
                   "boot success")
    try:
        wait_until("a controller leader", lambda: leader_ready(f"127.0.0.1:{port}"), 20)
    finally:
        os.kill(proc.proc.pid, signal.SIGINT)
        code = proc.proc.wait(30)
        err = proc.proc.stderr.read()
        proc.proc.stderr.close()
    assert code == 0, err
    assert "Traceback" not in err
    assert err.splitlines()[-1].endswith(f"mqtool.controller: The Controller n0 of DefaultControllerGroup on port "
                                         f"{port} shut down cleanly"), err
