"""A group consumer outlives a name server that goes away: its rebalance fails, it keeps pulling."""
from __future__ import annotations

import asyncio
import logging
import time

from mqtool.client.consumer import GroupConsumer
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.transport import RemotingClient
from tests.broker.test_broker_server import send_cmd, start_pair



async def first_message(consumer, seen: list[bytes]) -> None:
    """Consume until one message came (its body appended to `seen`), committing as it goes."""
    stop = asyncio.Event()
    async for mq, rec in consumer.messages(poll_ms=100, stop=stop):
        consumer.state.assigned[mq] = rec.queue_offset + 1
        seen.append(rec.body)
        stop.set()

def test_the_group_keeps_consuming_when_its_name_server_is_gone(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        addr = broker.config.broker_addr
        raw = RemotingClient()
        await raw.invoke(addr, send_cmd("Resilient", body=b"first", queue=0))
        consumer = GroupConsumer(f"127.0.0.1:{ns.port}", "GID_RESILIENT", "Resilient")
        seen: list[bytes] = []
        stop = asyncio.Event()

        async def consume():
            async for mq, rec in consumer.messages(poll_ms=100, stop=stop):
                consumer.state.assigned[mq] = rec.queue_offset + 1
                seen.append(rec.body)
        task = asyncio.ensure_future(consume())
        try:
            for _ in range(200):
                if seen:
                    break
                await asyncio.sleep(0.05)
            assert seen == [b"first"]
            await ns.stop()                                 # the name server goes away
            consumer._rebalance.set()                       # its next round asks it (and fails)
            await asyncio.sleep(0.5)
            assert not task.done(), task.exception() if task.done() else None
            await raw.invoke(addr, send_cmd("Resilient", body=b"second", queue=0))
            for _ in range(200):
                if len(seen) == 2:
                    break
                await asyncio.sleep(0.05)
            assert seen == [b"first", b"second"]
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
            await consumer.close()
            await raw.close()
            await broker.stop()
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_timeout_before_the_first_rebalance_does_not_end_the_group(tmp_path):
    """Java's push consumer starts whatever its first heartbeat and rebalance meet, and tries again:
    a name server too slow to answer the first route requests does not stop `messages()`."""
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        raw = RemotingClient()
        await raw.invoke(broker.config.broker_addr, send_cmd("SlowStart", body=b"first", queue=0))
        answer = ns.server.handler
        slow = {"left": 2}

        async def slow_routes(conn, cmd):
            if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC and slow["left"] > 0:
                slow["left"] -= 1
                await asyncio.sleep(1.0)          # past the consumer's 0.3 s timeout
            return await answer(conn, cmd)
        ns.server.handler = slow_routes           # the consumer's connection is a new one
        consumer = GroupConsumer(f"127.0.0.1:{ns.port}", "GID_SLOW_START", "SlowStart", start="first")
        consumer.timeout_s = 0.3
        seen: list[bytes] = []
        try:
            await asyncio.wait_for(first_message(consumer, seen), 20)
            assert seen == [b"first"] and slow["left"] == 0
        finally:
            await consumer.close()
            await raw.close()
            await broker.stop()
            await ns.stop()
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_filter_data_not_latest_is_pulled_again_later_as_javas_push_consumer_does(tmp_path, caplog):
    """A pull answered FILTER_DATA_NOT_LATEST (28: the broker has not yet seen the heartbeat with
    the new SQL92 expression) is an MQBrokerException to 4.9.8's push consumer: its onException
    logs a warning and pulls the queue again, at the same offset, pullTimeDelayMillsWhenException
    later; nothing reaches the application. The broker answers 28 to the first two pulls here."""
    caplog.set_level(logging.WARNING, logger="mqtool.client")

    async def scenario():
        ns, broker = await start_pair(tmp_path, enablePropertyFilter=True)
        raw = RemotingClient()
        for body, a in ((b"small", "1"), (b"big", "10")):
            await raw.invoke(broker.config.broker_addr, send_cmd("Lagging", body, f"a\x01{a}", queue=0))
        answer = broker.server.handler
        pulls: list[tuple[float, int, int]] = []        # (when, queueOffset, answer code) of queue 0's pulls

        async def lagging_filter(conn, cmd):
            if (cmd.code == RequestCode.PULL_MESSAGE and cmd.ext_fields.get("topic") == "Lagging"
                    and cmd.ext_fields.get("queueId") == "0"):
                if len(pulls) < 2:
                    pulls.append((time.monotonic(), int(cmd.ext_fields["queueOffset"]),
                                  ResponseCode.FILTER_DATA_NOT_LATEST))
                    return cmd.response(ResponseCode.FILTER_DATA_NOT_LATEST,
                                        "the consumer's consumer filter data not latest")
                resp = await answer(conn, cmd)
                pulls.append((time.monotonic(), int(cmd.ext_fields["queueOffset"]), resp.code))
                return resp
            return await answer(conn, cmd)
        broker.server.handler = lagging_filter            # the consumer's connection is a new one
        consumer = GroupConsumer(f"127.0.0.1:{ns.port}", "GID_LAGGING", "Lagging", start="first", sql="a > 5")
        consumer.pull_delay_on_error_ms = 400
        seen: list[bytes] = []
        try:
            await asyncio.wait_for(first_message(consumer, seen), 20)      # returns when the message came: no exception
        finally:
            await consumer.close()
            await raw.close()
            await broker.stop()
            await ns.stop()
        return seen, pulls
    seen, pulls = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert seen == [b"big"]
    codes = [code for _, _, code in pulls]
    assert codes[:3] == [ResponseCode.FILTER_DATA_NOT_LATEST] * 2 + [ResponseCode.SUCCESS]
    assert [offset for _, offset, _ in pulls[:3]] == [0, 0, 0]          # the queue kept its place
    gaps = [later[0] - earlier[0] for earlier, later in zip(pulls, pulls[1:3])]
    assert min(gaps) >= 0.4 - 0.01, gaps                                 # pullTimeDelayMillsWhenException
    warned = [r.getMessage() for r in caplog.records if "FILTER_DATA_NOT_LATEST (28)" in r.getMessage()]
    assert len(warned) == 1 and "Lagging queue 0" in warned[0], warned          # said once while it lasts
