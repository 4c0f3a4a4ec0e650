"""mqadmin's requests against a real broker with a live mqtool consumer group (issue 10)."""
from __future__ import annotations

import asyncio
import re

import pytest

from mqtool.client.admin import Admin
from mqtool.client.consumer import GroupConsumer
from mqtool.client.producer import OutMessage, Producer
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from tests.servers import cluster  # noqa: F401

pytestmark = pytest.mark.slow
TOPIC, GROUP = "AdminReq", "GID_ADMIN_REQ"
# Every runtime-info key of 4.9.8 (spec ha.md §6), but the ones named after a path or a level.
RUNTIME_KEYS = """bootTimestamp runtime putMessageEntireTimeMax putMessageTimesTotal putMessageFailedTimes
putMessageSizeTotal putMessageDistributeTime putMessageAverageSize dispatchMaxBuffer getMessageEntireTimeMax putTps
getFoundTps getMissTps getTotalTps getTransferedTps putLatency99 putLatency999 commitLogDiskRatio
consumeQueueDiskRatio commitLogMinOffset commitLogMaxOffset brokerVersionDesc brokerVersion
msgPutTotalYesterdayMorning msgPutTotalTodayMorning msgPutTotalTodayNow msgGetTotalYesterdayMorning
msgGetTotalTodayMorning msgGetTotalTodayNow sendThreadPoolQueueSize sendThreadPoolQueueCapacity
pullThreadPoolQueueSize pullThreadPoolQueueCapacity queryThreadPoolQueueSize queryThreadPoolQueueCapacity
EndTransactionQueueSize EndTransactionThreadPoolQueueCapacity dispatchBehindBytes pageCacheLockTimeMills
sendThreadPoolQueueHeadWaitTimeMills pullThreadPoolQueueHeadWaitTimeMills queryThreadPoolQueueHeadWaitTimeMills
earliestMessageTimeStamp startAcceptSendRequestTimeStamp remainTransientStoreBufferNumbs remainHowManyDataToFlush
commitLogDirCapacity""".split()


JAVA_DOUBLE = r"-?\d+\.\d+(E-?\d+)?"


def check_runtime_formats(table: dict) -> None:
    """The value formats of 4.9.8 (StoreStatsService, DefaultMessageStore, AdminBrokerProcessor)."""
    for key in ("putTps", "getFoundTps", "getMissTps", "getTransferedTps"):
        fields = table[key].split(" ")                    # a window not sampled yet is empty, as in Java
        assert len(fields) == 3 and all(f == "" or re.fullmatch(JAVA_DOUBLE, f) for f in fields), key
    assert all(re.fullmatch(JAVA_DOUBLE, f) for f in table["getTotalTps"].split(" "))
    assert re.fullmatch(r"\d+\.\d\d", table["putLatency99"]) and re.fullmatch(r"\d+\.\d\d", table["putLatency999"])
    assert table["putMessageDistributeTime"] == "null" or table["putMessageDistributeTime"].startswith("[<=0ms]:")
    assert re.fullmatch(JAVA_DOUBLE, table["putMessageAverageSize"])
    assert (table["brokerVersionDesc"], table["brokerVersion"]) == ("V4_9_8", "409")
    for key in ("commitLogDiskRatio", "consumeQueueDiskRatio"):
        assert re.fullmatch(JAVA_DOUBLE, table[key]) and -1 <= float(table[key]) <= 1
    assert any(k.startswith("commitLogDiskRatio_") for k in table)
    assert re.fullmatch(r"\d+(\.\d)? [KMGTPE]?i?B", table["remainHowManyDataToFlush"])
    assert re.fullmatch(r"Total : [\d.]+ \w?i?B, Free : [\d.]+ \w?i?B\.", table["commitLogDirCapacity"])
    for key in ("msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning", "msgPutTotalTodayNow",
                "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning", "msgGetTotalTodayNow",
                "bootTimestamp", "commitLogMinOffset", "commitLogMaxOffset", "sendThreadPoolQueueCapacity"):
        int(table[key])
    assert "brokerActive" not in table                     # a 5.x key


