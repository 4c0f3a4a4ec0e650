"""Frames, headers and bodies against the spec's golden bytes (produced by the 4.9.8 Java classes)."""
from __future__ import annotations

import pytest

from remoting.codes import RequestCode, ResponseCode, SerializeType, named
from remoting.command import RemotingCommand, decode_frame_body
from remoting.errors import FrameError, HeaderError
from remoting.framing import FrameDecoder
from remoting.headers import (PullMessageRequestHeader, SendMessageRequestHeader, from_ext_fields,
                              send_header_from_v2, send_header_to_v2, to_ext_fields)
from remoting.jsonbody import ObjectKey, dumps, loads

JSON_FRAME = bytes.fromhex("0000007d00000079") + (
    b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,'
    b'"serializeTypeCurrentRPC":"JSON","version":0}')
BINARY_FRAME = bytes.fromhex(
    "00000025" "01000021" "0069" "00" "0000" "00000001" "00000000" "00000000" "0000000c" "0005"
    "746f706963" "00000001" "54")


def route_request(stype=SerializeType.JSON):
    return RemotingCommand(105, 1, 0, None, {"topic": "T"}, b"", "JAVA", 0, stype)


def test_json_frame_is_byte_identical_to_java():
    assert route_request().encode() == JSON_FRAME
    back = FrameDecoder().feed(JSON_FRAME)[0]
    assert (back.code, back.opaque, back.ext_fields, back.language) == (105, 1, {"topic": "T"}, "JAVA")


def test_binary_frame_is_byte_identical_to_java():
    assert route_request(SerializeType.ROCKETMQ).encode() == BINARY_FRAME
    back = FrameDecoder().feed(BINARY_FRAME)[0]
    assert (back.code, back.opaque, back.ext_fields, back.serialize_type) == (105, 1, {"topic": "T"}, 1)
    resp = back.response(0, "ok", {"a": 1})
    again = FrameDecoder().feed(resp.encode())[0]
    assert again.serialize_type == 1 and again.is_response and again.remark == "ok" and again.ext_fields == {"a": "1"}


def test_send_response_matches_java_shape():
    req = RemotingCommand(310, 7)
    resp = req.response(0, None, {"queueId": 1, "TRACE_ON": True})
    assert resp.encode_header() == (b'{"code":0,"extFields":{"queueId":"1","TRACE_ON":"true"},"flag":1,'
                                    b'"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}')


def test_decoder_byte_by_byte_and_in_chunks():
    stream = JSON_FRAME + BINARY_FRAME + RemotingCommand(34, 9, body=b"x" * 1000).encode()
    d = FrameDecoder()
    got = [c for b in stream for c in d.feed(bytes([b]))]
    assert [c.code for c in got] == [105, 105, 34] and got[2].body == b"x" * 1000
    d = FrameDecoder()
    got = d.feed(stream[:50]) + d.feed(stream[50:])
    assert len(got) == 3 and d.pending == 0


@pytest.mark.parametrize("frame", [
    b"\x7f\xff\xff\xff" + b"\0" * 8,            # over 16 MiB
    b"\x00\x00\x00\x02\x00\x00",                 # shorter than a header length field
    b"\x00\x00\x00\x08\x00\x00\x00\x10abcd",     # header longer than the frame
    b"\x00\x00\x00\x08\x00\x00\x00\x04{{{{",     # header not JSON
    b"\x00\x00\x00\x08\x05\x00\x00\x00abcd",     # unknown serialize type
])
def test_bad_frames_raise(frame):
    with pytest.raises(FrameError):
        FrameDecoder().feed(frame)


def test_cpp_style_header_is_tolerated():
    hdr = (b'{"code":310,"extFields":{"AccessKey":"","a":"PG","b":"T","c":"TBW102","d":4,"e":1,"f":0,'
           b'"g":1700000000000,"h":0,"i":"TAGS\\u0001x","j":0,"k":false,"m":false},"flag":0,"language":"CPP",'
           b'"opaque":0,"remark":"","version":63}\n')
    cmd = decode_frame_body(len(hdr).to_bytes(4, "big") + hdr + b"body")
    assert cmd.ext_fields["d"] == "4" and cmd.ext_fields["k"] == "false" and cmd.body == b"body"
    h = send_header_from_v2(cmd.ext_fields)
    assert (h.producerGroup, h.topic, h.queueId, h.bornTimestamp, h.batch, h.properties) == (
        "PG", "T", 1, 1700000000000, False, "TAGS\x01x")
    assert send_header_from_v2(send_header_to_v2(h)) == h


def test_header_coercion_rules():
    ext = {"consumerGroup": "G", "topic": "T", "queueId": "3", "queueOffset": "10", "maxMsgNums": "32",
           "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "0"}
    h = from_ext_fields(PullMessageRequestHeader, ext)
    assert h.queueId == 3 and h.subscription is None
    assert from_ext_fields(PullMessageRequestHeader, to_ext_fields(h)) == h
    with pytest.raises(HeaderError, match="consumerGroup"):
        from_ext_fields(PullMessageRequestHeader, {k: v for k, v in ext.items() if k != "consumerGroup"})
    with pytest.raises(HeaderError, match="queueId"):
        from_ext_fields(PullMessageRequestHeader, dict(ext, queueId="three"))
    h2 = from_ext_fields(SendMessageRequestHeader, {"producerGroup": "P", "topic": "T", "defaultTopic": "TBW102",
                                                    "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
                                                    "bornTimestamp": "1", "flag": "0", "batch": "TRUE"})
    assert h2.batch is True
    assert from_ext_fields(SendMessageRequestHeader, dict(to_ext_fields(h2), batch="yes")).batch is False


def test_fastjson_bodies():
    legacy = b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a"}]}'
    assert loads(legacy)["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"}
    stats = b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"maxOffset":10,"minOffset":0}}}'
    table = loads(stats)["offsetTable"]
    (key, value), = table.items()
    assert isinstance(key, ObjectKey) and key.as_dict() == {"brokerName": "broker-a", "queueId": 0, "topic": "T"}
    assert dumps(loads(stats)) == stats
    assert dumps({0: "a", 1: "b"}, bare_int_keys=True) == b'{0:"a",1:"b"}'


def test_registry_tolerates_unknown_codes():
    assert named(RequestCode, 105) is RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert named(ResponseCode, 9999) == 9999
