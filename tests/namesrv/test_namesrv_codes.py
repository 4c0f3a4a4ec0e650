"""The name server's admin codes of 4.9.8's DefaultRequestProcessor that mqadmin and the dashboard
send (issue 10): topics by cluster, unit topic lists, KV lists, data versions, and the code table."""
from __future__ import annotations

import zlib

from mqtool.namesrv.server import _HANDLERS
from mqtool_remoting import jsonbody
from mqtool_remoting.bodies import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import connect
from tests.namesrv.test_server import req, run

A, B = "127.0.0.1:10911", "127.0.0.1:10931"
# the `case RequestCode.X` of namesrv/.../processor/DefaultRequestProcessor.java (rocketmq-all-4.9.8)
JAVA_NAMESRV_CODES = {
    "PUT_KV_CONFIG", "GET_KV_CONFIG", "DELETE_KV_CONFIG", "QUERY_DATA_VERSION", "REGISTER_BROKER",
    "UNREGISTER_BROKER", "GET_ROUTEINFO_BY_TOPIC", "GET_BROKER_CLUSTER_INFO", "WIPE_WRITE_PERM_OF_BROKER",
    "ADD_WRITE_PERM_OF_BROKER", "GET_ALL_TOPIC_LIST_FROM_NAMESERVER", "DELETE_TOPIC_IN_NAMESRV",
    "GET_KVLIST_BY_NAMESPACE", "GET_TOPICS_BY_CLUSTER", "GET_SYSTEM_TOPIC_LIST_FROM_NS", "GET_UNIT_TOPIC_LIST",
    "GET_HAS_UNIT_SUB_TOPIC_LIST", "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST", "UPDATE_NAMESRV_CONFIG",
    "GET_NAMESRV_CONFIG",
}
FLAG_UNIT, FLAG_UNIT_SUB = 0x1, 0x2        # TopicSysFlag


def register(name: str, addr: str, cluster: str, topics: dict[str, int], counter: int = 1) -> RemotingCommand:
    wrapper = TopicConfigSerializeWrapper({t: TopicConfig(t, 4, 4, 6, "SINGLE_TAG", flag) for t, flag in topics.items()},
                                          DataVersion(1700000000000, counter))
    body = RegisterBrokerBody(wrapper).encode()
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "haServerAddr": addr[:-1] + "2",
           "brokerId": 0, "compressed": False, "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body, language="JAVA")


def test_the_name_server_serves_exactly_javas_codes():
    assert {RequestCode(c).name for c in _HANDLERS} == JAVA_NAMESRV_CODES


def test_topics_by_cluster_unit_lists_kv_lists_and_data_versions(tmp_path):
    async def scenario(ns, addr):
        c = await connect(addr)

        async def topics(code, ext=None):
            resp = await c.request(req(code, ext))
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            return sorted(jsonbody.loads(resp.body)["topicList"])
        await c.request(register("broker-a", A, "C1", {"Plain": 0, "Unit": FLAG_UNIT,
                                                        "UnitSub": FLAG_UNIT | FLAG_UNIT_SUB}))
        await c.request(register("broker-b", B, "C2", {"OnlySub": FLAG_UNIT_SUB, "Plain": 0}))
        assert await topics(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "C1"}) == ["Plain", "Unit", "UnitSub"]
        assert await topics(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "C2"}) == ["OnlySub", "Plain"]
        assert await topics(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "None"}) == []
        assert await topics(RequestCode.GET_UNIT_TOPIC_LIST) == ["Unit", "UnitSub"]
        assert await topics(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST) == ["OnlySub", "UnitSub"]
        assert await topics(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST) == ["OnlySub"]
        missing = await c.request(req(RequestCode.GET_TOPICS_BY_CLUSTER))
        assert missing.code == ResponseCode.SYSTEM_ERROR                    # cluster is @CFNotNull

        await c.request(req(RequestCode.PUT_KV_CONFIG, {"namespace": "NS", "key": "k1", "value": "v1"}))
        kv = await c.request(req(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"}))
        assert (kv.code, jsonbody.loads(kv.body)) == (ResponseCode.SUCCESS, {"table": {"k1": "v1"}})
        none = await c.request(req(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "NOPE"}))
        assert (none.code, none.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: NOPE")

        def version(counter):
            return req(RequestCode.QUERY_DATA_VERSION, {"brokerName": "broker-a", "brokerAddr": A,
                                                        "clusterName": "C1", "brokerId": 0},
                       jsonbody.dumps(DataVersion(1700000000000, counter).to_json()))
        same, other = await c.request(version(1)), await c.request(version(2))
        assert (same.code, same.ext_fields["changed"], other.ext_fields["changed"]) == (0, "false", "true")
        assert jsonbody.loads(same.body) == {"counter": 1, "timestamp": 1700000000000}
        await c.close()
    run(scenario, tmp_path)
