"""4.9.8's rules where a request meets a topic or group: AdminBrokerProcessor's for creating and
deleting them (not on a slave, not a system topic; a deleted topic's consume queues go with it,
so the same name created again starts at offset 0), and PullMessageProcessor's for a pull by
the subscription a group registered."""
from __future__ import annotations

from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from tests.broker.test_broker_server import pull_cmd, records, run, running_pair, send_cmd

SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."


def create(topic, queues=1):
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
        "topicFilterType": "SINGLE_TAG"})


def delete(topic):
    return RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})


def test_system_topics_are_refused_and_a_deleted_topic_starts_again_at_zero(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, c):
            addr = broker.config.broker_addr
            for topic in ("SCHEDULE_TOPIC_XXXX", "TBW102", "rmq_sys_anything"):
                for req in (create(topic), delete(topic)):
                    resp = await c.invoke(addr, req)
                    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR,
                                                        f"The topic[{topic}] is conflict with system topic.")
            assert broker.topics.get("SCHEDULE_TOPIC_XXXX") is not None
            broker.config.traceTopicEnable, broker.config.msgTraceTopicName = True, "MyTrace"   # addSystemTopic
            assert (await c.invoke(addr, delete("MyTrace"))).remark == "The topic[MyTrace] is conflict with system topic."
            half = await c.invoke(addr, send_cmd("Again2", b"pending", "TRAN_MSG\x01true\x02PGROUP\x01PG",
                                                 sys_flag=0x4))                 # a prepared transaction
            assert half.code == ResponseCode.SUCCESS
            assert (await c.invoke(addr, create("Again"))).code == ResponseCode.SUCCESS
            for i in range(3):
                assert (await c.invoke(addr, send_cmd("Again", b"old%d" % i))).code == ResponseCode.SUCCESS
            assert (await c.invoke(addr, delete("Again"))).code == ResponseCode.SUCCESS
            assert not (tmp_path / "broker-a" / "consumequeue" / "Again").exists()
            assert broker.store.max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 1    # its queue has no config
            assert (await c.invoke(addr, create("Again"))).code == ResponseCode.SUCCESS
            sent = await c.invoke(addr, send_cmd("Again", b"new"))
            assert sent.ext_fields["queueOffset"] == "0"
            got = records((await c.invoke(addr, pull_cmd("Again"))).body)
            assert [r.body for r in got] == [b"new"]
    run(scenario())


def test_a_slave_refuses_topic_and_group_changes(tmp_path):
    async def scenario():
        async with running_pair(tmp_path, name="broker-s", brokerRole="SLAVE", brokerId=1) as (ns, broker, c):
            addr = broker.config.broker_addr
            group = jsonbody.dumps({"groupName": "G_ON_SLAVE"})
            for req in (create("OnSlave"), delete("OnSlave"),
                        RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, group),
                        RemotingCommand.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G_ON_SLAVE"})):
                resp = await c.invoke(addr, req)
                assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
            assert broker.topics.get("OnSlave") is None and "G_ON_SLAVE" not in broker.groups.table
    run(scenario())


def _heartbeat(group: str, topic: str, model: str, sub_version: int) -> RemotingCommand:
    body = {"clientID": "127.0.0.1@rules", "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": model,
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [], "codeSet": [],
                                 "subVersion": sub_version, "expressionType": "TAG", "classFilterMode": False}]}]}
    return RemotingCommand.request(RequestCode.HEART_BEAT, {}, jsonbody.dumps(body), language="JAVA")


def _pull_registered(group: str, topic: str, sub_version: int) -> RemotingCommand:
    """A pull without the subscription flag: the broker uses what the group's heartbeats registered."""
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": 0, "maxMsgNums": 32, "sysFlag": 0,
        "commitOffset": 0, "suspendTimeoutMillis": 0, "subVersion": sub_version})


def test_pulls_by_registered_subscription_follow_the_group(tmp_path):
    """PullMessageProcessor without the subscription flag: no heartbeat yet, a broadcast group whose
    config has consumeBroadcastEnable=false, a topic the group does not subscribe, an older
    subscription than the client's: each is refused with 4.9.8's code."""
    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, c):
            addr = broker.config.broker_addr
            assert (await c.invoke(addr, create("Pulled"))).code == ResponseCode.SUCCESS
            assert (await c.invoke(addr, send_cmd("Pulled", b"m"))).code == ResponseCode.SUCCESS
            no_group = await c.invoke(addr, _pull_registered("G_RULES", "Pulled", 1))
            assert (no_group.code, no_group.remark) == (ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                                        "the consumer's group info not exist")
            body = jsonbody.dumps({"groupName": "G_NO_BROADCAST", "consumeBroadcastEnable": False})
            assert (await c.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                                                 {}, body))).code == ResponseCode.SUCCESS
            assert (await c.invoke(addr, _heartbeat("G_NO_BROADCAST", "Pulled", "BROADCASTING", 1))).code == 0
            denied = await c.invoke(addr, _pull_registered("G_NO_BROADCAST", "Pulled", 1))
            assert (denied.code, denied.remark) == (ResponseCode.NO_PERMISSION,
                                                    "the consumer group[G_NO_BROADCAST] can not consume by broadcast way")
            assert (await c.invoke(addr, _heartbeat("G_RULES", "Pulled", "CLUSTERING", 5))).code == 0
            assert (await c.invoke(addr, create("Elsewhere"))).code == ResponseCode.SUCCESS
            other = await c.invoke(addr, _pull_registered("G_RULES", "Elsewhere", 5))
            assert other.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
            newer = await c.invoke(addr, _pull_registered("G_RULES", "Pulled", 6))
            assert (newer.code, newer.remark) == (ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                                  "the consumer's subscription not latest")
            ok = await c.invoke(addr, _pull_registered("G_RULES", "Pulled", 5))
            assert ok.code == ResponseCode.SUCCESS and [r.body for r in records(ok.body)] == [b"m"]
    run(scenario())


