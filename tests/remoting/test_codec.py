"""Frames and headers against the spec's golden bytes (remoting.md, produced by the 4.9.8 Java classes)."""
from __future__ import annotations

import json

import pytest

from mqtool_remoting.codes import FRAME_MAX_LENGTH, LanguageCode, RequestCode, ResponseCode, SerializeType, code_name, named
from mqtool_remoting.command import RemotingCommand, decode_frame, decode_frame_body
from mqtool_remoting.errors import FrameError
from mqtool_remoting.framing import FrameDecoder

# remoting.md §2 [ran]: GET_ROUTEINFO_BY_TOPIC, opaque 1, topic T, JSON header
JSON_FRAME = bytes.fromhex("0000007d" "00000079") + (
    b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,'
    b'"serializeTypeCurrentRPC":"JSON","version":0}')
# remoting.md §4 [ran]: the same request with the ROCKETMQ binary header, one field a line
BINARY_FRAME = bytes.fromhex(
    "00000025"        # frame length
    "01000021"        # serialize type 1, header length 0x21
    "0069"            # code 105
    "00"              # language JAVA
    "0000"            # version 0
    "00000001"        # opaque
    "00000000"        # flag
    "00000000"        # remark length (null)
    "0000000c"        # extFields length
    "0005" "746f706963"   # key "topic"
    "00000001" "54")      # value "T"
# remoting.md §3 [ran]: a broker's send response; extFields in Java HashMap order, not sorted
SEND_RESPONSE_HEADER = (
    b'{"code":0,"extFields":{"queueId":"1","TRACE_ON":"true","MSG_REGION":"DefaultRegion",'
    b'"msgId":"7F00000100002A9F0000000000000000","queueOffset":"0"},"flag":1,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":0}')
# remoting.md §7.0 [ran]: a Java SEND_MESSAGE_V2 request
SEND_V2_HEADER = (
    b'{"code":310,"extFields":{"a":"PG","b":"TopicTest","c":"TBW102","d":"4","e":"1","f":"0","g":"1700000000000",'
    b'"h":"0","i":"TAGS\\u0001TagA\\u0002UNIQ_KEY\\u0001ABC","j":"0","k":"false","m":"false"},"flag":0,'
    b'"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":0}')


def route_request(stype=SerializeType.JSON) -> RemotingCommand:
    return RemotingCommand(105, 1, 0, None, {"topic": "T"}, b"", "JAVA", 0, stype)


def test_json_frame_is_byte_identical_to_java():
    assert route_request().encode() == JSON_FRAME
    back = decode_frame(JSON_FRAME)
    assert (back.code, back.opaque, back.flag, back.ext_fields, back.language, back.version, back.remark) == \
        (105, 1, 0, {"topic": "T"}, "JAVA", 0, None)
    assert back.serialize_type == SerializeType.JSON and back.body == b""
    assert back.encode() == JSON_FRAME


def test_binary_frame_is_byte_identical_to_java():
    assert route_request(SerializeType.ROCKETMQ).encode() == BINARY_FRAME
    back = decode_frame(BINARY_FRAME)
    assert (back.code, back.opaque, back.ext_fields, back.serialize_type, back.remark) == \
        (105, 1, {"topic": "T"}, SerializeType.ROCKETMQ, None)
    assert back.encode() == BINARY_FRAME


def test_response_mirrors_the_request_serialize_type():
    req = decode_frame(BINARY_FRAME)
    resp = req.response(ResponseCode.TOPIC_NOT_EXIST, "no route: é", {"n": 1, "ok": True}, b"\x00body")
    again = decode_frame(resp.encode())
    assert again.serialize_type == SerializeType.ROCKETMQ and again.is_response and not again.is_oneway
    assert (again.code, again.opaque, again.remark, again.ext_fields, again.body) == \
        (17, 1, "no route: é", {"n": "1", "ok": "true"}, b"\x00body")
    json_resp = decode_frame(route_request().response(0).encode())
    assert json_resp.serialize_type == SerializeType.JSON and json_resp.is_response


