"""`mqtool top`'s drawing without a cluster: the snapshot (--once) has no line of keys to press."""
from __future__ import annotations

import io

from rich.console import Console

from mqtool.cli.top import render

VIEW = {"brokers": [{"cluster": "DefaultCluster", "broker": "broker-a", "broker_id": 0, "address": "127.0.0.1:10911",
                     "reachable": True, "put_tps": 1.0, "get_tps": 0.0, "disk_ratio": 0.5, "put_today": 3,
                     "get_today": 0}],
        "topics": [{"topic": "Orders", "max_offset": 3, "put_tps": 1.0}],
        "groups": [{"group": "billing", "topic": "Orders", "consume_tps": 0.0, "lag": 3, "behind_ms": 1000,
                    "trend": [1, 3]}]}
STATE = {"sort": "rate", "filter": "", "typing": None}


def drawn(**kw) -> str:
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(render(VIEW, STATE, 15, **kw))
    return console.export_text()


def test_the_live_view_names_its_keys():
    assert "q quit · s sort (rate)" in drawn()


def test_a_snapshot_has_no_keys_to_press():
    text = drawn(keys=False)
    assert "broker-a" in text and "billing" in text
    assert "q quit" not in text and "sort (rate)" not in text
