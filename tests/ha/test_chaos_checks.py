"""The chaos harness's own checks (benchmarks/chaoscheck.py, chaos.py), on made-up inputs: no root,
no namespaces, no servers. The harness itself runs in tests/ha/test_chaos.py."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent.parent / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import chaos
    import chaoscheck
    return chaos, chaoscheck


def test_missing_and_duplicate_keys_are_counted(bench):
    _, check = bench
    got = check.compare({"c1": {}, "c2": {}, "c3": {}, "c10": {}}, Counter({"c1": 1, "c3": 2, "c9": 1, "c10": 1}))
    assert (got["missing"], got["missing_keys"], got["duplicates"], got["duplicate_keys"]) == (1, ["c2"], 1, ["c3"])


def test_commit_logs_are_compared_up_to_the_shorter_one(bench, tmp_path):
    _, check = bench
    for name, data in (("a", b"abcdef"), ("b", b"abcdefgh"), ("c", b"abXdef")):
        (tmp_path / name / "commitlog").mkdir(parents=True)
        (tmp_path / name / "commitlog" / "00000000000000000000").write_bytes(data + b"\0" * 10)
    got = check.compare_commit_logs({n: tmp_path / n for n in "abc"})
    assert got["lengths"] == {"a": 6, "b": 8, "c": 6}
    assert got["differ"] == [{"replicas": ["a", "c"], "first_byte": 2, "common_length": 6}]


def test_a_traceback_in_a_log_is_found_with_its_exception(bench, tmp_path):
    _, check = bench
    log = tmp_path / "broker.log"
    log.write_text("2026 ERROR task failed\nTraceback (most recent call last):\n  File \"x.py\", line 1\n"
                   "ValueError: bad offset\n2026 INFO next\n")
    (tmp_path / "clean.log").write_text("2026 INFO fine\n")
    got = check.tracebacks({"b0": log, "b1": tmp_path / "clean.log"})
    assert list(got) == ["b0"] and "ValueError: bad offset" in got["b0"][0]


def test_every_kind_of_problem_fails_the_run(bench):
    chaos, _ = bench
    clean = {"replicas_read": {"b0": {"missing": 0, "duplicates": 0}},
             "verify": {"b0": {"clean": True}}, "commit_logs": {"differ": []}, "tracebacks": {}}
    assert chaos.failures(clean) == []
    bad = {"replicas_read": {"b0": {"missing": 2, "missing_keys": ["c5", "c6"], "duplicates": 1,
                                    "duplicate_keys": ["c7"]}, "b1": {"error": "elect b1: refused"}},
           "verify": {"b0": {"clean": False, "exit": 1, "problems": {"consumequeue": 1}, "first_problems": ["x"]}},
           "commit_logs": {"differ": [{"replicas": ["b0", "b1"], "first_byte": 9, "common_length": 20}]},
           "tracebacks": {"ns": ["| KeyError: 1"]}, "error": "RuntimeError: b0 did not start"}
    got = chaos.failures(bad)
    assert len(got) == 7, got


def test_replicas_with_the_same_commit_log_must_hold_as_many_units_and_index_entries(bench):
    """The 3-controller run of 2026-11-29 ended with one replica holding 2 index entries more than
    the others (a record indexed twice): now a failure. A replica with a shorter log is not compared."""
    chaos, _ = bench
    run = {"replicas_read": {}, "tracebacks": {},
           "commit_logs": {"differ": [], "lengths": {"b0": 3578224, "b1": 3578224, "b2": 3578224, "b3": 100}},
           "verify": {b: {"clean": True, "queue_units": 15018, "index_entries": n}
                      for b, n in (("b0", 30046), ("b1", 30046), ("b2", 30048), ("b3", 7))}}
    assert chaos.failures(run) == ["index entries differ between replicas with the same commit log (3578224 bytes): "
                                   "{'b0': 30046, 'b1': 30046, 'b2': 30048}"]
    run["verify"]["b2"]["index_entries"] = 30046
    assert chaos.failures(run) == []


def test_consume_queue_holes_are_told_apart_by_where_they_sit(bench, tmp_path):
    """Holes the runs found: the last record before an epoch start, and the first record above the
    confirmOffset a restarted broker rebuilt its queues to (its log line names it)."""
    _, check = bench
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    records = b"".join(size.to_bytes(4, "big") + b"r" * (size - 4) for size in (100, 100, 100, 100))
    (store / "commitlog" / "00000000000000000000").write_bytes(records)
    (store / "epochFileCheckpoint").write_text("2\n123\n1-0\n2-200")
    log = tmp_path / "broker.log"
    log.write_text("INFO store recovery: controller mode: consume queues and index only up to confirmOffset 300 "
                   "(checkpoint 250, queues end at 300, commit log at 400)\n")
    got = check.classify_holes(store, [100, 300, 0], log)
    assert got == {"records": 3, "last_before_an_epoch_start": 1, "at_a_restarts_confirm_offset": 1,
                   "elsewhere": [0]}
