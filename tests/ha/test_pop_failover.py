"""A POP consumer across a controller-mode failover (issue 45): the revive topic's checkpoints and acks
are replicated like every record, so after the master is killed (-9) the promoted replica redelivers
what was popped and not acked, never what was acked, and its POP offsets are not behind what the old
master handed out."""
from __future__ import annotations

import asyncio
import time

import pytest

from mqtool.client.popconsumer import INIT_MIN, PopConsumer
from tests.conftest import run_cli
from tests.ha.controller_group import ControllerGroup
from tests.ha.test_failover import send_some, start_pair
from tests.servers import wait_until

pytestmark = pytest.mark.slow
TOPIC = "PopFO"


@pytest.fixture
def group(tmp_path):
    g = ControllerGroup(tmp_path)
    yield g
    g.close()


def collect(ns: str, seconds: float, invisible_ms: int, ack: bool, until: int = 0) -> list:
    """Pops for `seconds`, or until `until` messages came (riding through a failover: errors are
    retried), acking if asked."""
    async def run():
        c = PopConsumer(ns, "PopFOG", TOPIC, invisible_ms=invisible_ms, init_mode=INIT_MIN, poll_ms=1000, timeout_s=3)
        out, end = [], time.monotonic() + seconds
        try:
            while time.monotonic() < end and not (until and len(out) >= until):
                try:
                    got = await c.pop()
                    if got and ack:
                        await c.ack_all(got)
                except Exception:          # noqa: BLE001 - no master routed yet: try again
                    await asyncio.sleep(0.5)
                    await c.route(TOPIC, refresh=True)
                    continue
                out += got
        finally:
            await c.close()
        return out
    return asyncio.run(run())


def test_pop_across_a_kill_9_failover(group):
    start_pair(group)
    run_cli("topic", "create", "-n", group.ns, "-c", "FOCluster", "-t", TOPIC, "-r", "2", "-w", "2", check=True)
    keys = send_some(group.ns, "p", 30, topic=TOPIC)
    wait_until("the replica in sync", lambda: group.in_sync({1, 2}))
    popped = collect(group.ns, 10, 2000, ack=False, until=30)     # 30 handed out, hidden 2 s, not acked
    assert sorted(k for m in popped for k in m.record.keys) == sorted(keys)
    acked = collect(group.ns, 10, 60_000, ack=True, until=30)     # back through the retry topic: acked
    assert sorted(k for m in acked for k in m.record.keys) == sorted(keys)
    # killed at once: the replica's copy of consumerOffset.json (every 10 s) is older than the POP
    # offsets and the revive offsets; the records in the revive topic are replicated
    master = group.master()
    other = "b" if master == "a" else "a"
    group.kill(master)
    group.wait_master(other, timeout=15)
    later = send_some(group.ns, "q", 5, topic=TOPIC)
    after = collect(group.ns, 8, 60_000, ack=True)
    assert sorted(k for m in after for k in m.record.keys) == sorted(later), "acked or old messages came back"
