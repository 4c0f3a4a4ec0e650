"""Topic, subscription group and offset managers load Java-written configs and persist them the same way."""
import shutil

from mqtool.broker.offsets import ConsumerOffsetManager
from mqtool.broker.subscriptions import SubscriptionGroupConfig, SubscriptionGroupManager
from mqtool.broker.topics import TopicConfigManager, check_topic_name
from mqtool.broker.topics import TopicConfig
from mqtool_store.configfiles import dumps_fastjson, loads


def test_topics_from_fixture_and_auto_create(basic_store, tmp_path):
    cfg = tmp_path / "config"
    shutil.copytree(basic_store / "config", cfg)
    m = TopicConfigManager(cfg, "DefaultCluster", "broker-a")
    assert m.get("TopicB").readQueueNums == 8 and m.get("TBW102").perm == 7
    created = m.create_in_send("NewTopic", "TBW102", 4)
    assert (created.readQueueNums, created.writeQueueNums, created.perm) == (4, 4, 6)
    again = TopicConfigManager(cfg, "DefaultCluster", "broker-a")     # from the journal
    assert again.get("NewTopic") == created
    m.persist()
    assert (cfg / "topics.json.bak").exists() and not (cfg / "topics.json.journal").exists()
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


def _file_dict(m, key):
    return {"dataVersion": m.data_version.to_json(), key: {k: v.to_json() for k, v in m.table.items()}}


def test_a_change_is_journaled_and_the_file_rewritten_later_as_dumps_fastjson_writes_it(basic_store, tmp_path):
    cfg = tmp_path / "config"
    shutil.copytree(basic_store / "config", cfg)
    m = TopicConfigManager(cfg, "DefaultCluster", "broker-a")
    m.persist()
    before = (cfg / "topics.json").read_bytes()
    m.update(TopicConfig("T1", 4, 4))
    m.update(TopicConfig("T2", 2, 2))
    assert m.delete("TopicB") and not m.delete("NoSuch")
    assert (cfg / "topics.json").read_bytes() == before             # not one rewrite per change
    assert len((cfg / "topics.json.journal").read_text().splitlines()) == 3
    again = TopicConfigManager(cfg, "DefaultCluster", "broker-a")
    assert again.get("T1").readQueueNums == 4 and again.get("TopicB") is None
    assert again.data_version.to_json() == m.data_version.to_json()
    job = m.begin_compact()
    assert m.begin_compact() is None                                 # one rewrite at a time
    m.update(TopicConfig("T3", 1, 1))                                # while the rewrite runs
    m.file.finish_compact(job)
    assert not (cfg / "topics.json.journal.old").exists()
    assert len((cfg / "topics.json.journal").read_text().splitlines()) == 1
    m.file.finish_compact(m.begin_compact())
    assert (cfg / "topics.json").read_text() == dumps_fastjson(_file_dict(m, "topicConfigTable"))
    assert not (cfg / "topics.json.journal").exists() or not (cfg / "topics.json.journal").read_text()


def test_a_rewrite_cut_short_loses_nothing_and_a_torn_last_line_is_skipped(tmp_path):
    m = TopicConfigManager(tmp_path, "C", "b")
    m.update(TopicConfig("A", 1, 1))
    m.begin_compact()                              # journal moved aside, the process dies before writing
    m.update(TopicConfig("B", 2, 2))
    m.delete("A")
    with open(tmp_path / "topics.json.journal", "ab") as f:
        f.write(b'{"dataVersion":{"counter":99,"timest')           # a write that never completed
    again = TopicConfigManager(tmp_path, "C", "b")
    assert again.get("A") is None and again.get("B").readQueueNums == 2
    assert again.data_version.counter == m.data_version.counter


def test_groups_journal_and_rewrite(basic_store, tmp_path):
    cfg = tmp_path / "config"
    shutil.copytree(basic_store / "config", cfg)
    m = SubscriptionGroupManager(cfg)
    m.find("AUTO")
    m.update(SubscriptionGroupConfig("G1", retryMaxTimes=3))
    assert m.delete("GID_FIXTURE")
    again = SubscriptionGroupManager(cfg)
    assert again.table["G1"].retryMaxTimes == 3 and "AUTO" in again.table and "GID_FIXTURE" not in again.table
    m.file.finish_compact(m.begin_compact())
    assert (cfg / "subscriptionGroup.json").read_text() == dumps_fastjson(_file_dict(m, "subscriptionGroupTable"))


def test_offsets_text_is_dumps_fastjson_and_the_indexes_follow_the_table(tmp_path):
    from mqtool.broker.offsets import offsets_text
    m = ConsumerOffsetManager(tmp_path)
    assert offsets_text({}) == dumps_fastjson({"offsetTable": {}})
    for g in ("G1", "G2", "G@x"):
        for t in ("TA", "TB"):
            for q in range(3):
                m.commit(g, t, q, q * 10)
    m.replace("TC@G1", {})
    assert offsets_text(m.table) == dumps_fastjson({"offsetTable": m.table})
    assert m.topics_of_group("G1") == {"TA", "TB", "TC"} and m.groups_of_topic("TA") == {"G1", "G2", "G@x"}
    m.remove_group("G1")
    m.remove_topic("TB")
    assert set(m.table) == {"TA@G2", "TA@G@x"} and m.groups_of_topic("TB") == set() and m.topics_of_group("G1") == set()
    old = m.snapshot()
    m.commit("G2", "TA", 0, 99)
    m.persist()
    m.write(old)                       # a slower writer of an older copy does not undo the newer file
    assert ConsumerOffsetManager(tmp_path).query("G2", "TA", 0) == 99


def test_a_slaves_copy_is_written_by_the_next_rewrite_not_on_the_spot(tmp_path):
    from mqtool.broker.topics import DataVersion
    m = TopicConfigManager(tmp_path, "C", "b")
    m.persist()
    m.replace_all({"Copied": TopicConfig("Copied", 3, 3)}, DataVersion(7, 1))
    assert "Copied" not in (tmp_path / "topics.json").read_text()
    m.file.finish_compact(m.begin_compact())
    assert m.begin_compact() is None
    again = TopicConfigManager(tmp_path, "C", "b")
    assert again.get("Copied").readQueueNums == 3 and again.data_version.counter == 7


def test_group_to_json_is_asdict_in_its_order():
    from dataclasses import asdict
    cfg = SubscriptionGroupConfig("G", 1, False, True, False, True, 3, 2, 0)
    as_4_9_8 = {k: v for k, v in asdict(cfg).items() if k != "consumeMessageOrderly"}
    assert list(cfg.to_json().items()) == list(as_4_9_8.items()), "a 4.9.8 group's file is unchanged"
    orderly = SubscriptionGroupConfig("G", consumeMessageOrderly=True)
    assert list(orderly.to_json().items()) == list(asdict(orderly).items()), "5.x's key only when set"


def test_entry_text_is_dumps_fastjson_at_indent_2():
    from mqtool.broker.configjournal import _entry_text
    for value in ({}, TopicConfig("T\\é\"x", 3, 4).to_json(), SubscriptionGroupConfig("G").to_json(),
                  {"a": 1.5, "b": None, "c": [1, 2], "d": {"x": 1}, "e": -3}):
        assert _entry_text(value) == dumps_fastjson(value, 2)
