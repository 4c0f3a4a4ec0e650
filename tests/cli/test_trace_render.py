"""Message traces without a broker: the dispatcher's batching (AsyncTraceDispatcher's rules), the
hooks' records, and `mqtool message trace`'s renderings against the spec's [ran] CLI output."""
from __future__ import annotations

import asyncio
from datetime import timezone

import pytest

from mqtool.cli.trace import in_time_order, mqadmin_text, table_text
from mqtool.client import trace
from mqtool.client.trace import TraceDispatcher, msg_type_of
from mqtool.common.tracedata import (FLUSH_AT, MAX_MESSAGE_SIZE, ConsumeReturnType, MsgType, TraceRecord, TraceType,
                                     decode, encode)
from tests.common.test_tracedata import MID0, MID1, V1, V4, V5, V7

UTC = timezone.utc


def views_of(body: str, msg_id: str, host: str = "10.0.0.7") -> list:
    """What the look-up keeps of one trace message: the records of `msg_id`, with its born host."""
    return [(r, host) for r in decode(body).records if r.msg_id == msg_id]


def test_mqadmin_rendering_is_byte_for_byte_the_spec_s():
    """spec §4 "CLI rendering [ran]": one trace message, body V9+V5+V7, born host 10.0.0.7, UTC."""
    body = V1 + V4 + V5 + V7
    assert mqadmin_text(views_of(body, MID0), UTC) == (
        "#Type      #ProducerGroup       #ClientHost          #SendTime            #CostTimes #Status   \n"
        "Pub        PG_ORDER             10.0.0.7             2023-11-14 22:13:20  12ms       success   \n"
        "\n"
        "#Type      #ConsumerGroup       #ClientHost          #ConsumerTime        #CostTimes #Status   \n"
        "Sub        CG_ORDER             10.0.0.7             2023-11-14 22:13:21  7ms        success   \n"
        "\n")
    assert mqadmin_text(views_of(body, MID1), UTC) == (     # the EndTransaction record is not printed
        "#Type      #ConsumerGroup       #ClientHost          #ConsumerTime        #CostTimes #Status   \n"
        "Sub        CG_ORDER             10.0.0.7             2023-11-14 22:13:22  250ms      failed    \n"
        "\n")


def test_mqadmin_groups_sub_after_records_in_hashmap_order():
    def sub(group, ts):
        return TraceRecord(TraceType.SubAfter, MID0, ts, "", group, "R", cost_time=1, success=True)
    # "CG_B" hashes to an earlier bucket of a 16-bucket HashMap than "CG_A": Java prints it first
    views = [(sub("CG_A", 1700000001000), "h"), (sub("CG_B", 1700000002000), "h"), (sub("CG_A", 1700000003000), "h")]
    blocks = mqadmin_text(views, UTC).split("\n\n")
    groups = [[line.split()[1] for line in b.splitlines()[1:]] for b in blocks if b]
    assert groups == [["CG_B"], ["CG_A", "CG_A"]]


def test_mqtool_table_has_every_record_in_time_order():
    body = V7 + V5 + V1 + V4             # found in any order
    views = views_of(body, MID0) + views_of(body, MID1)
    lines = table_text(views, UTC).splitlines()
    assert lines[0].split() == ["#Type", "#Group", "#ClientHost", "#Time", "#CostTimes", "#Status", "#Detail"]
    assert [line.split()[0] for line in lines[1:]] == ["Pub", "EndTransaction", "SubAfter", "SubAfter"]
    assert "COMMIT_MESSAGE" in lines[2] and "fromTransactionCheck=false" in lines[2]
    assert "msgType=Normal_Msg" in lines[1] and "contextCode=EXCEPTION" in lines[4] and "failed" in lines[4]


def test_a_sub_after_without_a_time_sorts_after_its_sub_before():
    before = TraceRecord(TraceType.SubBefore, MID0, 1700000001000, "r", "CG", "REQ", keys=None)
    old_after = TraceRecord(TraceType.SubAfter, MID0, 9999999999999, "", "", "REQ", cost_time=5,
                            timestamp_known=False)
    pub = TraceRecord(TraceType.Pub, MID0, 1700000001003, "r", "PG")
    ordered = in_time_order([(old_after, "h"), (pub, "h"), (before, "h")])
    assert [(r.type.value, ms) for r, _, ms in ordered] == [("SubBefore", 1700000001000), ("Pub", 1700000001003),
                                                            ("SubAfter", 1700000001005)]