def test_send_back_from_v3_4_9_on_honours_max_reconsume_times_and_the_retry_topic_perm(tmp_path):
    """CONSUMER_SEND_MSG_BACK: a client of V3_4_9 (ordinal 121) or later has its maxReconsumeTimes
    counted (0 here: straight to the DLQ), an older one gets the group's retryMaxTimes (16: a
    retry); a retry topic without the write bit refuses it (SendMessageProcessor)."""
    def back(offset: int, group: str, version: int) -> RemotingCommand:
        cmd = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": offset, "group": group, "delayLevel": 0, "originMsgId": "", "originTopic": "Backed",
            "unitMode": False, "maxReconsumeTimes": 0})
        cmd.version = version
        return cmd

    async def scenario():
        async with running_pair(tmp_path) as (ns, broker, c):
            addr = broker.config.broker_addr
            assert (await c.invoke(addr, create("Backed"))).code == ResponseCode.SUCCESS
            sent = await c.invoke(addr, send_cmd("Backed", b"m"))
            offset = int(sent.ext_fields["msgId"][-16:], 16)
            assert (await c.invoke(addr, back(offset, "G_BACK", 121))).code == ResponseCode.SUCCESS
            assert (await c.invoke(addr, back(offset, "G_OLD", 120))).code == ResponseCode.SUCCESS
            broker.store.drain_dispatch()
            assert broker.store.max_offset("%DLQ%G_BACK", 0) == 1 and broker.store.max_offset("%DLQ%G_OLD", 0) == 0
            assert broker.store.max_offset("SCHEDULE_TOPIC_XXXX", 2) == 1      # G_OLD's retry, delay level 3
            assert (await c.invoke(addr, create("%RETRY%G_READONLY"))).code == ResponseCode.SUCCESS
            broker.topics.get("%RETRY%G_READONLY").perm = 4
            refused = await c.invoke(addr, back(offset, "G_READONLY", 409))
            assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION,
                                                      "the topic[%RETRY%G_READONLY] sending message is forbidden")
    run(scenario())


def test_retry_topic_sends_and_batch_delays_as_4_9_8(tmp_path):
    """handleRetryAndDLQ: a send to %RETRY%G past the group's retries goes to %DLQ%G at once (DELAY
    set to 0), and a group that does not exist (no auto-creation) is SUBSCRIPTION_GROUP_NOT_EXIST;
    a batch is refused only for a delay level above 0 (asyncPutMessages)."""
    from mqtool_remoting.batch import encode_batch
    from mqtool_store.commitlog import decode_record

    def retry_send(topic, props, reconsume):
        cmd = send_cmd(topic, b"again", props)
        cmd.ext_fields["j"] = str(reconsume)          # reconsumeTimes
        cmd.ext_fields["l"] = "2"                     # maxReconsumeTimes
        return cmd

    async def scenario():
        async with running_pair(tmp_path, autoCreateSubscriptionGroup=False) as (ns, broker, c):
            addr = broker.config.broker_addr
            body = jsonbody.dumps({"groupName": "G_DLQ"})
            assert (await c.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                                                 {}, body))).code == ResponseCode.SUCCESS
            assert (await c.invoke(addr, create("%RETRY%G_DLQ"))).code == ResponseCode.SUCCESS
            assert (await c.invoke(addr, create("%RETRY%G_NONE"))).code == ResponseCode.SUCCESS
            dead = await c.invoke(addr, retry_send("%RETRY%G_DLQ", "DELAY\x013\x02KEYS\x01d", 2))
            assert dead.code == ResponseCode.SUCCESS
            broker.store.drain_dispatch()
            assert broker.store.max_offset("%DLQ%G_DLQ", 0) == 1                 # not via the schedule topic
            rec = decode_record(broker.store.get("%DLQ%G_DLQ", 0, 0, 1).messages[0], 0)
            assert rec.properties["DELAY"] == "0" and rec.body == b"again"
            none = await c.invoke(addr, retry_send("%RETRY%G_NONE", "KEYS\x01n", 0))
            assert none.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            batch = encode_batch([(0, b"b", "KEYS\x01b")])
            zero = await c.invoke(addr, send_cmd("BatchDelay", batch, "DELAY\x010", batch=True,
                                                 code=RequestCode.SEND_BATCH_MESSAGE))
            delayed = await c.invoke(addr, send_cmd("BatchDelay", batch, "DELAY\x012", batch=True,
                                                    code=RequestCode.SEND_BATCH_MESSAGE))
            assert (zero.code, delayed.code) == (ResponseCode.SUCCESS, ResponseCode.MESSAGE_ILLEGAL)
    run(scenario())
