"""The broker's Prometheus endpoint (metricsPort) over real 127.0.0.1 sockets, parsed with
prometheus_client's own parser."""
from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mqtool.broker.config import BrokerConfig
from mqtool.broker.controller import BrokerController
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient
from tests.broker.test_broker_server import pull_cmd, records, send_cmd, start_pair
from tests.servers import free_port

TOPIC, GROUP = "MetricsTopic", "MetricsGroup"


async def http_get(port: int, target: str = "/metrics", method: str = "GET") -> tuple[int, dict, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ")[1]), headers, body


def samples(text: bytes) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found: dict, name: str, **labels) -> float:
    want = set(labels.items())
    hits = [v for (n, lab), v in found.items() if n == name and want <= lab]
    assert len(hits) == 1, f"{name} {labels}: {len(hits)} samples"
    return hits[0]


def test_metrics_carry_topic_counters_and_group_lag(tmp_path):
    async def scenario():
        port = free_port()
        ns, broker = await start_pair(tmp_path, metricsPort=port)
        c = RemotingClient()
        addr = broker.config.broker_addr
        try:
            for i in range(10):
                resp = await c.invoke(addr, send_cmd(TOPIC, body=b"x" * (100 + i), queue=0))
                assert resp.code == ResponseCode.SUCCESS
            body_bytes = sum(100 + i for i in range(10))
            resp = await c.invoke(addr, pull_cmd(TOPIC, queue=0, offset=0, group=GROUP))
            got = records(resp.body)
            assert len(got) == 10
            await c.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 4}))

            status, headers, text = await http_get(port)
            assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
            found = samples(text)
            topic = {"cluster": "DefaultCluster", "broker": "broker-a", "topic": TOPIC}
            assert value(found, "mqtool_topic_put_messages_total", **topic) == 10
            assert value(found, "mqtool_topic_put_bytes_total", **topic) == sum(r.total_size for r in got)
            assert value(found, "rocketmq_producer_offset", **topic) == 10
            assert value(found, "rocketmq_producer_tps", **topic) == pytest.approx(10 / 60)
            assert value(found, "mqtool_broker_put_messages_total", broker="broker-a") == 10
            assert value(found, "mqtool_broker_get_messages_total", broker="broker-a") == 10
            assert value(found, "mqtool_group_get_messages_total", topic=TOPIC, group=GROUP) == 10
            assert value(found, "rocketmq_group_diff", topic=TOPIC, group=GROUP) == 6
            assert value(found, "rocketmq_consumer_offset", topic=TOPIC, group=GROUP) == 4
            assert value(found, "rocketmq_group_get_latency_by_storetime", topic=TOPIC, group=GROUP) >= 0
            assert value(found, "rocketmq_brokeruntime_commitlog_maxoffset", brokerIP=addr) == \
                broker.store.commitlog_max_offset
            assert value(found, "rocketmq_brokeruntime_msg_put_total_today_now", brokerIP=addr) == 10
            assert body_bytes < value(found, "mqtool_broker_put_bytes_total", broker="broker-a")
            assert_writer_is_generate_latest(broker)

            # the group catches up: its lag falls to 0, in messages and in time
            await c.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 10}))
            found = samples((await http_get(port))[2])
            assert value(found, "rocketmq_group_diff", topic=TOPIC, group=GROUP) == 0
            assert value(found, "rocketmq_group_get_latency_by_storetime", topic=TOPIC, group=GROUP) == 0
            assert value(found, "rocketmq_consumer_offset", topic=TOPIC, group=GROUP) == 10
        finally:
            await c.close()
            await broker.stop()
            await ns.stop()
    asyncio.run(asyncio.wait_for(scenario(), 60))


def assert_writer_is_generate_latest(broker):
    """metrics.text_format writes what prometheus_client's generate_latest writes, byte for byte,
    odd label values and numbers past a million included."""
    from prometheus_client import CollectorRegistry, generate_latest
    from mqtool.broker import metrics
    broker.offsets.commit('odd"group\\x\nline', TOPIC, 0, 3)
    broker.stats.topic_totals["MetricsTopic"] = (12_345_678, 10 ** 12)
    families = list(metrics.BrokerCollector(broker).collect())      # one collection (times move)

    class Fixed:
        def collect(self):
            return iter(families)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    expected = generate_latest(registry)
    assert b"e+" in expected and b'odd\\"group' in expected
    assert metrics.text_format(families) == expected


def test_lag_in_time_is_the_age_of_the_oldest_unconsumed_message(tmp_path):
    async def scenario():
        port = free_port()
        ns, broker = await start_pair(tmp_path, metricsPort=port)
        c = RemotingClient()
        addr = broker.config.broker_addr
        try:
            await c.invoke(addr, send_cmd(TOPIC, queue=1))
            await c.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": GROUP, "topic": TOPIC, "queueId": 1, "commitOffset": 0}))
            stored = broker.store.read(broker.store.commitlog_min_offset).store_timestamp
            found = samples((await http_get(port))[2])
            age = value(found, "rocketmq_group_get_latency_by_storetime", topic=TOPIC, group=GROUP)
            assert 0 <= age <= time.time() * 1000 - stored + 1
            assert value(found, "rocketmq_group_diff", topic=TOPIC, group=GROUP) == 1
        finally:
            await c.close()
            await broker.stop()
            await ns.stop()
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_other_paths_and_methods_are_refused(tmp_path):
    async def scenario():
        port = free_port()
        ns, broker = await start_pair(tmp_path, metricsPort=port)
        try:
            assert (await http_get(port, "/"))[0] == 404
            assert (await http_get(port, "/metrics", "POST"))[0] == 405
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"garbage\r\n\r\n")
            assert (await reader.read()).startswith(b"HTTP/1.1 400")
            writer.close()
            # a slow scraper sending nothing does not stop another from being answered
            idle = await asyncio.open_connection("127.0.0.1", port)
            assert (await http_get(port))[0] == 200
            idle[1].close()
        finally:
            await broker.stop()
            await ns.stop()
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_metrics_port_taken_is_one_clear_error(tmp_path):
    async def scenario():
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            taken = s.getsockname()[1]
            config = BrokerConfig(brokerName="b", listenPort=0, storePathRootDir=str(tmp_path / "b"), metricsPort=taken)
            with pytest.raises(OSError, match=f"cannot listen on metricsPort {taken}"):
                await BrokerController(config).start("127.0.0.1")
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_no_metrics_port_no_endpoint(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        try:
            assert broker.metrics is None
        finally:
            await broker.stop()
            await ns.stop()
    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_ha_lag_per_slave(tmp_path):
    from tests.ha.fakepeers import FakeSlave

    async def scenario():
        port = free_port()
        ns, broker = await start_pair(tmp_path, metricsPort=port)
        c = RemotingClient()
        try:
            for _ in range(3):
                await c.invoke(broker.config.broker_addr, send_cmd(TOPIC))
            top = broker.store.commitlog_max_offset
            with FakeSlave(f"127.0.0.1:{broker.ha_master.port}") as slave:
                slave.report(100)
                for _ in range(200):
                    if any(conn.ack_offset == 100 for conn in broker.ha_master.connections):
                        break
                    await asyncio.sleep(0.02)
                found = samples((await http_get(port))[2])
                assert value(found, "mqtool_ha_slave_lag_bytes", broker="broker-a") == top - 100
        finally:
            await c.close()
            await broker.stop()
            await ns.stop()
    asyncio.run(asyncio.wait_for(scenario(), 60))
