"""POP over remoting on a real broker (rocketmq5.md 2, 4): pop, ack, change-invisible, redelivery through
%RETRY%<group>_<topic>, batch ack, peek, notification, polling info, long polling, and the §4 items
38 and 39, with mqtool's own PopConsumer as the client."""
from __future__ import annotations

import asyncio
import time

from mqtool_remoting import extrainfo as ei
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_store.poprecords import REVIVE_GROUP

from mqtool.client.popconsumer import INIT_MIN, PopConsumer, bitset_base64

from .test_broker_server import records, run, running_pair, send_cmd

G = "GPOP"


def pop_cmd(topic, group=G, queue=-1, n=32, invisible=3000, poll=0, order=False, init=0, attempt=None, exp=None):
    ext = {"consumerGroup": group, "topic": topic, "queueId": queue, "maxMsgNums": n, "invisibleTime": invisible,
           "pollTime": poll, "bornTime": int(time.time() * 1000), "initMode": init}
    if order:
        ext["order"] = "true"
    if attempt:
        ext["attemptId"] = attempt
    if exp:
        ext.update(expType="TAG", exp=exp)
    return RemotingCommand.request(RequestCode.POP_MESSAGE, ext)


async def send_n(client, addr, topic, n, queues=2, tag="TagA"):
    for i in range(n):
        resp = await client.invoke(addr, send_cmd(topic, b"m%d" % i, f"TAGS\x01{tag}\x02KEYS\x01k{i}", queue=i % queues))
        assert resp.code == 0


