"""The plain-ACL signer against the vectors the real 4.9.8 jars produced (spec acl.md §3)."""
from __future__ import annotations

import pytest

from mqtool_remoting.acl import Credentials, broker_content, content_to_sign, java_order, signature
from mqtool_remoting.command import RemotingCommand, decode_frame

AK, SK = "RocketMQ", "12345678"
V1_EXT = {"a": "PG", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0",
          "i": "UNIQ_KEY\x01ABC\x02WAIT\x01true\x02", "j": "0", "k": "false", "m": "false"}
V1_CONTENT = bytes.fromhex(
    "526f636b65744d515047546f706963546573745442573130323430303137303030303030303030303030554e49515f4b4559014142430257"
    "4149540174727565023066616c736566616c736568656c6c6f")


def signed(code, ext, body=b"", creds=Credentials(AK, SK)):
    cmd = RemotingCommand.request(code, ext, body)
    creds.sign(cmd)
    return cmd


def test_v1_send_message_v2():
    cmd = signed(310, V1_EXT, b"hello")
    assert len(V1_CONTENT) == 81
    assert content_to_sign(cmd.ext_fields, cmd.body) == V1_CONTENT
    assert cmd.ext_fields["AccessKey"] == AK
    assert cmd.ext_fields["Signature"] == "ktXHD6M1wo+ozLl4DAeAUSoF1yE="


def test_v2_heartbeat_without_header():
    body = b'{"clientID":"127.0.0.1@1","consumerDataSet":[],"producerDataSet":[]}'
    cmd = signed(34, {}, body)
    assert content_to_sign(cmd.ext_fields, body) == b"RocketMQ" + body
    assert len(b"RocketMQ" + body) == 76
    assert cmd.ext_fields["Signature"] == "PN6N7+UPLoRkSyqaEeQMjQZWWew="


def test_v3_pull_with_security_token():
    ext = {"consumerGroup": "groupB", "topic": "topicB", "queueId": 1, "queueOffset": 0, "maxMsgNums": 32,
           "sysFlag": 2, "commitOffset": 0, "suspendTimeoutMillis": 15000, "subscription": "*", "subVersion": 0,
           "expressionType": "TAG"}
    cmd = signed(11, ext, creds=Credentials(AK, SK, "tok1"))
    assert content_to_sign(cmd.ext_fields, b"") == b"RocketMQtok10groupBTAG32100*150002topicB"
    assert cmd.ext_fields["Signature"] == "3xmP3y7ScfZvZ1QnTPwQpu9fnc0="


def test_v4_acl_update_signed_by_admin_account():
    ext = {"accessKey": "newUser01", "secretKey": "newSecret01", "admin": False, "defaultTopicPerm": "PUB",
           "topicPerms": "topicA=PUB|SUB,topicB=SUB"}
    cmd = signed(50, ext, creds=Credentials("rocketmq2", "12345678"))
    assert content_to_sign(cmd.ext_fields, b"") == b"rocketmq2newUser01falsePUBnewSecret01topicA=PUB|SUB,topicB=SUB"
    assert cmd.ext_fields["Signature"] == "B81YlE/1m3kt/E/4w3p9bMlMa4k="


def test_v5_unicode_topic_and_binary_body():
    ext = {k: v for k, v in V1_EXT.items() if k != "i"} | {"b": "主题", "e": "3"}
    cmd = signed(310, ext, bytes.fromhex("ff0041"))
    assert content_to_sign(cmd.ext_fields, cmd.body).hex() == (
        "526f636b65744d515047e4b8bbe9a29854425731303234333031373030303030303030303030303066616c736566616c7365ff0041")
    assert cmd.ext_fields["Signature"] == "/fm1PB2ANxqfowvvr45s0yiSyWs="


def test_broker_leaves_out_unique_key_query_but_client_signs_it():
    ext = {"topic": "T", "key": "k", "_UNIQUE_KEY_QUERY": "true"}
    assert content_to_sign(ext) == b"truekT"          # `_` sorts before lower case
    assert broker_content(ext, b"") == b"kT"


def test_signature_survives_the_wire_and_a_resign():
    cmd = signed(310, V1_EXT, b"hello")
    back = decode_frame(cmd.encode())
    assert signature(SK, broker_content(back.ext_fields, back.body)) == back.ext_fields["Signature"]
    Credentials(AK, SK).sign(back)                 # a retry signs the same command again: same result
    assert back.ext_fields["Signature"] == "ktXHD6M1wo+ozLl4DAeAUSoF1yE="


def test_empty_secret_is_refused_and_java_key_order():
    with pytest.raises(ValueError, match="Empty key"):
        signature("", b"x")
    assert sorted(["b", "SecurityToken", "AccessKey", "a"], key=java_order) == ["AccessKey", "SecurityToken", "a", "b"]
    # Java orders by UTF-16 unit: a key above U+FFFF (a surrogate pair) sorts before U+FFFD
    assert sorted(["\ufffd", "\U0001f600"], key=java_order) == ["\U0001f600", "\ufffd"]
