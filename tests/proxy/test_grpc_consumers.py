"""RocketMQ 5 consumers over gRPC (shared/spec/rocketmq5.md 3.10-3.13, §4 items 22-34): the official
Python client's SimpleConsumer and PushConsumer, and hand-built ReceiveMessage, AckMessage,
ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue and QueryAssignment calls."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from mqtool.proxy.descriptors import pb
from tests.proxy.conftest import REPO, SCRIPT, consume_all, mqtool, run_client
from tests.proxy.test_grpc_raw import message, send
from tests.servers import wait_until

pytestmark = pytest.mark.slow


def group_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def consumer_settings(raw, group: str, topic: str, client_type: int = 3):
    settings = pb.Settings(client_type=client_type, subscription=pb.Subscription(
        group=pb.Resource(name=group),
        subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name=topic),
                                            expression=pb.FilterExpression(type=1, expression="*"))]))
    settings.request_timeout.seconds = 3
    answers = list(raw.telemetry([pb.TelemetryCommand(settings=settings)]))
    assert answers[0].status.code == 20000
    return answers[0].settings


def receive(raw, group: str, topic: str, *, invisible_s: float = 10, poll_s: float = 5, batch: int = 16,
            deadline_s: float | None = 15, auto_renew: bool = False, attempt_id: str | None = None):
    request = pb.ReceiveMessageRequest(group=pb.Resource(name=group), batch_size=batch, auto_renew=auto_renew,
                                       message_queue=pb.MessageQueue(topic=pb.Resource(name=topic),
                                                                     broker=pb.Broker(name="broker-a")),
                                       filter_expression=pb.FilterExpression(type=1, expression="*"))
    request.invisible_duration.FromMilliseconds(int(invisible_s * 1000))
    request.long_polling_timeout.FromMilliseconds(int(poll_s * 1000))
    if attempt_id is not None:
        request.attempt_id = attempt_id
    call = raw.channel.unary_stream(f"/{raw.service}/ReceiveMessage", request_serializer=lambda m: m.SerializeToString(),
                                    response_deserializer=pb.ReceiveMessageResponse.FromString)
    return list(call(request, metadata=raw.metadata(), timeout=deadline_s))


def messages_of(items) -> list:
    return [i.message for i in items if i.HasField("message")]


def ack(raw, group: str, topic: str, msg, handle: str | None = None):
    entry = pb.AckMessageEntry(message_id=msg.system_properties.message_id,
                               receipt_handle=handle or msg.system_properties.receipt_handle)
    return raw.unary("AckMessage", pb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                                                        entries=[entry]), pb.AckMessageResponse)


def test_receive_stream_ack_change_invisible_and_redelivery(raw, proxy_cluster):
    """§4 items 24, 26-29: [status OK, messages, delivery timestamp]; 9-field handles; MD5 digests; an
    ack twice is OK twice; the un-acked message comes back after its invisible time (attempt 2, retry
    type 1) while the acked one and the one acked with its changed handle never do (the changed handle
    is the cluster-mode form, so an ack of a message that was not first in its batch holds); the old
    handle of the redelivered message is expired (40013)."""
    group = group_name("GR")
    mqtool("topic", "create", "-n", proxy_cluster["namesrv"], "-t", "TRCV", "-r", "1", "-w", "1")
    consumer_settings(raw, group, "TRCV")
    bodies = [f"m{i}".encode() for i in range(3)]
    for body in bodies:
        assert send(raw, message("TRCV", body)).status.code == 20000
    items = receive(raw, group, "TRCV", batch=64)
    assert items[0].HasField("status") and items[0].status.code == 20000
    assert items[-1].HasField("delivery_timestamp")
    got = messages_of(items)
    assert [m.body for m in got] == bodies
    for m in got:
        fields = m.system_properties.receipt_handle.split(" ")
        assert len(fields) == 9 and fields[5] == "broker-a" and fields[4] == "0" and int(fields[8]) >= 0
        assert m.system_properties.delivery_attempt == 1
        assert m.system_properties.body_digest.type == 2
        assert m.system_properties.body_digest.checksum == __import__("hashlib").md5(m.body).hexdigest().upper()
    first, second, third = got
    first_popped = time.time()
    assert [ack(raw, group, "TRCV", first).status.code for _ in range(2)] == [20000, 20000]
    change = pb.ChangeInvisibleDurationRequest(group=pb.Resource(name=group), topic=pb.Resource(name="TRCV"),
                                               receipt_handle=third.system_properties.receipt_handle,
                                               message_id=third.system_properties.message_id)
    change.invisible_duration.FromSeconds(30)
    changed = raw.unary("ChangeInvisibleDuration", change, pb.ChangeInvisibleDurationResponse)
    assert changed.status.code == 20000
    new = changed.receipt_handle.split(" ")
    old = third.system_properties.receipt_handle.split(" ")
    assert len(new) == 9 and new[2] == "30000" and int(new[1]) >= int(old[1]) and new[8] == old[8]
    assert ack(raw, group, "TRCV", third, changed.receipt_handle).status.code == 20000
    back = []
    deadline = time.time() + 40
    while not back and time.time() < deadline:
        back = messages_of(receive(raw, group, "TRCV", poll_s=5))
    assert [m.body for m in back] == [b"m1"], "only the un-acked message comes back"
    assert time.time() - first_popped >= 9
    assert back[0].system_properties.delivery_attempt == 2
    assert back[0].system_properties.message_id == second.system_properties.message_id
    assert back[0].system_properties.receipt_handle.split(" ")[4] == "1"
    expired = ack(raw, group, "TRCV", second)
    assert expired.status.code == 40013 and "expired" in expired.entries[0].status.message
    assert ack(raw, group, "TRCV", back[0]).status.code == 20000


def test_receive_checks_and_the_empty_answer(raw, proxy_cluster):
    """§4 items 22, 23: invisible 5 s -> 40011; no deadline -> 50001; an empty topic answers
    [MESSAGE_NOT_FOUND "no new message", delivery timestamp] after the polling time."""
    group = group_name("GE")
    mqtool("topic", "create", "-n", proxy_cluster["namesrv"], "-t", "TEMPTY", "-r", "2", "-w", "2")
    consumer_settings(raw, group, "TEMPTY")
    small = receive(raw, group, "TEMPTY", invisible_s=5)
    assert small[0].status.code == 40011 and "min is 10000" in small[0].status.message
    assert small[-1].HasField("delivery_timestamp")
    assert receive(raw, group, "TEMPTY", deadline_s=None)[0].status.code == 50001
    start = time.monotonic()
    empty = receive(raw, group, "TEMPTY", poll_s=5)
    assert time.monotonic() - start >= 4.5
    assert [i.WhichOneof("content") for i in empty] == ["status", "delivery_timestamp"]
    assert (empty[0].status.code, empty[0].status.message) == (40401, "no new message")


def test_receive_needs_settings(raw, proxy_cluster):
    other = type(raw)(proxy_cluster["grpc"])
    try:
        items = receive(other, "G_NOSET", "TN")
        assert items[0].status.code == 50001 and "settings" in items[0].status.message
    finally:
        other.close()


def test_query_assignment(raw, proxy_cluster):
    """§4 item 33: one assignment (id -1) for a normal group; readQueueNums ones for an orderly group."""
    def assignments(group, topic):
        return raw.unary("QueryAssignment", pb.QueryAssignmentRequest(topic=pb.Resource(name=topic),
                                                                      group=pb.Resource(name=group)),
                         pb.QueryAssignmentResponse)
    normal = assignments(group_name("GQ"), "TF")
    assert normal.status.code == 20000
    assert [(a.message_queue.id, a.message_queue.broker.id, a.message_queue.permission)
            for a in normal.assignments] == [(-1, 0, 4)]
    grpc_port = int(proxy_cluster["grpc"].rpartition(":")[2])
    assert normal.assignments[0].message_queue.broker.endpoints.addresses[0].port == grpc_port
    orderly = group_name("GQO")
    mqtool("group", "create", "-n", proxy_cluster["namesrv"], "-g", orderly, "--orderly")
    assert [a.message_queue.id for a in assignments(orderly, "TF").assignments] == list(range(8))
    assert assignments(orderly, "NO_SUCH_TOPIC").status.code == 40402


def test_forward_to_dead_letter_queue(raw, proxy_cluster):
    group = group_name("GD")
    mqtool("topic", "create", "-n", proxy_cluster["namesrv"], "-t", "TDLQ", "-r", "1", "-w", "1")
    consumer_settings(raw, group, "TDLQ")
    assert send(raw, message("TDLQ", b"to-the-dlq")).status.code == 20000
    got = messages_of(receive(raw, group, "TDLQ"))
    assert [m.body for m in got] == [b"to-the-dlq"]
    sp = got[0].system_properties
    resp = raw.unary("ForwardMessageToDeadLetterQueue", pb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name=group), topic=pb.Resource(name="TDLQ"), receipt_handle=sp.receipt_handle,
        message_id=sp.message_id, delivery_attempt=1, max_delivery_attempts=17),
        pb.ForwardMessageToDeadLetterQueueResponse)
    assert resp.status.code == 20000, resp.status.message
    dlq = consume_all(proxy_cluster["namesrv"], f"%DLQ%{group}")
    assert [(m["body"], m["msg_id"]) for m in dlq] == [("to-the-dlq", sp.message_id)]


def test_consumer_settings_register_the_group(raw, proxy_cluster):
    """A gRPC consumer is a connection of its group (`mqtool group connections`)."""
    group = group_name("GC")
    consumer_settings(raw, group, "TN")
    rows = [json.loads(line) for line in mqtool("group", "connections", "-n", proxy_cluster["namesrv"], "-g", group,
                                                "--json").splitlines() if line.startswith("{")]
    assert [r["client_id"] for r in rows] == [raw.client_id]
    assert rows[0]["language"] == "PYTHON"


def test_recall_message_is_refused_by_default(raw, proxy_cluster):
    """§4 items 19 (recall handle), 21: a delay message's receipt has a recall handle; the broker's
    default recallMessageEnable=false refuses it as 5.3.3 does."""
    resp = send(raw, message("TD", b"later", message_type=3, delivery_timestamp=int(time.time()) + 60))
    assert resp.status.code == 20000
    handle = resp.entries[0].recall_handle
    assert handle
    recalled = raw.unary("RecallMessage", pb.RecallMessageRequest(topic=pb.Resource(name="TD"), recall_handle=handle),
                         pb.RecallMessageResponse)
    assert recalled.status.code == 50001 and "forbidden" in recalled.status.message
    wrong = raw.unary("RecallMessage", pb.RecallMessageRequest(topic=pb.Resource(name="TN"), recall_handle=handle),
                      pb.RecallMessageResponse)
    assert wrong.status.code == 40014


# ---------------------------------------------------------------- the official client

def test_simple_consumer_receives_grpc_and_remoting_messages(rmq5_python, proxy_cluster):
    """SimpleConsumer: what the official producer sent and what `mqtool send` (remoting) sent, acked."""
    mqtool("topic", "create", "-n", proxy_cluster["namesrv"], "-t", "TSIMPLE", "-r", "4", "-w", "4")
    sent = run_client(rmq5_python, "send", proxy_cluster["grpc"], {"topic": "TSIMPLE", "count": 2, "tag": "TagA",
                                                                   "keys": ["k1"], "body": "from-grpc"})
    remoting = json.loads(subprocess.run(
        [sys.executable, "-m", "mqtool", "send", "-n", proxy_cluster["namesrv"], "-t", "TSIMPLE", "--tags", "TagA",
         "from-remoting", "--json"], capture_output=True, text=True, check=True, cwd=REPO).stdout.splitlines()[0])
    out = run_client(rmq5_python, "simple", proxy_cluster["grpc"],
                     {"topic": "TSIMPLE", "consumer_group": group_name("GS"), "count": 3, "await_s": 3})
    got = [o for o in out if "body" in o]
    assert sorted(m["body"] for m in got) == ["from-grpc", "from-grpc", "from-remoting"], out
    ids = {m["message_id"] for m in got}
    assert ids == {s["message_id"] for s in sent} | {remoting["msg_id"]}
    assert all(m["tag"] == "TagA" and m["attempt"] == 1 and not m["corrupted"] for m in got)
    assert {o["acked"] for o in out if "acked" in o} == ids


def test_simple_consumer_refuses_a_short_invisible_time(rmq5_python, proxy_cluster):
    """§4 item 22 with the client: BadRequestException (40011)."""
    out = run_client(rmq5_python, "simple", proxy_cluster["grpc"],
                     {"topic": "TN", "consumer_group": group_name("GS"), "invisible_s": 5})
    assert out[0]["error"] == "BadRequestException" and "min is 10000" in out[0]["text"]


def test_push_consumer_failure_is_retried(rmq5_python, proxy_cluster):
    """§4 item 32: a FAILURE is a ChangeInvisibleDuration of 1 s (the first customized backoff); the
    message comes back with delivery_attempt 2 and is then acked."""
    mqtool("topic", "create", "-n", proxy_cluster["namesrv"], "-t", "TPUSH", "-r", "4", "-w", "4")
    sent = run_client(rmq5_python, "send", proxy_cluster["grpc"], {"topic": "TPUSH", "count": 3})
    out = run_client(rmq5_python, "push", proxy_cluster["grpc"],
                     {"topic": "TPUSH", "consumer_group": group_name("GP"), "count": 3, "fail": 1, "seconds": 40})
    assert out[-1] == {"done": 3}
    seen = {}
    for m in (o for o in out if "body" in o):
        seen.setdefault(m["message_id"], []).append(m["attempt"])
    assert seen == {s["message_id"]: [1, 2] for s in sent}


def test_push_consumer_fifo_keeps_the_group_order(rmq5_python, proxy_cluster):
    """A FIFO push consumer (group consumeMessageOrderly, `mqtool group create --orderly`) gets one
    message group's messages in send order, a failed one retried before the next."""
    group = group_name("GF")
    mqtool("group", "create", "-n", proxy_cluster["namesrv"], "-g", group, "--orderly")
    sent = run_client(rmq5_python, "send", proxy_cluster["grpc"], {"topic": "TF", "count": 4, "group": "order-1"})
    ids = [s["message_id"] for s in sent]
    out = run_client(rmq5_python, "push", proxy_cluster["grpc"],
                     {"topic": "TF", "consumer_group": group, "count": 4, "fail": 1, "seconds": 60})
    assert out[-1] == {"done": 4}
    assert [o["success"] for o in out if "success" in o] == ids
    calls = [(m["message_id"], m["call"]) for m in out if "body" in m]
    assert calls == [(i, n) for i in ids for n in (1, 2)], "each message retried before the next is consumed"
    assert all(m["group"] == "order-1" for m in out if "body" in m)