def test_send_response_header_matches_java_hashmap_order():
    # The broker adds MSG_REGION and TRACE_ON first, then the header fields; Java prints bucket order.
    resp = RemotingCommand(310, 7).response(0, None, {
        "MSG_REGION": "DefaultRegion", "TRACE_ON": True, "msgId": "7F00000100002A9F0000000000000000",
        "queueId": 1, "queueOffset": 0})
    resp.version = 0
    assert resp.encode_header() == SEND_RESPONSE_HEADER
    assert decode_frame(resp.encode()).ext_fields["TRACE_ON"] == "true"


def test_send_v2_request_matches_java():
    from mqtool_remoting.headers import SendMessageRequestHeader, send_header_to_v2
    h = SendMessageRequestHeader("PG", "TopicTest", "TBW102", 4, 1, 0, 1700000000000, 0,
                                 "TAGS\x01TagA\x02UNIQ_KEY\x01ABC", 0, False, False)
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, 7, 0, None, send_header_to_v2(h), b"", "JAVA", 0)
    assert cmd.encode_header() == SEND_V2_HEADER


def test_decoder_byte_by_byte_and_in_chunks():
    stream = JSON_FRAME + BINARY_FRAME + RemotingCommand(34, 9, body=b"x" * 1000).encode()
    d = FrameDecoder()
    got = [c for b in stream for c in d.feed(bytes([b]))]
    assert [c.code for c in got] == [105, 105, 34] and got[2].body == b"x" * 1000 and d.pending == 0
    for cut in (1, 4, 7, 8, 50, 129, len(stream) - 1):
        d = FrameDecoder()
        got = d.feed(stream[:cut]) + d.feed(stream[cut:])
        assert [c.code for c in got] == [105, 105, 34] and d.pending == 0, cut
    d = FrameDecoder()
    assert d.feed(stream + stream[:10]) and d.pending == 10


@pytest.mark.parametrize("frame, why", [
    ((FRAME_MAX_LENGTH + 1).to_bytes(4, "big"), "outside"),            # rejected before any data arrives
    (b"\x7f\xff\xff\xff" + b"\0" * 8, "outside"),
    (b"\xff\xff\xff\xff", "outside"),                                  # negative
    (b"\x00\x00\x00\x02\x00\x00", "outside"),                          # no room for the header length
    (b"\x00\x00\x00\x08\x00\x00\x00\x10abcd", "exceeds the frame"),    # header longer than the frame
    (b"\x00\x00\x00\x08\x00\x00\x00\x04{{{{", "not JSON"),
    (b"\x00\x00\x00\x08\x00\x00\x00\x04\xff\xfe\xfd\xfc", "not JSON"),
    (b"\x00\x00\x00\x08\x00\x00\x00\x04[12]", "with a code"),
    (b"\x00\x00\x00\x0e\x00\x00\x00\x0a{\"flag\":1}", "with a code"),
    (b"\x00\x00\x00\x08\x05\x00\x00\x04abcd", "serialize type"),
    (b"\x00\x00\x00\x10\x01\x00\x00\x0c" + b"\x00" * 12, "truncated"),  # binary header cut short
])
def test_bad_frames_raise(frame, why):
    with pytest.raises(FrameError, match=why):
        FrameDecoder().feed(frame)


def test_binary_header_lengths_are_bounds_checked():
    good = route_request(SerializeType.ROCKETMQ).encode()
    header = bytearray(good[8:])
    header[13:17] = (1000).to_bytes(4, "big")       # remark length past the end
    with pytest.raises(FrameError, match="past the header"):
        decode_frame_body((0x01000000 | len(header)).to_bytes(4, "big") + bytes(header))
    header = bytearray(good[8:])
    header[17:21] = (1000).to_bytes(4, "big")       # extFields length past the end
    with pytest.raises(FrameError, match="exceeds the header"):
        decode_frame_body((0x01000000 | len(header)).to_bytes(4, "big") + bytes(header))


