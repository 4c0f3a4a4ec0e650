"""Message traces end to end on 127.0.0.1: mqtool's traced producer and consumer write 4.9.8 trace
records to a broker started with traceTopicEnable=true, and `mqtool message trace` reads them back."""
from __future__ import annotations

import asyncio

import pytest

from mqtool.client.admin import Admin
from mqtool.client.consumer import PushConsumer
from mqtool.client.producer import COMMIT, ROLLBACK, UNKNOWN, OutMessage, Producer, TransactionProducer
from mqtool.common.tracedata import decode, encode
from tests.conftest import json_lines, run_cli
from tests.servers import Process, free_port, start_broker, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("traced")
    port = free_port()
    ns = Process(["namesrv", "start", "--listen", f"127.0.0.1:{port}", "--kv-config", str(tmp / "kv.json")],
                 "boot success")
    broker, addr = start_broker(tmp, f"127.0.0.1:{port}", extra="traceTopicEnable=true\n")
    yield {"namesrv": f"127.0.0.1:{port}", "broker": addr}
    assert broker.stop() == 0
    assert ns.stop() == 0


def trace_of(ns: str, msg_id: str, types: list[str]) -> list[dict]:
    """The message's trace records once every type in `types` is there (the index may lag a send)."""
    def got():
        proc = run_cli("message", "trace", "-n", ns, "-i", msg_id, "--json")
        rows = json_lines(proc.stdout) if proc.returncode == 0 else []
        return rows if sorted(r["type"] for r in rows) == sorted(types) else None
    return wait_until(f"trace records {types} of {msg_id}", got, timeout=30, every=0.3)


def test_send_and_consume_with_trace_show_in_one_table(traced):
    ns, broker = traced["namesrv"], traced["broker"]
    route = json_lines(run_cli("topic", "route", "-n", ns, "-t", "RMQ_SYS_TRACE_TOPIC", "--json", check=True).stdout)[0]
    assert [(q["readQueueNums"], q["writeQueueNums"]) for q in route["queueDatas"]] == [(1, 1)]   # traceTopicEnable
    run_cli("topic", "create", "-n", ns, "-t", "TraceOrders", "-r", "2", "-w", "2", check=True)
    sent = json_lines(run_cli("send", "-n", ns, "-t", "TraceOrders", "--trace", "-g", "PG_TRACE", "--keys",
                              "order-1 order-2", "--tags", "TagA", "hello", "--json", check=True).stdout)[0]
    msg_id = sent["msg_id"]
    got = json_lines(run_cli("consume", "-n", ns, "-t", "TraceOrders", "-g", "CG_TRACE", "--trace", "-c", "1", "--json",
                             check=True).stdout)
    assert [g["msg_id"] for g in got] == [msg_id]

    pub, before, after = trace_of(ns, msg_id, ["Pub", "SubBefore", "SubAfter"])    # in time order
    assert (pub["type"], before["type"], after["type"]) == ("Pub", "SubBefore", "SubAfter")
    assert pub["timestamp"] <= before["timestamp"] <= after["timestamp"]
    assert {k: pub[k] for k in ("group", "topic", "msg_id", "tags", "keys", "store_host", "body_length", "msg_type",
                                "region_id", "success", "client_host")} == {
        "group": "PG_TRACE", "topic": "TraceOrders", "msg_id": msg_id, "tags": "TagA", "keys": "order-1 order-2",
        "store_host": broker, "body_length": 5, "msg_type": "Normal_Msg", "region_id": "DefaultRegion",
        "success": True, "client_host": "127.0.0.1"}
    assert len(pub["offset_msg_id"]) == 32 and pub["offset_msg_id"] != msg_id
    assert (before["group"], before["retry_times"], before["keys"], before["msg_id"]) == \
        ("CG_TRACE", 0, "order-1 order-2", msg_id)
    assert (after["group"], after["success"], after["context_code"], after["request_id"]) == \
        ("CG_TRACE", True, "SUCCESS", before["request_id"])

    table = run_cli("message", "trace", "-n", ns, "-i", msg_id, check=True).stdout.splitlines()
    assert [line.split()[0] for line in table] == ["#Type", "Pub", "SubBefore", "SubAfter"]
    assert table[1].split()[1:3] == ["PG_TRACE", "127.0.0.1"] and "success" in table[1]
    mqadmin = run_cli("message", "trace", "-n", ns, "-i", msg_id, "--mqadmin", check=True).stdout.split("\n")
    assert [line.split()[:2] for line in mqadmin if line] == [
        ["#Type", "#ProducerGroup"], ["Pub", "PG_TRACE"], ["#Type", "#ConsumerGroup"], ["Sub", "CG_TRACE"]]

    # What mqtool wrote is what 4.9.8 writes: Java's (strict) decoder reads every trace message whole,
    # each record re-encodes to the same text, and KEYS holds the message id and its keys.
    raw = json_lines(run_cli("message", "query", "-n", ns, "-t", "RMQ_SYS_TRACE_TOPIC", "-k", msg_id, "--json",
                             check=True).stdout)
    assert len(raw) >= 2                                    # the producer's, the consumer's (one or two)
    for m in raw:
        records = decode(m["body"], strict=True).records
        assert m["body"] == "".join(encode(r) for r in records) and m["body"].endswith("\x02")
        assert {msg_id, "order-1", "order-2"} <= set(m["keys"].split(" "))
        assert m["tags"] == ""


