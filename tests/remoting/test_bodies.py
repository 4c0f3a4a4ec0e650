"""Bodies against the spec's [ran] JSON (what 4.9.8 + fastjson 1.2.69 produce), and fastjson's quirks."""
from __future__ import annotations

import json
import struct
import zlib

import pytest

from mqtool_remoting.bodies import (BrokerData, ClusterInfo, ConsumerConnection, Connection, DataVersion, HeartbeatData,
                             KVTable, LockBatchRequestBody, LockBatchResponseBody, MessageQueue, QueueData,
                             RegisterBrokerBody, SubscriptionData, TopicConfig, TopicConfigSerializeWrapper,
                             TopicList, TopicRouteData)
from mqtool_remoting.errors import BodyError
from mqtool_remoting.jsonbody import ObjectKey, dumps, java_order, java_string_hash, loads

ROUTE_LEGACY = (b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a",'
                b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
                b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}')
ROUTE_STANDARD = ROUTE_LEGACY.replace(b"{0:", b'{"0":').replace(b',1:', b',"1":')
CLUSTER = (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},'
           b'"brokerName":"broker-a","cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}')
REGISTER = (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},'
            b'"topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
            b'"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}')
HEARTBEAT = (b'{"clientID":"192.168.0.2@12345","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
             b'"consumeType":"CONSUME_PASSIVELY","groupName":"CG","messageModel":"CLUSTERING","subscriptionDataSet":'
             b'[{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB",'
             b'"subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"TopicTest"}],"unitMode":false}],'
             b'"producerDataSet":[{"groupName":"PG"}]}')
LOCK = (b'{"clientId":"192.168.0.2@12345","consumerGroup":"CG","mqSet":[{"brokerName":"broker-a","queueId":0,'
        b'"topic":"TopicTest"}]}')
TOPIC_STATS = (b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":1700000000000,'
               b'"maxOffset":10,"minOffset":0}}}')
CONSUME_STATS = (b'{"consumeTps":1.5,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:'
                 b'{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700000000000}}}')


def sample_route() -> TopicRouteData:
    return TopicRouteData([QueueData("broker-a", 4, 4, 6)],
                          [BrokerData("DefaultCluster", "broker-a", {1: "127.0.0.1:10921", 0: "127.0.0.1:10911"})])


def test_route_legacy_and_standard_bytes():
    assert sample_route().encode(standard=False) == ROUTE_LEGACY
    assert sample_route().encode(standard=True) == ROUTE_STANDARD
    for raw in (ROUTE_LEGACY, ROUTE_STANDARD):
        back = TopicRouteData.decode(raw)
        assert back.brokerDatas[0].brokerAddrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
        assert back.encode(standard=False) == ROUTE_LEGACY


def test_standard_route_escapes_non_ascii_and_legacy_does_not():
    r = sample_route()
    r.orderTopicConf = "brøker-a:4"
    assert b'"orderTopicConf":"br\\u00f8ker-a:4"' in r.encode(standard=True)
    assert "brøker-a:4".encode() in r.encode(standard=False)
    assert TopicRouteData.decode(r.encode(standard=True)).orderTopicConf == "brøker-a:4"


def test_cluster_info_bytes():
    info = ClusterInfo({"broker-a": sample_route().brokerDatas[0]}, {"DefaultCluster": ["broker-a"]})
    assert info.encode() == CLUSTER
    assert ClusterInfo.from_json(loads(CLUSTER)).encode() == CLUSTER


def test_register_broker_body_json_and_compressed():
    tc = TopicConfig("TopicTest", 4, 4, 6)
    body = RegisterBrokerBody(TopicConfigSerializeWrapper({"TopicTest": tc}, DataVersion(1700000000000, 3)))
    assert body.encode() == REGISTER
    assert RegisterBrokerBody.decode(REGISTER) == body
    assert tc.encode_text() == "TopicTest 4 4 6 SINGLE_TAG"
    packed = body.encode(compress=True)
    assert RegisterBrokerBody.decode(packed, compressed=True) == body
    # the stream as Java's DeflaterOutputStream writes it, built by hand from the spec's layout
    def chunk(b):
        return struct.pack(">i", len(b)) + b
    raw = (chunk(b'{"counter":3,"timestamp":1700000000000}') + struct.pack(">i", 2) +
           chunk(b"TopicTest 4 4 6 SINGLE_TAG") + chunk(b"%RETRY%G 1 1 6 MULTI_TAG") + chunk(b'["10.0.0.1:1"]'))
    got = RegisterBrokerBody.decode(zlib.compress(raw, 9), compressed=True)
    assert got.topicConfigSerializeWrapper.dataVersion == DataVersion(1700000000000, 3)
    assert got.topicConfigSerializeWrapper.topicConfigTable["%RETRY%G"] == TopicConfig("%RETRY%G", 1, 1, 6, "MULTI_TAG")
    assert got.filterServerList == ["10.0.0.1:1"]
    with pytest.raises(ValueError):
        RegisterBrokerBody.decode(zlib.compress(raw[:-3]), compressed=True)
    with pytest.raises(BodyError, match="decompressing"):     # zlib.error too becomes the library's own error
        RegisterBrokerBody.decode(b"not zlib", compressed=True)


