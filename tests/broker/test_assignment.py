"""5.x server-side rebalance on real brokers (rocketmq5.md 2.1, 2.2): SET_MESSAGE_REQUEST_MODE (401) and
QUERY_ASSIGNMENT (400) hand-built, consumers registered by HEART_BEAT; the allocation rules of 5.3.3's
QueryAssignmentProcessor as pure functions; the mode file across a restart; `group set-consume-mode`."""
from __future__ import annotations

import asyncio
import contextlib
import json

from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient

from mqtool.broker.config import BrokerConfig
from mqtool.broker.controller import BrokerController
from mqtool.broker.pop.assignment import allocate_for_pop
from mqtool.common.allocate import allocate_averagely, allocate_by_circle
from mqtool.broker.topics import TopicConfig
from mqtool.namesrv.server import NameServer
from tests.conftest import json_lines, run_cli
from tests.servers import cluster, free_port_pair  # noqa: F401 - cluster: the namesrv + broker processes fixture

from .test_admin_requests import heartbeat
from .test_broker_server import run

G, T = "GID_ASSIGN", "TopicAssign"


async def start_broker(tmp_path, ns_port: int, name: str) -> BrokerController:
    config = BrokerConfig(brokerName=name, listenPort=0, namesrvAddr=f"127.0.0.1:{ns_port}",
                          storePathRootDir=str(tmp_path / name))
    return await BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 20),
                                           "mappedFileSizeConsumeQueue": "6000"}).start("127.0.0.1")


@contextlib.asynccontextmanager
async def two_brokers(tmp_path, queues: int = 2):
    """A name server and broker-a, broker-b, each with T (`queues` queues), registered."""
    ns = await NameServer(tmp_path / "kv.json").start("127.0.0.1", 0)
    brokers = []
    try:
        for name in ("broker-a", "broker-b"):
            broker = await start_broker(tmp_path, ns.port, name)
            brokers.append(broker)
            broker.topics.update(TopicConfig(T, queues, queues))
            await broker.register_all()
        yield ns, brokers
    finally:
        for broker in brokers:
            await broker.stop()
        await ns.stop()


def set_mode(mode: str, share: int = 0, topic: str = T, group: str = G) -> RemotingCommand:
    body = {"consumerGroup": group, "mode": mode, "popShareQueueNum": share, "topic": topic}
    return RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, body=jsonbody.dumps(body), language="JAVA")


def query(client_id: str, model: str = "CLUSTERING", strategy: str = "AVG", topic: str = T) -> RemotingCommand:
    body = {"clientId": client_id, "consumerGroup": G, "messageModel": model, "strategyName": strategy,
            "topic": topic}
    return RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, body=jsonbody.dumps(body), language="JAVA")


def assigned(resp: RemotingCommand) -> list[tuple[str, int, str]] | None:
    """(brokerName, queueId, mode) of each assignment; None when the answer has no list."""
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    body = json.loads(resp.body)
    if "messageQueueAssignments" not in body:
        return None
    out = []
    for a in body["messageQueueAssignments"]:
        assert a["messageQueue"]["topic"] == T and set(a) == {"messageQueue", "mode"}
        out.append((a["messageQueue"]["brokerName"], a["messageQueue"]["queueId"], a["mode"]))
    return out


async def consumers(addr: str, *client_ids: str) -> list[RemotingClient]:
    """One connection per client id, each registered in G by a HEART_BEAT."""
    clients = []
    for cid in client_ids:
        c = RemotingClient()
        clients.append(c)
        assert (await c.invoke(addr, heartbeat(G, T, cid))).code == ResponseCode.SUCCESS
    return clients


