"""The JSON header writer formats numbers and names directly: its bytes must equal a plain
json.dumps of the same bean (fastjson's property order, extFields in HashMap order)."""
from __future__ import annotations

import json

import pytest

from mqtool_remoting import jsonbody
from mqtool_remoting.codes import LanguageCode
from mqtool_remoting.command import RemotingCommand, decode_frame


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
