"""The name server over real 127.0.0.1 sockets, spoken to with the remoting client."""
from __future__ import annotations

import asyncio
import json
import zlib

import pytest

from mqtool.namesrv.kvconfig import KVConfigError
from mqtool.namesrv.server import NameServer
from mqtool_remoting import jsonbody
from mqtool_remoting.bodies import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from mqtool_remoting.codes import MQVersion, RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import connect

A, A_SLAVE, B = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931"
# remoting.md §7.2 / §7.5 [ran]: what a 4.9.8 name server sends for one master + one slave
ROUTE_LEGACY = (b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a",'
                b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
                b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
CLUSTER = (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},'
           b'"brokerName":"broker-a","cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')


def register_cmd(name, addr, broker_id=0, topics=("TopicTest",), counter=3, compressed=False, crc=True,
                 cluster="DefaultCluster") -> RemotingCommand:
    wrapper = TopicConfigSerializeWrapper({t: TopicConfig(t, 4, 4, 6) for t in topics},
                                          DataVersion(1700000000000, counter))
    body = RegisterBrokerBody(wrapper).encode(compressed)
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "haServerAddr": addr[:-1] + "2",
           "brokerId": broker_id, "compressed": compressed, "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF if crc else 0}
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body, language="JAVA")


def route_cmd(topic, version=int(MQVersion.V4_9_8), **ext) -> RemotingCommand:
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, **ext})
    cmd.version = version
    return cmd


def req(code, ext=None, body=b"") -> RemotingCommand:
    return RemotingCommand.request(code, ext, body)


def run(scenario, tmp_path, **kw):
    async def main():
        ns = await NameServer(tmp_path / "kv.json", **kw).start("127.0.0.1", 0)
        try:
            await scenario(ns, f"127.0.0.1:{ns.port}")
        finally:
            await ns.stop()
    asyncio.run(asyncio.wait_for(main(), 20))


async def until(check, what: str):
    """Poll a condition the server reaches on its own (e.g. after seeing a connection close)."""
    for _ in range(500):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def test_master_and_slave_give_java_identical_route_and_cluster_info(tmp_path):
    async def scenario(ns, addr):
        master, slave, client = await connect(addr), await connect(addr), await connect(addr)
        first = await master.request(register_cmd("broker-a", A))
        assert first.code == ResponseCode.SUCCESS and first.ext_fields == {} and first.body == b""
        sreg = await slave.request(register_cmd("broker-a", A_SLAVE, 1, topics=("Ignored",), compressed=True))
        assert sreg.ext_fields == {"masterAddr": A, "haServerAddr": "127.0.0.1:10912"}
        legacy = await client.request(route_cmd("TopicTest", int(MQVersion.V4_6_0)))   # the C++ client's version
        assert legacy.code == 0 and legacy.body == ROUTE_LEGACY
        standard = await client.request(route_cmd("TopicTest"))
        assert standard.body == ROUTE_LEGACY.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')
        asked = await client.request(route_cmd("TopicTest", 0, acceptStandardJsonOnly=True))
        assert asked.body == standard.body
        assert (await client.request(route_cmd("Ignored"))).code == ResponseCode.TOPIC_NOT_EXIST
        info = await client.request(req(RequestCode.GET_BROKER_CLUSTER_INFO))
        assert info.body == CLUSTER
        for c in (master, slave, client):
            await c.close()
    run(scenario, tmp_path)


def test_two_brokers_share_routes_and_leave_when_their_connection_closes(tmp_path):
    async def scenario(ns, addr):
        a, b, client = await connect(addr), await connect(addr), await connect(addr)
        assert (await a.request(register_cmd("broker-a", A, topics=("Shared", "OnlyA")))).code == 0
        assert (await b.request(register_cmd("broker-b", B, topics=("Shared",), compressed=True))).code == 0
        route = json.loads((await client.request(route_cmd("Shared"))).body)
        assert sorted(d["brokerName"] for d in route["brokerDatas"]) == ["broker-a", "broker-b"]
        assert sorted(q["brokerName"] for q in route["queueDatas"]) == ["broker-a", "broker-b"]
        topics = jsonbody.loads((await client.request(req(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))).body)
        assert topics == {"topicList": ["OnlyA", "Shared"]}
        by_cluster = await client.request(req(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}))
        assert jsonbody.loads(by_cluster.body)["topicList"] == ["OnlyA", "Shared"]
        missing = await client.request(route_cmd("X"))
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST
        assert missing.remark.startswith("No topic route info in name server for the topic: X")
        await a.close()                # broker-a's connection closes: it leaves the routes

        async def only_b():
            r = await client.request(route_cmd("Shared"))
            return [d["brokerName"] for d in json.loads(r.body)["brokerDatas"]] == ["broker-b"]
        await until(only_b, "broker-a removed")
        assert (await client.request(route_cmd("OnlyA"))).code == ResponseCode.TOPIC_NOT_EXIST
        cluster = jsonbody.loads((await client.request(req(RequestCode.GET_BROKER_CLUSTER_INFO))).body)
        assert cluster["clusterAddrTable"] == {"DefaultCluster": ["broker-b"]}
        await b.close()
        await client.close()
    run(scenario, tmp_path)


