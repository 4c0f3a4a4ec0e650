"""The official C++ client (rocketmq==0.4.4) against `mqtool namesrv` + `mqtool broker` processes."""
from __future__ import annotations

import time

import pytest

from tests.interop.conftest import HAVE_CPP, finish_cpp, run_cpp, start_cpp

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAVE_CPP, reason="C++ client wheel not loadable here")]


def msgs(prefix: str, n: int, mode: str = "sync", **extra) -> list[dict]:
    return [{"keys": f"{prefix}-{i}", "tags": f"Tag{i % 2}", "body": f"{prefix} body {i} é中",
             "props": {"color": f"c{i % 3}"}, "mode": mode, **extra} for i in range(n)]


def test_send_modes_then_pull_everything(cluster):
    ns = cluster["namesrv"]
    sent = msgs("sync", 8) + msgs("async", 8, "async") + msgs("oneway", 8, "oneway") + \
        [dict(m, arg=7) for m in msgs("orderly", 8, "orderly")]
    results = run_cpp("produce", ns, {"topic": "InteropSend", "messages": sent})
    assert len(results) == 32 and not [r for r in results if "error" in r]
    assert all(r["status"] == 0 for r in results if "status" in r)
    got = run_cpp("pull", ns, {"topic": "InteropSend", "count": 32})
    assert sorted((g["keys"], g["tags"], g["body"], g["prop"]) for g in got) == \
        sorted((m["keys"], m["tags"], m["body"], m["props"]["color"]) for m in sent)
    orderly = [g for g in got if g["keys"].startswith("orderly-")]
    assert len({g["queue_id"] for g in orderly}) == 1           # one sharding arg, one queue
    assert [g["keys"] for g in sorted(orderly, key=lambda g: g["queue_offset"])] == [f"orderly-{i}" for i in range(8)]


def test_push_clustering_shares_and_rebalances(cluster):
    ns = cluster["namesrv"]
    run_cpp("produce", ns, {"topic": "InteropPush", "messages": msgs("warm", 1)})   # create the topic
    a = start_cpp("push", ns, {"group": "GID_SHARE", "topic": "InteropPush", "name": "A", "timeout": 40})
    b = start_cpp("push", ns, {"group": "GID_SHARE", "topic": "InteropPush", "name": "B", "timeout": 12})
    time.sleep(4)   # both consumers register and rebalance (the C++ client does it on a timer)
    run_cpp("produce", ns, {"topic": "InteropPush", "messages": msgs("first", 40)})
    got_b = finish_cpp(b)
    run_cpp("produce", ns, {"topic": "InteropPush", "messages": msgs("second", 20)})
    time.sleep(1)
    a.stdin = None
    got_a = finish_cpp(a)
    bodies_a = {g["body"] for g in got_a if "body" in g}
    bodies_b = {g["body"] for g in got_b if "body" in g}
    first = {m["body"] for m in msgs("first", 40)}
    second = {m["body"] for m in msgs("second", 20)}
    assert first <= bodies_a | bodies_b
    assert bodies_a & first and bodies_b & first, "both consumers should have had queues"
    assert second <= bodies_a, "after B left, A should own every queue"


def test_broadcasting_delivers_to_every_consumer(cluster):
    ns = cluster["namesrv"]
    run_cpp("produce", ns, {"topic": "InteropBcast", "messages": msgs("warm", 1)})
    consumers = [start_cpp("push", ns, {"group": "GID_BCAST", "topic": "InteropBcast", "name": n, "broadcast": True,
                                        "count": 10, "timeout": 25}) for n in ("A", "B")]
    time.sleep(4)
    run_cpp("produce", ns, {"topic": "InteropBcast", "messages": msgs("bc", 10)})
    want = {m["body"] for m in msgs("bc", 10)}
    for c in consumers:
        got = {g["body"] for g in finish_cpp(c) if "body" in g}
        assert want <= got


