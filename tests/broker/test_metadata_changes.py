"""Topic and group changes at a cost that does not grow with the table: incremental registration
with the name server, compressed full registration, journaled config files that survive a kill -9."""
from __future__ import annotations

import asyncio
import os
import signal

import pytest

from mqtool.namesrv import server as server_module
from mqtool_remoting import jsonbody
from mqtool_remoting.bodies import RegisterBrokerBody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient
from tests.broker.test_broker_server import running_pair, run
from tests.servers import Process, free_port, spy_handlers, start_broker


def create_topic_cmd(topic: str, queues: int = 4) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})


@pytest.fixture
def registrations(monkeypatch) -> list[tuple[dict, RegisterBrokerBody]]:
    """Every REGISTER_BROKER a name server handles, with its decoded body."""
    seen = []
    real = server_module._HANDLERS[RequestCode.REGISTER_BROKER]

    def spy(ns, conn, cmd):
        compressed = cmd.ext_fields.get("compressed") == "true"
        seen.append((dict(cmd.ext_fields), RegisterBrokerBody.decode(cmd.body, compressed)))
        return real(ns, conn, cmd)
    monkeypatch.setitem(server_module._HANDLERS, RequestCode.REGISTER_BROKER, spy)
    return seen


def test_a_created_topic_is_registered_alone_with_the_new_data_version_before_the_answer(tmp_path, registrations):
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            addr = broker.config.broker_addr
            assert len(registrations) == 1              # the full one at start
            del registrations[:]
            resp = await client.invoke(addr, create_topic_cmd("IncTopic", 3), 5)
            seen = registrations
            assert resp.code == ResponseCode.SUCCESS
            # answered after the registration: the route is there at once
            assert ns.routes.route("IncTopic").queueDatas[0].writeQueueNums == 3
            assert len(seen) == 1
            ext, body = seen[0]
            wrapper = body.topicConfigSerializeWrapper
            assert list(wrapper.topicConfigTable) == ["IncTopic"]
            assert wrapper.dataVersion.counter == broker.topics.data_version.counter
            assert ext["compressed"] == "false"
            # the periodic full registration still carries every topic (and does not drop any)
            await broker.register_all()
            assert len(seen[-1][1].topicConfigSerializeWrapper.topicConfigTable) == len(broker.topics.table)
            # a delete registers nothing (4.9.8: the route goes with DELETE_TOPIC_IN_NAMESRV)
            n = len(seen)
            req = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "IncTopic"})
            assert (await client.invoke(addr, req, 5)).code == ResponseCode.SUCCESS
            assert len(seen) == n
    run(scenario())


def test_concurrent_creates_share_registrations(tmp_path, registrations):
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            del registrations[:]
            seen = registrations
            addr = broker.config.broker_addr
            resps = await asyncio.gather(*(client.invoke(addr, create_topic_cmd(f"Burst{i}"), 10) for i in range(40)))
            assert all(r.code == ResponseCode.SUCCESS for r in resps)
            assert all(ns.routes.route(f"Burst{i}") is not None for i in range(40))
            registered = [t for _, body in seen for t in body.topicConfigSerializeWrapper.topicConfigTable]
            assert sorted(registered) == sorted(f"Burst{i}" for i in range(40))      # each once
            assert len(seen) < 40
            last = seen[-1][1].topicConfigSerializeWrapper.dataVersion
            assert last.counter == broker.topics.data_version.counter
    run(scenario())


def test_compressed_register_sends_the_deflated_body_the_name_server_reads(tmp_path, registrations):
    async def scenario():
        async with running_pair(tmp_path, compressedRegister=True) as (ns, broker, client):
            seen = registrations
            for i in range(70):          # past the size at which the body is deflated on a thread
                broker.topics.update(broker.topics.get("TBW102").__class__(f"Z{i}", 2, 2))
            await broker.register_all()
            ext, body = seen[-1]
            assert ext["compressed"] == "true"
            assert set(body.topicConfigSerializeWrapper.topicConfigTable) == set(broker.topics.table)
            assert ns.routes.route("Z69").queueDatas[0].readQueueNums == 2
            resp = await client.invoke(broker.config.broker_addr, create_topic_cmd("ZInc", 5), 5)
            assert resp.code == ResponseCode.SUCCESS and ns.routes.route("ZInc").queueDatas[0].readQueueNums == 5
            assert seen[-1][0]["compressed"] == "true"
    run(scenario())


