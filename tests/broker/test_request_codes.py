"""Every request code a 4.9.8 broker or name server handles is handled here too (issue 10).

The sets below were read off the Java 4.9.8 sources (rocketmq-all-4.9.8): the broker's are the
`case RequestCode.X` of broker/.../processor/*.java plus the codes BrokerController registers
processors for; the name server's are the `case RequestCode.X` of namesrv/.../processor/*.java.
ACL (50-53) is another issue. Every other code of RequestCode.java is sent by a broker to a
client, or handled by no 4.9.8 server at all (13, 22, 23, 27, 209-214, 301, 302).
"""
from __future__ import annotations

import asyncio

import pytest

from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient
from tests.servers import cluster  # noqa: F401 - the module's own name server and broker

pytestmark = pytest.mark.slow

BROKER_HANDLES = {
    "CHECK_CLIENT_CONFIG", "CLEAN_EXPIRED_CONSUMEQUEUE", "CLEAN_UNUSED_TOPIC", "CLONE_GROUP_OFFSET",
    "CONSUMER_SEND_MSG_BACK", "CONSUME_MESSAGE_DIRECTLY", "DELETE_EXPIRED_COMMITLOG", "DELETE_SUBSCRIPTIONGROUP",
    "DELETE_TOPIC_IN_BROKER", "END_TRANSACTION", "GET_ALL_CONSUMER_OFFSET", "GET_ALL_DELAY_OFFSET",
    "GET_ALL_PRODUCER_INFO", "GET_ALL_SUBSCRIPTIONGROUP_CONFIG", "GET_ALL_TOPIC_CONFIG", "GET_BROKER_CONFIG",
    "GET_BROKER_CONSUME_STATS", "GET_BROKER_RUNTIME_INFO", "GET_CONSUMER_CONNECTION_LIST",
    "GET_CONSUMER_LIST_BY_GROUP", "GET_CONSUMER_RUNNING_INFO", "GET_CONSUME_STATS", "GET_EARLIEST_MSG_STORETIME",
    "GET_MAX_OFFSET", "GET_MIN_OFFSET", "GET_PRODUCER_CONNECTION_LIST", "GET_SYSTEM_TOPIC_LIST_FROM_BROKER",
    "GET_TOPIC_STATS_INFO", "HEART_BEAT", "INVOKE_BROKER_TO_GET_CONSUMER_STATUS", "INVOKE_BROKER_TO_RESET_OFFSET",
    "LOCK_BATCH_MQ", "PULL_MESSAGE", "QUERY_CONSUMER_OFFSET", "QUERY_CONSUME_QUEUE", "QUERY_CONSUME_TIME_SPAN",
    "QUERY_CORRECTION_OFFSET", "QUERY_MESSAGE", "QUERY_TOPIC_CONSUME_BY_WHO", "RESUME_CHECK_HALF_MESSAGE",
    "SEARCH_OFFSET_BY_TIMESTAMP", "SEND_BATCH_MESSAGE", "SEND_MESSAGE", "SEND_MESSAGE_V2", "SEND_REPLY_MESSAGE",
    "SEND_REPLY_MESSAGE_V2", "UNLOCK_BATCH_MQ", "UNREGISTER_CLIENT", "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
    "UPDATE_AND_CREATE_TOPIC", "UPDATE_BROKER_CONFIG", "UPDATE_CONSUMER_OFFSET", "VIEW_BROKER_STATS_DATA",
    "VIEW_MESSAGE_BY_ID",
    # TRIGGER_DELETE_FILES (27) is defined but no 4.9.8 processor has a case for it; mqtool runs
    # retention for it, as DELETE_EXPIRED_COMMITLOG does.
}
NAMESRV_HANDLES = {
    "ADD_WRITE_PERM_OF_BROKER", "DELETE_KV_CONFIG", "DELETE_TOPIC_IN_NAMESRV", "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
    "GET_BROKER_CLUSTER_INFO", "GET_HAS_UNIT_SUB_TOPIC_LIST", "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST",
    "GET_KVLIST_BY_NAMESPACE", "GET_KV_CONFIG", "GET_NAMESRV_CONFIG", "GET_ROUTEINFO_BY_TOPIC",
    "GET_SYSTEM_TOPIC_LIST_FROM_NS", "GET_TOPICS_BY_CLUSTER", "GET_UNIT_TOPIC_LIST", "PUT_KV_CONFIG",
    "QUERY_DATA_VERSION", "REGISTER_BROKER", "UNREGISTER_BROKER", "UPDATE_NAMESRV_CONFIG", "WIPE_WRITE_PERM_OF_BROKER",
}


def answers(addr: str, codes: list[RequestCode]) -> dict[str, int]:
    async def go():
        client = RemotingClient()
        try:
            out = {}
            for code in codes:      # no header: each handler must at least know the code
                resp = await client.invoke(addr, RemotingCommand.request(code, {}, language="JAVA"), 10)
                out[code.name] = resp.code
            return out
        finally:
            await client.close()
    return asyncio.run(go())


def test_the_code_table_is_4_9_8s():
    names = {c.name for c in RequestCode}
    assert BROKER_HANDLES | NAMESRV_HANDLES <= names


def test_every_code_java_handles_is_handled(cluster):  # noqa: F811
    broker = answers(cluster["broker"], [RequestCode[n] for n in sorted(BROKER_HANDLES)])
    namesrv = answers(cluster["namesrv"], [RequestCode[n] for n in sorted(NAMESRV_HANDLES)])
    unsupported = sorted(n for n, code in {**broker, **namesrv}.items()
                         if code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
    assert unsupported == []
    # A code no 4.9.8 server handles is refused the same way Java's default processor does.
    assert answers(cluster["broker"], [RequestCode.QUERY_BROKER_OFFSET]) == {
        "QUERY_BROKER_OFFSET": ResponseCode.REQUEST_CODE_NOT_SUPPORTED}