def test_orderly_consumer_sees_each_shard_in_order(cluster):
    ns = cluster["namesrv"]
    sent = [dict(m, arg=i % 3, body=f"shard{i % 3}-{i}") for i, m in enumerate(msgs("ord", 30, "orderly"))]
    run_cpp("produce", ns, {"topic": "InteropOrder", "messages": sent[:1]})
    c = start_cpp("push", ns, {"group": "GID_ORDER", "topic": "InteropOrder", "orderly": True, "count": 29,
                               "timeout": 30})
    time.sleep(3)
    run_cpp("produce", ns, {"topic": "InteropOrder", "messages": sent[1:]})
    got = [g for g in finish_cpp(c) if "body" in g]
    for shard in range(3):
        seq = [int(g["body"].split("-")[1]) for g in got if g["body"].startswith(f"shard{shard}-")]
        assert seq == sorted(seq) and len(seq) >= 9


def test_failed_callback_gets_message_again_through_retry(cluster):
    ns = cluster["namesrv"]
    run_cpp("produce", ns, {"topic": "InteropRetry", "messages": msgs("warm", 1)})
    c = start_cpp("push", ns, {"group": "GID_RETRY", "topic": "InteropRetry", "fail_first": True, "count": 4,
                               "timeout": 40})
    time.sleep(3)
    run_cpp("produce", ns, {"topic": "InteropRetry", "messages": msgs("retry", 3)})
    got = finish_cpp(c)
    for m in msgs("retry", 3):
        seen = [g for g in got if g.get("body") == m["body"]]
        assert any(g.get("failed") for g in seen), m["body"]
        again = [g for g in seen if not g.get("failed")]
        assert again and again[0]["reconsume_times"] >= 1


def test_delay_level_message_arrives_no_earlier_than_its_delay(cluster):
    ns = cluster["namesrv"]
    run_cpp("produce", ns, {"topic": "InteropDelay", "messages": msgs("warm", 1)})
    c = start_cpp("push", ns, {"group": "GID_DELAY", "topic": "InteropDelay", "count": 2, "timeout": 30,
                               "expression": "Tag1"})
    time.sleep(3)
    sent = run_cpp("produce", ns, {"topic": "InteropDelay", "messages": [
        {"keys": "d-1", "tags": "Tag1", "body": "delayed by level 2", "delay": 2},
        {"keys": "d-2", "tags": "Tag1", "body": "not delayed"}]})
    got = {g["body"]: g for g in finish_cpp(c) if "body" in g}
    assert got["delayed by level 2"]["at"] - sent[0]["at"] >= 2000      # level 2 is 2 s in this broker
    assert got["not delayed"]["at"] - sent[1]["at"] < 2000


def test_round_trips_between_mqtool_and_the_cpp_client(cluster):
    from tests.conftest import json_lines, run_cli
    ns = cluster["namesrv"]
    sent = msgs("cpp2py", 5)
    run_cpp("produce", ns, {"topic": "RoundTrip", "messages": sent})
    got = json_lines(run_cli("consume", "-n", ns, "-t", "RoundTrip", "-e", "--json", check=True).stdout)
    assert sorted((g["body"], " ".join(g["keys"]), g["tags"], g["properties"]["color"]) for g in got) == \
        sorted((m["body"], m["keys"], m["tags"], m["props"]["color"]) for m in sent)
    for i in range(5):
        run_cli("send", "-n", ns, "-t", "RoundTrip2", "--keys", f"py2cpp-{i}", "--tags", "TagP", "-p", "color=blue",
                f"from mqtool {i} é中", check=True)
    pulled = run_cpp("pull", ns, {"topic": "RoundTrip2", "count": 5})
    assert sorted((p["body"], p["keys"], p["tags"], p["prop"]) for p in pulled) == \
        sorted((f"from mqtool {i} é中", f"py2cpp-{i}", "TagP", "blue") for i in range(5))
