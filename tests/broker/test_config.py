import pytest

from mqtool_remoting import javaprops
from mqtool.broker.config import BrokerConfig, apply_properties


def test_properties_syntax():
    text = "# comment\n! also\nbrokerName = broker-a\nlistenPort:10921\nnamesrvAddr 127.0.0.1:9876;127.0.0.1:9877\n" \
           "messageDelayLevel=1s 5s \\\n   10s\nweird\\=key=a\\tb\\u0041\n\n"
    props = javaprops.loads(text)
    assert props == {"brokerName": "broker-a", "listenPort": "10921",
                     "namesrvAddr": "127.0.0.1:9876;127.0.0.1:9877",
                     "messageDelayLevel": "1s 5s 10s", "weird=key": "a\tbA"}
    assert javaprops.loads(javaprops.dumps({"a": 1, "b": "x y"})) == {"a": "1", "b": "x y"}


def test_apply_typed_keys_and_report_unknown():
    cfg = BrokerConfig()
    rest = apply_properties(cfg, {"brokerId": "1", "autoCreateTopicEnable": "false", "listenPort": "10921",
                                  "namesrvAddr": "a:1; b:2", "mappedFileSizeCommitLog": "1048576", "bogus": "x"})
    assert (cfg.brokerId, cfg.autoCreateTopicEnable, cfg.listenPort) == (1, False, 10921)
    assert cfg.namesrv_addrs == ["a:1", "b:2"] and cfg.broker_addr == "127.0.0.1:10921"
    assert rest == {"mappedFileSizeCommitLog": "1048576", "bogus": "x"}
    with pytest.raises(ValueError, match="listenPort must be an integer"):
        apply_properties(cfg, {"listenPort": "ten"})


def test_keys_mqtool_does_not_take_are_named_in_one_line_each():
    from mqtool.common.javakeys import check_keys
    known = ["flushIntervalCommitLog", "brokerName"]
    notes = check_keys({"sendMessageThreadPoolNums": "16", "flushIntervalComitLog": "500", "zzz": "1",
                        "enableDLegerCommitLog": "false"}, known)
    assert len(notes) == 4
    assert notes[0].startswith("enableDLegerCommitLog ignored: a RocketMQ 4.9.8 key mqtool does not implement")
    assert notes[1] == ("unknown config key 'flushIntervalComitLog' ignored: not a RocketMQ 4.9.8 broker key; "
                        "did you mean 'flushIntervalCommitLog'?")
    assert "thread pools" in notes[2] and notes[2].startswith("sendMessageThreadPoolNums ignored")
    assert notes[3] == "unknown config key 'zzz' ignored: not a RocketMQ 4.9.8 broker key"
    for key in ("enableDLegerCommitLog", "enableConsumeQueueExt", "enableLmq", "enableMultiDispatch",
                "duplicationEnable"):
        with pytest.raises(ValueError, match=f"^{key}=true: .* not implemented in mqtool$"):
            check_keys({key: "TRUE"}, known)


def test_every_key_mqtool_takes_is_used_and_none_is_also_listed_as_not_implemented():
    """A key in BrokerConfig or MessageStoreConfig is one mqtool honours: something outside the
    config modules reads it (else it belongs in javakeys.py, said to be ignored)."""
    import dataclasses
    import re
    from pathlib import Path

    from mqtool.common.javakeys import KEYS_4_9_8_NOT_HERE
    from mqtool_store.storeconfig import MessageStoreConfig
    repo = Path(__file__).resolve().parents[2]
    sources = "\n".join(p.read_text() for d in ("mqtool", "store", "remoting") for p in (repo / d).rglob("*.py")
                        if p.name not in ("config.py", "storeconfig.py", "javakeys.py"))
    ours = [f.name for c in (BrokerConfig, MessageStoreConfig) for f in dataclasses.fields(c)]
    unused = [k for k in ours if not re.search(rf"\.{k}\b", sources)]
    assert unused == []
    assert set(ours) & KEYS_4_9_8_NOT_HERE == set()
    from mqtool.broker.config import RUNTIME_KEYS
    assert RUNTIME_KEYS <= set(ours)            # each names a key mqtool has