def test_silent_broker_expires_and_its_connection_is_closed(tmp_path):
    now = [1_000_000]

    async def scenario(ns, addr):
        a, b, client = await connect(addr), await connect(addr), await connect(addr)
        await a.request(register_cmd("broker-a", A))
        now[0] += 60_000
        await b.request(register_cmd("broker-b", B))
        now[0] += 60_001                              # broker-a: 120.001 s since its last registration
        assert ns.scan_not_active_brokers() == 1
        await asyncio.wait_for(a.closed.wait(), 5)    # the name server hung up on it, as Java does
        assert not b.closed.is_set()
        route = json.loads((await client.request(route_cmd("TopicTest"))).body)
        assert [d["brokerName"] for d in route["brokerDatas"]] == ["broker-b"]
        # QUERY_DATA_VERSION with the same version counts as a heartbeat
        query = req(RequestCode.QUERY_DATA_VERSION, {"brokerName": "broker-b", "brokerAddr": B,
                                                     "clusterName": "DefaultCluster", "brokerId": 0},
                    jsonbody.dumps(DataVersion(1700000000000, 3).to_json()))
        now[0] += 100_000
        answer = await b.request(query)
        assert answer.ext_fields == {"changed": "false"}
        assert DataVersion.from_json(jsonbody.loads(answer.body)) == DataVersion(1700000000000, 3)
        now[0] += 100_000
        assert ns.scan_not_active_brokers() == 0
        changed = await b.request(req(RequestCode.QUERY_DATA_VERSION, query.ext_fields,
                                      jsonbody.dumps(DataVersion(1700000000000, 4).to_json())))
        assert changed.ext_fields == {"changed": "true"}
        for c in (a, b, client):
            await c.close()
    run(scenario, tmp_path, clock=lambda: now[0])