def test_group_connections_list_a_grpc_consumer(rmq5_python, proxy_cluster, tmp_path):
    group = group_name("GL")
    until = tmp_path / "stop"
    proc = subprocess.Popen([rmq5_python, str(SCRIPT), "simple", proxy_cluster["grpc"],
                             json.dumps({"topic": "TN", "consumer_group": group, "count": 0, "until": str(until)})],
                            cwd=SCRIPT.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def rows():
            done = subprocess.run([sys.executable, "-m", "mqtool", "group", "connections", "-n", proxy_cluster["namesrv"],
                                   "-g", group, "--json"], capture_output=True, text=True, cwd=REPO)
            return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        listed = wait_until("the consumer listed", rows, timeout=15, every=0.3)
        assert [r["language"] for r in listed] == ["PYTHON"]
    finally:
        until.write_text("")
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_grpc_traffic_is_counted_in_the_broker_statistics(raw, proxy_cluster):
    """A gRPC send and a gRPC receive go through the broker's own handlers: its runtime info counts
    them (msgPutTotalTodayNow, msgGetTotalTodayNow), as `mqtool top` and /metrics read them."""
    def counts():
        out = mqtool("broker", "status", "-b", proxy_cluster["broker"], "--json")
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        info = {r["key"]: r["value"] for r in rows} if rows and "key" in rows[0] else rows[0]
        return int(info["msgPutTotalTodayNow"]), int(info["msgGetTotalTodayNow"])
    group = group_name("GM")
    mqtool("topic", "create", "-n", proxy_cluster["namesrv"], "-t", "TMETRIC", "-r", "1", "-w", "1")
    consumer_settings(raw, group, "TMETRIC")
    put0, get0 = counts()
    for i in range(3):
        assert send(raw, message("TMETRIC", b"counted-%d" % i)).status.code == 20000
    got = messages_of(receive(raw, group, "TMETRIC"))
    assert len(got) == 3
    put1, get1 = counts()
    assert put1 - put0 >= 3 and get1 - get0 >= 3


def test_an_orderly_group_blocks_its_queue_until_acked(raw, proxy_cluster):
    """§4 item 34: an orderly group's receive of a FIFO queue, not acked: another attempt gets nothing
    from that queue; the same attempt id gets the same messages again (a retry of a lost answer)."""
    group = group_name("GO")
    mqtool("group", "create", "-n", proxy_cluster["namesrv"], "-g", group, "--orderly")
    mqtool("topic", "create", "-n", proxy_cluster["namesrv"], "-t", "TFO", "-r", "2", "-w", "2", "--message-type", "FIFO")
    assert consumer_settings(raw, group, "TFO").subscription.fifo is True
    for i in range(3):
        assert send(raw, message("TFO", b"o%d" % i, message_type=2, message_group="blocking")).status.code == 20000
    first = messages_of(receive(raw, group, "TFO", attempt_id="a1"))
    assert [m.body for m in first] == [b"o0", b"o1", b"o2"]
    assert all(m.system_properties.receipt_handle.split(" ")[3] == "999" for m in first)    # orderly revive qid
    start = time.monotonic()
    blocked = receive(raw, group, "TFO", attempt_id="a2", poll_s=5)
    assert blocked[0].status.code == 40401 and time.monotonic() - start >= 4.5
    again = messages_of(receive(raw, group, "TFO", attempt_id="a1"))
    assert [m.system_properties.message_id for m in again] == [m.system_properties.message_id for m in first]
    for m in again:
        assert ack(raw, group, "TFO", m).status.code == 20000


def test_delay_and_committed_transaction_messages_are_received_with_their_types(raw, proxy_cluster):
    """§4 items 19 and 35 on the receiving side: a delay message is received no earlier than its time,
    typed DELAY, its delivery_timestamp the due time (ms), its id the sender's; a committed
    transaction message is received typed NORMAL."""
    group = group_name("GT")
    consumer_settings(raw, group, "TD")
    due_s = int(time.time()) + 3
    sent = send(raw, message("TD", b"due-later", message_type=3, delivery_timestamp=due_s))
    assert sent.status.code == 20000
    got, deadline = [], time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = [m for m in messages_of(receive(raw, group, "TD", poll_s=5)) if m.body == b"due-later"]
    assert got and time.time() >= due_s
    sp = got[0].system_properties
    assert (sp.message_type, sp.delivery_timestamp.ToMilliseconds()) == (3, due_s * 1000)
    assert sp.message_id == sent.entries[0].message_id
    tx_group = group_name("GX")
    consumer_settings(raw, tx_group, "TX")
    half = send(raw, message("TX", b"committed", message_type=4))
    assert half.status.code == 20000
    entry = half.entries[0]
    ended = raw.unary("EndTransaction", pb.EndTransactionRequest(
        topic=pb.Resource(name="TX"), message_id=entry.message_id, transaction_id=entry.transaction_id,
        resolution=1, source=1), pb.EndTransactionResponse)
    assert ended.status.code == 20000
    got, deadline = [], time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = [m for m in messages_of(receive(raw, tx_group, "TX", poll_s=5)) if m.body == b"committed"]
    assert got and got[0].system_properties.message_type == 1
    assert got[0].system_properties.message_id == entry.message_id


def test_never_acked_goes_to_the_dlq_after_max_attempts(raw, proxy_cluster):
    """§4 item 31: a group with retryMaxTimes=1 (max attempts 2) that never acks gets the message twice
    (attempts 1, 2), then it is in %DLQ%<group> (1 queue, perm 6) and not delivered again."""
    group = group_name("GDLQ")
    mqtool("group", "create", "-n", proxy_cluster["namesrv"], "-g", group, "--retry-max-times", "1")
    mqtool("topic", "create", "-n", proxy_cluster["namesrv"], "-t", "TMAX", "-r", "1", "-w", "1")
    assert consumer_settings(raw, group, "TMAX").backoff_policy.max_attempts == 2
    assert send(raw, message("TMAX", b"given-up")).status.code == 20000
    attempts, deadline = [], time.monotonic() + 60
    dlq = []
    while time.monotonic() < deadline and not dlq:
        attempts += [m.system_properties.delivery_attempt for m in messages_of(receive(raw, group, "TMAX", poll_s=5))]
        if len(attempts) >= 2:            # the DLQ topic is made when the message moves there
            done = subprocess.run([sys.executable, "-m", "mqtool", "consume", "-n", proxy_cluster["namesrv"], "-t",
                                   f"%DLQ%{group}", "-e", "--json"], capture_output=True, text=True, cwd=REPO)
            dlq = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert attempts == [1, 2]
    assert [m["body"] for m in dlq] == ["given-up"]
    assert messages_of(receive(raw, group, "TMAX", poll_s=5)) == []
