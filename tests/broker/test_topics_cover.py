"""A promoted replica lists every queue it holds messages in (TopicConfigManager.cover_held_queues)."""
from __future__ import annotations

from mqtool.broker.topics import PERM_RW, TopicConfig, TopicConfigManager


def test_held_queues_widen_or_create_topic_configs_and_keep_the_rest(tmp_path):
    topics = TopicConfigManager(tmp_path / "config", "C", "broker-a")
    topics.update(TopicConfig("Narrow", 4, 4, PERM_RW, order=True))
    topics.update(TopicConfig("Wide", 8, 8))
    version = topics.data_version.counter
    changed = topics.cover_held_queues({"Narrow": 8, "Wide": 3, "Unknown": 2})
    assert changed == [("Narrow", 4, 8), ("Unknown", 0, 2)]
    narrow = topics.get("Narrow")
    assert (narrow.readQueueNums, narrow.writeQueueNums, narrow.order) == (8, 8, True)   # the rest is kept
    assert (topics.get("Wide").readQueueNums, topics.get("Unknown").writeQueueNums) == (8, 2)
    assert topics.data_version.counter == version + 2          # registered with the next registration
    assert topics.cover_held_queues({"Narrow": 8}) == []
