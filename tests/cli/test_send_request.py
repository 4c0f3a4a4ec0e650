"""The producer writes SEND_MESSAGE_V2 headers directly: they must equal the typed header's V2 form."""
from __future__ import annotations

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