def test_message_types_of_a_send():
    assert msg_type_of({}) is MsgType.Normal_Msg
    assert msg_type_of({"TRAN_MSG": "true"}) is MsgType.Trans_Msg_Half
    assert msg_type_of({"TRAN_MSG": "true", "DELAY": "3"}) is MsgType.Delay_Msg      # a delay wins, as sendKernelImpl
    assert msg_type_of({"__STARTDELIVERTIME": "1"}) is MsgType.Delay_Msg


class FakeRecord:
    """What the consume hook reads of a pulled message."""

    def __init__(self, uniq, props, reconsume=0, topic="T"):
        self.uniq_key, self.msg_id, self.properties, self.reconsume_times, self.topic = \
            uniq, "OFFSETID", props, reconsume, topic


def capture(monkeypatch, block: asyncio.Event | None = None) -> list[bytes]:
    """Trace messages a dispatcher would send, as bodies (the KEYS checked beside them)."""
    sent = []

    async def fake_send(self, batch):
        if block is not None:
            await block.wait()
        body = "".join(t for t, _ in batch)
        keys = set().union(*(k for _, k in batch))
        assert all(r.msg_id in keys for r in decode(body).records)
        sent.append(body.encode())
    monkeypatch.setattr(TraceDispatcher, "_send", fake_send)
    return sent


def test_hooks_write_4_9_8_records_and_the_batch_goes_out_by_age(monkeypatch):
    sent = capture(monkeypatch)

    async def scenario():
        d = TraceDispatcher("PG", "PRODUCE")
        d.pub("PG", "T", MID0, None, "k1 k2", "127.0.0.1:10911", 5, 1700000000000, MsgType.Normal_Msg, "OFF", True)
        d.pub("PG", "T", MID1, "TagA", None, "127.0.0.1:10911", 5, 1700000000000, MsgType.Normal_Msg, "OFF", True,
              trace_on=False)                                      # TRACE_ON=false in the answer: no Pub
        d.pub("PG", "RMQ_SYS_TRACE_TOPIC", MID1, None, None, "h", 5, 0, MsgType.Normal_Msg, "OFF", True)  # itself
        msgs = [FakeRecord(MID0, {"KEYS": "k1 k2", "MSG_REGION": "eu"}), FakeRecord(None, {}, 3),
                FakeRecord(MID1, {"TRACE_ON": "false"})]
        before = d.sub_before("CG", msgs)
        d.sub_after(before, False, ConsumeReturnType.FAILED)
        appended = asyncio.get_running_loop().time()
        while not sent:
            await asyncio.sleep(0.02)
        assert asyncio.get_running_loop().time() - appended >= trace.MAX_AGE_S - 0.05
        await d.close()
    asyncio.run(scenario())
    assert len(sent) == 1
    records = decode(sent[0].decode(), strict=True).records          # Java's decoder reads all of it
    assert [(r.type.value, r.msg_id) for r in records] == [
        ("Pub", MID0), ("SubBefore", MID0), ("SubBefore", "OFFSETID"), ("SubAfter", MID0), ("SubAfter", "OFFSETID")]
    pub, sb0, sb1, sa0, sa1 = records
    assert (pub.tags, pub.keys, pub.region_id, pub.success) == ("null", "k1 k2", "DefaultRegion", True)
    assert (sb0.region_id, sb0.keys, sb1.region_id, sb1.keys, sb1.retry_times) == ("eu", "k1 k2", "null", "null", 3)
    assert sb0.request_id == sb1.request_id == sa0.request_id == sa1.request_id and len(sb0.request_id) == 32
    assert (sa0.success, sa0.context_code, sa0.group) == (False, ConsumeReturnType.FAILED, "CG")
    assert all(body.endswith(b"\x02") for body in sent) and sent[0].count(b"\x02") == 5


