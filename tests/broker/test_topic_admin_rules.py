"""AdminBrokerProcessor's rules for creating and deleting topics and groups (4.9.8): not on a slave,
not a system topic; a deleted topic's consume queues go with it (cleanUnusedTopic), so the same
name created again starts at offset 0."""
from __future__ import annotations

from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient
from tests.broker.test_broker_server import pull_cmd, records, run, send_cmd, start_pair

SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."


def create(topic, queues=1):
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
        "topicFilterType": "SINGLE_TAG"})


def delete(topic):
    return RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})


def test_system_topics_are_refused_and_a_deleted_topic_starts_again_at_zero(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        addr, c = broker.config.broker_addr, RemotingClient()
        try:
            for topic in ("SCHEDULE_TOPIC_XXXX", "TBW102", "rmq_sys_anything"):
                for req in (create(topic), delete(topic)):
                    resp = await c.invoke(addr, req)
                    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR,
                                                        f"The topic[{topic}] is conflict with system topic.")
            assert broker.topics.get("SCHEDULE_TOPIC_XXXX") is not None
            assert (await c.invoke(addr, create("Again"))).code == ResponseCode.SUCCESS
            for i in range(3):
                assert (await c.invoke(addr, send_cmd("Again", b"old%d" % i))).code == ResponseCode.SUCCESS
            assert (await c.invoke(addr, delete("Again"))).code == ResponseCode.SUCCESS
            assert not (tmp_path / "broker-a" / "consumequeue" / "Again").exists()
            assert (await c.invoke(addr, create("Again"))).code == ResponseCode.SUCCESS
            sent = await c.invoke(addr, send_cmd("Again", b"new"))
            assert sent.ext_fields["queueOffset"] == "0"
            got = records((await c.invoke(addr, pull_cmd("Again"))).body)
            assert [r.body for r in got] == [b"new"]
        finally:
            await c.close()
            await broker.stop()
            await ns.stop()
    run(scenario())


def test_a_slave_refuses_topic_and_group_changes(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path, name="broker-s", brokerRole="SLAVE", brokerId=1)
        addr, c = broker.config.broker_addr, RemotingClient()
        group = jsonbody.dumps({"groupName": "G_ON_SLAVE"})
        try:
            for req in (create("OnSlave"), delete("OnSlave"),
                        RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, group),
                        RemotingCommand.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G_ON_SLAVE"})):
                resp = await c.invoke(addr, req)
                assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
            assert broker.topics.get("OnSlave") is None and "G_ON_SLAVE" not in broker.groups.table
        finally:
            await c.close()
            await broker.stop()
            await ns.stop()
    run(scenario())
