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
