"""The conformance items of shared/spec/rocketmq5.md §4 that a producer reaches, with hand-built
requests (items the official client would refuse before sending)."""
from __future__ import annotations

import time

import grpc
import pytest

from mqtool.proxy.descriptors import pb
from tests.proxy.conftest import consume_all

pytestmark = pytest.mark.slow


def message(topic: str, body: bytes = b"hello", **system):
    sp = pb.SystemProperties(message_id=system.pop("message_id", f"01{time.time_ns():032X}"[:34]),
                             message_type=system.pop("message_type", 1))
    for key, value in system.items():
        if key == "delivery_timestamp":
            sp.delivery_timestamp.seconds = value
        else:
            setattr(sp, key, value)
    return pb.Message(topic=pb.Resource(name=topic), system_properties=sp, body=body)


def send(raw, *messages):
    return raw.unary("SendMessage", pb.SendMessageRequest(messages=list(messages)), pb.SendMessageResponse)


def producer_settings(raw, topics=("TN",), client_id=None):
    settings = pb.Settings(client_type=1, publishing=pb.Publishing(topics=[pb.Resource(name=t) for t in topics],
                                                                   max_body_size=134217728,
                                                                   validate_message_type=True))
    settings.request_timeout.seconds = 3
    settings.user_agent.language = 6
    settings.user_agent.version = "5.1.2"
    return list(raw.telemetry([pb.TelemetryCommand(settings=settings)], client_id))


def test_every_unary_rpc_needs_a_client_id(raw):
    """§4 item 2: status 40017 in the answer, the transport OK."""
    resp = raw.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="TN")), pb.QueryRouteResponse,
                     client_id="")
    assert resp.status.code == 40017
    assert send(raw, message("TN")).status.code == 20000          # the same call with one: served


def test_rpcs_5_3_3_leaves_out_end_unimplemented(raw):
    """§4 item 3: PullMessage, UpdateOffset, GetOffset and QueryOffset, as 5.3.3's proxy."""
    for method in ("PullMessage", "UpdateOffset", "GetOffset", "QueryOffset"):
        with pytest.raises(grpc.RpcError) as err:
            raw.raw_bytes(method, stream=method == "PullMessage")
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert method in err.value.details()


