"""A million timer messages waiting, due over a day (issue 45's scale test; MQTOOL_TIMER_SCALE=N to
change the count): storing one costs the same whatever the number waiting, the broker's anonymous
memory does not grow with them (the wheel and the log are mapped files), and the ones that fall due
while the test watches are delivered never early and at most one timerPrecisionMs late."""
from __future__ import annotations

import asyncio
import os
import time

import pytest

from mqtool.client.base import MessageQueue
from mqtool.client.consumer import Consumer
from mqtool_store.codes import TIMER_TOPIC
from mqtool_store.messagestore import Message
from tests.broker.test_timer import start_pair

pytestmark = pytest.mark.slow
COUNT = int(os.environ.get("MQTOOL_TIMER_SCALE", "1000000"))
DAY_MS = 86_400_000
WATCH_S = 12
SLACK_MS = 400           # a round's work on a busy shared machine, beyond the precision itself


def rss_anon_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return 0.0


def test_a_million_waiting_timer_messages(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path, store={"timerPrecisionMs": "1000",
                                                       "mappedFileSizeCommitLog": str(1 << 30),
                                                       "mappedFileSizeConsumeQueue": str(300_000 * 20),
                                                       "mappedFileSizeTimerLog": "104857600"})
        store, timer = broker.store, broker.timer
        broker.topics.create_system("ScaleT", 1)
        await broker.register_all()
        t0 = int(time.time() * 1000) + 5_000
        due = [t0 + i * DAY_MS // COUNT for i in range(COUNT)]
        marks: dict[int, tuple[float, float]] = {}        # enqueued count -> (monotonic time, RssAnon MiB)
        chunk = 1000
        for k in range(0, COUNT, chunk):          # straight into the wheel topic, as the put hook leaves them
            msgs = []
            for i in range(k, min(COUNT, k + chunk)):
                slot = due[i] - 1000 if due[i] % 1000 == 0 else due[i] // 1000 * 1000
                props = {"TIMER_DELIVER_MS": str(due[i]), "TIMER_OUT_MS": str(slot), "REAL_TOPIC": "ScaleT",
                         "REAL_QID": "0", "UNIQ_KEY": f"{i:032X}", "WAIT": "false"}
                msgs.append(Message(TIMER_TOPIC, 0, b"s", props, "\x02".join(f"{a}\x01{b}" for a, b in props.items())
                                    + "\x02", born_timestamp=1))
            assert store.put_batch(msgs).ok
            broker.drain_soon()
            await asyncio.sleep(0)
            for mark in (COUNT // 10, COUNT * 9 // 10):
                if timer.enqueued >= mark and mark not in marks:
                    marks[mark] = (time.monotonic(), rss_anon_mib())
        while timer.enqueued < COUNT:
            for mark in (COUNT // 10, COUNT * 9 // 10):
                if timer.enqueued >= mark and mark not in marks:
                    marks[mark] = (time.monotonic(), rss_anon_mib())
            await asyncio.sleep(0.05)
        done = (time.monotonic(), rss_anon_mib())
        all_in_ms = time.time() * 1000
        (t10, rss10), (t90, rss90) = marks[COUNT // 10], marks[COUNT * 9 // 10]
        first_rate = (COUNT * 8 // 10) / (t90 - t10)
        last_rate = (COUNT - COUNT * 9 // 10) / max(done[0] - t90, 1e-3)
        status = timer.status()
        assert int(status["timerCongestNum"]) + timer.dequeued == COUNT
        print(f"{COUNT} waiting; enqueue {first_rate:,.0f}/s (10-90%), {last_rate:,.0f}/s (last 10%); "
              f"RssAnon {rss10:.0f} -> {rss90:.0f} -> {done[1]:.0f} MiB")
        assert last_rate > first_rate / 3, "enqueue slows down with the number waiting"
        assert done[1] - rss10 < 64, f"anonymous memory grew {done[1] - rss10:.0f} MiB with the waiting messages"
        # Watch WATCH_S seconds of deliveries.
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        watch_end = max(time.time() * 1000, t0) + WATCH_S * 1000
        got, offset = [], 0
        while time.time() * 1000 < watch_end + 1000 + SLACK_MS:
            res = await consumer.pull(MessageQueue("ScaleT", "broker-a", 0), offset, 32)
            got += res.messages
            offset = res.next_offset
            await asyncio.sleep(0.05)
        await consumer.close()
        assert got, "nothing delivered"
        late = []
        for m in got:
            i = int(m.properties["UNIQ_KEY"], 16)
            dequeued = int(m.properties["TIMER_DEQUEUE_MS"])
            assert dequeued >= due[i], f"message {i} delivered {due[i] - dequeued} ms early"
            if due[i] > all_in_ms:         # (one due while the wheel was still filling may wait for its enqueue)
                late.append(dequeued - due[i])
        assert late, "no message fell due while the test watched"
        seen = {int(m.properties["UNIQ_KEY"], 16) for m in got}
        expected = {i for i in range(COUNT) if due[i] <= watch_end}
        assert expected <= seen, f"{len(expected - seen)} due messages not delivered"
        assert max(late) <= 1000 + SLACK_MS, f"delivered up to {max(late)} ms late"
        await broker.stop()
        await ns.stop()
    asyncio.run(asyncio.wait_for(scenario(), 1800))