@pytest.mark.slow
def test_changes_acknowledged_before_a_kill_9_are_there_after_restart(tmp_path):
    ns_port = free_port()
    ns = Process(["namesrv", "start", "--listen", f"127.0.0.1:{ns_port}", "--kv-config", str(tmp_path / "kv.json")],
                 "boot success")
    broker, addr = start_broker(tmp_path, f"127.0.0.1:{ns_port}")
    try:
        async def changes():
            client = RemotingClient()
            try:
                for i in range(30):
                    assert (await client.invoke(addr, create_topic_cmd(f"Kept{i}", 2), 5)).code == 0
                req = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                              body=jsonbody.dumps({"groupName": "KeptGroup", "retryMaxTimes": 5}))
                assert (await client.invoke(addr, req, 5)).code == 0
                req = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Kept0"})
                assert (await client.invoke(addr, req, 5)).code == 0
            finally:
                await client.close()
        asyncio.run(changes())
        os.kill(broker.proc.pid, signal.SIGKILL)          # at once, most likely before the files' next rewrite
        broker.proc.wait(10)
        broker.proc.stderr.close()
        port = int(addr.rsplit(":", 1)[1])
        conf = tmp_path / "broker-a.conf"
        broker = Process(["broker", "start", "-n", f"127.0.0.1:{ns_port}", "-c", str(conf), "--listen",
                          f"127.0.0.1:{port}", "--store-dir", str(tmp_path / "store-broker-a")], "boot success")

        async def check():
            client = RemotingClient()
            try:
                topics = jsonbody.loads((await client.invoke(addr, RemotingCommand.request(
                    RequestCode.GET_ALL_TOPIC_CONFIG), 5)).body)["topicConfigTable"]
                groups = jsonbody.loads((await client.invoke(addr, RemotingCommand.request(
                    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), 5)).body)["subscriptionGroupTable"]
            finally:
                await client.close()
            return topics, groups
        topics, groups = asyncio.run(check())
        assert all(f"Kept{i}" in topics for i in range(1, 30)) and "Kept0" not in topics
        assert topics["Kept29"]["readQueueNums"] == 2
        assert groups["KeptGroup"]["retryMaxTimes"] == 5
    finally:
        assert broker.stop() in (0, -signal.SIGKILL)
        assert ns.stop() == 0


def test_topic_stats_body_and_tops_reading_of_it_match_the_general_codec():
    from mqtool.broker.admin import topic_stats_body
    from mqtool.client.top import max_offsets_sum
    from mqtool_remoting.jsonbody import ObjectKey
    rows = [(0, 1700000000123, 42, 3), (1, 0, 0, 0), (7, 5, 10 ** 12, 7)]
    table = {ObjectKey(sorted({"brokerName": 'b"é', "queueId": q, "topic": "T%RETRY%x"}.items())):
             {"lastUpdateTimestamp": last, "maxOffset": mx, "minOffset": mn} for q, last, mx, mn in rows}
    body = topic_stats_body('b"é', "T%RETRY%x", rows)
    assert body == jsonbody.dumps({"offsetTable": table})
    assert topic_stats_body("b", "T", []) == jsonbody.dumps({"offsetTable": {}})
    assert max_offsets_sum(body) == sum(v["maxOffset"] for v in jsonbody.loads(body)["offsetTable"].values())