async def call(admin, addr, code, ext=None, body=b""):
    return await admin.invoke(addr, RemotingCommand.request(code, ext or {}, body, language="JAVA"), 10)


async def scenario(ns: str, broker: str) -> dict:
    producer, admin = Producer(ns), Admin(ns)
    consumer = GroupConsumer(ns, GROUP, TOPIC, start="first")
    got: list = []
    out: dict = {}
    try:
        await admin.create_topic(TOPIC, 2, 2)
        for i in range(10):
            await producer.send(OutMessage(TOPIC, b"m%d" % i), queue=i % 2)
        stop = asyncio.Event()

        async def consume():
            async for mq, rec in consumer.messages(200, stop):
                got.append(rec.body)
                consumer.state.assigned[mq] = rec.queue_offset + 1
        task = asyncio.create_task(consume())
        for _ in range(200):
            if len(got) >= 10:
                break
            await asyncio.sleep(0.05)
        await consumer.commit_all()
        out["got"] = list(got)
        out["who"] = jsonbody.loads((await call(admin, broker, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                                {"topic": TOPIC})).body)
        out["stats"] = jsonbody.loads((await call(admin, broker, RequestCode.GET_BROKER_CONSUME_STATS,
                                                  {"isOrder": False})).body)
        out["cq"] = jsonbody.loads((await call(admin, broker, RequestCode.QUERY_CONSUME_QUEUE, {
            "topic": TOPIC, "queueId": 0, "index": 1, "count": 3, "consumerGroup": GROUP})).body)
        out["clone"] = (await call(admin, broker, RequestCode.CLONE_GROUP_OFFSET,
                                   {"srcGroup": GROUP, "destGroup": "GID_CLONED", "topic": TOPIC})).code
        out["view"] = await call(admin, broker, RequestCode.VIEW_BROKER_STATS_DATA,
                                 {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC})
        out["running"] = await call(admin, broker, RequestCode.GET_CONSUMER_RUNNING_INFO,
                                    {"consumerGroup": GROUP, "clientId": consumer.client_id})
        # Reset to the beginning: the broker pushes the offsets, the online consumer reads again.
        before = len(got)
        out["reset"] = await call(admin, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                  {"topic": TOPIC, "group": GROUP, "timestamp": 0, "isForce": True})
        for _ in range(200):
            if len(got) >= before + 10:
                break
            await asyncio.sleep(0.05)
        out["again"] = got[before:]
        out["runtime"] = jsonbody.loads((await call(admin, broker, RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
        out["offline_reset"] = await call(admin, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                          {"topic": TOPIC, "group": "GID_CLONED", "timestamp": 0, "isForce": True})
        stop.set()
        await task
        out["cloned"] = await admin.group_progress("GID_CLONED", TOPIC)
    finally:
        await consumer.close()
        await producer.close()
        await admin.close()
    return out


def test_mqadmin_requests_with_a_live_group(cluster):  # noqa: F811
    out = asyncio.run(scenario(cluster["namesrv"], cluster["broker"]))
    assert sorted(out["got"]) == sorted(b"m%d" % i for i in range(10))
    assert GROUP in out["who"]["groupList"]
    stats = out["stats"]
    assert stats["totalDiff"] == 0 and any(GROUP in entry for entry in stats["consumeStatsList"])
    assert out["cq"]["maxQueueIndex"] == 5 and len(out["cq"]["queueData"]) == 3
    assert out["cq"]["subscriptionData"]["topic"] == TOPIC
    assert out["clone"] == ResponseCode.SUCCESS
    assert [r["consumer_offset"] for r in out["cloned"]] == [5, 5]
    view = jsonbody.loads(out["view"].body)
    assert view["statsDay"]["sum"] == 10 and view["statsMinute"]["sum"] <= 10
    running = jsonbody.loads(out["running"].body)
    assert running["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
    reset = out["reset"]
    assert reset.code == ResponseCode.SUCCESS
    assert sorted(jsonbody.loads(reset.body)["offsetTable"].values()) == [0, 0]
    assert sorted(out["again"]) == sorted(b"m%d" % i for i in range(10))      # read again from 0
    assert out["offline_reset"].code == ResponseCode.CONSUMER_NOT_ONLINE
    table = out["runtime"]
    assert set(RUNTIME_KEYS) <= set(table)
    assert int(table["msgPutTotalTodayNow"]) >= 10
    assert int(table["msgGetTotalTodayNow"]) >= 20          # messages, not pull requests
    check_runtime_formats(table)
    assert re.fullmatch(r"Total : [\d.]+ \w?i?B, Free : [\d.]+ \w?i?B\.", table["commitLogDirCapacity"])
    assert re.fullmatch(r"\[ \d+ days, \d+ hours, \d+ minutes, \d+ seconds \]", table["runtime"])
    float(table["commitLogDiskRatio"])


# ---------------------------------------------------------------------- a raw consumer connection

RAW_TOPIC, RAW_GROUP, RAW_CLIENT = "AdminRaw", "GID_ADMIN_RAW", "127.0.0.1@raw-consumer"


def heartbeat(group: str, topic: str, client_id: str = RAW_CLIENT, language: str = "JAVA") -> RemotingCommand:
    body = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1,
                                 "expressionType": "TAG", "classFilterMode": False}]}]}
    return RemotingCommand.request(RequestCode.HEART_BEAT, {}, jsonbody.dumps(body), language=language)