def test_old_brokers_bare_wrapper_and_defaults():
    bare = json.dumps({"dataVersion": {"counter": 1, "timestamp": 5}, "topicConfigTable": {"T": {"topicName": "T"}}})
    body = RegisterBrokerBody.from_json(loads(bare))
    assert body.topicConfigSerializeWrapper.topicConfigTable["T"] == TopicConfig("T")   # 16/16/6 defaults
    assert body.topicConfigSerializeWrapper.dataVersion == DataVersion(5, 1)


def test_small_bodies():
    assert dumps(TopicList(["TopicTest"]).to_json()) == b'{"topicList":["TopicTest"]}'
    assert dumps(TopicList(["a"], "1.2.3.4:5").to_json()) == b'{"brokerAddr":"1.2.3.4:5","topicList":["a"]}'
    assert dumps(KVTable({"k": "v"}).to_json()) == b'{"table":{"k":"v"}}'
    assert KVTable.from_json(loads(b'{"table":{"k":"v"}}')).table == {"k": "v"}
    assert dumps({"consumerIdList": ["192.168.0.2@12345"]}) == b'{"consumerIdList":["192.168.0.2@12345"]}'


def test_heartbeat_java_and_cpp_shapes():
    hb = HeartbeatData.from_json(loads(HEARTBEAT))
    assert dumps(hb.to_json()) == HEARTBEAT
    cpp = {"clientID": "1.2.3.4@x", "consumerDataSet": [{"consumeFromWhere": 4, "consumeType": 1, "groupName": "CG",
           "messageModel": 0, "subscriptionDataSet": [{"codeSet": [0], "subString": "*", "subVersion": "17",
                                                       "tagsSet": [], "topic": "T"}]}], "producerDataSet": None}
    c = HeartbeatData.from_json(cpp)
    cd = c.consumerDataSet[0]
    assert (cd.consumeFromWhere, cd.consumeType, cd.messageModel, cd.unitMode) == \
        ("CONSUME_FROM_FIRST_OFFSET", "CONSUME_PASSIVELY", "BROADCASTING", False)
    assert cd.subscriptionDataSet[0] == SubscriptionData("T", "*", [], [0], 17, "TAG", False)
    assert c.producerDataSet == []


def test_lock_bodies_and_message_queue_keys():
    req = LockBatchRequestBody.from_json(loads(LOCK))
    assert dumps(req.to_json()) == LOCK and req.mqSet == [MessageQueue("TopicTest", "broker-a", 0)]
    resp = LockBatchResponseBody(req.mqSet)
    assert LockBatchResponseBody.from_json(loads(dumps(resp.to_json()))) == resp
    key = MessageQueue("T", "broker-a", 0).key()
    assert dumps({"offsetTable": {key: {"lastUpdateTimestamp": 1700000000000, "maxOffset": 10, "minOffset": 0}}}) \
        == TOPIC_STATS
    assert MessageQueue.from_json(key) == MessageQueue("T", "broker-a", 0)


def test_consumer_connection_round_trip():
    cc = ConsumerConnection([Connection("c1", "127.0.0.1:5555", "CPP", 333)], {"T": SubscriptionData("T", "*")},
                            "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    obj = cc.to_json()
    assert list(obj) == sorted(obj)
    assert ConsumerConnection.from_json(loads(dumps(obj))) == cc


@pytest.mark.parametrize("raw", [TOPIC_STATS, CONSUME_STATS])
def test_object_keys_parse_and_write_back_verbatim(raw):
    data = loads(raw)
    (key, value), = data["offsetTable"].items()
    assert isinstance(key, ObjectKey) and key.as_dict() == {"brokerName": "broker-a", "queueId": 0, "topic": "T"}
    assert dumps(data) == raw


def test_tolerant_loader():
    assert loads(b'{0:250, 1 : 249}') == {"0": 250, "1": 249}
    assert loads('{"offsetTable":{"T@G":{0:1}}}') == {"offsetTable": {"T@G": {"0": 1}}}
    assert loads(b'[{0:"a"}, []]') == [{"0": "a"}, []]
    assert loads(b' {} ') == {}
    for bad in (b'{0:}', b'{0 "a"}', b'{"a":1', b'{0:1} x', b'', b'{0:[1,}'):
        with pytest.raises(ValueError):
            loads(bad)
    assert dumps({0: "a", 1: "b"}, bare_int_keys=True) == b'{0:"a",1:"b"}'
    assert dumps({0: "a"}) == b'{"0":"a"}'


def test_java_hash_and_hashmap_order():
    assert java_string_hash("") == 0 and java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == (-2147483648) & 0xFFFFFFFF   # the famous MIN_VALUE
    assert java_order(["MSG_REGION", "TRACE_ON", "msgId", "queueId", "queueOffset"]) == \
        ["queueId", "TRACE_ON", "MSG_REGION", "msgId", "queueOffset"]
    assert java_order([3, 1, 2, 0]) == [0, 1, 2, 3]
    assert java_order(list("mlkjihgfedcba")) == list("abcdefghijklm")   # grows to 32 buckets, same order
