"""Walk 4.9.8's whole RequestCode table against a real mqtool broker and name server (issue 10).

Which server handles what was read off rocketmq-all-4.9.8, not guessed:
* broker: the `case RequestCode.X` of broker/.../processor/AdminBrokerProcessor.java (the default
  processor) plus the codes BrokerController.registerProcessor() gives the send, pull, reply, query,
  client-manage, consumer-manage and end-transaction processors;
* name server: the `case RequestCode.X` of namesrv/.../processor/DefaultRequestProcessor.java;
* JAVA_HANDLES_NOWHERE: every other code of common/.../protocol/RequestCode.java. They are defined but
  have no case in any 4.9.8 server processor (13, 22, 23, 27, 209-214, 301, 302), or are requests a
  broker sends to its clients (39, 40, 220, 221, 326). A 4.9.8 broker's AdminBrokerProcessor answers
  them REQUEST_CODE_NOT_SUPPORTED " request type N not supported", and mqtool's broker must do the same.
ACL (50-53, AdminBrokerProcessor) is another issue's; GET_BROKER_HA_STATUS (907) is 5.x, served by
mqtool's HA code; GET_TOPIC_CONFIG (351) is 5.x and GET_ALL_TOPIC_OFFSETS (90001) mqtool's own, both served
by mqtool's broker (tests/broker/test_metadata_changes.py).
"""
from __future__ import annotations

import asyncio
import time

import pytest

from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient
from tests.servers import cluster  # noqa: F401 - the module's own name server and broker

pytestmark = pytest.mark.slow

T, G, PG = "CodeWalkTopic", "GID_CODE_WALK", "PID_CODE_WALK"
NOW = int(time.time() * 1000)
SUB = {"topic": T, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 0, "expressionType": "TAG"}
MQS = [{"brokerName": "broker-a", "queueId": 0, "topic": T}]
SEND = {"producerGroup": PG, "topic": T, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4, "queueId": 0,
        "sysFlag": 0, "bornTimestamp": NOW, "flag": 0}