def test_a_java_producer_s_trace_and_mqtool_s_consumer_trace_show_together(traced):
    """The other way round: a Pub record exactly as 4.9.8's producer writes it (the spec's V1, with
    this message's id), in a trace message as its dispatcher sends it, beside the records of an
    mqtool consumer reading explicit queues (traced as Java's lite pull consumer)."""
    from tests.common.test_tracedata import MID0, V1
    ns = traced["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "TraceFromJava", "-r", "1", "-w", "1", check=True)
    msg_id = json_lines(run_cli("send", "-n", ns, "-t", "TraceFromJava", "--keys", "order-1 order-2", "java",
                                "--json", check=True).stdout)[0]["msg_id"]

    async def java_dispatcher():
        p = Producer(ns, "_INNER_TRACE_PRODUCER-PG_ORDER-PRODUCE-1")
        await p.send(OutMessage("RMQ_SYS_TRACE_TOPIC", V1.replace(MID0, msg_id).encode(),
                                [msg_id, "order-1", "order-2"]))
        await p.close()
    asyncio.run(java_dispatcher())
    run_cli("consume", "-n", ns, "-t", "TraceFromJava", "--trace", "-e", check=True)
    table = trace_of(ns, msg_id, ["Pub", "SubBefore", "SubAfter"])
    assert [(r["type"], r["group"]) for r in table] == [("Pub", "PG_ORDER"), ("SubBefore", "CID_MQTOOL_CLI"),
                                                       ("SubAfter", "CID_MQTOOL_CLI")]
    assert (table[0]["store_host"], table[0]["cost_time"], table[0]["timestamp"]) == \
        ("192.168.0.10:10911", 12, 1700000000000)
    assert table[2]["success"] is True and table[1]["keys"] == "order-1 order-2"


def test_a_bad_message_id_or_trace_topic_is_one_line(traced):
    ns = traced["namesrv"]
    bad = run_cli("message", "trace", "-n", ns, "-i", "no-such-id")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "mqtool: no trace message of message no-such-id in topic RMQ_SYS_TRACE_TOPIC (a message id is 32 hex digits)"]
    other = run_cli("message", "trace", "-n", ns, "-i", "0" * 32, "--trace-topic", "NoTraceHere")
    assert other.returncode == 1 and len(other.stderr.strip().splitlines()) == 1
    assert "no broker has the trace topic NoTraceHere" in other.stderr and "Traceback" not in other.stderr
    empty = run_cli("message", "trace", "-n", ns, "-i", " ")
    assert empty.returncode == 2 and empty.stderr.strip() == "mqtool: error: --msg-id is empty"
    alone = run_cli("send", "-n", ns, "-t", "TraceOrders", "--trace-topic", "T", "x")
    assert alone.returncode == 2 and "--trace-topic goes with --trace" in alone.stderr


