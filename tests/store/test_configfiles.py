import json

import pytest

from mqtool_store.configfiles import dumps_fastjson, int_keys, load_config, loads, quote_bare_keys, write_config
from mqtool_store.errors import FormatError


def test_unquoted_integer_keys():
    assert loads('{"offsetTable":{"T@G":{0:250,1:249\n\t\t}}}') == {"offsetTable": {"T@G": {"0": 250, "1": 249}}}
    assert quote_bare_keys('{"a:b":"{0:1}", 7 : 1}') == '{"a:b":"{0:1}", "7" : 1}'


def test_fixture_configs_dump_byte_identically(basic_store):
    for name in ("consumerOffset.json", "delayOffset.json"):
        text = (basic_store / "config" / name).read_text()
        data = loads(text)
        table = data["offsetTable"]
        if name == "delayOffset.json":
            rebuilt = {"offsetTable": int_keys(table)}
        else:
            rebuilt = {"offsetTable": {k: int_keys(v) for k, v in table.items()}}
        assert dumps_fastjson(rebuilt) == text
    topics = (basic_store / "config" / "topics.json").read_text()
    assert dumps_fastjson(loads(topics)) == topics


def test_corrupt_main_falls_back_to_bak(tmp_path):
    main = tmp_path / "topics.json"
    write_config(main, '{"topicConfigTable":{"A":{}}}')
    write_config(main, '{"topicConfigTable":{"B":{}}}')
    assert json.loads((tmp_path / "topics.json.bak").read_text()) == {"topicConfigTable": {"A": {}}}
    main.write_text('{"topicConfigTable":{"B"')    # torn write
    loaded = load_config(main)
    assert loaded.used_backup and loaded.data == {"topicConfigTable": {"A": {}}}
    assert any("backup" in w for w in loaded.warnings)
    with pytest.raises(FormatError):
        load_config(main, fallback_to_bak=False)


def test_missing_everything_is_empty(tmp_path):
    loaded = load_config(tmp_path / "consumerOffset.json")
    assert loaded.data == {} and not loaded.used_backup


def test_a_journal_left_by_a_killed_broker_is_applied_in_order(tmp_path):
    from mqtool_store.configfiles import apply_journal, journal_entries
    from mqtool_store.stats import config_stats
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "topics.json").write_text('{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":'
                                     '{"A":{"topicName":"A"},"B":{"topicName":"B"}}}')
    (cfg / "topics.json.journal.old").write_text('{"dataVersion":{"counter":2,"timestamp":2},"name":"C",'
                                                 '"value":{"topicName":"C"}}\n')
    (cfg / "topics.json.journal").write_text('{"dataVersion":{"counter":3,"timestamp":3},"name":"A","value":null}\n'
                                             '{"dataVersion":{"counter":4,"timest')     # torn: never acknowledged
    entries = journal_entries(cfg / "topics.json")
    assert [e["name"] for e in entries] == ["C", "A"]
    data = apply_journal({"topicConfigTable": {"A": {}, "B": {}}}, "topicConfigTable", entries)
    assert sorted(data["topicConfigTable"]) == ["B", "C"] and data["dataVersion"]["counter"] == 3
    stats = config_stats(tmp_path)["topics"]
    assert stats["count"] == 2 and "2 changes from topics.json.journal" in stats["warnings"][0]


def test_a_rewritten_config_file_keeps_its_mode(tmp_path):
    main = tmp_path / "broker.conf"
    main.write_text("brokerName=a\n")
    main.chmod(0o600)
    write_config(main, "brokerName=b\n")
    assert main.read_text() == "brokerName=b\n" and main.stat().st_mode & 0o777 == 0o600
    bak = tmp_path / "broker.conf.bak"
    assert bak.read_text() == "brokerName=a\n" and bak.stat().st_mode & 0o777 == 0o600
