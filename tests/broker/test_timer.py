"""Timer messages (5.x) on a real broker over remoting: the put hook, the wheel, delivery, recall
(shared/spec/rocketmq5.md §1, §4 items 19-21, 40-41 over remoting)."""
from __future__ import annotations

import asyncio
import json
import base64
import time

import pytest

from mqtool.broker.config import BrokerConfig
from mqtool.broker.controller import BrokerController
from mqtool.broker.timerhook import round_due, timer_hook
from mqtool.client.base import MessageQueue
from mqtool.client.consumer import Consumer
from mqtool.client.producer import OutMessage, Producer
from mqtool.namesrv.server import NameServer
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingCommandError
from mqtool_remoting.transport import RemotingClient
from mqtool_store.codes import TIMER_TOPIC
from mqtool_store.messagestore import Message, PutStatus


def run(coro, timeout=60):
    asyncio.run(asyncio.wait_for(coro, timeout))


async def start_pair(tmp_path, store=None, listen_port=0, **cfg):
    ns = await NameServer(tmp_path / "kv.json").start("127.0.0.1", 0)
    config = BrokerConfig(brokerName="broker-a", listenPort=listen_port, namesrvAddr=f"127.0.0.1:{ns.port}",
                          storePathRootDir=str(tmp_path / "broker-a"), **cfg)
    broker = await BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 20),
                                             "mappedFileSizeConsumeQueue": "6000", "timerPrecisionMs": "100",
                                             "mappedFileSizeTimerLog": str(52 * 1000), **(store or {})}
                                    ).start("127.0.0.1")
    return ns, broker


async def wait_messages(consumer, topic, n, timeout=20.0, queues=(0, 1, 2, 3)):
    """(record, arrival ms) of the first `n` messages of `topic`, polled every 20 ms."""
    got, offsets = [], dict.fromkeys(queues, 0)
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for q in queues:
            res = await consumer.pull(MessageQueue(topic, "broker-a", q), offsets[q], 32)
            now = time.time() * 1000
            got += [(m, now) for m in res.messages]
            offsets[q] = res.next_offset
        await asyncio.sleep(0.02)
    return got


