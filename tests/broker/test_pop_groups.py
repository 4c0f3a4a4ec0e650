"""POP on a real broker, continued: max reconsume to %DLQ%<group> (§4 31), orderly POP with queue blocking,
attempt ids and consumed counts (§2.10, §4 34), and POP beside the 4.x pull consumers."""
from __future__ import annotations

import asyncio
import time

from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient

from mqtool.broker.subscriptions import SubscriptionGroupConfig
from mqtool.client.consumer import GroupConsumer
from mqtool.client.popconsumer import INIT_MIN, PopConsumer

from .test_broker_server import records, run, running_pair, start_pair
from .test_pop import G, pop_cmd, send_n


def test_past_retry_max_times_to_the_dlq(tmp_path):
    """retryMaxTimes 1: delivered twice (attempts 1 and 2), then in %DLQ%<group> (1 queue, perm 6), never again."""
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            addr = broker.config.broker_addr
            broker.groups.update(SubscriptionGroupConfig(G, retryMaxTimes=1))
            await send_n(client, addr, "TD", 1, queues=1)
            await broker.register_all()
            c = PopConsumer(f"127.0.0.1:{ns.port}", G, "TD", invisible_ms=600, init_mode=INIT_MIN)
            try:
                seen = []
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and broker.topics.get(f"%DLQ%{G}") is None:
                    seen += [m.record.reconsume_times for m in await c.pop(poll_ms=500)]
                assert seen == [0, 1]
                dlq = broker.topics.get(f"%DLQ%{G}")
                assert dlq is not None and (dlq.readQueueNums, dlq.perm) == (1, 6)
                await asyncio.sleep(0.3)
                got = broker.store.get(f"%DLQ%{G}", 0, 0, 32)
                [rec] = records(b"".join(got.messages))
                assert rec.body == b"m0" and rec.reconsume_times == 2
                assert rec.properties["RETRY_TOPIC"] == f"%RETRY%{G}_TD"
                assert await c.pop(poll_ms=1500) == []
            finally:
                await c.close()
    run(scenario())


def test_orderly_pop_blocks_the_queue_until_acked_or_invisible(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (_, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TO", 4, queues=1)
            first = await client.invoke(addr, pop_cmd("TO", n=2, invisible=1000, order=True, attempt="a1"))
            assert first.code == 0 and first.ext_fields["reviveQid"] == "999"
            assert [r.body for r in records(first.body)] == [b"m0", b"m1"]
            assert first.ext_fields["orderCountInfo"] == "0 0 0"
            assert broker.offsets.query(G, "TO", 0) == 0                  # moves on ack only
            blocked = await client.invoke(addr, pop_cmd("TO", n=2, invisible=1000, order=True, attempt="a2"))
            assert blocked.code == ResponseCode.POLLING_TIMEOUT
            same = await client.invoke(addr, pop_cmd("TO", n=2, invisible=1000, order=True, attempt="a1"))
            assert [r.body for r in records(same.body)] == [b"m0", b"m1"]
            await asyncio.sleep(1.1)                                     # invisible time over: back, counted
            again = await client.invoke(addr, pop_cmd("TO", n=2, invisible=1000, order=True, attempt="a3"))
            assert [r.body for r in records(again.body)] == [b"m0", b"m1"]
            assert again.ext_fields["orderCountInfo"] == "0 qo0%0 1;0 qo0%1 1;0 0 1"
            pt = int(again.ext_fields["popTime"])
            for off in (0, 1):
                extra = f"0 {pt} 1000 999 0 broker-a 0 {off}"
                ack = {"consumerGroup": G, "topic": "TO", "queueId": 0, "extraInfo": extra, "offset": off}
                resp = await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, ack))
                assert resp.code == 0
            assert broker.offsets.query(G, "TO", 0) == 2
            nxt = await client.invoke(addr, pop_cmd("TO", n=2, invisible=1000, order=True, attempt="a4"))
            assert [r.body for r in records(nxt.body)] == [b"m2", b"m3"]
            stale = {"consumerGroup": G, "topic": "TO", "queueId": 0, "offset": 1,
                     "extraInfo": f"0 {nxt.ext_fields['popTime']} 1000 999 0 broker-a 0 1"}
            ok = await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, stale))
            assert ok.code == 0                                          # below the committed offset: ignored
            outside = {**stale, "offset": 4, "extraInfo": f"0 {nxt.ext_fields['popTime']} 1000 999 0 broker-a 0 4"}
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, outside))
            assert resp.code == ResponseCode.MESSAGE_ILLEGAL                # not in the batch
            broker.pop.order.persist()
            assert (broker.store_config.root / "config" / "consumerOrderInfo.json").exists()
    run(scenario())


def test_pop_and_pull_consumers_beside_each_other(tmp_path):
    """A 4.x group pulling a topic and a POP group popping it each get every message; the same group
    name pulling one topic and popping another keeps two sets of offsets and two retry topics."""
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TS", 6, queues=2)
            await send_n(client, addr, "TS2", 3, queues=1)
            await broker.register_all()
            ns_addr = f"127.0.0.1:{ns.port}"
            popper = PopConsumer(ns_addr, "Mixed", "TS2", invisible_ms=60_000, init_mode=INIT_MIN)
            popper2 = PopConsumer(ns_addr, "PopOnly", "TS", invisible_ms=60_000, init_mode=INIT_MIN)
            puller = GroupConsumer(ns_addr, "Mixed", "TS", start="first")
            try:
                popped = await popper2.pop(poll_ms=0)
                await popper2.ack_all(popped)
                assert sorted(m.record.body for m in popped) == [b"m%d" % i for i in range(6)]
                pulled = []
                gen = puller.messages(200, until_end=True)
                async for mq, rec in gen:
                    pulled.append(rec.body)
                    puller.state.assigned[mq] = rec.queue_offset + 1
                assert sorted(pulled) == [b"m%d" % i for i in range(6)]
                mine = await popper.pop(poll_ms=0)
                assert sorted(m.record.body for m in mine) == [b"m0", b"m1", b"m2"]
                await popper.ack_all(mine)
                assert broker.offsets.query("Mixed", "TS2", 0) == 3
            finally:
                await popper.close()
                await popper2.close()
                await puller.close()
    run(scenario())


