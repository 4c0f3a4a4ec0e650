"""The supervisor's restart backoff, driven with a made-up clock and a child that exits at once."""
from __future__ import annotations

import subprocess
import sys

from mqtool.cluster.plan import plan_cluster
from mqtool.cluster.supervisor import BACKOFF_FIRST, STABLE_AFTER, Supervisor


def test_a_child_that_keeps_dying_waits_twice_as_long_each_time_up_to_30_s(tmp_path):
    plan = plan_cluster(1, 1, tmp_path)
    plan.brokers[0].args = ["--version"]            # exits at once, with code 0
    events: list[dict] = []
    sup = Supervisor(plan, events.append)
    child = sup.children[1]
    sup.spawn(child, fresh=True)
    now, delays = 1000.0, []
    for _ in range(7):
        child.proc.wait(60)
        sup.tick(now)
        died = events[-1]
        assert (died["event"], died["key"], died["how"]) == ("died", "broker-a-0", "exited with code 0")
        delays.append(died["restart_in"])
        sup.tick(now + died["restart_in"] - 0.01)   # not yet
        assert events[-1] is died
        now += died["restart_in"]
        sup.tick(now)
        assert (events[-1]["event"], events[-1]["pid"]) == ("restarting", child.proc.pid)
    child.proc.wait(60)
    assert delays == [1, 2, 4, 8, 16, 30, 30]
    assert "mqtool" in (tmp_path / "broker-a-0" / "broker.log").read_text()     # its output, kept across restarts


def test_the_backoff_starts_again_once_a_child_has_stayed_up(tmp_path):
    plan = plan_cluster(1, 1, tmp_path)
    sup = Supervisor(plan, lambda e: None)
    child = sup.children[1]
    child.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        child.ready, child.backoff, child.started = True, 16.0, 500.0
        sup.tick(500.0 + STABLE_AFTER - 1)
        assert child.backoff == 16.0
        sup.tick(500.0 + STABLE_AFTER)
        assert child.backoff == BACKOFF_FIRST
    finally:
        child.proc.kill()
        child.proc.wait()