def test_hook_rounds_the_due_time_and_refuses_as_java():
    assert round_due(1700000030000, 1000) == 1700000029000 and round_due(1700000030500, 1000) == 1700000030000
    now = 1700000000000

    def hook(props, enabled=True, now=now, reject=None):
        m = Message("T", 3, b"x", dict(props))
        return m, timer_hook(m, now, enabled, 1000, 259200, reject)
    m, refused = hook({"TIMER_DELIVER_MS": "1700000030000"})
    assert refused is None and m.topic == TIMER_TOPIC and m.queue_id == 0
    assert (m.properties["TIMER_OUT_MS"], m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == \
        ("1700000029000", "T", "3") and "TIMER_OUT_MS\x011700000029000" in m.properties_text
    m, _ = hook({"TIMER_DELAY_SEC": "5", "TIMER_DELAY_MS": "100", "TIMER_DELIVER_MS": "1"})   # SEC first
    assert m.properties["TIMER_OUT_MS"] == "1700000004000"
    m, _ = hook({"TIMER_DELAY_MS": "1500"})
    assert m.properties["TIMER_OUT_MS"] == "1700000001000"
    m, refused = hook({"TIMER_DELIVER_MS": str(now - 1)})                # due already: its own topic
    assert refused is None and m.topic == "T" and "TIMER_OUT_MS" not in m.properties
    m, refused = hook({"TIMER_DELIVER_MS": "1700000030000", "DELAY": "3"})    # a delay level wins
    assert refused is None and m.topic == "T" and "TIMER_DELIVER_MS" not in m.properties
    for props in ({"TIMER_DELIVER_MS": " 17"}, {"TIMER_DELAY_SEC": "1_0"}, {"TIMER_DELAY_SEC": str(259201)},
                  {"TIMER_DELIVER_MS": str(now - 5), "TIMER_DEL_UNIQKEY": "T+X"}):
        assert hook(props)[1].status is PutStatus.WHEEL_TIMER_MSG_ILLEGAL, props
    assert hook({"TIMER_DELAY_SEC": "259200"})[1] is None
    assert hook({"TIMER_DELAY_SEC": "5"}, enabled=False)[1].status is PutStatus.WHEEL_TIMER_NOT_ENABLE
    assert hook({"TIMER_DELAY_SEC": "5"}, reject=lambda t: True)[1].status is PutStatus.WHEEL_TIMER_FLOW_CONTROL
    m, refused = hook({"TIMER_DELAY_SEC": "5", "TIMER_OUT_MS": "1"})   # delivered already: not timed again
    assert refused is None and m.topic == "T"


def test_timer_messages_arrive_at_their_time_never_early(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        now = int(time.time() * 1000)
        due = [now + 1234, now + 800, now + 2000]
        results = [await producer.send(OutMessage("TimerT", b"m%d" % i, deliver_time_ms=d), queue=1)
                   for i, d in enumerate(due)]
        r = await producer.send(OutMessage("TimerT", b"relative", delay_time_ms=1500), queue=1)
        results.append(r)
        due.append(now + 1500)
        assert [x.queue_offset for x in results] == [0, 1, 2, 3]      # offsets in rmq_sys_wheel_timer/0
        text = base64.urlsafe_b64decode(results[0].recall_handle).decode().split(" ")
        assert text[:3] == ["v1", "TimerT", "broker-a"] and text[4] == results[0].msg_id
        assert int(text[3]) - 1 == round_due(due[0], 100)
        past = await producer.send(OutMessage("TimerT", b"past", deliver_time_ms=now - 10), queue=2)
        assert past.recall_handle == "" and past.queue_offset == 0        # stored in TimerT itself
        got = await wait_messages(consumer, "TimerT", 5)
        by_body = {m.body: (m, at) for m, at in got}
        assert set(by_body) == {b"m0", b"m1", b"m2", b"relative", b"past"}
        for i, body in enumerate([b"m0", b"m1", b"m2", b"relative"]):
            m, at = by_body[body]
            assert at >= due[i], (body, at - due[i])          # never early
            assert m.queue_id == 1 and "REAL_TOPIC" not in m.properties and "REAL_QID" not in m.properties
            assert m.properties["UNIQ_KEY"] == results[i].msg_id
            for k in ("TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS"):
                assert k in m.properties, k
            assert int(m.properties["TIMER_DEQUEUE_MS"]) >= due[i]
        assert by_body[b"m0"][0].properties["TIMER_DELIVER_MS"] == str(due[0])
        assert by_body[b"relative"][0].properties["TIMER_DELAY_MS"] == "1500"
        root = tmp_path / "broker-a"
        assert (root / "timerwheel").stat().st_size == 38707200
        assert (root / "timerlog" / "00000000000000000000").stat().st_size == 52 * 1000
        await producer.close()
        await consumer.close()
        await broker.stop()
        await ns.stop()
        assert (root / "config" / "timercheck").stat().st_size == 4096
        from mqtool_store.verify import verify_store
        report = verify_store(root)
        assert report.ok and report.timer_units == 4, report.problems
    run(scenario())


def test_refusals_over_remoting(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        with pytest.raises(RemotingCommandError) as exc:
            await producer.send(OutMessage("TimerT", b"x", delay_time_ms=259201 * 1000))
        assert exc.value.code == ResponseCode.MESSAGE_ILLEGAL and "max delay 259200000ms" in str(exc.value)
        broker.store_config.timerCongestNumEachSlot = 1          # a slot holding one refuses the next
        due = int(time.time() * 1000) + 30_000
        await producer.send(OutMessage("TimerT", b"first", deliver_time_ms=due))
        for _ in range(100):
            if broker.timer.enqueued:
                break
            await asyncio.sleep(0.05)
        with pytest.raises(RemotingCommandError) as exc:
            await producer.send(OutMessage("TimerT", b"second", deliver_time_ms=due))
        assert exc.value.code == ResponseCode.SYSTEM_ERROR and "flow control" in str(exc.value)
        await producer.send(OutMessage("TimerT", b"next slot", deliver_time_ms=due + 1000))
        broker.store_config.timerWheelEnable = False
        with pytest.raises(RemotingCommandError) as exc:
            await producer.send(OutMessage("TimerT", b"x", delay_time_ms=5000))
        assert exc.value.code == ResponseCode.SYSTEM_ERROR and "timerWheelEnable is false" in str(exc.value)
        await producer.close()
        await broker.stop()
        await ns.stop()
    run(scenario())


def test_cli_send_deliver_at_and_delay_over_a_broker_process(tmp_path):
    """`mqtool send --delay / --deliver-at` against broker and name server processes (timerPrecisionMs 1000)."""
    from tests.conftest import json_lines, run_cli
    from tests.servers import start_broker, start_namesrv
    ns, ns_addr = start_namesrv(tmp_path)
    broker, _ = start_broker(tmp_path, ns_addr)
    try:
        sent_at = time.time() * 1000
        out = run_cli("send", "-n", ns_addr, "-t", "CliTimer", "--queue", "0", "--delay", "2s", "--json", "later",
                      check=True).stdout
        first = json_lines(out)[0]
        assert first["recall_handle"] and first["queue_offset"] == 0
        due_at = int(time.time() * 1000) + 3000
        run_cli("send", "-n", ns_addr, "-t", "CliTimer", "--queue", "0", "--deliver-at", str(due_at), "at",
                check=True)
        bad = run_cli("send", "-n", ns_addr, "-t", "CliTimer", "--delay", "soon", "x")
        assert bad.returncode != 0 and "--delay takes a duration" in bad.stderr and "Traceback" not in bad.stderr

        async def consume():
            consumer = Consumer(ns_addr, "CG")
            try:
                early = await consumer.pull(MessageQueue("CliTimer", "broker-a", 0), 0, 32)
                assert early.messages == [] or time.time() * 1000 >= sent_at + 2000
                return await wait_messages(consumer, "CliTimer", 2, queues=(0,))
            finally:
                await consumer.close()
        got = asyncio.run(consume())
        arrival = {m.body: at for m, at in got}
        assert arrival[b"later"] >= sent_at + 2000 and arrival[b"at"] >= due_at
    finally:
        broker.stop()
        ns.stop()
    root = tmp_path / "store-broker-a"                       # §4 item 40, with the default sizes
    assert (root / "timerwheel").stat().st_size == 38707200
    first = root / "timerlog" / "00000000000000000000"
    assert first.stat().st_size == 104857600
    with open(first, "rb") as f:
        head = f.read(16)
    assert int.from_bytes(head[0:4], "big") == 52 and int.from_bytes(head[12:16], "big") == 1
    assert (root / "config" / "timercheck").stat().st_size == 4096
    verified = run_cli("store", "verify", root)
    assert verified.returncode == 0 and "2 timerlog units" in verified.stdout, verified.stdout


def test_recall_cancels_a_timer_message_before_it_is_due(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        due = int(time.time() * 1000) + 1500
        kept = await producer.send(OutMessage("RecallT", b"kept", deliver_time_ms=due), queue=0)
        gone = await producer.send(OutMessage("RecallT", b"recalled", deliver_time_ms=due), queue=0)
        with pytest.raises(RemotingCommandError) as exc:          # recallMessageEnable is false by default
            await producer.recall("RecallT", gone.recall_handle)
        assert exc.value.code == ResponseCode.NO_PERMISSION and "recall failed, operation is forbidden" in str(exc.value)
        broker.config.recallMessageEnable = True
        with pytest.raises(ValueError, match="not a recall handle"):       # the client reads the broker name
            await producer.recall("RecallT", "not base64!")
        client = RemotingClient()
        for handle, remark in ((base64.urlsafe_b64encode(b"v2 RecallT broker-a 1 x").decode(), "is invalid"),
                               ("not base64!", "is invalid"), (base64.urlsafe_b64encode(b"v1 a b").decode(), "is invalid"),
                               (base64.urlsafe_b64encode(f"v1 RecallT broker-b {due} X".encode()).decode(),
                                "is invalid"),
                               (base64.urlsafe_b64encode(b"v1 RecallT broker-a 5 X").decode(), "timestamp invalid")):
            resp = await client.invoke(broker.config.broker_addr, RemotingCommand.request(
                RequestCode.RECALL_MESSAGE, {"topic": "RecallT", "recallHandle": handle, "producerGroup": "PG"}))
            assert resp.code == ResponseCode.ILLEGAL_OPERATION and remark in resp.remark, (handle, resp.remark)
        resp = await client.invoke(broker.config.broker_addr, RemotingCommand.request(
            RequestCode.RECALL_MESSAGE, {"topic": "NoSuchT", "recallHandle": gone.recall_handle}))
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        await client.close()
        assert await producer.recall("RecallT", gone.recall_handle) == gone.msg_id
        got = await wait_messages(consumer, "RecallT", 2, timeout=4.0, queues=(0,))
        assert [m.body for m, _ in got] == [b"kept"]                # the recalled one never comes
        assert got[0][0].properties["UNIQ_KEY"] == kept.msg_id
        with pytest.raises(RemotingCommandError) as exc:            # too late: due already
            await producer.recall("RecallT", kept.recall_handle)
        assert exc.value.code == ResponseCode.ILLEGAL_OPERATION and "timestamp invalid" in str(exc.value)
        await producer.close()
        await consumer.close()
        await broker.stop()
        await ns.stop()
    run(scenario())


def test_timer_checkpoint_and_metrics_requests(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        await producer.send(OutMessage("MetricT", b"x", delay_time_ms=60_000))
        client = RemotingClient()
        addr = broker.config.broker_addr
        await asyncio.sleep(0.5)                                   # a few rounds: enqueued
        cp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_TIMER_CHECK_POINT, {}))
        assert cp.code == ResponseCode.SUCCESS and len(cp.body) == 56
        assert int.from_bytes(cp.body[24:32], "big") == 1          # masterTimerQueueOffset: one enqueued
        metrics = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_TIMER_METRICS, {}))
        assert metrics.code == ResponseCode.SUCCESS
        body = json.loads(metrics.body)
        assert body["timingCount"]["MetricT"]["count"] == 1 and set(body) == {"dataVersion", "timingCount"}
        broker.timer.timing["GoneTopic"] = 2                       # a topic deleted since
        broker.timer.prune_metrics()
        assert set(broker.timer.timing) == {"MetricT"}
        broker.store_config.timerWheelEnable = False
        cp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_TIMER_CHECK_POINT, {}))
        assert (cp.code, cp.remark) == (ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        await client.close()
        await producer.close()
        await broker.stop()
        await ns.stop()
    run(scenario())


def test_status_in_runtime_info_metrics_top_and_cli(tmp_path):
    from mqtool.client.admin import Admin
    from tests.broker.test_metrics import http_get, samples, value
    from tests.conftest import json_lines, run_cli
    from tests.servers import free_port

    async def scenario():
        port = free_port()
        ns, broker = await start_pair(tmp_path, metricsPort=port)
        admin = Admin(f"127.0.0.1:{ns.port}")
        addr = broker.config.broker_addr
        kv = await admin.broker_runtime(addr)            # before any timer message
        assert {k: kv[k] for k in ("timerReadBehind", "timerOffsetBehind", "timerCongestNum")} == \
            {"timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0"}
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        due = int(time.time() * 1000) + 60_000
        for i in range(3):
            await producer.send(OutMessage("StatusT", b"x", deliver_time_ms=due + i * 1000))
        for _ in range(100):
            kv = await admin.broker_runtime(addr)
            if kv["timerCongestNum"] == "3":
                break
            await asyncio.sleep(0.05)
        assert kv["timerCongestNum"] == "3" and kv["timerOffsetBehind"] == "0" and int(kv["timerReadBehind"]) <= 1
        assert float(kv["timerEnqueueTps"]) >= 0 and "timerDequeueTps" in kv
        assert int(kv["timerNextDueMs"]) == round_due(due, 100) + 100
        _, _, body = await http_get(port)
        found = samples(body)
        assert value(found, "mqtool_timer_pending") == 3 and value(found, "rocketmq_timer_enqueue_total") == 3
        rows = await admin.timer_rows()
        assert [(r["broker"], r["timer_pending"]) for r in rows] == [("broker-a", 3)]
        cli = await asyncio.to_thread(run_cli, "timer", "status", "-n", f"127.0.0.1:{ns.port}", "--json", check=True)
        assert json_lines(cli.stdout)[0]["timer_pending"] == 3
        table = await asyncio.to_thread(run_cli, "timer", "status", "-n", f"127.0.0.1:{ns.port}", check=True)
        assert "broker-a" in table.stdout and "3" in table.stdout
        top = await asyncio.to_thread(run_cli, "top", "-n", f"127.0.0.1:{ns.port}", "--once", check=True)
        assert "3 waiting" in top.stdout
        await producer.close()
        await admin.close()
        await broker.stop()
        await ns.stop()
    run(scenario(), timeout=120)


def test_the_timer_stops_and_starts_with_the_master_role(tmp_path):
    """Controller mode's role changes call stop_master_services / start_master_services: the timer
    closes its files and opens them again, and what was waiting is still delivered."""
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        due = int(time.time() * 1000) + 1200
        await producer.send(OutMessage("RoleT", b"waits", deliver_time_ms=due), queue=0)
        await asyncio.sleep(0.3)                             # enqueued
        await broker.stop_master_services()
        assert broker.timer.log is None and broker.timer.status()["timerCongestNum"] == "0"
        await asyncio.sleep(0.2)
        broker.start_master_services()
        got = await wait_messages(consumer, "RoleT", 1, queues=(0,))
        assert [m.body for m, _ in got] == [b"waits"] and got[0][1] >= due
        await producer.close()
        await consumer.close()
        await broker.stop()
        await ns.stop()
    run(scenario())


def test_recovery_relinks_units_the_wheel_lost(tmp_path):
    """A unit in the timerlog whose slot the wheel file does not show (written, the wheel not flushed)
    is found by recovery's rescan from the checkpoint and still delivered."""
    from mqtool_store.timerlog import TimerCheck
    from mqtool_store.timerstore import TimerCheckFile, TimerWheel

    async def scenario():
        ns, broker = await start_pair(tmp_path)
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        due = int(time.time() * 1000) + 3000
        await producer.send(OutMessage("LostT", b"relinked", deliver_time_ms=due), queue=0)
        for _ in range(100):
            if broker.timer.enqueued:
                break
            await asyncio.sleep(0.05)
        await producer.close()
        await broker.stop()
        await ns.stop()
        root = tmp_path / "broker-a"
        wheel = TimerWheel(root / "timerwheel", 100)
        assert wheel.get(round_due(due, 100)).num == 1
        wheel.put(round_due(due, 100) - 1_209_600 * 100, 0, 0, 0)      # the same index, another time: empty
        assert wheel.get(round_due(due, 100)).time_ms == -1
        wheel.close()
        check = TimerCheckFile(root / "config" / "timercheck")
        old = check.read()
        check.write(TimerCheck(old.last_read_time_ms, 0, old.last_timer_queue_offset, old.master_timer_queue_offset))
        check.close()
        ns, broker = await start_pair(tmp_path)
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        got = await wait_messages(consumer, "LostT", 1, queues=(0,))
        assert [m.body for m, _ in got] == [b"relinked"] and got[0][1] >= due
        assert broker.timer.enqueued == 0                    # not enqueued again: found in the timerlog
        await consumer.close()
        await broker.stop()
        await ns.stop()
    run(scenario())


def test_a_message_past_the_roll_window_rolls_and_still_arrives_on_time(tmp_path):
    """timerRollWindowSlot=10 at P=100: anything over 1 s ahead is parked in a slot within the window
    (MAGIC_ROLL), put back into the wheel topic with TIMER_ROLL_TIMES + 1 when that slot falls due,
    and delivered at its own time once it is within the window."""
    async def scenario():
        ns, broker = await start_pair(tmp_path, store={"timerRollWindowSlot": "10"})
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        due = int(time.time() * 1000) + 3500
        await producer.send(OutMessage("RollT", b"rolled", deliver_time_ms=due), queue=0)
        got = await wait_messages(consumer, "RollT", 1, queues=(0,))
        await asyncio.sleep(0.5)
        assert [m.body for m, _ in got] == [b"rolled"]
        assert (await consumer.pull(MessageQueue("RollT", "broker-a", 0), 1, 32)).messages == []     # once
        m, at = got[0]
        assert at >= due and int(m.properties["TIMER_ROLL_TIMES"]) >= 1 and m.properties["TIMER_OUT_MS"] == \
            str(round_due(due, 100))
        await producer.close()
        await consumer.close()
        await broker.stop()
        await ns.stop()
        from mqtool_store.dump import Filters, dump_path
        from mqtool_store.layout import Kind
        flags = [u["flags"] for u in dump_path(tmp_path / "broker-a" / "timerlog", Kind.TIMERLOG, Filters())]
        assert ["MAGIC_DEFAULT", "MAGIC_ROLL"] in flags and flags[-1] == ["MAGIC_DEFAULT"]
    run(scenario())


def test_a_delay_level_wins_over_timer_properties_and_4x_delay_works_as_before(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        sent = time.time() * 1000
        far = int(sent) + 3_600_000
        r = await producer.send(OutMessage("LevelT", b"level 1", delay_level=1,
                                           properties={"TIMER_DELIVER_MS": str(far)}), queue=0)
        assert r.recall_handle == ""
        plain = await producer.send(OutMessage("LevelT", b"level 1 only", delay_level=1), queue=0)
        got = await wait_messages(consumer, "LevelT", 2, queues=(0,))
        by_body = {m.body: (m, at) for m, at in got}
        assert set(by_body) == {b"level 1", b"level 1 only"}
        for body in by_body:
            m, at = by_body[body]
            assert sent + 1000 <= at < far and m.properties["DELAY"] == "1"
            assert not any(k.startswith("TIMER_") for k in m.properties), m.properties
        assert plain.queue_offset == 1 and broker.store.max_offset("SCHEDULE_TOPIC_XXXX", 0) == 2
        assert broker.store.max_offset("rmq_sys_wheel_timer", 0) == 0
        await producer.close()
        await consumer.close()
        await broker.stop()
        await ns.stop()
    run(scenario())


def test_a_promoted_slave_replays_the_wheel_topic_from_its_masters_checkpoint(tmp_path):
    """A slave has the replicated commit log and wheel topic but no timer files, and the master's
    timer checkpoint from its metadata sync. Promoted, it enqueues the wheel topic again but for what
    the checkpoint says was delivered: nothing twice, nothing lost."""
    import shutil

    async def scenario():
        ns, broker = await start_pair(tmp_path)
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        now = int(time.time() * 1000)
        await producer.send(OutMessage("PromoT", b"early", deliver_time_ms=now + 600), queue=0)
        await producer.send(OutMessage("PromoT", b"late", deliver_time_ms=now + 4000), queue=0)
        got = await wait_messages(consumer, "PromoT", 1, queues=(0,))
        assert [m.body for m, _ in got] == [b"early"]
        await asyncio.sleep(0.3)
        client = RemotingClient()
        cp = await client.invoke(broker.config.broker_addr, RemotingCommand.request(RequestCode.GET_TIMER_CHECK_POINT, {}))
        await client.close()
        await producer.close()
        await consumer.close()
        await broker.stop()
        await ns.stop()
        root = tmp_path / "broker-a"                      # what a slave holds: no timer files of its own
        shutil.rmtree(root / "timerlog")
        (root / "timerwheel").unlink()
        (root / "config" / "timercheck").unlink()
        (root / "config" / "timermetrics").unlink(missing_ok=True)
        slave = BrokerController(BrokerConfig(brokerName="broker-a", storePathRootDir=str(root)))
        slave.timer.adopt(cp.body)                          # SlaveSynchronize._timer_check
        slave.store.shutdown()
        ns, broker = await start_pair(tmp_path)
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        got = await wait_messages(consumer, "PromoT", 2, queues=(0,))
        assert sorted(m.body for m, _ in got) == [b"early", b"late"]
        assert [at for m, at in got if m.body == b"late"][0] >= now + 4000
        await asyncio.sleep(0.5)
        assert broker.store.max_offset("PromoT", 0) == 2        # "early" not delivered again, "late" once
        await consumer.close()
        await broker.stop()
        await ns.stop()
    run(scenario())


def test_a_slave_copies_its_masters_timer_checkpoint(tmp_path):
    from mqtool_store.timerstore import TimerCheckFile
    from tests.servers import free_port_pair

    async def scenario():
        ns, master = await start_pair(tmp_path, listen_port=free_port_pair())   # (the fast port: listenPort - 2)
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        await producer.send(OutMessage("SyncT", b"x", delay_time_ms=60_000))
        await asyncio.sleep(0.3)
        config = BrokerConfig(brokerName="broker-a", brokerId=1, brokerRole="SLAVE", listenPort=free_port_pair(),
                              namesrvAddr=f"127.0.0.1:{ns.port}", storePathRootDir=str(tmp_path / "slave"))
        slave = await BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 20)}).start("127.0.0.1")
        try:
            assert slave.slave_sync.master_addr == master.config.broker_addr
            assert await slave.slave_sync.sync_all()
            theirs = master.timer.check.read()
            check = TimerCheckFile(tmp_path / "slave" / "config" / "timercheck")
            mine = check.read()
            check.close()
            assert mine.last_read_time_ms > 0 and abs(mine.last_read_time_ms - theirs.last_read_time_ms) <= 1000
            assert mine.master_timer_queue_offset == 1 and mine.last_timer_log_flush_pos == 0
            assert slave.timer.log is None                  # the timer runs on the master only
        finally:
            await slave.stop()
            await producer.close()
            await master.stop()
            await ns.stop()
    run(scenario())


