"""The live export's driver-side choices that need no cluster: where a one-task batch runs, how
often it is tried, and when availableNow has read everything it set out to."""
from __future__ import annotations

import pytest

from mqtool.spark import livelake


@pytest.mark.parametrize("master,attempts", [
    ("local", 1), ("local[2]", 1), ("local[*]", 1), ("local[2,4]", 4), ("local[*,3]", 3),
    ("spark://h:7077", None), ("yarn", None), ("local-cluster[2,1,1024]", None)])
def test_local_attempts(master, attempts):
    assert livelake.local_attempts(master) == attempts


def test_a_batch_in_the_driver_is_retried_as_a_local_task_would_be(monkeypatch):
    tried = []

    def write_one(fs, staging, job, opts, parts, index, ranges, attempt):
        tried.append(attempt)
        if attempt < 2:
            raise OSError("the broker went away")
        return f"{staging}/attempt-00000-{attempt}", [["part.parquet", 3]]
    monkeypatch.setattr(livelake, "_write_one", write_one)
    assert livelake._in_driver(None, "/s", "j", None, [], [], 4) == [("/s/attempt-00000-2", [["part.parquet", 3]])]
    assert tried == [0, 1, 2]
    tried.clear()
    with pytest.raises(OSError):
        livelake._in_driver(None, "/s", "j", None, [], [], 2)
    assert tried == [0, 1]


def test_available_now_is_done_once_every_queue_reached_its_target():
    target = {("T", "b", 0): 5, ("T", "b", 1): 7}
    assert livelake._reached(target, {"T": {"b:0": 5, "b:1": 7}})
    assert livelake._reached(target, {"T": {"b:0": 5, "b:1": 7}, "U": {"b:0": 1}})
    assert not livelake._reached(target, {"T": {"b:0": 5, "b:1": 6}})       # a read limit stopped short
    assert not livelake._reached(None, {"T": {"b:0": 5}})                   # no target: a processing-time trigger
