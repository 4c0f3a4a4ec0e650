"""What mqtool's consumer answers when a broker asks (RESET_CONSUMER_CLIENT_OFFSET, 221, 307, 309)."""
from __future__ import annotations

import asyncio
import zlib

from mqtool.client.base import MessageQueue
from mqtool.client.consumer import GroupConsumer, PushConsumer
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_store.commitlog import decode_record, encode_record, new_record

MQ0, MQ1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)


def consumer(cls=GroupConsumer, **kw):
    c = cls("127.0.0.1:1", "G", "T", **kw)
    c.state.assigned.update({MQ0: 10, MQ1: 20})
    c.state.committed.update({MQ0: 10, MQ1: 20})
    return c


def ask(c, code, ext=None, body=b""):
    async def go():
        try:
            return await c.on_request(None, RemotingCommand.request(code, ext or {}, body))
        finally:
            await c.remoting.close()
    return asyncio.run(go())


def test_reset_moves_the_held_queues_and_drops_the_batch_in_flight():
    c = consumer()
    c.commit_all = lambda: asyncio.sleep(0)        # no broker here: committing is the broker test's job
    body = jsonbody.dumps({"offsetTable": {jsonbody.ObjectKey.of(MQ0.to_json()): 3,
                                           jsonbody.ObjectKey.of({"brokerName": "broker-b", "queueId": 0,
                                                                  "topic": "T"}): 7}})
    assert ask(c, RequestCode.RESET_CONSUMER_CLIENT_OFFSET, {"topic": "T", "group": "G", "timestamp": 0,
                                                             "isForce": True}, body) is None
    assert c.state.assigned == {MQ0: 3, MQ1: 20}           # a queue it does not hold is ignored
    assert MQ0 in c.interrupted and MQ0 not in c.state.committed and c.reset_count == 1


def test_status_and_running_info_bodies():
    c = consumer()
    resp = ask(c, RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": "T", "group": "G"})
    table = jsonbody.loads(resp.body)["messageQueueTable"]
    assert {k.as_dict()["queueId"]: v for k, v in table.items()} == {0: 10, 1: 20}
    resp = ask(consumer(), RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G", "clientId": "x"})
    info = jsonbody.loads(resp.body)
    assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
    assert [s["topic"] for s in info["subscriptionSet"]] == ["T", "%RETRY%G"]
    assert sorted(v["commitOffset"] for v in info["mqTable"].values()) == [10, 20]


def test_consume_directly_runs_the_listener():
    body = encode_record(new_record("T", b"hello"))
    push = consumer(PushConsumer)
    push.listener = lambda rec: rec.body == b"hello"
    resp = ask(push, RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": "G", "clientId": "x", "msgId": "m"}, body)
    assert resp.code == ResponseCode.SUCCESS and jsonbody.loads(resp.body)["consumeResult"] == "CR_SUCCESS"
    push = consumer(PushConsumer)
    push.listener = lambda rec: 1 / 0
    result = jsonbody.loads(ask(push, RequestCode.CONSUME_MESSAGE_DIRECTLY, {}, body).body)
    assert result["consumeResult"] == "CR_THROW_EXCEPTION" and "ZeroDivisionError" in result["remark"]
    assert ask(consumer(), RequestCode.CONSUME_MESSAGE_DIRECTLY, {}, body).code == ResponseCode.SYSTEM_ERROR
    assert decode_record(body).body == b"hello"


def test_consume_directly_inflates_a_compressed_body_as_a_pull_does():
    """Java's ConsumeMessageDirectly decodes with MessageDecoder.decode, which inflates the body; a body
    that does not inflate reaches the listener as stored, with the pull path's warning."""
    seen = []
    for body in (zlib.compress(b"hello"), b"not zlib"):
        push = consumer(PushConsumer)
        push.listener = lambda rec: seen.append(rec.body) or True
        record = encode_record(new_record("T", body, sys_flag=0x1))
        resp = ask(push, RequestCode.CONSUME_MESSAGE_DIRECTLY, {}, record)
        assert jsonbody.loads(resp.body)["consumeResult"] == "CR_SUCCESS"
    assert seen == [b"hello", b"not zlib"]


def test_a_transaction_check_sees_the_body_inflated():
    from mqtool.client.producer import COMMIT, TransactionProducer
    seen, sent = [], []

    class Conn:
        async def oneway(self, cmd):
            sent.append(cmd)

    async def go():
        producer = TransactionProducer("127.0.0.1:1", "PG", lambda rec: seen.append(rec.body) or COMMIT)
        try:
            record = encode_record(new_record("T", zlib.compress(b"half"), sys_flag=0x1))
            await producer.on_request(Conn(), RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {
                "tranStateTableOffset": 1, "commitLogOffset": 2, "msgId": "m", "transactionId": "m"}, record))
        finally:
            await producer.close()
    asyncio.run(go())
    assert seen == [b"half"] and sent[0].code == RequestCode.END_TRANSACTION


def test_a_send_back_that_cannot_reach_the_broker_is_a_failed_send_back():
    """PushConsumer.run treats False as "consume it again here" (Java's consumeMessageService on a
    failed sendMessageBack); a broker away must not end the consumer."""
    from tests.servers import free_port
    rec = decode_record(encode_record(new_record("T", b"m", store_host=(b"\x7f\0\0\x01", free_port()))))

    async def go():
        push = consumer(PushConsumer)
        try:
            return await push.send_back(rec)
        finally:
            await push.remoting.close()
    assert asyncio.run(go()) is False


def test_a_start_that_is_neither_first_nor_last_is_refused():
    import pytest
    with pytest.raises(ValueError, match="start must be 'first' or 'last', not 'beginning'"):
        GroupConsumer("127.0.0.1:1", "G", "T", start="beginning")


def test_a_named_queue_is_that_queue_or_an_error():
    import pytest
    from mqtool.client.producer import _named_queue
    from mqtool_remoting.errors import RemotingCommandError
    queues = [MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1), MessageQueue("T", "broker-b", 0)]
    assert _named_queue("T", queues, 1) == queues[1]
    assert _named_queue("T", queues, MessageQueue("T", "broker-b", 0)) == queues[2]
    with pytest.raises(RemotingCommandError, match="write queue 0 on brokers broker-a, broker-b: name one as BROKER:0"):
        _named_queue("T", queues, 0)
    with pytest.raises(RemotingCommandError, match="no write queue broker-b:1"):
        _named_queue("T", queues, MessageQueue("T", "broker-b", 1))