def test_recovery_relinks_a_slot_whose_last_unit_was_cut(tmp_path):
    """TimerWheel.checkPhyPos: slot S holds unit A in the first timerlog file and unit B at the start of
    the second; B's unit is torn (a crash), so recovery (from the checkpoint: the second file) cuts the
    timerlog there. S still points at the cut unit: recovery rescans from S's first unit, S ends at A
    again, B is enqueued again from the wheel topic, and both arrive at their time."""
    from mqtool_store.timerlog import TimerCheck
    from mqtool_store.timerstore import TimerCheckFile
    unit_file = 52 * 1000

    async def wait_enqueued(broker, n):
        for _ in range(400):
            if broker.timer.enqueued >= n:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{broker.timer.enqueued} timer messages enqueued, not {n}")

    async def scenario():
        ns, broker = await start_pair(tmp_path)
        producer = Producer(f"127.0.0.1:{ns.port}", "PG")
        due = int(time.time() * 1000) + 10_000
        later = due + 3_600_000
        await producer.send(OutMessage("PhyT", b"A", deliver_time_ms=due), queue=0)
        for i in range(999):                                   # the rest of the first timerlog file
            await producer.send(OutMessage("PhyFill", b"f%d" % i, deliver_time_ms=later), queue=0)
        await wait_enqueued(broker, 1000)
        await producer.send(OutMessage("PhyT", b"B", deliver_time_ms=due), queue=0)
        await wait_enqueued(broker, 1001)
        slot = broker.timer.wheel.get(round_due(due, 100))
        b_pos = slot.last_pos
        assert (slot.first_pos, slot.num) == (0, 2) and b_pos >= unit_file        # B in the second file
        await producer.close()
        await broker.stop()
        await ns.stop()
        root = tmp_path / "broker-a"
        second = root / "timerlog" / f"{unit_file:020d}"
        data = bytearray(second.read_bytes())
        data[b_pos - unit_file:b_pos - unit_file + 4] = (999).to_bytes(4, "big")    # B's unit torn
        second.write_bytes(bytes(data))
        check = TimerCheckFile(root / "config" / "timercheck")
        old = check.read()
        check.write(TimerCheck(old.last_read_time_ms, 2 * unit_file, 1000, 1000))
        check.close()
        ns, broker = await start_pair(tmp_path)
        await wait_enqueued(broker, 1)                         # B again, at the cut
        at = b_pos - unit_file
        prev = int.from_bytes(second.read_bytes()[at + 4:at + 12], "big", signed=True)
        assert prev == 0, "B's new unit links back to A (not to the cut unit it replaces)"
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        got = await wait_messages(consumer, "PhyT", 2, queues=(0,), timeout=30)
        assert sorted(m.body for m, _ in got) == [b"A", b"B"]
        assert all(at >= due for _, at in got)
        await consumer.close()
        await broker.stop()
        await ns.stop()
    run(scenario())
