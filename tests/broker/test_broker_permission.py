"""brokerPermission (BrokerConfig): a broker made read-only (4) or write-only (2) in broker.conf or at
run time (mqadmin updateBrokerConfig -k brokerPermission), as 4.9.8 does it: routes carry the
broker's permission for every topic, an ordered topic's sends and every send-back are refused
when it is not writeable, pulls when it is not readable."""
from __future__ import annotations

import asyncio
import contextlib

import pytest

from mqtool.client.admin import Admin
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingCommandError
from tests.broker.test_broker_server import pull_cmd, run, running_pair, send_cmd


async def route_perms(c, ns_addr, topic) -> list[int]:
    resp = await c.invoke(ns_addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    return [q["perm"] for q in jsonbody.loads(resp.body)["queueDatas"]] if resp.code == 0 else []


async def until_perms(c, ns_addr, topic, want, timeout=10.0):
    """Wait for the name server's route of `topic` to carry `want` (the broker registers at once)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while await route_perms(c, ns_addr, topic) != want:
        assert asyncio.get_running_loop().time() < deadline, f"route of {topic} never became {want}"
        await asyncio.sleep(0.05)
    return True


@contextlib.asynccontextmanager
async def with_admin(tmp_path, **cfg):
    """running_pair, and an Admin on its name server."""
    async with running_pair(tmp_path, **cfg) as (ns, broker, c):
        admin = Admin(f"127.0.0.1:{ns.port}")
        try:
            yield broker, c, admin, f"127.0.0.1:{ns.port}"
        finally:
            await admin.close()


def test_broker_permission_at_run_time(tmp_path):
    async def scenario():
        async with with_admin(tmp_path) as (broker, c, admin, ns_addr):
            addr = broker.config.broker_addr
            await admin.create_topic("PermPlain", 2, 2, 6)
            await admin.create_topic("PermOrdered", 2, 2, 6, order=True)
            assert (await c.invoke(addr, send_cmd("PermOrdered"))).code == ResponseCode.SUCCESS
            assert await until_perms(c, ns_addr, "PermPlain", [6])

            await admin.set_broker_config(addr, {"brokerPermission": "4"})        # read-only
            assert await until_perms(c, ns_addr, "PermPlain", [4])
            assert await route_perms(c, ns_addr, "PermOrdered") == [4]
            refused = await c.invoke(addr, send_cmd("PermOrdered"))
            assert refused.code == ResponseCode.NO_PERMISSION
            assert refused.remark == "the broker[127.0.0.1] sending message is forbidden"
            back = await c.invoke(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {
                "offset": 0, "group": "CG", "delayLevel": 0, "originMsgId": "", "originTopic": "PermOrdered",
                "unitMode": False, "maxReconsumeTimes": 16}))
            assert back.code == ResponseCode.NO_PERMISSION
            pulled = await c.invoke(addr, pull_cmd("PermOrdered"))
            assert pulled.code == ResponseCode.SUCCESS                            # still readable

            await admin.set_broker_config(addr, {"brokerPermission": "2"})        # write-only
            assert await until_perms(c, ns_addr, "PermPlain", [2])
            denied = await c.invoke(addr, pull_cmd("PermOrdered"))
            assert denied.code == ResponseCode.NO_PERMISSION
            assert denied.remark == "the broker[127.0.0.1] pulling message is forbidden"
            assert (await c.invoke(addr, send_cmd("PermOrdered"))).code == ResponseCode.SUCCESS

            await admin.set_broker_config(addr, {"brokerPermission": "6"})        # each topic's own again
            await admin.create_topic("PermPlain", perm=4)
            assert await until_perms(c, ns_addr, "PermPlain", [4])
            assert await route_perms(c, ns_addr, "PermOrdered") == [6]
            assert (await c.invoke(addr, pull_cmd("PermOrdered"))).code == ResponseCode.SUCCESS
    run(scenario())


def test_broker_permission_from_broker_conf(tmp_path):
    async def scenario():
        async with with_admin(tmp_path, brokerPermission=4) as (_broker, c, admin, ns_addr):
            await admin.create_topic("ConfPerm", 1, 1, 6)
            assert await until_perms(c, ns_addr, "ConfPerm", [4])
    run(scenario())


def test_run_time_config_changes_only_what_counts_while_running(tmp_path):
    """UPDATE_BROKER_CONFIG sets RUNTIME_KEYS at once (the store's own config too); a key used only at
    start is refused and nothing in the request is set; a key mqtool does not take is named."""
    async def scenario():
        async with with_admin(tmp_path) as (broker, c, admin, ns_addr):
            addr = broker.config.broker_addr
            await admin.set_broker_config(addr, {"maxMessageSize": "1000", "fileReservedTime": "1"})
            assert broker.store.cfg.maxMessageSize == 1000 and broker.store.cfg.fileReservedTime == 1
            big = await c.invoke(addr, send_cmd("RtTopic", b"x" * 1001))
            assert big.code == ResponseCode.MESSAGE_ILLEGAL
            port = broker.config.listenPort
            with pytest.raises(RemotingCommandError, match="listenPort cannot change while the broker runs"):
                await admin.set_broker_config(addr, {"listenPort": "1", "fileReservedTime": "5"})
            assert (broker.config.listenPort, broker.store.cfg.fileReservedTime) == (port, 1)
            with pytest.raises(RemotingCommandError, match="fileReservedTime must be an integer"):
                await admin.set_broker_config(addr, {"maxMessageSize": "2000", "fileReservedTime": "x"})
            assert broker.store.cfg.maxMessageSize == 1000
            remark = await admin.set_broker_config(addr, {"sendMessageThreadPoolNums": "4"})
            assert remark.startswith("sendMessageThreadPoolNums ignored: a RocketMQ 4.9.8 key mqtool does not")
    run(scenario())
