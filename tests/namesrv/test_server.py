"""The name server over real 127.0.0.1 sockets, spoken to with the remoting client."""
from __future__ import annotations

import asyncio
import json

from mqtool.namesrv.server import NameServer
from remoting import jsonbody
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.transport import RemotingClient, connect

BODY = {"filterServerList": [], "topicConfigSerializeWrapper": {
    "dataVersion": {"counter": 3, "timestamp": 1700000000000},
    "topicConfigTable": {"TopicTest": {"order": False, "perm": 6, "readQueueNums": 4,
                                       "topicFilterType": "SINGLE_TAG", "topicName": "TopicTest",
                                       "topicSysFlag": 0, "writeQueueNums": 4}}}}


def register(name, addr, broker_id=0):
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, {
        "brokerName": name, "brokerAddr": addr, "clusterName": "DefaultCluster", "haServerAddr": addr,
        "brokerId": broker_id, "compressed": False}, json.dumps(BODY).encode())


def test_register_route_cluster_kv_and_close(tmp_path):
    async def scenario():
        ns = await NameServer(tmp_path / "kv.json").start("127.0.0.1", 0)
        addr = f"127.0.0.1:{ns.port}"
        broker_a = await connect(addr)
        broker_b = await connect(addr)
        assert (await broker_a.request(register("broker-a", "127.0.0.1:10911"))).code == 0
        assert (await broker_b.request(register("broker-b", "127.0.0.1:10921"))).code == 0
        client = RemotingClient()
        old = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        old.version = 63    # the 0.4.4 C++ client
        resp = await client.invoke(addr, old)
        assert resp.code == 0 and b'"brokerAddrs":{0:"127.0.0.1:10911"}' in resp.body
        new = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        resp = await client.invoke(addr, new)
        route = json.loads(resp.body)   # standard JSON for 4.9.4+ clients
        assert sorted(b["brokerName"] for b in route["brokerDatas"]) == ["broker-a", "broker-b"]
        missing = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "X"}))
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "X" in missing.remark
        info = jsonbody.loads((await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))).body)
        assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}
        put = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"})
        assert (await client.invoke(addr, put)).code == 0
        got = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}))
        assert got.ext_fields == {"value": "v"}
        unknown = await client.invoke(addr, RemotingCommand.request(9999))
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        bad = await client.invoke(addr, RemotingCommand.request(RequestCode.REGISTER_BROKER, {"brokerName": "x"}))
        assert bad.code == ResponseCode.SYSTEM_ERROR and "brokerAddr" in bad.remark
        await broker_a.close()     # its connection closes: it leaves the routes
        for _ in range(200):
            route = json.loads((await client.invoke(addr, new)).body)
            if len(route["brokerDatas"]) == 1:
                break
            await asyncio.sleep(0.01)
        assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-b"]
        await client.close()
        await broker_b.close()
        await ns.stop()
        assert json.loads((tmp_path / "kv.json").read_text()) == {"configTable": {"ns": {"k": "v"}}}
    asyncio.run(asyncio.wait_for(scenario(), 20))
