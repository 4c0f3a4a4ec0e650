"""Topic, subscription group and offset managers load Java-written configs and persist them the same way."""
import shutil

from mqtool.broker.offsets import ConsumerOffsetManager
from mqtool.broker.subscriptions import SubscriptionGroupManager
from mqtool.broker.topics import TopicConfigManager, check_topic_name
from mqtool_store.configfiles import loads


def test_topics_from_fixture_and_auto_create(basic_store, tmp_path):
    cfg = tmp_path / "config"
    shutil.copytree(basic_store / "config", cfg)
    m = TopicConfigManager(cfg, "DefaultCluster", "broker-a")
    assert m.get("TopicB").readQueueNums == 8 and m.get("TBW102").perm == 7
    created = m.create_in_send("NewTopic", "TBW102", 4)
    assert (created.readQueueNums, created.writeQueueNums, created.perm) == (4, 4, 6)
    again = TopicConfigManager(cfg, "DefaultCluster", "broker-a")
    assert again.get("NewTopic") == created
    assert (cfg / "topics.json.bak").exists()
    assert loads((cfg / "topics.json").read_text())["topicConfigTable"]["NewTopic"]["perm"] == 6
    assert m.create_in_send("Other", "NoSuchDefault", 4) is None
    assert m.get("RMQ_SYS_TRACE_TOPIC") is None                   # traceTopicEnable is off by default
    traced = TopicConfigManager(tmp_path / "t", "DefaultCluster", "broker-a", trace_topic="MyTrace")
    assert traced.get("MyTrace").readQueueNums == 1               # msgTraceTopicName


def test_topic_names():
    assert check_topic_name("TopicA") is None and check_topic_name("%RETRY%G") is None
    assert "longer than 127" in check_topic_name("t" * 128)
    assert "characters" in check_topic_name("bad topic")


def test_offsets_round_trip_with_bare_int_keys(basic_store, tmp_path):
    cfg = tmp_path / "config"
    shutil.copytree(basic_store / "config", cfg)
    m = ConsumerOffsetManager(cfg)
    assert m.query("GID_FIXTURE", "TopicA", 0) == 376 and m.query("GID_FIXTURE", "TopicA", 9) == -1
    m.commit("G2", "TopicA", 1, 10)
    m.persist()
    text = (cfg / "consumerOffset.json").read_text()
    assert '"TopicA@G2":{1:10' in text
    assert ConsumerOffsetManager(cfg).query("G2", "TopicA", 1) == 10


def test_subscription_groups_auto_create(basic_store, tmp_path):
    cfg = tmp_path / "config"
    shutil.copytree(basic_store / "config", cfg)
    m = SubscriptionGroupManager(cfg)
    assert m.find("GID_FIXTURE").retryMaxTimes == 16
    assert m.find("NEW_GROUP").groupName == "NEW_GROUP"
    assert "NEW_GROUP" in SubscriptionGroupManager(cfg).table
    assert SubscriptionGroupManager(cfg, auto_create=False).find("MISSING") is None
