"""QUERY_CONSUMER_OFFSET for a group with no committed offset (ConsumerManageProcessor, 4.9.8): 0
while the queue starts at 0 and its first message is still within accessMessageInMemoryMaxRatio
of memory behind the commit log's end, else QUERY_NOT_FOUND, so the client's consumeFromWhere
decides (CONSUME_FROM_LAST_OFFSET: the end, not a replay of the whole queue)."""
from __future__ import annotations

from mqtool.broker.config import BrokerConfig
from mqtool.broker.controller import BrokerController
from mqtool.namesrv.server import NameServer
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient
from tests.broker.test_broker_server import send_cmd


def query(group: str, topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET,
                                   {"consumerGroup": group, "topic": topic, "queueId": 0})


def test_a_new_group_starts_at_zero_only_while_the_queue_is_in_memory(tmp_path):
    async def scenario():
        results = {}
        for ratio in ("40", "0"):        # 0: nothing counts as in memory
            ns = await NameServer(tmp_path / f"kv{ratio}.json").start("127.0.0.1", 0)
            config = BrokerConfig(brokerName="broker-a", listenPort=0, namesrvAddr=f"127.0.0.1:{ns.port}",
                                  storePathRootDir=str(tmp_path / f"s{ratio}"))
            broker = await BrokerController(config, {"accessMessageInMemoryMaxRatio": ratio}).start("127.0.0.1")
            c = RemotingClient()
            try:
                addr = broker.config.broker_addr
                empty = await c.invoke(addr, query("NEW_G", "NoMessagesYet"))
                for i in range(3):
                    assert (await c.invoke(addr, send_cmd("Young", b"m%d" % i, queue=0))).code == ResponseCode.SUCCESS
                broker.store.drain_dispatch()
                results[ratio] = (empty, await c.invoke(addr, query("NEW_G", "Young")))
            finally:
                await c.close()
                await broker.stop()
                await ns.stop()
        return results
    results = run_result(scenario())
    for ratio in ("40", "0"):
        empty, _ = results[ratio]
        assert (empty.code, empty.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "0")    # nothing stored yet
    young = results["40"][1]
    assert (young.code, young.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "0")
    on_disk = results["0"][1]
    assert on_disk.code == ResponseCode.QUERY_NOT_FOUND
    assert on_disk.remark == "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


def run_result(coro):
    import asyncio
    return asyncio.run(asyncio.wait_for(coro, 60))
