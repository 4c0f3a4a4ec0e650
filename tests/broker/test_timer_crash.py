"""kill -9 of a broker while it enqueues and delivers timer messages: after a restart on the same
store every acknowledged timer message arrives, none early, and a message comes twice only where
Java's recovery would send it twice (delivered in the last checkpoint interval before the kill)."""
from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from mqtool.client.base import MessageQueue
from mqtool.client.consumer import Consumer
from mqtool.client.producer import OutMessage, Producer
from tests.servers import start_broker, start_namesrv

pytestmark = pytest.mark.slow
TOPIC = "CrashTimer"
CONF = "timerPrecisionMs=100\ntimerFlushIntervalMs=1000\nmappedFileSizeTimerLog=520000\n"


async def send_all(ns: str, n: int, spread_ms: int) -> dict[str, int]:
    """n timer messages due over the next spread_ms, sent 64 at a time: {UNIQ_KEY: due ms}."""
    producer = Producer(ns, "PG_CRASH")
    due: dict[str, int] = {}
    try:
        start = int(time.time() * 1000)

        async def one(i: int):
            at = start + 500 + i * spread_ms // n
            r = await producer.send(OutMessage(TOPIC, b"m%d" % i, deliver_time_ms=at), queue=i % 2)
            due[r.msg_id] = at
        for k in range(0, n, 64):
            await asyncio.gather(*(one(i) for i in range(k, min(n, k + 64))))
    finally:
        await producer.close()
    return due


async def collect(ns: str, want: set[str], timeout: float) -> list[tuple[str, int, dict]]:
    consumer = Consumer(ns, "CG_CRASH")
    got, offsets = [], [0, 0]
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not want <= {u for u, _, _ in got}:
            for q in (0, 1):
                try:
                    res = await consumer.pull(MessageQueue(TOPIC, "broker-a", q), offsets[q], 32)
                except Exception:  # noqa: BLE001 - the broker is restarting
                    await asyncio.sleep(0.2)
                    continue
                now = int(time.time() * 1000)
                got += [(m.properties["UNIQ_KEY"], now, m.properties) for m in res.messages]
                offsets[q] = res.next_offset
            await asyncio.sleep(0.02)
    finally:
        await consumer.close()
    return got


@pytest.mark.parametrize("first_conf", [CONF, CONF + "timerStopEnqueue=true\n"], ids=["delivering", "not-enqueued"])
def test_kill_9_during_enqueue_and_delivery_loses_nothing(tmp_path, first_conf):
    """"delivering": killed while slots are delivered; "not-enqueued": killed with every timer message
    still only in rmq_sys_wheel_timer (the first run's enqueue is stopped), some due during the restart."""
    ns, ns_addr = start_namesrv(tmp_path)
    broker, _ = start_broker(tmp_path, ns_addr, extra=first_conf)
    try:
        due = asyncio.run(send_all(ns_addr, 3000, 4000))
        time.sleep(max(0.0, (min(due.values()) + 1500) / 1000 - time.time()))   # deliveries under way
        killed_at = int(time.time() * 1000)
        os.kill(broker.proc.pid, signal.SIGKILL)
        broker.proc.wait(10)
        broker.proc.stderr.close()
        broker, _ = start_broker(tmp_path, ns_addr, extra=CONF)
        got = asyncio.run(collect(ns_addr, set(due), 60))
    finally:
        broker.stop()
        ns.stop()
    seen: dict[str, list[dict]] = {}
    for uniq, at, props in got:
        assert at >= due[uniq], f"{uniq} arrived {due[uniq] - at} ms early"
        assert int(props["TIMER_DEQUEUE_MS"]) >= due[uniq]
        seen.setdefault(uniq, []).append(props)
    assert set(seen) == set(due), f"{len(set(due) - set(seen))} timer messages lost"
    twice = {u: p for u, p in seen.items() if len(p) > 1}
    for uniq, copies in twice.items():        # Java's recovery: slots after the checkpointed read time again
        first = min(int(p["TIMER_DEQUEUE_MS"]) for p in copies)
        assert first >= killed_at - 2500, (uniq, killed_at - first)
    delivered_before = sum(1 for p in seen.values() if min(int(x["TIMER_DEQUEUE_MS"]) for x in p) < killed_at)
    if first_conf == CONF:
        assert 0 < delivered_before < len(due)
    else:
        assert delivered_before == 0 and not twice