def test_a_batch_goes_out_at_118000_bytes_and_never_passes_128000(monkeypatch):
    sent = capture(monkeypatch)
    big_keys = " ".join(f"key-{i:04d}-" + "x" * 90 for i in range(10))     # ~1 KB a record

    async def scenario():
        d = TraceDispatcher("PG", "PRODUCE")
        for i in range(300):
            d.pub("PG", "T", f"{i:032X}", None, big_keys, "h:1", 1, 0, MsgType.Normal_Msg, "OFF", True)
        await d.close()
    asyncio.run(scenario())
    assert len(sent) >= 3
    assert all(FLUSH_AT <= len(b) <= MAX_MESSAGE_SIZE for b in sent[:-1]) and len(sent[-1]) < FLUSH_AT
    assert sum(len(decode(b.decode(), strict=True).records) for b in sent) == 300


def test_a_full_queue_drops_records_and_the_hook_never_waits(monkeypatch):
    block = asyncio.Event()
    sent = capture(monkeypatch, block)

    async def scenario():
        d = TraceDispatcher("PG", "PRODUCE")
        record = TraceRecord(TraceType.Pub, MID0, 1, "r", "PG")
        d.append([record] * (trace.QUEUE_SIZE + 76))       # the worker has not run: the queue holds 1024
        assert (len(d.queue), d.dropped) == (trace.QUEUE_SIZE, 76)
        while d.queue:                                   # taken by the worker, whose send now hangs
            await asyncio.sleep(0.02)
        d.append([record])                               # ... and the hook still returns at once
        block.set()
        await d.close()
    asyncio.run(scenario())
    assert sum(len(decode(b.decode()).records) for b in sent) == trace.QUEUE_SIZE + 1


def test_close_sends_what_is_left_at_once(monkeypatch):
    sent = capture(monkeypatch)

    async def scenario():
        d = TraceDispatcher("PG", "PRODUCE")
        d.append([TraceRecord(TraceType.Pub, MID0, 1, "r", "PG")])
        t0 = asyncio.get_running_loop().time()
        await d.close()
        return asyncio.get_running_loop().time() - t0
    took = asyncio.run(scenario())
    assert len(sent) == 1 and took < trace.MAX_AGE_S
    assert encode(decode(sent[0].decode()).records[0]) == sent[0].decode()


@pytest.mark.parametrize("kind", ["PRODUCE", "CONSUME"])
def test_the_trace_producer_is_named_as_java_names_it(kind):
    a, b = TraceDispatcher("G", kind), TraceDispatcher("G", kind)
    assert a.group.startswith(f"_INNER_TRACE_PRODUCER-G-{kind}-") and a.group != b.group
    assert a.topic == "RMQ_SYS_TRACE_TOPIC" and TraceDispatcher("G", kind, "MyTrace").topic == "MyTrace"


def test_the_dispatcher_sends_through_the_sender_it_is_given():
    """Tracing is a layer the client is given: the dispatcher makes its trace producer with the
    factory it was handed (named with its group), sends through it and closes it."""
    made, sent, closed = [], [], []

    class Sender:
        def __init__(self, group):
            made.append(group)

        async def send(self, topic, body, keys):
            sent.append((topic, body, keys))

        async def close(self):
            closed.append(True)

    async def scenario():
        d = TraceDispatcher("PG", "PRODUCE", "MyTrace", make_sender=Sender, new_id=lambda: "ID" * 16)
        d.append([TraceRecord(TraceType.Pub, MID0, 1, "r", "PG", keys="k1")])
        await d.close()
        return d
    d = asyncio.run(scenario())
    assert made == [d.group] and closed == [True]
    [(topic, body, keys)] = sent
    assert topic == "MyTrace" and keys == sorted({MID0, "k1"}) and decode(body.decode()).records[0].msg_id == MID0


def test_a_client_s_tracer_names_its_group_and_makes_unique_key_request_ids():
    from mqtool.client.producer import Producer, TraceProducer, tracer_for
    p = Producer("127.0.0.1:1;127.0.0.1:2", "PG_T", trace=True, trace_topic="TT")
    assert p.tracer.group.startswith("_INNER_TRACE_PRODUCER-PG_T-PRODUCE-") and p.tracer.topic == "TT"
    sender = p.tracer.make_sender(p.tracer.group)
    assert isinstance(sender, TraceProducer) and sender.namesrv == "127.0.0.1:1;127.0.0.1:2"
    a, b = p.tracer.new_id(), p.tracer.new_id()
    assert len(a) == 32 and a[:20] == b[:20] and a != b              # MessageClientIDSetter's layout
    assert tracer_for(p, "CONSUME").group.startswith("_INNER_TRACE_PRODUCER-PG_T-CONSUME-")
