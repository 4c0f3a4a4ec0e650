"""The producer writes SEND_MESSAGE_V2 headers directly: they must equal the typed header's V2 form."""
from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from mqtool.client.producer import send_request
from mqtool_remoting.codes import RPC_ONEWAY, RequestCode
from mqtool_remoting.headers import SendMessageRequestHeader, send_header_from_v2, send_header_to_v2


def test_direct_v2_header_equals_the_typed_one():
    for batch, oneway in ((False, False), (True, True)):
        cmd = send_request("PG", "T", 3, 0x105, 7, "KEYS\x01k\x02WAIT\x01true", b"body", batch, oneway)
        h = send_header_from_v2(cmd.ext_fields)
        expected = SendMessageRequestHeader("PG", "T", "TBW102", 4, 3, 0x105, h.bornTimestamp, 7,
                                            "KEYS\x01k\x02WAIT\x01true", 0, False, batch)
        assert cmd.ext_fields == send_header_to_v2(expected)
        assert cmd.code == (RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2)
        assert bool(cmd.flag & RPC_ONEWAY) == oneway and cmd.body == b"body"


NAMES = st.text(min_size=1, max_size=10)


@given(NAMES, NAMES, st.integers(0, 1 << 20), st.integers(-5, 1 << 20), st.text(max_size=40), st.booleans(),
       st.booleans(), st.integers(-1, 1000))
def test_the_header_template_writes_what_the_general_encoder_writes(group, topic, sys_flag, flag, props, batch,
                                                                    oneway, queue_id):
    cmd = send_request(group, topic, queue_id, sys_flag, flag, props, b"b", batch, oneway)
    assert cmd.encode() == dataclasses.replace(cmd, header_json=None).encode()


def test_the_usual_send_uses_the_template_and_a_clash_with_its_marks_does_not():
    assert send_request("PG", "T", 1, 0, 0, "WAIT\x01true", b"", False, False).header_json is not None
    assert send_request("\x00queue\x00", "T", 1, 0, 0, "", b"", False, False).header_json is None
