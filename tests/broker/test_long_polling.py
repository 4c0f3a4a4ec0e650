"""Long polling on a real broker: a held pull answers as soon as a message it can read arrives, long
before its suspend time, and only then (another queue's message, or a tag it filters out, leaves
it held). The broker drains the store's dispatch on its event loop, so the wake-up happens there."""
from __future__ import annotations

import asyncio
import time

from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand

from .test_broker_server import records, run, running_pair, send_cmd

SUSPEND_MS = 20_000


def held_pull(topic, queue, offset, sub="*"):
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "LongPollGroup", "topic": topic, "queueId": queue, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": 0x2 | 0x4, "commitOffset": 0, "suspendTimeoutMillis": SUSPEND_MS, "subscription": sub,
        "subVersion": 0})


async def until(condition, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def test_held_pulls_wake_on_their_own_queue_and_tags_only(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (_, broker, client):
            addr = broker.config.broker_addr
            for q in range(3):        # the topic and its queues exist, one message each
                assert (await client.invoke(addr, send_cmd("LP", b"first", "TAGS\x01TagA\x02", queue=q))).code == 0
            holds = broker.pull_holds.holds
            t0 = time.monotonic()
            on_q0 = asyncio.create_task(client.invoke(addr, held_pull("LP", 0, 1), timeout_s=SUSPEND_MS / 1000 + 10))
            on_q1 = asyncio.create_task(client.invoke(addr, held_pull("LP", 1, 1), timeout_s=SUSPEND_MS / 1000 + 10))
            tag_b = asyncio.create_task(client.invoke(addr, held_pull("LP", 2, 1, "TagB"),
                                                      timeout_s=SUSPEND_MS / 1000 + 10))
            await until(lambda: {("LP", 0), ("LP", 1), ("LP", 2)} <= holds.keys())

            assert (await client.invoke(addr, send_cmd("LP", b"second", "TAGS\x01TagA\x02", queue=0))).code == 0
            got = await on_q0
            assert got.code == ResponseCode.SUCCESS
            assert [r.body for r in records(got.body)] == [b"second"]
            assert not on_q1.done() and not tag_b.done()        # answered in the same turns: still held

            assert (await client.invoke(addr, send_cmd("LP", b"not-b", "TAGS\x01TagA\x02", queue=2))).code == 0
            assert (await client.invoke(addr, send_cmd("LP", b"is-b", "TAGS\x01TagB\x02", queue=2))).code == 0
            got = await tag_b
            assert got.code == ResponseCode.SUCCESS
            assert [r.body for r in records(got.body)] == [b"is-b"]
            assert not on_q1.done()

            assert (await client.invoke(addr, send_cmd("LP", b"third", "TAGS\x01TagA\x02", queue=1))).code == 0
            got = await on_q1
            assert got.code == ResponseCode.SUCCESS and [r.body for r in records(got.body)] == [b"third"]
            assert time.monotonic() - t0 < SUSPEND_MS / 1000 / 2      # woken, not timed out
            await until(lambda: not holds)
    run(scenario())


def short_held_pull(topic, queue, offset, suspend_ms):
    cmd = held_pull(topic, queue, offset)
    cmd.ext_fields["suspendTimeoutMillis"] = str(suspend_ms)
    return cmd


def test_a_held_pull_that_times_out_answers_and_keeps_its_connection(tmp_path):
    """A held pull whose suspend time passes with nothing arriving answers PULL_NOT_FOUND, and its
    connection stays open for the next request (its timer once cancelled the connection's reader,
    which closed the connection instead)."""
    async def scenario():
        async with running_pair(tmp_path) as (_, broker, client):
            addr = broker.config.broker_addr
            assert (await client.invoke(addr, send_cmd("LPT", b"first", queue=0))).code == 0
            conn = await client.connection(addr)
            t0 = time.monotonic()
            got = await client.invoke(addr, short_held_pull("LPT", 0, 1, 300), timeout_s=10)
            assert got.code == ResponseCode.PULL_NOT_FOUND
            assert 0.25 <= time.monotonic() - t0 < 5
            await asyncio.sleep(0.2)
            assert await client.connection(addr) is conn and not conn.closed.is_set()
            assert all(not c.closed.is_set() for c in broker.server.connections)
            again = await client.invoke(addr, short_held_pull("LPT", 0, 0, 300), timeout_s=10)
            assert again.code == ResponseCode.SUCCESS and [r.body for r in records(again.body)] == [b"first"]
            assert await client.connection(addr) is conn
    run(scenario())
