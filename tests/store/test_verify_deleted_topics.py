"""`store verify` after a topic delete: the broker removes the topic's consume queues and its
topics.json entry but never its records (4.9.8's deleteTopic), so those records having no unit is
what a delete leaves, not damage. A topic still configured whose queues are gone stays a problem."""
from __future__ import annotations

import json
import shutil

from mqtool_store.messagestore import Message, MessageStore
from mqtool_store.storeconfig import MessageStoreConfig
from mqtool_store.verify import verify_store

SMALL = dict(mappedFileSizeCommitLog=48 * 1024, mappedFileSizeConsumeQueue=400, maxHashSlotNum=50, maxIndexNum=200)


def store_with(root, configured: list[str], journal: list[dict] = ()) -> None:
    with MessageStore(MessageStoreConfig(storePathRootDir=str(root), **SMALL)) as s:
        for i in range(6):
            s.put(Message("Kept" if i % 2 else "Gone", 0, b"x%d" % i, {"KEYS": f"k{i}"}))
    shutil.rmtree(root / "consumequeue" / "Gone")                        # what a topic delete removes
    (root / "config").mkdir(exist_ok=True)
    table = {t: {"topicName": t, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6} for t in configured}
    (root / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": table}))
    if journal:
        (root / "config" / "topics.json.journal").write_text("".join(json.dumps(e) + "\n" for e in journal))


def test_records_of_a_deleted_topic_are_not_problems(tmp_path):
    store_with(tmp_path, ["Kept"])
    report = verify_store(tmp_path)
    assert report.ok, report.problems
    assert report.deleted_topics == ["Gone"] and report.records == 6 and report.queue_units == 3


def test_a_delete_still_in_the_journal_counts(tmp_path):
    # the broker was still running (or was killed): topics.json has the topic, the journal its delete
    store_with(tmp_path, ["Kept", "Gone"], [{"dataVersion": {"counter": 9}, "name": "Gone", "value": None}])
    report = verify_store(tmp_path)
    assert report.ok and report.deleted_topics == ["Gone"]


def test_a_configured_topic_without_queues_is_a_problem(tmp_path):
    store_with(tmp_path, ["Kept", "Gone"])
    report = verify_store(tmp_path)
    assert report.deleted_topics == []
    assert [(p.path, p.message.split(") ")[-1]) for p in report.problems] == [
        (str(tmp_path / "consumequeue" / "Gone" / "0"), "has no consume queue unit")] * 3


def test_without_topics_json_nothing_is_known_deleted(tmp_path):
    store_with(tmp_path, [])
    (tmp_path / "config" / "topics.json").unlink()
    report = verify_store(tmp_path)
    assert report.deleted_topics == [] and len(report.problems) == 3