async def until(condition, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def consumer(ns, topic, **kw):
    return PopConsumer(f"127.0.0.1:{ns.port}", G, topic, **kw)


def test_pop_ack_and_redelivery_through_the_retry_topic(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TP", 6)
            await broker.register_all()
            c = consumer(ns, "TP", invisible_ms=1000, init_mode=INIT_MIN)
            try:
                got = await c.pop(poll_ms=0)
                assert sorted(m.record.body for m in got) == [b"m%d" % i for i in range(6)]
                # the offset moved at pop time; nothing more to pop now
                assert broker.offsets.query(G, "TP", 0) == 3 and broker.offsets.query(G, "TP", 1) == 3
                assert await c.pop(poll_ms=0) == []
                first = got[0].extra
                assert first.kind == "0" and first.broker_name == "broker-a" and first.queue_offset is not None
                acked = [m for m in got if m.record.body in (b"m0", b"m1", b"m2")]
                for m in acked:
                    await c.ack(m)
                await c.ack(acked[0])                        # twice: both OK (§4 27)
                t0 = time.monotonic()
                back = []
                while len(back) < 3:
                    back += await c.pop(poll_ms=3000)
                assert time.monotonic() - t0 >= 0.5
                assert sorted(m.record.body for m in back) == [b"m3", b"m4", b"m5"]
                for m in back:
                    assert m.record.topic == "TP" and m.record.reconsume_times == 1
                    assert m.extra.kind == "1" and m.real_topic(G) == "%RETRY%GPOP_TP"
                    assert m.record.properties["1ST_POP_TIME"] == str(first.pop_time)
                retry = broker.topics.get("%RETRY%GPOP_TP")
                assert retry is not None and (retry.readQueueNums, retry.perm) == (1, 6)
                await c.ack_all(back)                        # a batch ack of retried messages
                await asyncio.sleep(1.5)
                assert await c.pop(poll_ms=0) == []
                assert broker.pop.revive.revived == 3
                assert broker.offsets.query(REVIVE_GROUP, broker.pop.revive_topic, first.revive_qid) >= 0
            finally:
                await c.close()
    run(scenario())


def test_change_invisible_time_and_its_new_handle(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TC", 2, queues=1)
            await broker.register_all()
            c = consumer(ns, "TC", invisible_ms=800, init_mode=INIT_MIN)
            try:
                got = await c.pop(poll_ms=0)
                assert len(got) == 2
                later = await c.change_invisible(got[1], 2500)
                assert later.extra.invisible_time == 2500 and later.extra.ck_offset == later.extra.queue_offset
                assert later.extra.pop_time >= got[1].extra.pop_time
                back = await c.pop(poll_ms=2000)         # the first comes back at ~0.8 s, not the second
                assert [m.record.body for m in back] == [b"m0"]
                await c.ack(back[0])
                await c.ack(later)                        # acked with the new handle: never back
                assert await c.pop(poll_ms=3500) == []
            finally:
                await c.close()
    run(scenario())


def test_batch_ack_peek_notification_polling_info_and_long_polling(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (_, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TB", 4, queues=1)
            peek = await client.invoke(addr, RemotingCommand.request(RequestCode.PEEK_MESSAGE, {
                "topic": "TB", "queueId": 0, "maxMsgNums": 2, "consumerGroup": G}))
            assert peek.code == 0 and [r.body for r in records(peek.body)] == [b"m0", b"m1"]
            assert broker.offsets.query(G, "TB", 0) == -1            # a peek moves nothing
            resp = await client.invoke(addr, pop_cmd("TB", queue=0, invisible=1000))
            assert resp.code == 0 and resp.ext_fields["msgOffsetInfo"] == "0 0 0,1,2,3"
            so, pt = int(resp.ext_fields["startOffsetInfo"].split()[2]), int(resp.ext_fields["popTime"])
            body = jsonbody.dumps({"acks": [{"b": bitset_base64([0, 1, 2, 3], so), "c": G, "it": 1000, "pt": pt, "q": 0,
                                             "r": "0", "rq": int(resp.ext_fields["reviveQid"]), "so": so, "t": "TB"}],
                                   "brokerName": "broker-a"})
            assert (await client.invoke(addr, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, body=body))).code == 0
            empty = jsonbody.dumps({"acks": [], "brokerName": "broker-a"})
            assert (await client.invoke(addr, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE,
                                                                      body=empty))).code == ResponseCode.NO_MESSAGE
            note = {"consumerGroup": G, "topic": "TB", "queueId": -1, "pollTime": 0, "bornTime": int(time.time() * 1000)}
            got = await client.invoke(addr, RemotingCommand.request(RequestCode.NOTIFICATION, note))
            assert got.code == 0 and got.ext_fields["hasMsg"] == "false"
            # a held POP: counted by POLLING_INFO, woken by a send, long before its poll time
            held = asyncio.create_task(client.invoke(addr, pop_cmd("TB", poll=15000), timeout_s=20))
            info = {"consumerGroup": G, "topic": "TB", "queueId": -1}
            await until(lambda: broker.pop.polling.size == 1)
            polled = await client.invoke(addr, RemotingCommand.request(RequestCode.POLLING_INFO, info))
            assert polled.code == 0 and polled.ext_fields["pollingNum"] == "1"
            t0 = time.monotonic()
            assert (await client.invoke(addr, send_cmd("TB", b"late"))).code == 0
            woke = await held
            assert woke.code == 0 and [r.body for r in records(woke.body)] == [b"late"]
            assert time.monotonic() - t0 < 5
            note["pollTime"], note["bornTime"] = 200, int(time.time() * 1000)
            got = await client.invoke(addr, RemotingCommand.request(RequestCode.NOTIFICATION, note))
            assert got.ext_fields["hasMsg"] == "false"
            assert (await client.invoke(addr, send_cmd("TB", b"more"))).code == 0
            note["bornTime"] = int(time.time() * 1000)
            got = await client.invoke(addr, RemotingCommand.request(RequestCode.NOTIFICATION, note))
            assert got.ext_fields["hasMsg"] == "true"
            # the batch acked: nothing of it comes back after its invisible time
            await asyncio.sleep(1.5)
            again = await client.invoke(addr, pop_cmd("TB", queue=0, invisible=1000))
            assert [r.body for r in records(again.body)] == [b"more"]
    run(scenario())


def test_conformance_38_and_39(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (_, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TX9", 1, queues=1)
            resp = await client.invoke(addr, pop_cmd("TX9", n=33))
            assert resp.code == ResponseCode.INVALID_PARAMETER and "greater than 32" in resp.remark
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.POP_ROLLBACK, {}))
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            broker.store_config.timerWheelEnable = False
            resp = await client.invoke(addr, pop_cmd("TX9"))
            assert resp.code == ResponseCode.SYSTEM_ERROR and "timerWheelEnable is false" in resp.remark
            broker.store_config.timerWheelEnable = True
            extra = ei.build_extra_info(0, 1, 1000, 0, "TX9", "broker-a", 0, 5)
            ack = {"consumerGroup": G, "topic": "TX9", "queueId": 0, "extraInfo": extra, "offset": 5}
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, ack))
            assert resp.code == ResponseCode.NO_MESSAGE
            change = {**ack, "offset": 1, "invisibleTime": 1000}                 # offset = max
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change))
            assert resp.code == ResponseCode.NO_MESSAGE
            assert (await client.invoke(addr, pop_cmd("NOPE"))).code == ResponseCode.TOPIC_NOT_EXIST
            assert (await client.invoke(addr, pop_cmd("TX9", queue=9))).code == ResponseCode.INVALID_PARAMETER
            # the fast port takes acks but not pops, as 5.3.3 registers them
            fast = f"127.0.0.1:{broker.fast_server.port}"
            assert (await client.invoke(fast, pop_cmd("TX9"))).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            resp = await client.invoke(fast, RemotingCommand.request(RequestCode.ACK_MESSAGE, ack))
            assert resp.code == ResponseCode.NO_MESSAGE
    run(scenario())