def test_broker_consume_stats_body_and_tops_reading_of_it_match_the_general_codec():
    from mqtool.broker.adminops import consume_stats_list_body
    from mqtool.client.top import _topic_of, consume_stats_list
    from mqtool_remoting.bodies import ConsumeStats, ConsumeStatsList, MessageQueue, OffsetWrapper

    def stats(topic, n, tps):
        return ConsumeStats({MessageQueue(topic, 'b"é', q): OffsetWrapper(100 + q, 90 + q, 1700000000000 + q)
                             for q in range(n)}, tps)
    body = ConsumeStatsList([{"G1": [stats("TA", 3, 1.5), stats('T\\"x', 2, 0.0)]}, {"G2": []},
                             {'G"é': [stats("TA", 8, 0.25)]}], "127.0.0.1:10911", 42)
    data = consume_stats_list_body(body)
    assert data == jsonbody.dumps(body.to_json())
    assert consume_stats_list_body(ConsumeStatsList()) == jsonbody.dumps(ConsumeStatsList().to_json())

    def sums(parsed):
        out = {}
        for entry in parsed["consumeStatsList"]:
            for group, per_topic in entry.items():
                for st in per_topic:
                    for key, w in st["offsetTable"].items():
                        k = (group, _topic_of(key))
                        out[k] = out.get(k, 0) + w["brokerOffset"] * 1000 + w["consumerOffset"]
        return out
    fast, general = sums(consume_stats_list(data)), sums(jsonbody.loads(data))
    assert fast == general and len(fast) == 3 and ("G1", 'T\\"x') in fast


def test_the_plain_full_registration_body_is_what_register_broker_body_encodes(tmp_path, registrations):
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            sent = []
            real = broker.namesrv_client.invoke

            async def spy(addr, cmd, timeout):
                sent.append(cmd)
                return await real(addr, cmd, timeout)
            broker.namesrv_client.invoke = spy
            await broker.register_all()
            body = RegisterBrokerBody.decode(sent[-1].body, False)
            assert sent[-1].body == body.encode(False)
            assert set(body.topicConfigSerializeWrapper.topicConfigTable) == set(broker.topics.table)
    run(scenario())


@pytest.fixture
def asked(monkeypatch) -> list[int]:
    """The code of every GET_TOPIC_CONFIG and GET_ALL_TOPIC_CONFIG a broker's main port handles."""
    return spy_handlers(monkeypatch, (RequestCode.GET_TOPIC_CONFIG, RequestCode.GET_ALL_TOPIC_CONFIG))


@pytest.mark.parametrize("broker_kind", ["mqtool", "4.9.8"])
def test_create_topic_keeps_what_is_there_without_fetching_the_table(tmp_path, monkeypatch, asked, broker_kind):
    """A value left out is read from the one topic's config (GET_TOPIC_CONFIG, 351); a broker that answers
    351 REQUEST_CODE_NOT_SUPPORTED, as 4.9.8's does, is asked for its whole table instead."""
    from mqtool.broker import controller
    from mqtool.broker.topics import TopicConfig
    from mqtool.client.admin import Admin
    if broker_kind == "4.9.8":
        monkeypatch.delitem(controller.HANDLERS, RequestCode.GET_TOPIC_CONFIG)

    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            for i in range(300):            # a table the answer must not carry
                broker.topics.update(TopicConfig(f"Filler{i}", 1, 1))
            admin = Admin(f"127.0.0.1:{ns.port}")
            try:
                await admin.create_topic("Kept", read=3, perm=4)            # new: mqadmin's defaults for the rest
                assert broker.topics.get("Kept") == TopicConfig("Kept", 3, 8, 4)
                await admin.create_topic("Kept", write=2)                   # existing: read and perm kept
                assert broker.topics.get("Kept") == TopicConfig("Kept", 3, 2, 4)
                await admin.create_topic("Kept", 5, 5, 6, False)            # all given: nothing asked
                assert broker.topics.get("Kept") == TopicConfig("Kept", 5, 5, 6)
                assert await admin.delete_topic("Kept") == {"broker-a": True}
                assert await admin.delete_topic("Kept") == {"broker-a": False}
            finally:
                await admin.close()
            if broker_kind == "mqtool":
                assert asked == [RequestCode.GET_TOPIC_CONFIG] * 4
            else:
                assert asked == [RequestCode.GET_ALL_TOPIC_CONFIG] * 4    # 351 never reached a handler
    run(scenario())