def test_query_route(raw, proxy_cluster):
    """§4 items 4-6."""
    resp = raw.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="TN")), pb.QueryRouteResponse)
    assert resp.status.code == 20000
    grpc_port = int(proxy_cluster["grpc"].rpartition(":")[2])
    assert [q.id for q in resp.message_queues] == [0, 1, 2, 3]
    for q in resp.message_queues:
        assert (q.permission, q.broker.id, q.broker.name, list(q.accept_message_types)) == (4, 0, "broker-a", [1])
        assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [("127.0.0.1", grpc_port)]
    fifo = raw.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="TF")), pb.QueryRouteResponse)
    assert len(fifo.message_queues) == 8 and {tuple(q.accept_message_types) for q in fifo.message_queues} == {(2,)}
    unknown = raw.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")),
                        pb.QueryRouteResponse)
    assert unknown.status.code == 40402
    for topic in ("rmq_sys_wheel_timer", "TBW102", "BenchmarkTest"):
        resp = raw.unary("QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name=topic)), pb.QueryRouteResponse)
        assert (resp.status.code, resp.status.message) == (40002, "cannot access system topic")


def test_producer_settings_answer(raw):
    """§4 item 7: one answer on the stream: OK, 4 MiB bodies, type validation, 3 attempts 10 ms -> 1 s x2."""
    answers = producer_settings(raw)
    assert len(answers) == 1
    answer = answers[0]
    assert answer.status.code == 20000
    s = answer.settings
    assert (s.publishing.max_body_size, s.publishing.validate_message_type, s.metric.on) == (4194304, True, False)
    backoff = s.backoff_policy
    assert backoff.max_attempts == 3
    assert (backoff.exponential_backoff.initial.ToMilliseconds(), backoff.exponential_backoff.max.ToMilliseconds(),
            backoff.exponential_backoff.multiplier) == (10, 1000, 2)
    assert [t.name for t in s.publishing.topics] == ["TN"]


def test_settings_without_publishing_or_subscription_end_the_stream(raw):
    """§4 item 9."""
    with pytest.raises(grpc.RpcError) as err:
        list(raw.telemetry([pb.TelemetryCommand(settings=pb.Settings(client_type=1))]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_heartbeat_and_termination_need_settings(raw):
    """§4 items 10 and 42: 40015 before any Settings; after them OK, and a second termination 40015."""
    hb = raw.unary("Heartbeat", pb.HeartbeatRequest(client_type=1), pb.HeartbeatResponse)
    assert (hb.status.code, hb.status.message) == (40015, "cannot find client settings for this client")
    producer_settings(raw)
    assert raw.unary("Heartbeat", pb.HeartbeatRequest(client_type=1), pb.HeartbeatResponse).status.code == 20000
    bye = pb.NotifyClientTerminationRequest()
    assert raw.unary("NotifyClientTermination", bye, pb.NotifyClientTerminationResponse).status.code == 20000
    assert raw.unary("NotifyClientTermination", bye, pb.NotifyClientTerminationResponse).status.code == 40015


def test_send_answers_the_clients_id_and_the_queue_offset(raw, proxy_cluster):
    """§4 item 12; stored with UNIQ_KEY = the id, PGROUP = the topic, readable by a remoting consumer."""
    msg_id = "0102FC0000000120540B1D858E000000AA"
    resp = send(raw, message("TN", b"raw-send", message_id=msg_id, tag="TagR"))
    assert resp.status.code == 20000 and len(resp.entries) == 1
    entry = resp.entries[0]
    assert (entry.message_id, entry.transaction_id) == (msg_id, msg_id)
    stored = [m for m in consume_all(proxy_cluster["namesrv"], "TN") if m["msg_id"] == msg_id]
    assert len(stored) == 1 and stored[0]["queue_offset"] == entry.offset
    assert stored[0]["tags"] == "TagR" and stored[0]["properties"]["PGROUP"] == "TN"


@pytest.mark.parametrize("topic, system, expected, actual", [
    ("TN", {"message_group": "g"}, "NORMAL", "FIFO"), ("TF", {}, "FIFO", "NORMAL"),
    ("TN", {"delivery_timestamp": int(time.time()) + 60}, "NORMAL", "DELAY"),
    ("TF", {"message_type": 4, "message_group": "g"}, "FIFO", "TRANSACTION")])
def test_type_conflicts(raw, topic, system, expected, actual):
    """§4 item 13: 40014 with 5.3.3's words."""
    resp = send(raw, message(topic, **system))
    assert resp.status.code == 40014
    assert resp.status.message.endswith(f"the expected type is {expected}, but actual type is {actual}")


def test_fifo_group_goes_to_its_hashed_queue(raw, proxy_cluster):
    """§4 item 14: group-a over TF's 8 queues -> queue 7, every time."""
    ids = [f"01{n:032X}" for n in range(3)]
    for msg_id in ids:
        assert send(raw, message("TF", message_group="group-a", message_id=msg_id)).status.code == 20000
    stored = {m["msg_id"]: m for m in consume_all(proxy_cluster["namesrv"], "TF")}
    assert [stored[i]["queue_id"] for i in ids] == [7, 7, 7]
    assert stored[ids[0]]["properties"]["__SHARDINGKEY"] == "group-a"


def test_message_checks(raw):
    """§4 items 15-18."""
    tags = message("TN")
    tags.user_properties["TAGS"] = "x"
    resp = send(raw, tags)
    assert (resp.status.code, resp.status.message) == (40007, "property is used by system: TAGS")
    assert send(raw, message("TN", b"x" * 4194305)).status.code == 41301
    assert send(raw, message("TN", b"")).status.code == 41302
    many = message("TN")
    many.user_properties.update({f"k{i}": "v" for i in range(129)})
    assert send(raw, many).status.code == 43101
    assert send(raw, message("TF", message_group="g" * 64)).status.code == 40006
    assert send(raw, message("TF", message_group="g" * 63)).status.code == 20000
    far = send(raw, message("TD", delivery_timestamp=int(time.time()) + 2 * 86400))
    assert far.status.code == 40012 and far.status.message.endswith("max is 86400000")
    assert send(raw, message("TD", delivery_timestamp=int(time.time() * 1000))).status.code == 50001
    assert send(raw, message("TN", message_id=" ")).status.code == 40009
    assert send(raw).status.code == 40016
    assert send(raw, message("TN"), message("TF")).status.code == 40016          # topics not the same
    assert send(raw, message("NoSuchTopic")).status.code == 40402


def test_end_transaction_data_is_taken_once(raw):
    """§4 items 35/36: commit OK, a second EndTransaction 50001 `cannot found transaction data`."""
    msg_id = f"01{time.time_ns():032X}"[:34]
    resp = send(raw, message("TX", message_id=msg_id, message_type=4))
    assert resp.status.code == 20000 and resp.entries[0].transaction_id == msg_id
    end = pb.EndTransactionRequest(topic=pb.Resource(name="TX"), message_id=msg_id, transaction_id=msg_id,
                                   resolution=1, source=1)
    assert raw.unary("EndTransaction", end, pb.EndTransactionResponse).status.code == 20000
    again = raw.unary("EndTransaction", end, pb.EndTransactionResponse)
    assert again.status.code == 50001 and "cannot found transaction data" in again.status.message


def test_consumer_settings_answer_for_a_group_not_in_the_broker(raw):
    """§4 item 8: batch 32, long polling 20 s, not FIFO; 17 attempts with 18 customized delays 1 s .. 2 h."""
    settings = pb.Settings(client_type=3, subscription=pb.Subscription(
        group=pb.Resource(name="G_NOT_CREATED"),
        subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name="TN"), expression=pb.FilterExpression(
            type=1, expression="*"))]))
    answers = list(raw.telemetry([pb.TelemetryCommand(settings=settings)]))
    assert len(answers) == 1 and answers[0].status.code == 20000
    s = answers[0].settings
    assert (s.subscription.receive_batch_size, s.subscription.long_polling_timeout.ToMilliseconds(),
            s.subscription.fifo) == (32, 20000, False)
    delays = [d.ToMilliseconds() // 1000 for d in s.backoff_policy.customized_backoff.next]
    assert s.backoff_policy.max_attempts == 17 and len(delays) == 18
    assert (delays[:5], delays[-1]) == ([1, 5, 10, 30, 60], 7200)


def test_delay_message_whose_time_is_past_is_stored_at_once(raw, proxy_cluster):
    """§4 item 20: stored directly in the topic (the receipt's offset counts there), readable at once."""
    msg_id = f"01{time.time_ns():032X}"[:34]
    resp = send(raw, message("TD", b"overdue", message_id=msg_id, delivery_timestamp=int(time.time()) - 10))
    assert resp.status.code == 20000
    stored = [m for m in consume_all(proxy_cluster["namesrv"], "TD") if m["msg_id"] == msg_id]
    assert len(stored) == 1 and stored[0]["queue_offset"] == resp.entries[0].offset
    assert "DELAY" not in stored[0]["properties"] and "TIMER_DELIVER_MS" in stored[0]["properties"]
