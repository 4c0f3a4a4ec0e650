"""A group consumer outlives a name server that goes away: its rebalance fails, it keeps pulling."""
from __future__ import annotations

import asyncio

from mqtool.client.consumer import GroupConsumer
from mqtool_remoting.codes import RequestCode
from mqtool_remoting.transport import RemotingClient
from tests.broker.test_broker_server import send_cmd, start_pair


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
        stop = asyncio.Event()
        seen: list[bytes] = []

        async def consume():
            async for mq, rec in consumer.messages(poll_ms=100, stop=stop):
                consumer.state.assigned[mq] = rec.queue_offset + 1
                seen.append(rec.body)
                stop.set()
        try:
            await asyncio.wait_for(consume(), 20)
            assert seen == [b"first"] and slow["left"] == 0
        finally:
            await consumer.close()
            await raw.close()
            await broker.stop()
            await ns.stop()
    asyncio.run(asyncio.wait_for(scenario(), 60))