def test_pull_mode_splits_the_cluster_s_queues_among_the_group_s_clients(tmp_path):
    async def scenario():
        async with two_brokers(tmp_path) as (_ns, (a, b)):
            addr = a.config.broker_addr
            clients = await consumers(addr, "127.0.0.1@c1", "127.0.0.1@c2")
            try:
                c1 = clients[0]
                assert (await c1.invoke(addr, set_mode("PULL"))).code == ResponseCode.SUCCESS
                first = assigned(await c1.invoke(addr, query("127.0.0.1@c1")))
                second = assigned(await clients[1].invoke(addr, query("127.0.0.1@c2")))
                assert first == [("broker-a", 0, "PULL"), ("broker-a", 1, "PULL")]
                assert second == [("broker-b", 0, "PULL"), ("broker-b", 1, "PULL")]
                circle = assigned(await c1.invoke(addr, query("127.0.0.1@c1", strategy="AVG_BY_CIRCLE")))
                assert circle == [("broker-a", 0, "PULL"), ("broker-b", 0, "PULL")]
                # the VIP (fast) port answers too
                fast = f"127.0.0.1:{a.fast_server.port}"
                assert assigned(await c1.invoke(fast, query("127.0.0.1@c1"))) == first
                # as 5.3.3: no list (the client keeps its queues) for an unknown strategy or topic,
                # an empty one (it drops them) for a client that is not in the group
                assert assigned(await c1.invoke(addr, query("127.0.0.1@c1", strategy="NOPE"))) is None
                assert assigned(await c1.invoke(addr, query("127.0.0.1@c1", topic="NoSuchTopic"))) is None
                assert assigned(await c1.invoke(addr, query("127.0.0.1@stranger"))) == []
                # a client gone: the other takes every queue
                await clients.pop().close()
                while len(a.consumers.get(G).client_ids()) > 1:
                    await asyncio.sleep(0.02)
                assert len(assigned(await c1.invoke(addr, query("127.0.0.1@c1")))) == 4
            finally:
                for c in clients:
                    await c.close()
    run(scenario())


def test_pop_mode_gives_every_client_each_broker_as_queue_minus_1(tmp_path):
    async def scenario():
        async with two_brokers(tmp_path, queues=4) as (_ns, (a, b)):
            addr = a.config.broker_addr
            clients = await consumers(addr, "127.0.0.1@c1", "127.0.0.1@c2")
            try:
                c1 = clients[0]
                assert (await c1.invoke(addr, set_mode("POP", 0))).code == ResponseCode.SUCCESS
                pop = [("broker-a", -1, "POP"), ("broker-b", -1, "POP")]
                assert assigned(await c1.invoke(addr, query("127.0.0.1@c1"))) == pop
                assert assigned(await clients[1].invoke(addr, query("127.0.0.1@c2"))) == pop
                # broadcasting: every queue of every broker, in the topic's mode
                every = assigned(await c1.invoke(addr, query("127.0.0.1@c1", model="BROADCASTING")))
                assert every == [(n, q, "POP") for n in ("broker-a", "broker-b") for q in range(4)]
                # back to PULL: the averagely split again; broker-b never heard of the mode (PULL, its default)
                assert (await c1.invoke(addr, set_mode("PULL"))).code == ResponseCode.SUCCESS
                assert assigned(await c1.invoke(addr, query("127.0.0.1@c1"))) == [
                    ("broker-a", q, "PULL") for q in range(4)]
                assert b.pop.request_modes.get(T, G) is None
            finally:
                for c in clients:
                    await c.close()
    run(scenario())


