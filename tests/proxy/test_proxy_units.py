"""The gRPC endpoint's pure parts against the vectors of shared/spec/rocketmq5.md §3 ([ran] = run on 5.3.3)."""
from __future__ import annotations

import pytest

from mqtool.broker import topicattrs
from mqtool.broker.topics import TopicConfig
from mqtool.proxy import auth, route, send
from mqtool.proxy.codes import Permission
from mqtool.proxy.context import ProxyError, RequestContext, from_metadata, version_ordinal


@pytest.mark.parametrize("group, hash_code, buckets", [
    ("group-a", 293427347, (0, 2, 7, 7)), ("order-1", -1207111310, (0, 3, 3, 3)),
    ("user_42", -147134606, (0, 0, 0, 10)), ("", 0, (0, 0, 0, 0)), ("中文", 646394, (0, 3, 3, 3))])
def test_fifo_queue_is_guavas_consistent_hash_of_javas_hash_code(group, hash_code, buckets):
    """§3.9 [ran]: String.hashCode, then Hashing.consistentHash for 1, 4, 8 and 16 queues."""
    assert send.java_hash(group) == hash_code
    assert tuple(send.consistent_hash(hash_code, n) for n in (1, 4, 8, 16)) == buckets


def test_signature_is_hex_hmac_sha1_of_the_date():
    """§3.3 [ran]: SK sk-secret, date 20240101T000000Z."""
    assert auth.signature("sk-secret", "20240101T000000Z") == "eb68ecf32e18534bc197b862773f6842e3ba4bc5"


PLAIN_ACL = """\
accounts:
  - {accessKey: grpcuser1, secretKey: sk-secret, defaultTopicPerm: DENY, topicPerms: [TP=PUB]}
"""


def authorization(ak: str, sk: str, date: str) -> str:
    return f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={auth.signature(sk, date)}"


def test_authorization_checked_by_the_plain_acl(tmp_path):
    """The signature against the account (UNAUTHORIZED), then the topic's permission (FORBIDDEN)."""
    from mqtool.broker.acl.manager import PlainPermissionManager
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    manager = PlainPermissionManager(str(tmp_path))
    manager.load()
    date = "20240101T000000Z"
    ctx = RequestContext("c", "PYTHON", "5.1.2", "", date, authorization("grpcuser1", "sk-secret", date), "127.0.0.1:1")
    auth.check_acl(ctx, manager, 10, {"TP": 4})
    for changed, code in [(dict(authorization=authorization("grpcuser1", "wrong", date)), 40100),
                          (dict(authorization=authorization("nobody", "sk-secret", date)), 40100),
                          (dict(authorization=""), 40100), (dict(date=""), 40100)]:
        refused = RequestContext(**{**ctx.__dict__, **changed})
        with pytest.raises(ProxyError) as err:
            auth.check_acl(refused, manager, 10, {"TP": 4})
        assert err.value.code == code, changed
    with pytest.raises(ProxyError) as err:
        auth.check_acl(ctx, manager, 10, {"OTHER": 4})
    assert err.value.code == 40300


def test_metadata_and_versions():
    ctx = from_metadata([("x-mq-client-id", "host@1@0@x"), ("x-mq-language", "PYTHON"),
                         ("x-mq-client-version", "5.1.2")], "ipv4:127.0.0.1:5555")
    assert (ctx.client_id, ctx.peer, ctx.peer_host, ctx.peer_port) == ("host@1@0@x", "127.0.0.1:5555", "127.0.0.1", 5555)
    assert version_ordinal("4.9.8") == 409 and version_ordinal("5.0.0") == 413     # MQVersion ordinals
    assert version_ordinal("5.1.2") == 437 and version_ordinal("junk") == 413


def test_queue_permissions_per_queue_data():
    """§3.7: read-only, write-only, then read-write entries for perm 6; perm 2 all WRITE; 4 all READ."""
    assert route.queue_permissions(4, 4, 6) == [Permission.READ_WRITE] * 4
    assert route.queue_permissions(6, 4, 6) == [Permission.READ] * 2 + [Permission.READ_WRITE] * 4
    assert route.queue_permissions(2, 3, 2) == [Permission.WRITE] * 3
    assert route.queue_permissions(2, 3, 0) == [Permission.NONE] * 3


@pytest.mark.parametrize("topic", ["rmq_sys_wheel_timer", "TBW102", "BenchmarkTest", "CHECKPOINT_TOPIC"])
def test_system_topics_are_refused(topic):
    with pytest.raises(ProxyError) as refused:
        route.validate_topic(topic)
    assert (refused.value.code, refused.value.message) == (40002, "cannot access system topic")


def test_message_type_from_properties():
    """TopicMessageType.parseFromMessageProperty: transaction, then delay, then FIFO."""
    assert send.message_type_of({"TRAN_MSG": "true", "__SHARDINGKEY": "g"}) == "TRANSACTION"
    assert send.message_type_of({"TIMER_DELIVER_MS": "1", "__SHARDINGKEY": "g"}) == "DELAY"
    assert send.message_type_of({"__SHARDINGKEY": "g"}) == "FIFO"
    assert send.message_type_of({"KEYS": "k"}) == "NORMAL"


def test_delay_level_is_the_first_longer_than_the_wait():
    levels = {1: 1000, 2: 5000, 3: 10000, 4: 30000}
    assert send.delay_level(levels, 3_000, 0) == 2
    assert send.delay_level(levels, 5_000, 0) == 3
    assert send.delay_level(levels, 99_000, 0) == 4


def test_topic_attributes_text():
    assert topicattrs.alter(None, "+message.type=FIFO") == {"message.type": "FIFO"}
    assert topicattrs.alter({"message.type": "FIFO"}, None) == {"message.type": "FIFO"}     # kept when not given
    assert topicattrs.alter({"message.type": "FIFO"}, "-message.type") is None
    for bad, words in [("message.type=FIFO", "format"), ("+message.type=FOO", "not in set"),
                       ("+queue.kind=x", "unsupported key"), ("+message.type=MIXED", "MIXED")]:
        with pytest.raises(topicattrs.TopicAttributeError, match=words):
            topicattrs.alter(None, bad)
    assert topicattrs.alter(None, "+message.type=MIXED", mixed_allowed=True) == {"message.type": "MIXED"}


def test_topics_json_keeps_attributes_and_4_9_8_bytes_without_them():
    plain = TopicConfig("T", 4, 4)
    assert "attributes" not in plain.to_json()
    fifo = TopicConfig("T", 4, 4, attributes={"message.type": "FIFO"})
    d = fifo.to_json()
    assert list(d)[0] == "attributes" and d["attributes"] == {"message.type": "FIFO"}       # fastjson's order
    assert TopicConfig.from_json(d) == fifo and TopicConfig.from_json(plain.to_json()) == plain


def test_version_names_as_mqadmin_prints_them():
    from mqtool_remoting.codes import version_desc
    assert [version_desc(v) for v in (409, 437, 333, 412, 100)] == ["V4_9_8", "V5_1_2", "V4_6_0",
                                                                     "V5_0_0_SNAPSHOT", "100"]