def test_get_topic_config_answers_one_topic_as_5_x_does(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            addr = broker.config.broker_addr
            assert (await client.invoke(addr, create_topic_cmd("One", 3), 5)).code == ResponseCode.SUCCESS
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": "One"}), 5)
            assert resp.code == ResponseCode.SUCCESS
            assert jsonbody.loads(resp.body) == {"topicName": "One", "readQueueNums": 3, "writeQueueNums": 3,
                                                 "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                                 "order": False}
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": "None"}), 5)
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST and resp.remark == "No topic in this broker. topic: None"
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {}), 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR and "topic" in resp.remark
    run(scenario())


@pytest.fixture
def namesrv_requests(monkeypatch) -> list[tuple[int, int]]:
    """(name server port, code) of every REGISTER_BROKER and QUERY_DATA_VERSION a name server handles."""
    seen = []
    for code in (RequestCode.REGISTER_BROKER, RequestCode.QUERY_DATA_VERSION):
        def spy(ns, conn, cmd, real=server_module._HANDLERS[code]):
            seen.append((ns.port, cmd.code))
            return real(ns, conn, cmd)
        monkeypatch.setitem(server_module._HANDLERS, code, spy)
    return seen


async def wait_for(what: str, check, timeout: float = 10):
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("force", [False, True])
def test_force_register_false_registers_only_when_a_data_version_differs(tmp_path, namesrv_requests, force):
    from mqtool.broker.config import BrokerConfig
    from mqtool.broker.controller import BrokerController
    from mqtool.namesrv.server import NameServer

    async def scenario():
        ns1 = await NameServer(tmp_path / "kv1.json").start("127.0.0.1", 0)
        ns2 = await NameServer(tmp_path / "kv2.json").start("127.0.0.1", 0)
        config = BrokerConfig(brokerName="broker-a", listenPort=0, namesrvAddr=f"127.0.0.1:{ns1.port};127.0.0.1:{ns2.port}",
                              storePathRootDir=str(tmp_path / "broker-a"), forceRegister=force)
        broker = await BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 20)}).start("127.0.0.1")
        sent = broker.registration.sent
        seen = namesrv_requests
        reg, query = RequestCode.REGISTER_BROKER, RequestCode.QUERY_DATA_VERSION

        async def periodic() -> list[tuple[int, int]]:
            """One turn of the periodic registration (what registerNameServerPeriod would start)."""
            before = sum(sent.values())
            del seen[:]
            broker.schedule_register()
            await wait_for("a periodic registration", lambda: sum(sent.values()) > before)
            return sorted(seen)
        try:
            assert sorted(seen) == sorted([(ns1.port, reg), (ns2.port, reg)])          # the one at start: always
            # nothing changed: 4.9.8's needRegister finds both versions equal and sends nothing more
            got = await periodic()
            if force:
                assert got == sorted([(ns1.port, reg), (ns2.port, reg)])
                return
            assert got == sorted([(ns1.port, query), (ns2.port, query)]) and sent["skipped"] == 1
            assert ns1.routes.route("TBW102") is not None and ns2.routes.route("TBW102") is not None
            # a delete changes the data version without registering: the next turn registers in full
            broker.topics.delete("SELF_TEST_TOPIC")
            full = sent["full"]
            got = await periodic()
            assert got == sorted([(ns1.port, query), (ns1.port, reg), (ns2.port, query), (ns2.port, reg)])
            assert sent["full"] == full + 1
            for ns in (ns1, ns2):
                assert ns.routes.data_version(broker.config.broker_addr).counter == broker.topics.data_version.counter
            # a name server that lost the broker (as one restarted would): as 4.9.8's needRegister, one
            # name server that differs is enough for the full registration to go to every one
            client = RemotingClient()
            try:
                resp = await client.invoke(f"127.0.0.1:{ns2.port}", RemotingCommand.request(
                    RequestCode.UNREGISTER_BROKER, {"brokerName": "broker-a", "brokerAddr": broker.config.broker_addr,
                                                    "clusterName": "DefaultCluster", "brokerId": 0}), 5)
                assert resp.code == ResponseCode.SUCCESS and ns2.routes.route("TBW102") is None
            finally:
                await client.close()
            got = await periodic()
            assert got == sorted([(ns1.port, query), (ns1.port, reg), (ns2.port, query), (ns2.port, reg)])
            assert ns2.routes.route("TBW102") is not None
        finally:
            await broker.stop()
            await ns1.stop()
            await ns2.stop()
    run(scenario())