def test_set_mode_refusals_and_a_default_from_the_broker_config(tmp_path):
    async def scenario():
        async with two_brokers(tmp_path) as (_ns, (a, _b)):
            addr = a.config.broker_addr
            (c1,) = clients = await consumers(addr, "127.0.0.1@c1")
            try:
                retry = await c1.invoke(addr, set_mode("POP", topic=f"%RETRY%{G}"))
                assert (retry.code, retry.remark) == (ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
                missing = await c1.invoke(addr, set_mode("POP", topic="NoSuchTopic"))
                assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[NoSuchTopic] not exist")
                no_body = await c1.invoke(addr, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE))
                assert no_body.code == ResponseCode.SYSTEM_ERROR
                a.config.autoCreateSubscriptionGroup = False
                a.groups.auto_create = False
                no_group = await c1.invoke(addr, set_mode("POP", group="GID_NOBODY"))
                assert (no_group.code, no_group.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                                            "subscription group does not exist")
                assert not (a.store_config.root / "config" / "messageRequestMode.json").exists()
                # nothing set: defaultMessageRequestMode (PULL), POP with defaultPopShareQueueNum -1
                assert assigned(await c1.invoke(addr, query("127.0.0.1@c1")))[0][2] == "PULL"
                a.config.defaultMessageRequestMode = "POP"
                assert assigned(await c1.invoke(addr, query("127.0.0.1@c1"))) == [
                    ("broker-a", -1, "POP"), ("broker-b", -1, "POP")]
            finally:
                for c in clients:
                    await c.close()
    run(scenario())


def test_the_mode_file_is_java_s_shape_and_is_read_again_at_start(tmp_path):
    async def first():
        async with two_brokers(tmp_path) as (_ns, (a, _b)):
            client = RemotingClient()
            try:
                addr = a.config.broker_addr
                assert (await client.invoke(addr, set_mode("POP", 1))).code == ResponseCode.SUCCESS
                got = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_MESSAGE_REQUEST_MODE))
                assert got.code == ResponseCode.SUCCESS
                assert got.body == (b'{"messageRequestModeMap":{"TopicAssign":{"GID_ASSIGN":{"consumerGroup":'
                                    b'"GID_ASSIGN","mode":"POP","popShareQueueNum":1,"topic":"TopicAssign"}}}}')
            finally:
                await client.close()

    async def second():
        async with two_brokers(tmp_path) as (_ns, (a, _b)):
            mode = a.pop.request_modes.get(T, G)
            assert (mode.mode, mode.popShareQueueNum) == ("POP", 1)
            (c1,) = clients = await consumers(a.config.broker_addr, "127.0.0.1@c1")
            try:     # one client: popShareQueueNum 1 >= clients - 1, so every broker's queues
                assert assigned(await c1.invoke(a.config.broker_addr, query("127.0.0.1@c1"))) == [
                    ("broker-a", -1, "POP"), ("broker-b", -1, "POP")]
            finally:
                for c in clients:
                    await c.close()

    run(first())
    path = tmp_path / "broker-a" / "config" / "messageRequestMode.json"
    assert path.read_text() == ('{\n\t"messageRequestModeMap":{\n\t\t"TopicAssign":{\n\t\t\t"GID_ASSIGN":{\n'
                                '\t\t\t\t"consumerGroup":"GID_ASSIGN",\n\t\t\t\t"mode":"POP",\n'
                                '\t\t\t\t"popShareQueueNum":1,\n\t\t\t\t"topic":"TopicAssign"\n'
                                '\t\t\t}\n\t\t}\n\t}\n}')
    run(second())


def test_a_slave_copies_its_masters_modes(tmp_path):
    async def scenario():
        async with two_brokers(tmp_path) as (ns, (master, _b)):
            config = BrokerConfig(brokerName="broker-a", brokerId=1, brokerRole="SLAVE", listenPort=free_port_pair(),
                                  namesrvAddr=f"127.0.0.1:{ns.port}", storePathRootDir=str(tmp_path / "slave"))
            slave = await BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 20)}).start("127.0.0.1")
            client = RemotingClient()
            try:
                assert slave.slave_sync.master_addr == master.config.broker_addr
                assert (await client.invoke(master.config.broker_addr, set_mode("POP", 2))).code == 0
                await slave.slave_sync.sync_all()
                copy = slave.pop.request_modes.get(T, G)
                assert (copy.mode, copy.popShareQueueNum) == ("POP", 2)
                assert (slave.store_config.root / "config" / "messageRequestMode.json").read_bytes() == \
                    (master.store_config.root / "config" / "messageRequestMode.json").read_bytes()
                assert (await client.invoke(master.config.broker_addr, set_mode("PULL"))).code == 0
                await slave.slave_sync.sync_all()
                assert slave.pop.request_modes.get(T, G).mode == "PULL"
            finally:
                await client.close()
                await slave.stop()
    run(scenario())


