"""Three `mqtool controller start` processes: the leader killed with SIGKILL right after answering
loses none of its answered decisions, and a new leader answers (controller.md 10, "controller leader loss")."""
from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from mqtool_remoting.codes import RequestCode as Q
from mqtool_remoting.codes import ResponseCode as R
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import connect
from tests.controller.test_controller_cli import cli
from tests.servers import Process, drain, free_port_pair, wait_until

C, A = "DefaultCluster", "broker-a"


def status(addrs: str) -> dict:
    out = cli("controller", "status", "-a", addrs, "--json")
    return json.loads(out.stdout) if out.returncode == 0 else {}


def leader_of(addrs: str, ports: dict) -> str | None:
    """The leader's id once the leader itself says it serves (isLeader): a Raft leader answers
    CONTROLLER_NOT_LEADER until its first entry of the term commits, as DLedger's does."""
    leader = status(addrs).get("controllerLeaderId")
    if leader is None or leader not in ports:
        return None
    own = status(f"127.0.0.1:{ports[leader]}")
    return leader if own.get("isLeader") and own.get("controllerLeaderId") == leader else None


async def decide(addr: str) -> None:
    """Ids 1 and 2, and 1 elected, each answered SUCCESS by the leader."""
    conn = await connect(addr)
    try:
        for i in (1, 2):
            r = await conn.request(RemotingCommand.request(Q.CONTROLLER_APPLY_BROKER_ID, {
                "clusterName": C, "brokerName": A, "appliedBrokerId": i, "registerCheckCode": f"127.0.0.1:{i};{i}"}), 6)
            assert r.code == R.SUCCESS, r.remark
        r = await conn.request(RemotingCommand.request(Q.CONTROLLER_ELECT_MASTER,
                                                       {"clusterName": C, "brokerName": A, "brokerId": 1}), 6)
        assert r.code == R.SUCCESS and r.ext_fields["masterEpoch"] == "1"
    finally:
        await conn.close()


@pytest.mark.slow
def test_sigkill_of_the_leader_loses_no_answered_decision(tmp_path):
    ports = {f"n{i}": free_port_pair() for i in range(3)}
    peers = ";".join(f"{i}-127.0.0.1:{p}" for i, p in ports.items())
    procs = {}
    try:
        for node in ports:
            conf = tmp_path / f"{node}.conf"
            conf.write_text(f"controllerDLegerGroup=g\ncontrollerDLegerPeers={peers}\ncontrollerDLegerSelfId={node}\n"
                            f"controllerStorePath={tmp_path / node}\n")
            procs[node] = Process(["controller", "start", "-c", str(conf)], "boot success")
            drain(procs[node])
        everyone = ";".join(f"127.0.0.1:{p}" for p in ports.values())
        leader = wait_until("a leader", lambda: leader_of(everyone, ports), 20)
        asyncio.run(decide(f"127.0.0.1:{ports[leader]}"))
        os.kill(procs[leader].proc.pid, signal.SIGKILL)
        procs.pop(leader).proc.wait(10)
        survivors = ";".join(f"127.0.0.1:{ports[n]}" for n in procs)
        new = wait_until("a new leader", lambda: (lambda x: x if x and x != leader else None)(leader_of(survivors, ports)),
                         20)
        assert new in procs
        state = json.loads(wait_until("the new leader's answer", lambda: cli(
            "controller", "sync-state", "-a", survivors, "-b", A, "--json").stdout, 10))
        assert (state["masterBrokerId"], state["masterEpoch"], state["syncStateSetEpoch"]) == (1, 1, 1)
        assert [r["brokerId"] for r in state["notInSyncReplicas"]] == [2]

        async def next_id():
            conn = await connect(f"127.0.0.1:{ports[new]}")
            try:
                return await conn.request(RemotingCommand.request(Q.CONTROLLER_GET_NEXT_BROKER_ID,
                                                                  {"clusterName": C, "brokerName": A}))
            finally:
                await conn.close()
        assert asyncio.run(next_id()).ext_fields["nextBrokerId"] == "3"
    finally:
        for p in procs.values():
            assert p.stop() == 0
