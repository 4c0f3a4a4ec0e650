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
    assert all(len(table[k].split()) == 3 for k in ("putTps", "getTransferedTps", "getTotalTps"))
    assert re.fullmatch(r"Total : [\d.]+ \w?i?B, Free : [\d.]+ \w?i?B\.", table["commitLogDirCapacity"])
    assert re.fullmatch(r"\[ \d+ days, \d+ hours, \d+ minutes, \d+ seconds \]", table["runtime"])
    float(table["commitLogDiskRatio"])
