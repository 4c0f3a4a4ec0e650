"""Auto-renewed receipt handles (mqtool/proxy/renew.py), in-process: a name server and a broker with
its gRPC endpoint on this test's loop, so a renewal pass can be run for a chosen `now`."""
from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from mqtool.broker.config import BrokerConfig
from mqtool.broker.controller import BrokerController
from mqtool.broker.topics import TopicConfig
from mqtool.namesrv.server import NameServer
from mqtool.proxy.descriptors import SERVICE, pb
from tests.servers import free_port

pytestmark = pytest.mark.slow
META = [("x-mq-client-id", "renew-test@1@0@x"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2")]


def _stub(channel, method, request_class, response_class, stream=False):
    maker = channel.unary_stream if stream else channel.unary_unary
    return maker(f"/{SERVICE}/{method}", request_serializer=request_class.SerializeToString,
                 response_deserializer=response_class.FromString)


async def _receive(channel, group, topic, poll_s=2.0):
    request = pb.ReceiveMessageRequest(group=pb.Resource(name=group), batch_size=8, auto_renew=True,
                                       message_queue=pb.MessageQueue(topic=pb.Resource(name=topic),
                                                                     broker=pb.Broker(name="broker-a")),
                                       filter_expression=pb.FilterExpression(type=1, expression="*"))
    request.long_polling_timeout.FromMilliseconds(int(poll_s * 1000))
    call = _stub(channel, "ReceiveMessage", pb.ReceiveMessageRequest, pb.ReceiveMessageResponse, stream=True)
    return [item.message async for item in call(request, metadata=META, timeout=poll_s + 5)
            if item.HasField("message")]


def test_auto_renew_extends_handles_acks_with_the_newest_and_gives_back_a_gone_clients(tmp_path):
    async def scenario():
        ns = await NameServer(tmp_path / "kv.json").start("127.0.0.1", 0)
        config = BrokerConfig(brokerName="broker-a", listenPort=0, namesrvAddr=f"127.0.0.1:{ns.port}",
                              storePathRootDir=str(tmp_path / "broker-a"), enableProxy=True,
                              grpcServerPort=free_port())
        broker = await BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 20)}).start("127.0.0.1")
        proxy = broker.proxy
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{proxy.port}")
        try:
            broker.topics.update(TopicConfig("TR", 1, 1))
            settings = pb.Settings(client_type=2, subscription=pb.Subscription(
                group=pb.Resource(name="GREN"), subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name="TR"))]))
            telemetry = channel.stream_stream(f"/{SERVICE}/Telemetry",
                                              request_serializer=pb.TelemetryCommand.SerializeToString,
                                              response_deserializer=pb.TelemetryCommand.FromString)
            answers = [a async for a in telemetry(iter([pb.TelemetryCommand(settings=settings)]), metadata=META,
                                                  timeout=5)]
            assert answers[0].status.code == 20000
            send = _stub(channel, "SendMessage", pb.SendMessageRequest, pb.SendMessageResponse)
            for body in (b"kept", b"given-back"):
                msg = pb.Message(topic=pb.Resource(name="TR"), body=body, system_properties=pb.SystemProperties(
                    message_id=f"01{time.time_ns():032X}"[:34], message_type=1))
                assert (await send(pb.SendMessageRequest(messages=[msg]), metadata=META, timeout=5)).status.code \
                    == 20000
            got = await _receive(channel, "GREN", "TR")
            assert [m.body for m in got] == [b"kept", b"given-back"]
            assert all(m.system_properties.receipt_handle.split(" ")[2] == "60000" for m in got), \
                "auto_renew: 60 s invisible"
            kept, back = got
            # a pass 55 s later: both are due within 10 s, both are extended by the first step (1 min)
            assert await proxy.renewals.scan(now_ms=int(time.time() * 1000) + 55_000) == 2
            held = proxy.renewals.table[("renew-test@1@0@x", "GREN", kept.system_properties.message_id)]
            assert held.times == 1 and held.handle != kept.system_properties.receipt_handle
            assert held.handle.split(" ")[2] == "60000"
            ack = _stub(channel, "AckMessage", pb.AckMessageRequest, pb.AckMessageResponse)
            resp = await ack(pb.AckMessageRequest(group=pb.Resource(name="GREN"), topic=pb.Resource(name="TR"),
                                                  entries=[pb.AckMessageEntry(
                                                      message_id=kept.system_properties.message_id,
                                                      receipt_handle=kept.system_properties.receipt_handle)]),
                             metadata=META, timeout=5)
            assert resp.status.code == 20000, "the ack used the renewed handle"
            assert ("renew-test@1@0@x", "GREN", kept.system_properties.message_id) not in proxy.renewals.table
            # the client goes away: what it still holds comes back after 1 s
            proxy.clients.remove("renew-test@1@0@x")
            assert await proxy.renewals.scan() == 1
            assert not proxy.renewals.table
            answers = [a async for a in telemetry(iter([pb.TelemetryCommand(settings=settings)]), metadata=META,
                                                  timeout=5)]                # (a new consumer of the group)
            again = []
            deadline = time.monotonic() + 30
            while not again and time.monotonic() < deadline:
                again = await _receive(channel, "GREN", "TR")
            assert [(m.body, m.system_properties.delivery_attempt) for m in again] == [(b"given-back", 2)]
        finally:
            await channel.close()
            await broker.stop()
            await ns.stop()
    asyncio.run(scenario())
