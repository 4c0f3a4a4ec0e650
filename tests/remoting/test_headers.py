"""The generic header <-> extFields mapping follows Java's coercion rules."""
from __future__ import annotations

import pytest

from mqtool_remoting.errors import HeaderError
from mqtool_remoting.headers import (CreateTopicRequestHeader, GetRouteInfoRequestHeader, PullMessageRequestHeader,
                              RegisterBrokerRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader,
                              from_ext_fields, send_header_from_v2, send_header_to_v2, to_ext_fields)

PULL = {"consumerGroup": "G", "topic": "T", "queueId": "3", "queueOffset": "10", "maxMsgNums": "32",
        "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "0"}
SEND = {"producerGroup": "P", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
        "queueId": "0", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0"}


def test_round_trip_and_optional_fields():
    h = from_ext_fields(PullMessageRequestHeader, PULL)
    assert (h.queueId, h.queueOffset, h.subscription, h.expressionType, h.bname) == (3, 10, None, None, None)
    assert from_ext_fields(PullMessageRequestHeader, to_ext_fields(h)) == h
    assert to_ext_fields(h) == PULL          # None fields are left out, everything else is text
    assert to_ext_fields(SendMessageResponseHeader("ID", 1, 0)) == {"msgId": "ID", "queueId": "1", "queueOffset": "0"}


@pytest.mark.parametrize("field", ["consumerGroup", "queueId", "subVersion"])
def test_missing_required_field_is_named(field):
    with pytest.raises(HeaderError, match=f"'{field}'"):
        from_ext_fields(PullMessageRequestHeader, {k: v for k, v in PULL.items() if k != field})


@pytest.mark.parametrize("raw, ok", [
    ("7", 7), ("-7", -7), ("+7", 7), ("2147483647", 2147483647), ("-2147483648", -2147483648),
    ("2147483648", None), (" 7", None), ("7 ", None), ("7.0", None), ("1_000", None), ("", None), ("0x10", None),
    ("٣", None),
])
def test_integer_parsing_is_java_parse_int(raw, ok):
    ext = dict(PULL, queueId=raw)
    if ok is None:
        with pytest.raises(HeaderError, match="queueId"):
            from_ext_fields(PullMessageRequestHeader, ext)
    else:
        assert from_ext_fields(PullMessageRequestHeader, ext).queueId == ok


def test_long_fields_take_64_bits():
    assert from_ext_fields(PullMessageRequestHeader, dict(PULL, queueOffset=str(2 ** 63 - 1))).queueOffset == 2 ** 63 - 1
    with pytest.raises(HeaderError, match="queueOffset"):
        from_ext_fields(PullMessageRequestHeader, dict(PULL, queueOffset=str(2 ** 63)))
    with pytest.raises(HeaderError, match="maxMsgNums"):     # an Integer, not a Long
        from_ext_fields(PullMessageRequestHeader, dict(PULL, maxMsgNums=str(2 ** 31)))


@pytest.mark.parametrize("raw, value", [("true", True), ("TRUE", True), ("True", True), ("false", False),
                                        ("yes", False), ("1", False), (" true", False), ("", False)])
def test_boolean_is_java_parse_boolean(raw, value):
    assert from_ext_fields(SendMessageRequestHeader, dict(SEND, batch=raw)).batch is value


def test_unparsable_optional_field_keeps_its_default_like_java():
    h = from_ext_fields(SendMessageRequestHeader, dict(SEND, reconsumeTimes="abc", maxReconsumeTimes=""))
    assert h.reconsumeTimes is None and h.maxReconsumeTimes is None
    assert from_ext_fields(CreateTopicRequestHeader, {"topic": "T", "defaultTopic": "TBW102", "readQueueNums": "8",
                                                      "writeQueueNums": "8", "perm": "6",
                                                      "topicFilterType": "SINGLE_TAG"}).order is None
    assert from_ext_fields(GetRouteInfoRequestHeader, {"topic": "T", "acceptStandardJsonOnly": "TRUE"}).acceptStandardJsonOnly
    assert from_ext_fields(RegisterBrokerRequestHeader, {"brokerName": "b", "brokerAddr": "a", "clusterName": "c",
                                                         "haServerAddr": "h", "brokerId": "0",
                                                         "bodyCrc32": "-5"}).bodyCrc32 == -5


def test_send_v2_letters_round_trip_and_errors_name_both_spellings():
    v2 = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0",
          "i": "TAGS\x01x", "j": "0", "k": "false", "m": "true", "n": "broker-a", "AccessKey": ""}
    h = send_header_from_v2(v2)
    assert (h.producerGroup, h.topic, h.queueId, h.bornTimestamp, h.batch, h.unitMode, h.bname) == \
        ("PG", "T", 1, 1700000000000, True, False, "broker-a")
    assert send_header_from_v2(send_header_to_v2(h)) == h
    assert set(send_header_to_v2(h)) == set(v2) - {"AccessKey"}
    with pytest.raises(HeaderError, match=r"'topic'.*letter b"):
        send_header_from_v2({k: v for k, v in v2.items() if k != "b"})