def test_library_traces_a_retry_and_a_transaction_and_never_holds_a_send(traced):
    ns = traced["namesrv"]

    async def scenario():
        admin = Admin(ns)
        await admin.create_topic("TraceLib", 1, 1)
        p = Producer(ns, "PG_LIB", trace=True)
        gate, entered = asyncio.Event(), asyncio.Event()
        real_send = p.tracer._send

        async def held(batch):                  # the trace producer's send hangs until the gate opens
            entered.set()
            await gate.wait()
            await real_send(batch)
        p.tracer._send = held
        first = await p.send(OutMessage("TraceLib", b"retried", ["lib-1"]))
        async with asyncio.timeout(5):
            await entered.wait()                # the worker is sending the Pub's batch, and hangs ...
        async with asyncio.timeout(2):          # ... and a traced send does not wait for it
            second = await p.send(OutMessage("TraceLib", b"second"))
        assert second.status == "SEND_OK"
        gate.set()
        checked = asyncio.Event()

        def check_back(rec):
            checked.set()
            return ROLLBACK
        tp = TransactionProducer(ns, "PG_LIB_TX", check_back, trace=True)
        tx, _state = await tp.send_in_transaction(OutMessage("TraceLibTx", b"tx", ["tx-key"]), lambda m, r: COMMIT)
        later, _ = await tp.send_in_transaction(OutMessage("TraceLibTx", b"later"), lambda m, r: UNKNOWN)
        async with asyncio.timeout(30):
            await checked.wait()                # the broker asked; the answer is traced too
        await tp.close()
        await p.close()

        answers = []

        def listener(rec):                      # fails the first delivery: it comes back from %RETRY%
            answers.append(rec.reconsume_times)
            return rec.reconsume_times > 0
        stop = asyncio.Event()
        c = PushConsumer(ns, "CG_LIB", "TraceLib", trace=True)
        task = asyncio.create_task(c.run(listener, stop))
        try:
            async with asyncio.timeout(40):
                while answers.count(1) < 1:
                    await asyncio.sleep(0.1)
        finally:
            stop.set()
            await task
            await c.close()
        await admin.close()
        return first.msg_id, tx.msg_id, later.msg_id
    retried, tx_id, later_id = asyncio.run(scenario())

    rows = trace_of(ns, retried, ["Pub", "SubBefore", "SubAfter", "SubBefore", "SubAfter"])
    assert [(r["type"], r.get("retry_times"), r.get("success"), r.get("context_code")) for r in rows] == [
        ("Pub", None, True, None), ("SubBefore", 0, None, None), ("SubAfter", None, False, "FAILED"),
        ("SubBefore", 1, None, None), ("SubAfter", None, True, "SUCCESS")]
    tx_rows = trace_of(ns, tx_id, ["Pub", "EndTransaction"])
    pub, end = tx_rows
    assert (pub["msg_type"], end["msg_type"], end["transaction_state"], end["from_transaction_check"]) == \
        ("Trans_Msg_Half", "Trans_msg_Commit", "COMMIT_MESSAGE", False)
    assert (end["group"], end["topic"], end["keys"], end["transaction_id"]) == ("PG_LIB_TX", "TraceLibTx", "tx-key",
                                                                               tx_id)
    ends = [r for r in trace_of(ns, later_id, ["Pub", "EndTransaction", "EndTransaction"]) if r["type"] != "Pub"]
    assert [(e["transaction_state"], e["from_transaction_check"]) for e in ends] == \
        [("UNKNOW", False), ("ROLLBACK_MESSAGE", True)]
    assert ends[1]["topic"] == "TraceLibTx" and ends[1]["store_host"] == traced["broker"]


def test_the_broker_s_region_id_and_trace_on_reach_the_trace(traced):
    """regionId and traceOn (BrokerConfig, changed at run time as updateBrokerConfig changes them)
    go out in every send answer: a traced producer writes the region into its Pub, and writes no
    Pub while the broker says trace off."""
    ns, broker = traced["namesrv"], traced["broker"]
    run_cli("topic", "create", "-n", ns, "-t", "TraceRegion", "-r", "1", "-w", "1", check=True)

    async def send_two():
        p = Producer(ns, "PG_REGION", trace=True)
        run_cli("broker", "config", "set", "-b", broker, "regionId=eu-west", "traceOn=false", check=True)
        try:
            silent = await p.send(OutMessage("TraceRegion", b"untraced"))
            run_cli("broker", "config", "set", "-b", broker, "traceOn=true", check=True)
            traced_one = await p.send(OutMessage("TraceRegion", b"traced"))
        finally:
            run_cli("broker", "config", "set", "-b", broker, "regionId=DefaultRegion", "traceOn=true", check=True)
            await p.close()
        return silent, traced_one
    silent, traced_one = asyncio.run(send_two())
    assert (silent.region_id, silent.trace_on, traced_one.region_id, traced_one.trace_on) == \
        ("eu-west", False, "eu-west", True)
    assert trace_of(ns, traced_one.msg_id, ["Pub"])[0]["region_id"] == "eu-west"
    quiet = run_cli("message", "trace", "-n", ns, "-i", silent.msg_id)
    assert quiet.returncode == 1 and "no trace message" in quiet.stderr


def test_without_trace_topic_enable_the_first_trace_message_creates_the_topic(cluster):
    """A stock broker (traceTopicEnable=false): the trace producer finds no route and sends through
    TBW102, and the broker creates RMQ_SYS_TRACE_TOPIC with 4 queues, as 4.9.8 does."""
    ns = cluster["namesrv"]
    missing = run_cli("topic", "route", "-n", ns, "-t", "RMQ_SYS_TRACE_TOPIC")
    assert missing.returncode != 0
    run_cli("topic", "create", "-n", ns, "-t", "TraceAuto", "-r", "1", "-w", "1", check=True)
    msg_id = json_lines(run_cli("send", "-n", ns, "-t", "TraceAuto", "--trace", "auto", "--json",
                                check=True).stdout)[0]["msg_id"]
    route = json_lines(run_cli("topic", "route", "-n", ns, "-t", "RMQ_SYS_TRACE_TOPIC", "--json", check=True).stdout)[0]
    assert [(q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]] == [(4, 4, 6)]
    assert [r["type"] for r in trace_of(ns, msg_id, ["Pub"])] == ["Pub"]
