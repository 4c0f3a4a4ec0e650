"""`mqtool top`'s samples (mqtool/client/top.py) at a few hundred topics, against a broker in this
process: every topic's offsets in one GET_ALL_TOPIC_OFFSETS from mqtool's broker, one
GET_TOPIC_STATS_INFO per topic from a broker without it (4.9.8's), the same figures either way."""
from __future__ import annotations

import asyncio

import pytest

from mqtool.broker import controller
from mqtool.broker.topics import TopicConfig
from mqtool.client.admin import Admin
from mqtool.client.top import ClusterWatch
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from tests.broker.test_broker_server import run, running_pair, send_cmd
from tests.servers import spy_handlers

TOPICS = 200


def sent_to(i: int, q: int) -> int:
    """Messages the test puts into queue `q` of topic i before the first sample."""
    return (i + q) % 5


async def put(client, addr: str, topic: str, queue: int, n: int) -> None:
    resps = await asyncio.gather(*(client.invoke(addr, send_cmd(topic, b"m", queue=queue), 10) for _ in range(n)))
    assert all(r.code == ResponseCode.SUCCESS for r in resps)


async def commit(client, addr: str, group: str, topic: str, queue: int, offset: int) -> None:
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": queue, "commitOffset": offset}), 10)
    assert resp.code == ResponseCode.SUCCESS


def moved(rate: float, interval_s: float) -> tuple[float, float]:
    """The bounds of rate x the time between the samples: interval_s is rounded to the millisecond."""
    return rate * (interval_s - 0.0005), rate * (interval_s + 0.0005)


@pytest.fixture
def handled(monkeypatch) -> list[int]:
    """The codes of the offset requests the broker's main port handles."""
    return spy_handlers(monkeypatch, (RequestCode.GET_ALL_TOPIC_OFFSETS, RequestCode.GET_TOPIC_STATS_INFO,
                                      RequestCode.GET_ALL_TOPIC_CONFIG))


@pytest.mark.parametrize("broker_kind", ["mqtool", "4.9.8"])
def test_samples_give_what_was_sent_and_its_rates(tmp_path, monkeypatch, handled, broker_kind):
    if broker_kind == "4.9.8":         # a broker without mqtool's code answers it REQUEST_CODE_NOT_SUPPORTED
        monkeypatch.delitem(controller.HANDLERS, RequestCode.GET_ALL_TOPIC_OFFSETS)

    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            addr = broker.config.broker_addr
            for i in range(TOPICS):
                broker.topics.update(TopicConfig(f"Many{i:03d}", 2, 2))
            await asyncio.gather(*(put(client, addr, f"Many{i:03d}", q, sent_to(i, q))
                                   for i in range(TOPICS) for q in range(2)))
            for j in range(10):            # group j consumed part of topic j
                resp = await client.invoke(addr, RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=jsonbody.dumps({"groupName": f"GID_MANY{j}"})))
                assert resp.code == ResponseCode.SUCCESS
                for q in range(2):
                    await commit(client, addr, f"GID_MANY{j}", f"Many{j:03d}", q, sent_to(j, q) // 2)
            admin = Admin(f"127.0.0.1:{ns.port}")
            try:
                watch = ClusterWatch(admin)
                first = await watch.step()
                topics = {t["topic"]: t for t in first["topics"]}
                assert {t: v["max_offset"] for t, v in topics.items() if t.startswith("Many")} == \
                    {f"Many{i:03d}": sent_to(i, 0) + sent_to(i, 1) for i in range(TOPICS)}
                assert all(t["put_tps"] is None for t in first["topics"])           # no rate from one sample
                assert "TBW102" not in topics and not any(t.startswith("%RETRY%") for t in topics)
                groups = {g["group"]: g for g in first["groups"] if g["group"].startswith("GID_MANY")}
                for j in range(10):
                    g = groups[f"GID_MANY{j}"]
                    done = sent_to(j, 0) // 2 + sent_to(j, 1) // 2
                    assert (g["topic"], g["consumer_offset"], g["lag"]) == \
                        (f"Many{j:03d}", done, sent_to(j, 0) + sent_to(j, 1) - done)
                # between two samples: 7 messages into Many007, 3 into Many100; GID_MANY7 takes 4
                await put(client, addr, "Many007", 0, 4)
                await put(client, addr, "Many007", 1, 3)
                await put(client, addr, "Many100", 1, 3)
                await commit(client, addr, "GID_MANY7", "Many007", 0, sent_to(7, 0) // 2 + 4)
                asked = len(handled)
                second = await watch.step()
                dt = second["interval_s"]
                rates = {t["topic"]: t["put_tps"] for t in second["topics"]}
                lo, hi = moved(rates["Many007"], dt)
                assert lo <= 7 <= hi
                lo, hi = moved(rates["Many100"], dt)
                assert lo <= 3 <= hi
                assert {t for t, r in rates.items() if r} == {"Many007", "Many100"}
                g7 = next(g for g in second["groups"] if g["group"] == "GID_MANY7")
                lo, hi = moved(g7["consume_tps"], dt)
                assert lo <= 4 <= hi
                assert g7["lag"] == sent_to(7, 0) + sent_to(7, 1) + 7 - (sent_to(7, 0) // 2 + 4 + sent_to(7, 1) // 2)
            finally:
                await admin.close()
            codes = handled[asked:]          # what the second sample asked
            if broker_kind == "mqtool":
                assert codes == [RequestCode.GET_ALL_TOPIC_OFFSETS] and watch.per_topic == set()
            else:                            # not asked 90001 again: the table, then each topic
                assert codes[0] == RequestCode.GET_ALL_TOPIC_CONFIG and watch.per_topic == {addr}
                assert codes[1:] == [RequestCode.GET_TOPIC_STATS_INFO] * TOPICS      # the system topics left out
    run(scenario())


def test_all_topic_offsets_answers_every_topics_write_queues(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, client):
            addr = broker.config.broker_addr
            broker.topics.update(TopicConfig("Wide", 2, 3))
            await put(client, addr, "Wide", 2, 4)
            await put(client, addr, "Wide", 0, 1)
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_OFFSETS), 10)
            assert resp.code == ResponseCode.SUCCESS
            table = jsonbody.loads(resp.body)["maxOffsets"]
            assert table["Wide"] == [1, 0, 4]
            assert set(table) == set(broker.topics.table) and table["TBW102"] == [0] * 8
    run(scenario())