def test_refused_key_stops_the_broker_in_one_line(tmp_path):
    from mqtool.broker.controller import BrokerController
    cfg = BrokerConfig(brokerName="b", listenPort=0, storePathRootDir=str(tmp_path / "s"))
    with pytest.raises(ValueError, match="enableLmq=true"):
        BrokerController(cfg, {"enableLmq": "true"})
    with pytest.raises(ValueError, match="readOnlyCommitLogStorePaths=/old: read-only commit log directories"):
        BrokerController(cfg, {"readOnlyCommitLogStorePaths": "/old"})
    empty = BrokerController(cfg, {"readOnlyCommitLogStorePaths": ""})                # empty: nothing to serve
    assert empty.notes == ["readOnlyCommitLogStorePaths ignored: a RocketMQ 4.9.8 key mqtool does not implement "
                           "(not implemented)"]
    multi = BrokerConfig(brokerName="b", listenPort=0, storePathRootDir=str(tmp_path / "s"),
                         storePathCommitLog=f"{tmp_path}/a,{tmp_path}/b")
    with pytest.raises(ValueError, match="multi-path commit log"):
        BrokerController(multi, {})
    assert not (tmp_path / "s" / "commitlog").exists()          # refused before the store opened


def test_a_delete_hour_that_never_matches_is_said(tmp_path):
    from mqtool.broker.controller import BrokerController
    cfg = BrokerConfig(brokerName="b", listenPort=0, storePathRootDir=str(tmp_path / "s"))
    assert BrokerController(cfg, {"deleteWhen": "04;16"}).notes == []
    notes = BrokerController(cfg, {"deleteWhen": "4am"}).notes
    assert notes == ["deleteWhen=4am: not hours 0-23 separated by ';' (those parts never match): expired files "
                     "are deleted only at the other hours or when the disk is full"]


def test_a_malformed_name_server_address_is_refused(tmp_path):
    from mqtool.broker.controller import BrokerController
    for addr in ("nonsense", "host:", ":9876", "host:99999", "127.0.0.1:9876;oops"):
        cfg = BrokerConfig(brokerName="b", listenPort=0, storePathRootDir=str(tmp_path / "s"), namesrvAddr=addr)
        with pytest.raises(ValueError, match="namesrvAddr: '.*' is not HOST:PORT"):
            BrokerController(cfg, {})


def test_a_period_of_zero_is_refused():
    """A 0 ms period would spin its thread (cleanResourceInterval=0 ran retention without a pause)."""
    from mqtool_store.storeconfig import MessageStoreConfig, apply_store_properties
    with pytest.raises(ValueError, match="cleanResourceInterval must be above 0"):
        apply_store_properties(MessageStoreConfig(), {"cleanResourceInterval": "0"})
    with pytest.raises(ValueError, match="flushConsumerOffsetInterval must be above 0"):
        apply_properties(BrokerConfig(), {"flushConsumerOffsetInterval": "-5"})


def test_controller_mode_keys(tmp_path):
    """enableControllerMode: brokerId/brokerRole are the controller's (one line says so), controllerAddr
    is needed and checked, and 5.x controller-mode keys mqtool does not take are named."""
    from mqtool.broker.controller import BrokerController
    from mqtool.common.javakeys import check_keys

    def cfg(**kw):
        return BrokerConfig(brokerName="b", listenPort=0, storePathRootDir=str(tmp_path / "s"),
                            enableControllerMode=True, **kw)
    with pytest.raises(ValueError, match="needs controllerAddr"):
        BrokerController(cfg())
    with pytest.raises(ValueError, match="controllerAddr: 'nope' is not HOST:PORT"):
        BrokerController(cfg(controllerAddr="nope"))
    b = BrokerController(cfg(controllerAddr="127.0.0.1:9878", brokerId=0, brokerRole="ASYNC_MASTER"),
                         {"allAckInSyncStateSet": "true", "minInSyncReplicas": "2"})
    assert b.notes == ["brokerRole ASYNC_MASTER and brokerId 0 ignored: with enableControllerMode=true the "
                       "controller's elections set them (a master is SYNC_MASTER, brokerId 0; a slave takes its "
                       "controller id)"]
    assert b.is_slave and b.store_config.allAckInSyncStateSet and b.store_config.minInSyncReplicas == 2
    assert b.replicas.epochs.path == tmp_path / "s" / "epochFileCheckpoint"
    [note] = check_keys({"fetchControllerAddrByDnsLookup": "true"}, [])
    assert note.startswith("fetchControllerAddrByDnsLookup ignored: a RocketMQ 5.x controller-mode key")
