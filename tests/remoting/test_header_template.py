"""The JSON header writer formats numbers and names directly: its bytes must equal a plain
json.dumps of the same bean (fastjson's property order, extFields in HashMap order)."""
from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtool_remoting import command, jsonbody
from mqtool_remoting.codes import LanguageCode
from mqtool_remoting.command import RemotingCommand, decode_frame
from mqtool_remoting.errors import FrameError


def reference(cmd: RemotingCommand) -> bytes:
    obj: dict = {"code": cmd.code}
    if cmd.ext_fields:
        obj["extFields"] = jsonbody.java_map(cmd.ext_fields)
    obj["flag"] = cmd.flag
    obj["language"] = cmd.language.name if isinstance(cmd.language, LanguageCode) else str(cmd.language)
    obj["opaque"] = cmd.opaque
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = cmd.version
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


CASES = [
    RemotingCommand(0, 1, 1, None, {"msgId": "7F00000100002A9F", "queueId": "3", "queueOffset": "12345",
                                    "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}),
    RemotingCommand(1, -5, 0, 'a "quoted" remark\nwith\tcontrol \x01 chars and ünïcödé ☃', {}),
    RemotingCommand(310, 2**31 - 1, 2, "", {"k\u2028ey": "va\"lue\\", "": "", "数字": "١٢٣"}, language="CPP"),
    RemotingCommand(17, 0, 0, None, {"a": "1"}, language="SOME\"LANG"),
    RemotingCommand(105, 7, 0, None, {}, language=LanguageCode.GO),
]


@pytest.mark.parametrize("cmd", CASES)
def test_header_bytes_equal_a_plain_json_dump(cmd):
    assert cmd.encode_header() == reference(cmd)
    back = decode_frame(cmd.encode())
    assert (back.code, back.opaque, back.remark, back.ext_fields) == (cmd.code, cmd.opaque, cmd.remark, cmd.ext_fields)


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=14),
       st.integers(-(1 << 31), (1 << 31) - 1))
def test_any_ext_fields_are_written_as_a_plain_json_dump(ext, opaque):
    cmd = RemotingCommand(310, opaque, 0, None, ext)
    assert cmd.encode_header() == reference(cmd)


def test_non_text_ext_values_take_the_general_encoder():
    cmd = RemotingCommand(310, 1, 0, None, {"a": 1, "b": None, "c": "x"})
    assert cmd.encode_header() == reference(cmd)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
                    max_leaves=12)
HEADER = st.fixed_dictionaries({"code": JSON | st.integers()}, optional={
    "opaque": JSON | st.integers(), "flag": JSON, "version": JSON, "remark": JSON, "language": JSON,
    "extFields": st.dictionaries(st.text(max_size=6), st.text(max_size=8) | JSON, max_size=6) | JSON,
    "serializeTypeCurrentRPC": JSON})


def decoded(header: bytes):
    try:
        cmd = command._decode_json_header(header)
    except FrameError as exc:
        return "error", str(exc)
    return cmd.code, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, cmd.language, cmd.version


def json_module_only(header: bytes):
    fast, command._fast_loads = command._fast_loads, None
    try:
        return decoded(header)
    finally:
        command._fast_loads = fast


@given(HEADER)
def test_headers_decode_the_same_with_and_without_orjson(obj):
    for text in (json.dumps(obj), json.dumps(obj, ensure_ascii=False, indent=1)):
        header = text.encode("utf-8", "surrogatepass")
        assert decoded(header) == json_module_only(header)


@pytest.mark.parametrize("text", ['{"code":0,"opaque":1180591620717411303424}', '{"code":1,"code":2,"flag":1}',
                                  '{"code":0,"remark":"\\ud800x"}', '{"code":0,"opaque":NaN}',
                                  '{"code":0,"extFields":{0:"x"}}', '{"code":0,"extFields":{"a":1e400}}',
                                  ' {"code" : 7, "language":"CPP" } ', '{"code":0,"opaque":18446744073709551615}'])