# ---------------------------------------------------------------------- the allocation rules

QUEUES = [("T", b, q) for b in ("broker-a", "broker-b") for q in range(2)]


def test_averagely_and_by_circle_as_the_java_strategies():
    cids = ["c1", "c2", "c3"]
    assert [allocate_averagely(c, QUEUES, cids) for c in cids] == [QUEUES[0:2], QUEUES[2:3], QUEUES[3:4]]
    assert [allocate_by_circle(c, QUEUES, cids) for c in cids] == [[QUEUES[0], QUEUES[3]], [QUEUES[1]], [QUEUES[2]]]
    five = [f"c{i}" for i in range(5)]
    assert [allocate_averagely(c, QUEUES, five) for c in five] == [[q] for q in QUEUES] + [[]]
    assert allocate_averagely("stranger", QUEUES, cids) == []


def test_pop_sharing_adds_the_following_clients_queues():
    cids = ["c1", "c2", "c3", "c4"]
    # popShareQueueNum 1 of 4 clients: its own queue and the next client's (c4 wraps round to c1)
    assert allocate_for_pop(allocate_averagely, "c1", QUEUES, cids, 1) == QUEUES[0:2]
    assert allocate_for_pop(allocate_averagely, "c4", QUEUES, cids, 1) == [QUEUES[3], QUEUES[0]]
    # 0, or >= clients - 1: every broker as queue -1
    minus_1 = [("T", "broker-a", -1), ("T", "broker-a", -1), ("T", "broker-b", -1), ("T", "broker-b", -1)]
    assert allocate_for_pop(allocate_averagely, "c1", QUEUES, cids, 0) == minus_1
    assert allocate_for_pop(allocate_averagely, "c1", QUEUES, cids, 3) == minus_1
    # more clients than queues: one queue each, round the queues
    six = [f"c{i}" for i in range(6)]
    assert allocate_for_pop(allocate_averagely, "c5", QUEUES, six, 1) == [QUEUES[1]]


# ---------------------------------------------------------------------- the CLI

def test_set_consume_mode_cli(cluster):  # noqa: F811
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "ModeTopic", "-r", "2", "-w", "2", check=True)
    proc = run_cli("group", "set-consume-mode", "-n", ns, "-g", "GID_MODE", "-t", "ModeTopic", "-m", "pop",
                   "-q", "2", "--json", check=True)
    assert json_lines(proc.stdout) == [{"group": "GID_MODE", "topic": "ModeTopic", "broker": "broker-a",
                                        "mode": "POP", "pop_share_queue_num": 2}]
    saved = json.loads((cluster["tmp"] / "store-broker-a" / "config" / "messageRequestMode.json").read_text())
    assert saved["messageRequestModeMap"]["ModeTopic"]["GID_MODE"] == {
        "consumerGroup": "GID_MODE", "mode": "POP", "popShareQueueNum": 2, "topic": "ModeTopic"}
    table = run_cli("setConsumeMode", "-n", ns, "-g", "GID_MODE", "-t", "ModeTopic", "-m", "PULL",
                    "-b", "broker-a", check=True)
    assert "PULL" in table.stdout
    # the broker's refusal: one line, exit 1
    bad = run_cli("group", "set-consume-mode", "-n", ns, "-g", "GID_MODE", "-t", "NoSuchTopic", "-m", "POP")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "TOPIC_NOT_EXIST" in lines[0] and "topic[NoSuchTopic] not exist" in lines[0], lines
    wrong = run_cli("group", "set-consume-mode", "-n", ns, "-g", "GID_MODE", "-t", "ModeTopic", "-m", "PUSH")
    assert wrong.returncode == 2 and "PUSH" in wrong.stderr
