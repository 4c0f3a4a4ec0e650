"""A controller on 127.0.0.1 answering scripted brokers (real sockets): ids, registration, heartbeats,
elections, a master's channel closing and the NOTIFY_BROKER_ROLE_CHANGED that follows; Raft groups
of one (across a restart) and three (the leader killed)."""
from __future__ import annotations

import asyncio
import time

import pytest

from mqtool.client.controller import ControllerAdmin, ControllerError
from mqtool.common.controllerbodies import SyncStateSet
from mqtool.controller.config import ControllerConfig
from mqtool.controller.server import Controller
from mqtool_remoting.codes import RequestCode as Q
from mqtool_remoting.codes import ResponseCode as R
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingCommandError
from mqtool_remoting.transport import Server, connect
from tests.servers import free_port_pair

C, A = "DefaultCluster", "broker-a"


async def until(what: str, check, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def config(tmp_path, peers: dict[str, int], self_id: str = "n0", **kw) -> ControllerConfig:
    return ControllerConfig(controllerDLegerPeers=";".join(f"{i}-127.0.0.1:{p}" for i, p in peers.items()),
                            controllerDLegerSelfId=self_id, controllerStorePath=str(tmp_path / self_id), **kw)


async def one_node(tmp_path, **kw) -> Controller:
    ctl = await Controller(config(tmp_path, {"n0": free_port_pair()}, **kw)).start()
    await until("a leader", lambda: ctl.is_leader)
    return ctl


class FakeBroker:
    """A broker as the controller sees it: its own connection to the controller, and a listening
    address that records the requests (1008) sent to it."""

    def __init__(self):
        self.received: list[RemotingCommand] = []
        self.server = Server(self._handle)
        self.conn = None

    async def _handle(self, conn, cmd):
        self.received.append(cmd)
        return cmd.response(R.SUCCESS)

    async def start(self, controller_port: int) -> "FakeBroker":
        await self.server.start("127.0.0.1", 0)
        self.conn = await connect(f"127.0.0.1:{controller_port}")
        return self

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    async def call(self, code, ext=None, body=b""):
        return await self.conn.request(RemotingCommand.request(code, ext, body), 6)

    async def join(self, name=A) -> int:
        """GET_NEXT_BROKER_ID, APPLY_BROKER_ID, REGISTER_BROKER, a heartbeat: the broker's start."""
        nxt = int((await self.call(Q.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": C, "brokerName": name}))
                  .ext_fields["nextBrokerId"])
        applied = await self.call(Q.CONTROLLER_APPLY_BROKER_ID, {"clusterName": C, "brokerName": name,
                                                                 "appliedBrokerId": nxt,
                                                                 "registerCheckCode": f"{self.addr};{nxt}"})
        assert applied.code == R.SUCCESS, applied.remark
        self.id, self.name = nxt, name
        await self.heartbeat()
        reg = await self.call(Q.CONTROLLER_REGISTER_BROKER, {"clusterName": C, "brokerName": name, "brokerId": nxt,
                                                             "brokerAddress": self.addr})
        assert reg.code == R.SUCCESS, reg.remark
        return nxt

    async def heartbeat(self, **extra):
        await self.conn.oneway(RemotingCommand.request(Q.BROKER_HEARTBEAT, {
            "clusterName": C, "brokerName": self.name, "brokerAddr": self.addr, "brokerId": self.id, **extra}))

    async def close(self):
        if self.conn is not None:
            await self.conn.close()
        await self.server.stop()


async def _replica(broker: FakeBroker):
    r = await broker.call(Q.CONTROLLER_GET_REPLICA_INFO, {"brokerName": broker.name})
    return r, SyncStateSet.from_json(r.body)


def test_a_scripted_broker_pair_fails_over_and_the_survivor_is_notified(tmp_path):
    async def go():
        ctl = await one_node(tmp_path)
        b1, b2 = await FakeBroker().start(ctl.port), await FakeBroker().start(ctl.port)
        try:
            assert await b1.join() == 1
            first = await b1.call(Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": A, "brokerId": 1})
            assert first.code == R.SUCCESS and first.ext_fields["masterEpoch"] == "1"
            assert await b2.join() == 2
            reg = await b2.call(Q.CONTROLLER_REGISTER_BROKER, {"clusterName": C, "brokerName": A, "brokerId": 2,
                                                               "brokerAddress": b2.addr})
            assert reg.ext_fields["masterBrokerId"] == "1" and reg.ext_fields["masterAddress"] == b1.addr
            alter = await b1.call(Q.CONTROLLER_ALTER_SYNC_STATE_SET,
                                  {"brokerName": A, "masterBrokerId": 1, "masterEpoch": 1},
                                  SyncStateSet(frozenset({1, 2}), 1).to_json())
            assert alter.code == R.SUCCESS and alter.ext_fields["newSyncStateSetEpoch"] == "2"
            assert [c.ext_fields["masterEpoch"] for c in b1.received] == ["1"]   # told of its own election
            await b1.conn.close()                 # the master's process died: its connection closes
            notify = await until("a role change notify", lambda: b2.received)
            assert notify[0].code == Q.NOTIFY_BROKER_ROLE_CHANGED
            assert {k: notify[0].ext_fields[k] for k in ("masterBrokerId", "masterAddress", "masterEpoch",
                                                         "syncStateSetEpoch")} == \
                {"masterBrokerId": "2", "masterAddress": b2.addr, "masterEpoch": "2", "syncStateSetEpoch": "3"}
            assert SyncStateSet.from_json(notify[0].body) == SyncStateSet(frozenset({2}), 3)
            assert len(b1.received) == 1          # the dead one is not told
            info, sync = await _replica(b2)
            assert (info.ext_fields["masterBrokerId"], info.ext_fields["masterEpoch"]) == ("2", "2")
            assert sync == SyncStateSet(frozenset({2}), 3)
        finally:
            await b1.close()
            await b2.close()
            await ctl.stop()
    asyncio.run(go())


def test_other_codes_and_a_heartbeat_without_id(tmp_path):
    async def go():
        ctl = await one_node(tmp_path)
        conn = await connect(f"127.0.0.1:{ctl.port}")
        try:
            r = await conn.request(RemotingCommand.request(Q.GET_ROUTEINFO_BY_TOPIC, {"topic": "t"}))
            assert r.code == R.REQUEST_CODE_NOT_SUPPORTED
            r = await conn.request(RemotingCommand.request(Q.BROKER_HEARTBEAT, {
                "clusterName": C, "brokerName": A, "brokerAddr": "127.0.0.1:1"}))
            assert r.code == R.CONTROLLER_INVALID_REQUEST and not ctl.live.table
            r = await conn.request(RemotingCommand.request(Q.CONTROLLER_GET_REPLICA_INFO, {"brokerName": "nope"}))
            assert r.code == R.CONTROLLER_BROKER_METADATA_NOT_EXIST
            r = await conn.request(RemotingCommand.request(Q.CONTROLLER_GET_SYNC_STATE_DATA))
            assert r.code == R.SYSTEM_ERROR
        finally:
            await conn.close()
            await ctl.stop()
    asyncio.run(go())


@pytest.mark.parametrize("unclean", [False, True])
def test_no_eligible_replica_leaves_no_master_unless_unclean(tmp_path, unclean):
    async def go():
        ctl = await one_node(tmp_path, enableElectUncleanMaster=unclean)
        b1, b2 = await FakeBroker().start(ctl.port), await FakeBroker().start(ctl.port)
        admin = ControllerAdmin(f"127.0.0.1:{ctl.port}")
        try:
            await b1.join()
            await b1.call(Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": A, "brokerId": 1})
            await b2.join()                       # never caught up: the syncStateSet stays {1}
            if not unclean:                       # a switchover to it is refused while 1 lives
                with pytest.raises(RemotingCommandError) as err:
                    await admin.elect_master(C, A, 2)
                assert err.value.code == R.CONTROLLER_ELECT_MASTER_FAILED
            await b1.conn.close()
            if unclean:
                await until("the lagging replica elected", lambda: b2.received)
                info, _ = await _replica(b2)
                assert (info.ext_fields.get("masterBrokerId"), info.ext_fields["masterEpoch"]) == ("2", "2")
                return

            async def master_cleared():
                info, _ = await _replica(b2)
                return info.ext_fields.get("masterBrokerId") is None and info.ext_fields["masterEpoch"] == "2"
            deadline = time.monotonic() + 10
            while not await master_cleared():     # the controller-triggered election answered 2004
                assert time.monotonic() < deadline, "the master was never cleared"
                await asyncio.sleep(0.05)
            again = await b2.call(Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": A, "brokerId": 2})
            assert again.code == R.CONTROLLER_ELECT_MASTER_FAILED and not b2.received
        finally:
            await admin.close()
            await b1.close()
            await b2.close()
            await ctl.stop()
    asyncio.run(go())


def test_a_paused_master_is_replaced_after_its_heartbeat_timeout(tmp_path):
    async def go():
        ctl = await one_node(tmp_path, scanNotActiveBrokerInterval=100)
        b1, b2 = await FakeBroker().start(ctl.port), await FakeBroker().start(ctl.port)
        try:
            await b1.join()
            await b1.call(Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": A, "brokerId": 1})
            await b2.join()
            await b1.call(Q.CONTROLLER_ALTER_SYNC_STATE_SET, {"brokerName": A, "masterBrokerId": 1, "masterEpoch": 1},
                          SyncStateSet(frozenset({1, 2}), 1).to_json())
            await b1.heartbeat(heartbeatTimeoutMills=300)     # then silence, its connection still open
            started = time.monotonic()
            while not b2.received:
                await b2.heartbeat(heartbeatTimeoutMills=300)
                await asyncio.sleep(0.05)
                assert time.monotonic() - started < 10, "no election after the master's heartbeat timeout"
            assert b2.received[0].ext_fields["masterBrokerId"] == "2"
            assert b1.conn.closed.is_set() or await until("the silent master's channel closed",
                                                          lambda: b1.conn.closed.is_set())
        finally:
            await b1.close()
            await b2.close()
            await ctl.stop()
    asyncio.run(go())


def test_the_leader_scan_elects_for_a_set_whose_master_is_dead_and_a_member_alive(tmp_path):
    """scanInactiveMaster alone (the expiry scan is off here): the master's entry timed out but was
    never removed, so no inactive-broker event fired."""
    async def go():
        ctl = await one_node(tmp_path, scanNotActiveBrokerInterval=600_000, scanInactiveMasterInterval=100)
        b1, b2 = await FakeBroker().start(ctl.port), await FakeBroker().start(ctl.port)
        try:
            await b1.join()
            await b1.call(Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": A, "brokerId": 1})
            await b2.join()
            await b1.call(Q.CONTROLLER_ALTER_SYNC_STATE_SET, {"brokerName": A, "masterBrokerId": 1, "masterEpoch": 1},
                          SyncStateSet(frozenset({1, 2}), 1).to_json())
            await b1.heartbeat(heartbeatTimeoutMills=200)
            started = time.monotonic()
            while not b2.received:
                await b2.heartbeat(heartbeatTimeoutMills=5000)
                await asyncio.sleep(0.05)
                assert time.monotonic() - started < 10, "the leader's scan never elected"
            assert b2.received[0].ext_fields["masterBrokerId"] == "2"
            assert ctl.live.info(C, A, 1) is not None           # still in the table: the scan, not the expiry
        finally:
            await b1.close()
            await b2.close()
            await ctl.stop()
    asyncio.run(go())


def test_a_one_node_group_keeps_its_decisions_across_a_restart(tmp_path):
    async def go():
        port = free_port_pair()
        conf = config(tmp_path, {"n0": port})
        ctl = await Controller(conf).start()
        await until("a leader", lambda: ctl.is_leader)
        b1 = await FakeBroker().start(ctl.port)
        await b1.join()
        await b1.call(Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": A, "brokerId": 1})
        await b1.close()
        await ctl.stop()
        ctl = await Controller(config(tmp_path, {"n0": port})).start()
        await until("a leader again", lambda: ctl.is_leader)
        conn = await connect(f"127.0.0.1:{ctl.port}")
        try:
            r = await conn.request(RemotingCommand.request(Q.CONTROLLER_GET_REPLICA_INFO, {"brokerName": A}))
            assert (r.ext_fields["masterBrokerId"], r.ext_fields["masterEpoch"]) == ("1", "1")
            r = await conn.request(RemotingCommand.request(Q.CONTROLLER_GET_NEXT_BROKER_ID,
                                                           {"clusterName": C, "brokerName": A}))
            assert r.ext_fields["nextBrokerId"] == "2"
        finally:
            await conn.close()
            await ctl.stop()
    asyncio.run(go())


@pytest.mark.slow
def test_three_controllers_lose_no_answered_decision_when_the_leader_dies(tmp_path):
    async def go():
        ports = {f"n{i}": free_port_pair() for i in range(3)}
        ctls = {i: await Controller(config(tmp_path, ports, i)).start() for i in ports}
        addrs = ";".join(f"127.0.0.1:{p}" for p in ports.values())
        admin = ControllerAdmin(addrs)
        brokers = []
        try:
            leader = await until("one leader", lambda: [i for i, c in ctls.items() if c.is_leader])
            assert len(leader) == 1
            leader = leader[0]
            follower = next(i for i in ctls if i != leader)
            fconn = await connect(f"127.0.0.1:{ports[follower]}")
            r = await fconn.request(RemotingCommand.request(Q.CONTROLLER_GET_NEXT_BROKER_ID,
                                                            {"clusterName": C, "brokerName": A}))
            assert r.code == R.CONTROLLER_NOT_LEADER and r.remark == "The controller is not in leader state"
            await fconn.close()
            meta = await admin.metadata(f"127.0.0.1:{ports[follower]}")
            assert meta.leader_id == leader and meta.leader_addr == f"127.0.0.1:{ports[leader]}"
            for _ in range(2):
                b = await FakeBroker().start(ports[leader])
                brokers.append(b)
                await b.join()
            first = await brokers[0].call(Q.CONTROLLER_ELECT_MASTER, {"clusterName": C, "brokerName": A,
                                                                      "brokerId": 1})
            assert first.code == R.SUCCESS
            alter = await brokers[0].call(Q.CONTROLLER_ALTER_SYNC_STATE_SET,
                                          {"brokerName": A, "masterBrokerId": 1, "masterEpoch": 1},
                                          SyncStateSet(frozenset({1, 2}), 1).to_json())
            assert alter.code == R.SUCCESS
            for b in brokers:
                await b.close()
            await ctls.pop(leader).stop()          # the leader dies right after answering
            new = await until("a new leader", lambda: [i for i, c in ctls.items() if c.is_leader], 20)
            assert new[0] != leader
            survivors = ControllerAdmin(";".join(f"127.0.0.1:{ports[i]}" for i in ctls))
            try:
                info = await survivors.sync_state_sets([A])
            finally:
                await survivors.close()
            got = info.replicasInfoTable[A]
            assert (got.masterBrokerId, got.masterEpoch, got.syncStateSetEpoch) == (1, 1, 2)
            assert sorted(r.brokerId for r in got.inSyncReplicas) == [1, 2]
        finally:
            await admin.close()
            for b in brokers:
                await b.close()
            for c in ctls.values():
                await c.stop()
    asyncio.run(go())


def test_the_admin_client_says_which_set_it_does_not_know(tmp_path):
    async def go():
        ctl = await one_node(tmp_path)
        admin = ControllerAdmin(f"127.0.0.1:{ctl.port}")
        try:
            with pytest.raises(ControllerError, match="broker set nope is not known"):
                await admin.sync_state_sets(["nope"])
            with pytest.raises(ControllerError, match="broker set nope is not known"):
                await admin.elect_master(C, "nope", None)
        finally:
            await admin.close()
            await ctl.stop()
    asyncio.run(go())