def test_what_orjson_reads_differently_decodes_as_before(text):
    assert command._fast_loads is not None, "orjson is a dependency"
    assert decoded(text.encode()) == json_module_only(text.encode())


@given(st.dictionaries(st.text(min_size=1, max_size=6), st.text(max_size=10), min_size=1, max_size=10), st.data())
def test_a_header_template_filled_is_the_header_encode_writes(ext, data):
    keys = data.draw(st.lists(st.sampled_from(sorted(ext)), unique=True, min_size=1))
    marks = {k: f"\x00mark{i}\x00" for i, k in enumerate(keys)}
    template = command.HeaderTemplate.make(RemotingCommand(17, 0, 1, None, {**ext, **marks}), marks)
    values = [data.draw(st.text(max_size=12)) for _ in keys]
    opaque = data.draw(st.integers(0, (1 << 31) - 1))
    if template is None:                      # only when a fixed value holds a mark's text
        assert any("\x00mark" in v for v in ext.values())
        return
    expected = RemotingCommand(17, opaque, 1, None, {**ext, **dict(zip(keys, values))}).encode_header()
    assert template.fill(opaque, *values) == expected
    plain = [data.draw(st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.from_regex(r"[0-9A-Za-z]{0,32}", fullmatch=True)))
             for _ in keys]                   # what fill_plain is for: ints, hex ids
    assert template.fill_plain(opaque, *plain) == template.fill(opaque, *map(str, plain))
    # frame_plain (the C filler where it is built) on the same values, and on id lists as long as a
    # batch's answer has (64 ids and their commas)
    count, seed = data.draw(st.integers(0, 64)), data.draw(st.integers(0, (1 << 128) - 1))
    long_ids = [",".join(f"{(seed * (i + 1) + k) % (1 << 128):032X}" for i in range(count)) for k in range(len(keys))]
    for vals in (plain, long_ids):
        header = template.fill(opaque, *map(str, vals))
        assert template.frame_plain(opaque, *vals) == struct.pack(">ii", 4 + len(header), len(header)) + header


def test_the_c_filler_takes_a_batch_answers_id_list():
    """A SEND_BATCH_MESSAGE answer's msgId is 64 ids long; the C filler writes it (it once gave up on
    any value of 128 characters or more, and the answer went through a % format instead)."""
    if command._fill_frame is None:
        pytest.skip("the C header module is not built")
    marks = {"msgId": "\x00m0\x00"}
    template = command.HeaderTemplate.make(RemotingCommand(0, 0, 1, None, {"a": "b", **marks}), marks)
    ids = ",".join(f"{i:032X}" for i in range(64))
    got = command._fill_frame(template.byte_parts, template.slots, 7, ids)
    header = template.fill(7, ids)
    assert got == struct.pack(">ii", 4 + len(header), len(header)) + header
    assert command._fill_frame(template.byte_parts, template.slots, 7, 'a"' * 100) is None    # needs an escape


def test_the_send_answer_is_the_header_encode_writes():
    import dataclasses

    import types

    from mqtool.broker.config import BrokerConfig
    from mqtool.broker.send import _put_response
    from mqtool_store.messagestore import PutResult, PutStatus
    default, traced_off = BrokerConfig(), BrokerConfig(regionId="eu-\"1\"", traceOn=False)
    for queue_id, offset, ids, cfg in ((0, 0, ["7F00000100002A9F0000000000000000"], default),
                                       (3, 1 << 40, ["A", "B\"", "ü"], default), (1, 5, ["C"], traced_off)):
        resp = _put_response(RemotingCommand(310, 99, 0, None, {}), types.SimpleNamespace(config=cfg),
                             PutResult(PutStatus.PUT_OK, 0, 1, offset, ids, 1), queue_id)
        assert resp.header_json is not None
        assert (resp.ext_fields["MSG_REGION"], resp.ext_fields["TRACE_ON"]) == \
            (cfg.regionId, "true" if cfg.traceOn else "false")
        assert resp.encode() == dataclasses.replace(resp, header_json=None).encode()
