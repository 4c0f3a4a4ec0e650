"""How `mqtool ha status` judges a slave from the figures brokers give (no servers needed)."""
from __future__ import annotations

from mqtool.client.ha import _slave_row

LIMITS = {"fallbehind": 256 << 20, "housekeeping": 20_000}
MASTER = {"addr": "m:10911", "reachable": True, "commitLogMaxOffset": 10_000}
NOW = 1_000_000


def view(max_offset, ha=None, reachable=True):
    return {"addr": "s:10911", "reachable": reachable, "commitLogMaxOffset": max_offset, "ha": ha}


def client(active=True, last_read=NOW):
    return {"haClientRuntimeInfo": {"isActivated": active, "masterAddr": "m:10912", "transferredByteInSecond": 5,
                                    "lastReadTimestamp": last_read, "dispatchBehindBytes": 0}}


def test_a_4x_slave_is_judged_by_its_offset_alone():
    row = _slave_row(1, view(9_000), MASTER, LIMITS, NOW)
    assert row["lagBytes"] == 1000 and row["inSync"] and "connected" not in row


def test_the_256_mib_rule():
    master = dict(MASTER, commitLogMaxOffset=(256 << 20) + 5)
    row = _slave_row(1, view(5, client()), master, LIMITS, NOW)
    assert not row["inSync"] and "haSlaveFallbehindMax" in row["why"]


def test_a_disconnected_or_silent_slave_is_not_in_sync():
    row = _slave_row(1, view(9_000, client(active=False)), MASTER, LIMITS, NOW)
    assert not row["inSync"] and "not connected" in row["why"]
    row = _slave_row(1, view(9_000, client(last_read=NOW - 60_000)), MASTER, LIMITS, NOW)
    assert not row["inSync"] and "nothing from the master for 60 s" in row["why"]
    row = _slave_row(1, view(10_000, client(last_read=NOW - 60_000)), MASTER, LIMITS, NOW)
    assert row["inSync"]                       # caught up: an idle master sends only heartbeats


def test_unreachable_sides():
    assert "unreachable" in _slave_row(1, view(0, reachable=False) | {"error": "refused"}, MASTER, LIMITS, NOW)["why"]
    row = _slave_row(1, view(9_000, client()), {"addr": None, "reachable": False}, LIMITS, NOW)
    assert not row["inSync"] and row["why"] == "master unreachable"