def test_a_new_group_starts_at_0_when_the_first_message_is_in_memory(tmp_path):
    """§2.5 / §4 25: with initMode MAX a brand-new group still gets what was sent before it existed,
    because the queue's first message is in the page cache (mincore)."""
    async def scenario():
        async with running_pair(tmp_path) as (_, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TN", 3, queues=1)
            assert broker.store.in_memory("TN", 0, 0)
            resp = await client.invoke(addr, pop_cmd("TN", group="Fresh", init=1))
            assert [r.body for r in records(resp.body)] == [b"m0", b"m1", b"m2"]
            broker.config.initPopOffsetByCheckMsgInMem = False    # else: the newest message only
            resp = await client.invoke(addr, pop_cmd("TN", group="Fresh2", init=1))
            assert [r.body for r in records(resp.body)] == [b"m2"]
    run(scenario())


def test_tag_filtered_messages_are_never_delivered(tmp_path):
    """§4 30: messages the expression does not match are skipped and never come back."""
    async def scenario():
        async with running_pair(tmp_path) as (_, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TF", 2, queues=1, tag="TagB")
            await send_n(client, addr, "TF", 1, queues=1, tag="TagA")
            resp = await client.invoke(addr, pop_cmd("TF", queue=0, invisible=1000, exp="TagA"))
            assert [r.tags for r in records(resp.body)] == ["TagA"]
            await asyncio.sleep(1.6)
            resp = await client.invoke(addr, pop_cmd("TF", queue=0, exp="TagA"))
            assert [r.tags for r in records(resp.body)] == ["TagA"]       # the TagA one back, no TagB
    run(scenario())


def test_a_late_ack_is_harmless_and_a_short_change_redelivers_soon(tmp_path):
    """§2.7 / §4 28 over remoting: an ack after the invisible time (the message already revived)
    answers SUCCESS and the retried copy still comes; §4 32: a change to 300 ms brings the message
    back with reconsumeTimes 1 well before its first invisible time."""
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TL", 1, queues=1)
            await broker.register_all()
            c = consumer(ns, "TL", invisible_ms=300, init_mode=INIT_MIN)
            try:
                [late] = await c.pop(nums=1, poll_ms=0)
                await until(lambda: broker.pop.revive.revived >= 1)
                await c.ack(late)                                     # SUCCESS: nothing raised
                back = await c.pop(poll_ms=2000)
                assert [m.record.body for m in back] == [b"m0"] and back[0].record.reconsume_times == 1
                await c.ack(back[0])
                assert (await client.invoke(addr, send_cmd("TL", b"m1"))).code == 0
                c.invisible_ms = 30_000
                [slow] = await c.pop(poll_ms=0)
                assert slow.record.body == b"m1"
                t0 = time.monotonic()
                await c.change_invisible(slow, 300)
                again = []
                while not again and time.monotonic() - t0 < 15:     # polls of 1 s (CI once missed one 5 s poll)
                    again = await c.pop(poll_ms=1000)
                assert [m.record.body for m in again] == [b"m1"] and again[0].record.reconsume_times == 1
                assert time.monotonic() - t0 < 15                   # half the first invisible time (30 s)
            finally:
                await c.close()
    run(scenario())


def test_polling_full_when_too_many_pops_wait_on_one_key(tmp_path):
    """§2.11: past popPollingSize held POPs on one topic@group@queueId, a POP answers POLLING_FULL
    (a NOTIFICATION says pollingFull=true), and one held POP that expires answers POLLING_TIMEOUT."""
    async def scenario():
        async with running_pair(tmp_path) as (_, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TW", 1, queues=1)
            await client.invoke(addr, pop_cmd("TW"))                    # the one message taken
            broker.pop.polling.per_key = 1
            held = asyncio.create_task(client.invoke(addr, pop_cmd("TW", poll=1500), timeout_s=10))
            await until(lambda: broker.pop.polling.size == 1)
            full = await client.invoke(addr, pop_cmd("TW", poll=1500))
            assert full.code == ResponseCode.POLLING_FULL
            note = {"consumerGroup": G, "topic": "TW", "queueId": -1, "pollTime": 1500,
                    "bornTime": int(time.time() * 1000)}
            got = await client.invoke(addr, RemotingCommand.request(RequestCode.NOTIFICATION, note))
            assert got.ext_fields == {**got.ext_fields, "hasMsg": "false", "pollingFull": "true"}
            assert (await held).code == ResponseCode.POLLING_TIMEOUT
    run(scenario())


def test_a_pop_consumer_is_listed_in_its_group(tmp_path):
    """A PopConsumer heartbeats (consumeType CONSUME_POP, as 5.x's pop-mode consumer) before its first
    pop, so the broker's consumer manager lists it in its group with its subscription."""
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            await send_n(client, broker.config.broker_addr, "TPL", 1)
            await broker.register_all()
            c = consumer(ns, "TPL", init_mode=INIT_MIN, expression="TagA")
            try:
                assert broker.consumers.get(G) is None
                assert len(await c.pop(poll_ms=0)) == 1
                group = broker.consumers.get(G)
                assert group.client_ids() == [c.client_id] and group.consume_type == "CONSUME_POP"
                assert group.subscriptions["TPL"].sub_string == "TagA"
            finally:
                await c.close()
    run(scenario())