async def raw_scenario(broker: str) -> dict:
    from mqtool_remoting.transport import RemotingClient
    pushed: list[RemotingCommand] = []
    status_asked: list[RemotingCommand] = []

    async def on_request(conn, cmd):        # what the broker asks of its consumer
        if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            pushed.append(cmd)
            return None
        if cmd.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            status_asked.append(cmd)
            mq = jsonbody.ObjectKey.of({"brokerName": "broker-a", "queueId": 0, "topic": RAW_TOPIC})
            return cmd.response(0, None, None, jsonbody.dumps({"messageQueueTable": {mq: 3}}))
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "no")

    consumer, admin = RemotingClient(on_request), RemotingClient()
    out: dict = {}

    async def ask(code, ext=None, body=b""):
        return await admin.invoke(broker, RemotingCommand.request(code, ext or {}, body, language="JAVA"), 10)
    try:
        await ask(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": RAW_TOPIC, "defaultTopic": "TBW102",
                                                        "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                                                        "topicFilterType": "SINGLE_TAG"})
        for i in range(8):
            await ask(RequestCode.SEND_MESSAGE, {"producerGroup": "PG_RAW", "topic": RAW_TOPIC, "defaultTopic": "TBW102",
                                                 "defaultTopicQueueNums": 2, "queueId": i % 2, "sysFlag": 0,
                                                 "bornTimestamp": 0, "flag": 0}, b"r%d" % i)
        for q in (0, 1):
            await ask(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": RAW_GROUP, "topic": RAW_TOPIC,
                                                           "queueId": q, "commitOffset": 4})
        runtime = jsonbody.loads((await ask(RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
        out["got_before"] = int(runtime["msgGetTotalTodayNow"])
        pull = await ask(RequestCode.PULL_MESSAGE, {
            "consumerGroup": RAW_GROUP, "topic": RAW_TOPIC, "queueId": 0, "queueOffset": 0, "maxMsgNums": 3,
            "sysFlag": 4, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0})
        out["pull_code"] = pull.code
        runtime = jsonbody.loads((await ask(RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
        out["got_after"] = int(runtime["msgGetTotalTodayNow"])
        out["offline"] = await ask(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                   {"topic": RAW_TOPIC, "group": RAW_GROUP, "timestamp": 0, "isForce": True})
        assert (await consumer.invoke(broker, heartbeat(RAW_GROUP, RAW_TOPIC), 10)).code == 0
        out["reset"] = await ask(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                 {"topic": RAW_TOPIC, "group": RAW_GROUP, "timestamp": 0, "isForce": True})
        for _ in range(100):
            if pushed:
                break
            await asyncio.sleep(0.02)
        out["pushed"] = list(pushed)
        out["committed"] = []
        for q in (0, 1):
            r = await ask(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": RAW_GROUP, "topic": RAW_TOPIC,
                                                              "queueId": q})
            out["committed"].append(int(r.ext_fields["offset"]))
        out["status"] = await ask(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                  {"topic": RAW_TOPIC, "group": RAW_GROUP})
        out["status_asked"] = list(status_asked)
        out["running_offline"] = await ask(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                           {"consumerGroup": RAW_GROUP, "clientId": "127.0.0.1@nobody"})
        out["span"] = jsonbody.loads((await ask(RequestCode.QUERY_CONSUME_TIME_SPAN,
                                                {"topic": RAW_TOPIC, "group": RAW_GROUP})).body)
        out["sql"] = await ask(RequestCode.CHECK_CLIENT_CONFIG, {}, jsonbody.dumps({
            "clientId": RAW_CLIENT, "group": RAW_GROUP, "subscriptionData": {
                "topic": RAW_TOPIC, "subString": "a > 1", "expressionType": "SQL92"}}))
        out["system"] = jsonbody.loads((await ask(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)).body)
        out["cq_missing"] = await ask(RequestCode.QUERY_CONSUME_QUEUE, {"topic": RAW_TOPIC, "queueId": 0,
                                                                        "index": 99, "count": 1})
    finally:
        await consumer.close()
        await admin.close()
    return out


def test_reset_offset_pushes_to_an_online_consumer_and_commits(cluster):  # noqa: F811
    out = asyncio.run(raw_scenario(cluster["broker"]))
    assert out["pull_code"] == ResponseCode.SUCCESS
    assert out["got_after"] - out["got_before"] == 3           # msgGetTotalTodayNow counts messages
    assert out["offline"].code == ResponseCode.CONSUMER_NOT_ONLINE
    reset = out["reset"]
    assert reset.code == ResponseCode.SUCCESS, reset.remark
    mq0 = jsonbody.ObjectKey.of({"brokerName": "broker-a", "queueId": 0, "topic": RAW_TOPIC})
    assert jsonbody.loads(reset.body)["offsetTable"] == {
        mq0: 0, jsonbody.ObjectKey.of({"brokerName": "broker-a", "queueId": 1, "topic": RAW_TOPIC}): 0}
    [push] = out["pushed"]
    assert push.ext_fields["topic"] == RAW_TOPIC and push.ext_fields["group"] == RAW_GROUP
    assert push.ext_fields["timestamp"] == "0" and push.body == reset.body
    assert out["committed"] == [0, 0]                          # from 4 back to the time's offset
    status = out["status"]
    assert status.code == ResponseCode.SUCCESS and len(out["status_asked"]) == 1
    assert jsonbody.loads(status.body)["consumerTable"] == {RAW_CLIENT: {mq0: 3}}
    assert out["running_offline"].code == ResponseCode.SYSTEM_ERROR
    assert out["running_offline"].remark == f"The Consumer <{RAW_GROUP}> <127.0.0.1@nobody> not online"
    spans = out["span"]["consumeTimeSpanSet"]
    assert len(spans) == 2 and all(s["delayTime"] > 0 and s["minTimeStamp"] <= s["maxTimeStamp"] for s in spans)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d#\d\d:\d\d:\d\d:\d{3}", spans[0]["minTimeStampStr"])
    assert out["sql"].code == ResponseCode.SYSTEM_ERROR
    assert out["sql"].remark == "The broker does not support consumer to filter message by SQL92"
    assert "RMQ_SYS_TRANS_HALF_TOPIC" in out["system"]["topicList"] and "brokerAddr" not in out["system"]
    assert out["cq_missing"].code == ResponseCode.SUCCESS and not out["cq_missing"].body
    assert out["cq_missing"].remark == f"Index 99 of 0@{RAW_TOPIC} is not exist!"