def test_kv_config_is_persisted_like_java(tmp_path):
    kv_file = tmp_path / "kv.json"

    async def first(ns, addr):
        c = await connect(addr)
        for k, v in (("k", "v"), ("k2", "v2"), ("k", "v3")):
            put = await c.request(req(RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": k, "value": v}))
            assert put.code == 0
        got = await c.request(req(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}))
        assert (got.code, got.ext_fields) == (0, {"value": "v3"})
        nf = await c.request(req(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "nope"}))
        assert (nf.code, nf.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ns Key: nope")
        await c.request(req(RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k2"}))
        listed = await c.request(req(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"}))
        assert listed.body == b'{"table":{"k":"v3"}}'
        none = await c.request(req(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "other"}))
        assert none.code == ResponseCode.QUERY_NOT_FOUND
        nokey = await c.request(req(RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "value": "x"}))
        assert (nokey.code, nokey.remark) == (ResponseCode.SYSTEM_ERROR, "namespace or key is null")
        await c.close()
    run(first, tmp_path)
    assert kv_file.read_bytes() == b'{"configTable":{"ns":{"k":"v3"}}}'      # compact, as KVConfigManager writes
    assert json.loads((tmp_path / "kv.json.bak").read_text()) == {"configTable": {"ns": {"k": "v3", "k2": "v2"}}}  # before the delete
    assert not (tmp_path / "kv.json.tmp").exists()

    async def second(ns, addr):      # a restarted name server reads the file back
        c = await connect(addr)
        got = await c.request(req(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}))
        assert got.ext_fields == {"value": "v3"}
        await c.request(req(RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"}))
        emptied = await c.request(req(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"}))
        assert (emptied.code, emptied.body) == (0, b'{"table":{}}')        # Java keeps the emptied namespace
        await c.close()
    run(second, tmp_path)


def test_order_topic_config_reaches_brokers_and_routes(tmp_path):
    (tmp_path / "kv.json").write_text('{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicTest":"broker-a:4"}}}')

    async def scenario(ns, addr):
        c = await connect(addr)
        reg = await c.request(register_cmd("broker-a", A))
        assert reg.body == b'{"table":{"TopicTest":"broker-a:4"}}'
        route = json.loads((await c.request(route_cmd("TopicTest"))).body)
        assert route["orderTopicConf"] == "broker-a:4"
        await c.close()
    run(scenario, tmp_path, order_message_enable=True)


def test_corrupt_kv_file_is_a_clear_error(tmp_path):
    (tmp_path / "kv.json").write_text("{not json")
    with pytest.raises(KVConfigError, match="kv.json"):
        NameServer(tmp_path / "kv.json")


def test_bad_requests_get_answers_and_garbage_closes_only_its_connection(tmp_path):
    async def scenario(ns, addr):
        c = await connect(addr)
        unknown = await c.request(req(9999))
        assert (unknown.code, unknown.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                  " request type 9999 not supported")
        missing = await c.request(req(RequestCode.REGISTER_BROKER, {"brokerName": "x"}))
        assert missing.code == ResponseCode.SYSTEM_ERROR and "brokerAddr" in missing.remark
        bad_crc = register_cmd("broker-a", A)
        bad_crc.ext_fields["bodyCrc32"] = "12345"
        assert (await c.request(bad_crc)).remark == "crc32 not match"
        bad_body = register_cmd("broker-a", A, crc=False)
        bad_body.body = b"{broken"
        assert (await c.request(bad_body)).code == ResponseCode.SYSTEM_ERROR
        bad_zip = register_cmd("broker-a", A, crc=False, compressed=True)
        bad_zip.body = b"not zlib"
        assert "RegisterBrokerBody" in (await c.request(bad_zip)).remark
        assert (await c.request(route_cmd("TopicTest"))).code == ResponseCode.TOPIC_NOT_EXIST   # nothing registered
        reader, writer = await asyncio.open_connection("127.0.0.1", ns.port)
        writer.write(b"GET / HTTP/1.1\r\n\r\n")
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        assert (await c.request(register_cmd("broker-a", A))).code == 0
        await c.close()
    run(scenario, tmp_path)


def test_admin_requests(tmp_path):
    async def scenario(ns, addr):
        c = await connect(addr)
        await c.request(register_cmd("broker-a", A, topics=("T1", "T2")))
        wipe = await c.request(req(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}))
        assert wipe.ext_fields == {"wipeTopicCount": "2"}
        assert json.loads((await c.request(route_cmd("T1"))).body)["queueDatas"][0]["perm"] == 4
        add = await c.request(req(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}))
        assert add.ext_fields == {"addTopicCount": "2"}
        assert json.loads((await c.request(route_cmd("T1"))).body)["queueDatas"][0]["perm"] == 6
        assert (await c.request(req(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T1"}))).code == 0
        assert (await c.request(route_cmd("T1"))).code == ResponseCode.TOPIC_NOT_EXIST
        await c.request(req(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T2", "clusterName": "Other"}))
        assert (await c.request(route_cmd("T2"))).code == 0
        system = jsonbody.loads((await c.request(req(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS))).body)
        assert system == {"brokerAddr": A, "topicList": ["DefaultCluster", "broker-a"]}
        units = await c.request(req(RequestCode.GET_UNIT_TOPIC_LIST))
        assert units.body == b'{"topicList":[]}'
        config = (await c.request(req(RequestCode.GET_NAMESRV_CONFIG))).body.decode()
        assert "orderMessageEnable=false\n" in config and f"listenPort={ns.port}\n" in config
        upd = await c.request(req(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"orderMessageEnable=true\n"))
        assert upd.code == 0 and ns.config.orderMessageEnable
        black = await c.request(req(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"kvConfigPath=/tmp/x\n"))
        assert (black.code, black.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        unreg = req(RequestCode.UNREGISTER_BROKER, {"brokerName": "broker-a", "brokerAddr": A,
                                                    "clusterName": "DefaultCluster", "brokerId": 0})
        assert (await c.request(unreg)).code == 0
        assert (await c.request(route_cmd("T2"))).code == ResponseCode.TOPIC_NOT_EXIST
        assert not c.closed.is_set()
        await c.close()
    run(scenario, tmp_path)


def test_update_namesrv_config_keeps_what_it_honours_in_its_conf(tmp_path):
    """updateNamesrvConfig: the keys the name server reads at run time are kept in the namesrv.conf it
    started with (-c); a key used only at start is refused; a key it does not have is warned about."""
    conf = tmp_path / "namesrv.conf"
    conf.write_text("# ours\nlistenPort=9876\norderMessageEnable=false\n")

    async def scenario(ns, addr):
        ns.config_file = conf
        c = await connect(addr)
        upd = await c.request(req(RequestCode.UPDATE_NAMESRV_CONFIG, None,
                                  b"orderMessageEnable=true\nproductEnvName=test\nserverWorkerThreads=16\n"))
        assert upd.code == 0 and ns.config.orderMessageEnable and ns.config.productEnvName == "test"
        assert "serverWorkerThreads" in upd.remark and "restarts" not in upd.remark
        assert conf.read_text() == "# ours\nlistenPort=9876\norderMessageEnable=true\nproductEnvName=test\n"
        shown = await c.request(req(RequestCode.GET_NAMESRV_CONFIG))
        assert "serverWorkerThreads" not in shown.body.decode()       # not shown as if it were set
        fixed = await c.request(req(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"listenPort=1\n"))
        assert fixed.code == ResponseCode.SYSTEM_ERROR and "listenPort cannot change" in fixed.remark
        assert "listenPort=9876" in conf.read_text()
        await c.close()
    run(scenario, tmp_path)


def test_a_test_name_server_whose_port_was_taken_starts_on_a_new_port(tmp_path, monkeypatch):
    """tests/servers.py starts servers on ports chosen free; one taken before the server binds it
    (by any process on the machine) must not fail the test that asked for a server."""
    import socket
    from tests import servers
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1]])
        real = servers.free_port
        monkeypatch.setattr(servers, "free_port", lambda: next(ports, None) or real())
        proc, addr = servers.start_namesrv(tmp_path)
        try:
            assert addr != f"127.0.0.1:{taken.getsockname()[1]}"
            socket.create_connection(("127.0.0.1", int(addr.rpartition(":")[2])), timeout=5).close()
        finally:
            assert proc.stop() == 0
