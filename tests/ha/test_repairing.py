"""Issue 43, finding 3: after a failover the surviving slave follows the new master at once, as 5.3.0
does when the role change arrives, not at its next periodic name server registration (30 s later),
and the SyncStateSet is full again soon after it has caught up. Three replicas as real processes."""
from __future__ import annotations

import time

import pytest

from tests.ha.controller_group import ControllerGroup
from tests.ha.test_failover import read_back, send_some
from tests.servers import wait_until

pytestmark = pytest.mark.slow
REGISTER_PERIOD_S = 30          # registerNameServerPeriod's default: what a slave waited for before


@pytest.fixture
def group(tmp_path):
    g = ControllerGroup(tmp_path)
    yield g
    g.close()


def test_the_surviving_slave_follows_the_new_master_at_once(group):
    group.start("a")
    group.wait_master("a")
    group.start("b")
    group.start("c")
    wait_until("three controller ids", lambda: all((group.store(w) / "brokerIdentity").exists() for w in "abc"))
    ids = {group.controller_id(who) for who in "abc"}
    wait_until("all three replicas in the SyncStateSet", lambda: group.in_sync(ids), timeout=40)
    acked = send_some(group.ns, "before", 20)
    group.kill("a")
    wait_until("a new master in the route", lambda: group.master() in ("b", "c"), timeout=30)
    routed = time.monotonic()
    new = group.master()
    other = "c" if new == "b" else "b"
    survivors = ids - {group.controller_id("a")}
    # haMaxTimeSlaveNotCatchup is 15 s; the slave has nothing to catch up but the new epoch's start
    wait_until(f"{other} back in the SyncStateSet of {new}", lambda: group.in_sync(survivors),
               timeout=REGISTER_PERIOD_S - 12)
    took = time.monotonic() - routed
    assert took < REGISTER_PERIOD_S / 2, f"{other} rejoined after {took:.1f} s"
    follow = [line for line in group.logs[other] if "HA master address is now" in line]
    assert follow and group.addr(new).rsplit(":", 1)[0] in follow[-1]
    acked += send_some(group.ns, "after", 20)
    assert read_back(group.ns) >= set(acked)