SEND_V2 = {"a": PG, "b": T, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": NOW, "h": 0}
TQ = {"topic": T, "queueId": 0}
BOGUS_MSG_ID = "7F00000100002A9F0000000000000000"       # 127.0.0.1:10911, offset 0

# code name -> (extFields, body): the smallest request that is valid for the Java server.
BROKER = {
    "SEND_MESSAGE": (SEND, b"walk"),
    "PULL_MESSAGE": ({"consumerGroup": G, "topic": T, "queueId": 0, "queueOffset": 0, "maxMsgNums": 1, "sysFlag": 0,
                      "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0}, b""),
    "QUERY_MESSAGE": ({"topic": T, "key": "k", "maxNum": 1, "beginTimestamp": 0, "endTimestamp": NOW}, b""),
    "QUERY_CONSUMER_OFFSET": ({"consumerGroup": G, **TQ}, b""),
    "UPDATE_CONSUMER_OFFSET": ({"consumerGroup": G, **TQ, "commitOffset": 0}, b""),
    "UPDATE_AND_CREATE_TOPIC": ({"topic": T, "defaultTopic": "TBW102", "readQueueNums": 2, "writeQueueNums": 2,
                                 "perm": 6, "topicFilterType": "SINGLE_TAG"}, b""),
    "GET_ALL_TOPIC_CONFIG": ({}, b""),
    "UPDATE_BROKER_CONFIG": ({}, b""),
    "GET_BROKER_CONFIG": ({}, b""),
    "GET_BROKER_RUNTIME_INFO": ({}, b""),
    "SEARCH_OFFSET_BY_TIMESTAMP": ({**TQ, "timestamp": NOW}, b""),
    "GET_MAX_OFFSET": (TQ, b""),
    "GET_MIN_OFFSET": (TQ, b""),
    "GET_EARLIEST_MSG_STORETIME": (TQ, b""),
    "VIEW_MESSAGE_BY_ID": ({"offset": 0}, b""),
    "HEART_BEAT": ({}, jsonbody.dumps({"clientID": "127.0.0.1@walk", "consumerDataSet": [],
                                       "producerDataSet": [{"groupName": PG}]})),
    "UNREGISTER_CLIENT": ({"clientID": "127.0.0.1@walk", "producerGroup": PG}, b""),
    "CONSUMER_SEND_MSG_BACK": ({"offset": 0, "group": G, "delayLevel": 0}, b""),
    "END_TRANSACTION": ({"producerGroup": PG, "tranStateTableOffset": 0, "commitLogOffset": 0,
                         "commitOrRollback": 8, "msgId": "X"}, b""),
    "GET_CONSUMER_LIST_BY_GROUP": ({"consumerGroup": G}, b""),
    "LOCK_BATCH_MQ": ({}, jsonbody.dumps({"clientId": "127.0.0.1@walk", "consumerGroup": G, "mqSet": MQS})),
    "UNLOCK_BATCH_MQ": ({}, jsonbody.dumps({"clientId": "127.0.0.1@walk", "consumerGroup": G, "mqSet": MQS})),
    "GET_ALL_CONSUMER_OFFSET": ({}, b""),
    "GET_ALL_DELAY_OFFSET": ({}, b""),
    "CHECK_CLIENT_CONFIG": ({}, jsonbody.dumps({"clientId": "c", "group": G, "subscriptionData": SUB})),
    "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP": ({}, jsonbody.dumps({"groupName": G})),
    "GET_ALL_SUBSCRIPTIONGROUP_CONFIG": ({}, b""),
    "GET_TOPIC_STATS_INFO": ({"topic": T}, b""),
    "GET_CONSUMER_CONNECTION_LIST": ({"consumerGroup": G}, b""),
    "GET_PRODUCER_CONNECTION_LIST": ({"producerGroup": PG}, b""),
    "GET_CONSUME_STATS": ({"consumerGroup": G, "topic": T}, b""),
    "INVOKE_BROKER_TO_RESET_OFFSET": ({"topic": T, "group": G, "timestamp": 0, "isForce": False}, b""),
    "INVOKE_BROKER_TO_GET_CONSUMER_STATUS": ({"topic": T, "group": G}, b""),
    "QUERY_TOPIC_CONSUME_BY_WHO": ({"topic": T}, b""),
    "QUERY_CONSUME_TIME_SPAN": ({"topic": T, "group": G}, b""),
    "GET_SYSTEM_TOPIC_LIST_FROM_BROKER": ({}, b""),
    "CLEAN_EXPIRED_CONSUMEQUEUE": ({}, b""),
    "GET_CONSUMER_RUNNING_INFO": ({"consumerGroup": G, "clientId": "127.0.0.1@nobody"}, b""),
    "QUERY_CORRECTION_OFFSET": ({"topic": T, "compareGroup": G}, b""),
    "CONSUME_MESSAGE_DIRECTLY": ({"consumerGroup": G, "clientId": "127.0.0.1@nobody", "msgId": BOGUS_MSG_ID}, b""),
    "SEND_MESSAGE_V2": (SEND_V2, b"walk"),
    "CLONE_GROUP_OFFSET": ({"srcGroup": G, "destGroup": G + "_CLONE", "topic": T}, b""),
    "VIEW_BROKER_STATS_DATA": ({"statsName": "TOPIC_PUT_NUMS", "statsKey": T}, b""),
    "CLEAN_UNUSED_TOPIC": ({}, b""),
    "GET_BROKER_CONSUME_STATS": ({"isOrder": False}, b""),
    "SEND_BATCH_MESSAGE": ({**SEND_V2, "m": True}, b""),
    "QUERY_CONSUME_QUEUE": ({**TQ, "index": 0, "count": 1}, b""),
    "RESUME_CHECK_HALF_MESSAGE": ({"msgId": BOGUS_MSG_ID}, b""),
    "SEND_REPLY_MESSAGE": (SEND, b"walk"),
    "SEND_REPLY_MESSAGE_V2": (SEND_V2, b"walk"),
    "GET_ALL_PRODUCER_INFO": ({}, b""),
    "DELETE_EXPIRED_COMMITLOG": ({}, b""),
    # last, as they remove what the others used
    "DELETE_SUBSCRIPTIONGROUP": ({"groupName": G + "_CLONE"}, b""),
    "DELETE_TOPIC_IN_BROKER": ({"topic": "CodeWalkGone"}, b""),
}
NAMESRV = {
    "PUT_KV_CONFIG": ({"namespace": "WALK", "key": "k", "value": "v"}, b""),
    "GET_KV_CONFIG": ({"namespace": "WALK", "key": "k"}, b""),
    "GET_KVLIST_BY_NAMESPACE": ({"namespace": "WALK"}, b""),
    "DELETE_KV_CONFIG": ({"namespace": "WALK", "key": "k"}, b""),
    "REGISTER_BROKER": ({"brokerName": "walk-b", "brokerAddr": "127.0.0.9:1", "clusterName": "WalkCluster",
                         "haServerAddr": "127.0.0.9:2", "brokerId": 0}, b""),
    "QUERY_DATA_VERSION": ({"brokerName": "walk-b", "brokerAddr": "127.0.0.9:1", "clusterName": "WalkCluster",
                            "brokerId": 0}, jsonbody.dumps({"counter": 0, "timestamp": 0})),
    "WIPE_WRITE_PERM_OF_BROKER": ({"brokerName": "walk-b"}, b""),
    "ADD_WRITE_PERM_OF_BROKER": ({"brokerName": "walk-b"}, b""),
    "UNREGISTER_BROKER": ({"brokerName": "walk-b", "brokerAddr": "127.0.0.9:1", "clusterName": "WalkCluster",
                           "brokerId": 0}, b""),
    "GET_ROUTEINFO_BY_TOPIC": ({"topic": "TBW102"}, b""),
    "GET_BROKER_CLUSTER_INFO": ({}, b""),
    "GET_ALL_TOPIC_LIST_FROM_NAMESERVER": ({}, b""),
    "DELETE_TOPIC_IN_NAMESRV": ({"topic": "CodeWalkGone"}, b""),
    "GET_TOPICS_BY_CLUSTER": ({"cluster": "DefaultCluster"}, b""),
    "GET_SYSTEM_TOPIC_LIST_FROM_NS": ({}, b""),
    "GET_UNIT_TOPIC_LIST": ({}, b""),
    "GET_HAS_UNIT_SUB_TOPIC_LIST": ({}, b""),
    "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST": ({}, b""),
    "UPDATE_NAMESRV_CONFIG": ({}, b""),
    "GET_NAMESRV_CONFIG": ({}, b""),
}
JAVA_HANDLES_NOWHERE = {
    "QUERY_BROKER_OFFSET", "GET_TOPIC_CONFIG_LIST", "GET_TOPIC_NAME_LIST", "TRIGGER_DELETE_FILES",
    "CHECK_TRANSACTION_STATE", "NOTIFY_CONSUMER_IDS_CHANGED", "SUSPEND_CONSUMER", "RESUME_CONSUMER",
    "RESET_CONSUMER_OFFSET_IN_CONSUMER", "RESET_CONSUMER_OFFSET_IN_BROKER", "ADJUST_CONSUMER_THREAD_POOL",
    "WHO_CONSUME_THE_MESSAGE", "RESET_CONSUMER_CLIENT_OFFSET", "GET_CONSUMER_STATUS_FROM_CLIENT",
    "REGISTER_FILTER_SERVER", "REGISTER_MESSAGE_FILTER_CLASS", "PUSH_REPLY_MESSAGE_TO_CLIENT",
}
ELSEWHERE = {"UPDATE_AND_CREATE_ACL_CONFIG", "DELETE_ACL_CONFIG", "GET_BROKER_CLUSTER_ACL_INFO",
             "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG", "GET_BROKER_HA_STATUS", "GET_TOPIC_CONFIG",
             "GET_ALL_TOPIC_OFFSETS"}
# 5.x controller mode (shared/spec/controller.md 3.1): served by mqtool's controller (tests/controller) and,
# 1007 and 1008, by a controller-mode broker (tests/ha/test_failover.py)
CONTROLLER_MODE = {"BROKER_HEARTBEAT", "CONTROLLER_ALTER_SYNC_STATE_SET", "CONTROLLER_ELECT_MASTER",
                   "CONTROLLER_REGISTER_BROKER", "CONTROLLER_GET_REPLICA_INFO", "CONTROLLER_GET_METADATA_INFO",
                   "CONTROLLER_GET_SYNC_STATE_DATA", "GET_BROKER_EPOCH_CACHE", "NOTIFY_BROKER_ROLE_CHANGED",
                   "UPDATE_CONTROLLER_CONFIG", "GET_CONTROLLER_CONFIG", "CLEAN_BROKER_DATA",
                   "CONTROLLER_GET_NEXT_BROKER_ID", "CONTROLLER_APPLY_BROKER_ID"}
# 5.x POP over remoting (rocketmq5.md 2.1): tests/broker/test_pop*.py; POP_ROLLBACK is registered by no
# 5.3.3 broker (REQUEST_CODE_NOT_SUPPORTED, held there too)
POP = {"POP_MESSAGE", "ACK_MESSAGE", "BATCH_ACK_MESSAGE", "PEEK_MESSAGE", "CHANGE_MESSAGE_INVISIBLETIME",
       "NOTIFICATION", "POLLING_INFO", "POP_ROLLBACK"}
# 5.x timer messages (shared/spec/rocketmq5.md §1.9, §1.11): served by mqtool's broker (tests/broker/test_timer.py)
TIMER_5X = {"GET_TIMER_CHECK_POINT", "GET_TIMER_METRICS", "RECALL_MESSAGE"}
# 5.x server-side rebalance (rocketmq5.md 2.1, 2.2): served by mqtool's broker (tests/broker/test_assignment.py)
ASSIGNMENT_5X = {"QUERY_ASSIGNMENT", "SET_MESSAGE_REQUEST_MODE", "GET_ALL_MESSAGE_REQUEST_MODE"}


def walk(addr: str, requests: dict[str, tuple[dict, bytes]]) -> dict[str, RemotingCommand]:
    async def go():
        client = RemotingClient()
        try:
            out = {}
            for name, (ext, body) in requests.items():
                cmd = RemotingCommand.request(RequestCode[name], ext, body, language="JAVA")
                out[name] = await client.invoke(addr, cmd, 10)
            return out
        finally:
            await client.close()
    return asyncio.run(go())


def test_the_table_is_4_9_8s_and_every_code_has_a_place():
    names = {c.name for c in RequestCode}
    # RequestCode.java's 95, 5.x's 351, 907, controller mode's 14, POP's 8, mqtool's 90001
    assert len(names) == 120 + len(TIMER_5X) + len(ASSIGNMENT_5X)
    groups = [set(BROKER), set(NAMESRV), JAVA_HANDLES_NOWHERE, ELSEWHERE, CONTROLLER_MODE, POP, TIMER_5X, ASSIGNMENT_5X]
    assert set().union(*groups) == names
    assert sum(len(g) for g in groups) == len(names)     # no code in two places


def test_every_code_java_serves_is_served_with_a_valid_header(cluster):  # noqa: F811
    answers = {**walk(cluster["broker"], BROKER), **walk(cluster["namesrv"], NAMESRV)}
    unsupported = sorted(n for n, r in answers.items() if r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
    assert unsupported == []
    bad_header = sorted(n for n, r in answers.items() if "request header" in (r.remark or ""))
    assert bad_header == []
    # a few that must simply succeed
    for name in ("GET_BROKER_RUNTIME_INFO", "GET_SYSTEM_TOPIC_LIST_FROM_BROKER", "CHECK_CLIENT_CONFIG",
                 "GET_BROKER_CONSUME_STATS", "QUERY_TOPIC_CONSUME_BY_WHO", "GET_ALL_PRODUCER_INFO",
                 "CLEAN_UNUSED_TOPIC", "CLEAN_EXPIRED_CONSUMEQUEUE", "DELETE_EXPIRED_COMMITLOG",
                 "GET_TOPICS_BY_CLUSTER", "GET_SYSTEM_TOPIC_LIST_FROM_NS", "GET_NAMESRV_CONFIG",
                 "WIPE_WRITE_PERM_OF_BROKER", "ADD_WRITE_PERM_OF_BROKER", "QUERY_DATA_VERSION"):
        assert answers[name].code == ResponseCode.SUCCESS, (name, answers[name].remark)
    # the relayed ones, with nobody online, answer as Java does
    assert answers["INVOKE_BROKER_TO_RESET_OFFSET"].code in (ResponseCode.CONSUMER_NOT_ONLINE,
                                                             ResponseCode.SYSTEM_ERROR)
    assert answers["GET_CONSUMER_RUNNING_INFO"].remark == f"The Consumer <{G}> <127.0.0.1@nobody> not online"


def test_codes_no_4_9_8_server_handles_are_refused_like_java(cluster):  # noqa: F811
    answers = walk(cluster["broker"], {n: ({}, b"") for n in sorted(JAVA_HANDLES_NOWHERE)})
    for name, resp in answers.items():
        code = int(RequestCode[name])
        assert (resp.code, resp.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                            f" request type {code} not supported"), name