def test_orderly_past_retry_max_times_to_the_dlq(tmp_path):
    """An orderly message delivered retryMaxTimes + 1 times goes to %DLQ%<group> and the queue moves on."""
    async def scenario():
        async with running_pair(tmp_path) as (_, broker, client):
            addr = broker.config.broker_addr
            broker.groups.update(SubscriptionGroupConfig(G, retryMaxTimes=1))
            await send_n(client, addr, "TOD", 2, queues=1)
            for attempt, count in (("a1", None), ("a2", "1")):
                resp = await client.invoke(addr, pop_cmd("TOD", n=1, invisible=400, order=True, attempt=attempt))
                assert [r.body for r in records(resp.body)] == [b"m0"]
                assert (resp.ext_fields["orderCountInfo"].split(";")[0].split()[-1] == count) if count else True
                await asyncio.sleep(0.5)
            resp = await client.invoke(addr, pop_cmd("TOD", n=1, invisible=400, order=True, attempt="a3"))
            assert resp.code == ResponseCode.POLLING_TIMEOUT
            got = broker.store.get(f"%DLQ%{G}", 0, 0, 32)
            [rec] = records(b"".join(got.messages))
            assert rec.body == b"m0" and rec.reconsume_times == 2 and rec.properties["RETRY_TOPIC"] == "TOD"
            assert broker.offsets.query(G, "TOD", 0) == 1
            resp = await client.invoke(addr, pop_cmd("TOD", n=1, invisible=400, order=True, attempt="a4"))
            assert [r.body for r in records(resp.body)] == [b"m1"]
    run(scenario())


def test_a_clean_restart_keeps_held_checkpoints_and_orderly_blocks(tmp_path):
    """Stopped and started again on its store: a popped, un-acked message still comes back after its
    invisible time (its checkpoint is read again from the revive topic), an acked one does not, and an
    orderly queue whose batch is un-acked is still blocked (consumerOrderInfo.json)."""
    async def first():
        ns, broker = await start_pair(tmp_path)
        client = RemotingClient()
        try:
            addr = broker.config.broker_addr
            await send_n(client, addr, "TR", 2, queues=1)
            await send_n(client, addr, "TRO", 2, queues=1)
            resp = await client.invoke(addr, pop_cmd("TR", queue=0, invisible=2500))
            recs = records(resp.body)
            assert [r.body for r in recs] == [b"m0", b"m1"]
            extra = f"0 {resp.ext_fields['popTime']} 2500 {resp.ext_fields['reviveQid']} 0 broker-a 0 0"
            ack = {"consumerGroup": G, "topic": "TR", "queueId": 0, "extraInfo": extra, "offset": 0}
            assert (await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, ack))).code == 0
            resp = await client.invoke(addr, pop_cmd("TRO", n=2, invisible=60_000, order=True, attempt="a1"))
            assert [r.body for r in records(resp.body)] == [b"m0", b"m1"]
        finally:
            await client.close()
            await broker.stop()
            await ns.stop()

    async def second():
        ns, broker = await start_pair(tmp_path)
        client = RemotingClient()
        try:
            addr = broker.config.broker_addr
            blocked = await client.invoke(addr, pop_cmd("TRO", n=2, invisible=60_000, order=True, attempt="a2"))
            assert blocked.code == ResponseCode.POLLING_TIMEOUT
            back = await client.invoke(addr, pop_cmd("TR", poll=6000), timeout_s=10)
            assert [r.body for r in records(back.body)] == [b"m1"] and records(back.body)[0].reconsume_times == 1
        finally:
            await client.close()
            await broker.stop()
            await ns.stop()
    run(first())
    run(second())


def test_one_group_pulling_and_popping_one_topic(tmp_path):
    """The same group pulling (4.x) and popping one topic at once: both work, share the `topic@group`
    offsets as 5.3.3 does, and every message reaches the group at least once; the 4.x retry topic
    (%RETRY%group) and the POP one (%RETRY%group_topic) stay apart."""
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            addr = broker.config.broker_addr
            await send_n(client, addr, "TM", 40, queues=4)
            await broker.register_all()
            ns_addr = f"127.0.0.1:{ns.port}"
            popper = PopConsumer(ns_addr, "Both", "TM", invisible_ms=60_000, init_mode=INIT_MIN)
            puller = GroupConsumer(ns_addr, "Both", "TM", start="first")
            seen: list[bytes] = []
            try:
                async def pull_all():
                    async for mq, rec in puller.messages(200, until_end=True):
                        seen.append(rec.body)
                        puller.state.assigned[mq] = rec.queue_offset + 1

                async def pop_all():          # (the popper is a client of the group too: the puller
                    for _ in range(20):       # rebalances onto part of the queues; the popper reads them all)
                        got = await popper.pop(nums=8, poll_ms=0)
                        if not got:
                            break
                        seen.extend(m.record.body for m in got)
                        await popper.ack_all(got)
                await asyncio.gather(pull_all(), pop_all())
                assert set(seen) == {b"m%d" % i for i in range(40)}
                assert broker.topics.get("%RETRY%Both_TM") is None
            finally:
                await popper.close()
                await puller.close()
    run(scenario())