def test_frames_before_garbage_are_kept_and_the_decoder_stays_failed():
    d = FrameDecoder()
    with pytest.raises(FrameError) as info:
        d.feed(JSON_FRAME + BINARY_FRAME + b"\xff\xff\xff\xffjunk")
    assert [c.code for c in info.value.decoded] == [105, 105]
    with pytest.raises(FrameError, match="already failed"):
        d.feed(JSON_FRAME)


def test_small_frame_limit_is_configurable():
    frame = RemotingCommand(34, body=b"x" * 100).encode()
    with pytest.raises(FrameError):
        FrameDecoder(max_frame=100).feed(frame)
    assert FrameDecoder(max_frame=len(frame) - 4).feed(frame)[0].body == b"x" * 100


def test_cpp_style_header_is_tolerated():
    # jsoncpp FastWriter: sorted keys, trailing newline, numbers and booleans in extFields
    hdr = (b'{"code":310,"extFields":{"AccessKey":"","OnsChannel":"","Signature":"","a":"PG","b":"T","c":"TBW102",'
           b'"d":4,"e":1,"f":0,"g":1700000000000,"h":0,"i":"TAGS\\u0001x","j":0,"k":false,"m":true,"x":null,'
           b'"y":1.5},"flag":0,"language":"CPP","opaque":0,"remark":"","version":333}\n')
    cmd = decode_frame_body(len(hdr).to_bytes(4, "big") + hdr + b"body")
    assert cmd.ext_fields["d"] == "4" and cmd.ext_fields["g"] == "1700000000000"
    assert cmd.ext_fields["k"] == "false" and cmd.ext_fields["m"] == "true" and cmd.ext_fields["y"] == "1.5"
    assert "x" not in cmd.ext_fields and cmd.ext_fields["AccessKey"] == ""
    assert (cmd.language, cmd.version, cmd.remark, cmd.body) == ("CPP", 333, "", b"body")


def test_minimal_and_odd_json_headers_get_java_defaults():
    def decode(obj) -> RemotingCommand:
        hdr = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        return decode_frame_body(len(hdr).to_bytes(4, "big") + hdr)
    c = decode({"code": 34})
    assert (c.opaque, c.flag, c.version, c.language, c.remark, c.ext_fields) == (0, 0, 0, "JAVA", None, {})
    c = decode({"code": "105", "opaque": "9", "language": 1, "extFields": None, "newField": [1], "flag": 3})
    assert (c.code, c.opaque, c.language, c.ext_fields, c.is_response, c.is_oneway) == (105, 9, "CPP", {}, True, True)
    c = decode(b'{"code":105,"extFields":{"nested":{"a":1}},"remark":5}')
    assert c.ext_fields == {"nested": '{"a":1}'} and c.remark == "5"
    with pytest.raises(FrameError, match="bad header field"):
        decode({"code": "x"})
    with pytest.raises(FrameError, match="extFields"):
        decode({"code": 1, "extFields": [1, 2]})


def test_oneway_request_and_flags():
    cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, {"a": 1, "b": None}, oneway=True)
    assert cmd.is_oneway and not cmd.is_response and cmd.ext_fields == {"a": "1"}
    assert cmd.language == "PYTHON" and 0 <= cmd.opaque <= 0x7FFFFFFF
    assert RemotingCommand.request(1).opaque != RemotingCommand.request(1).opaque


def test_registry_names_and_tolerates_unknown_numbers():
    assert named(RequestCode, 105) is RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert named(ResponseCode, 9999) == 9999 and type(named(ResponseCode, 9999)) is int
    assert code_name(ResponseCode, 17) == "TOPIC_NOT_EXIST" and code_name(RequestCode, 9999) == "9999"
    assert RequestCode.SEND_MESSAGE_V2 == 310 and RequestCode.DELETE_EXPIRED_COMMITLOG == 329
    assert LanguageCode.RUST == 12 and ResponseCode.FLOW_CONTROL == 215
    unknown = decode_frame(RemotingCommand(4242, 3, 1, language="JAVA").encode())
    assert unknown.code == 4242 and named(RequestCode, unknown.code) == 4242
