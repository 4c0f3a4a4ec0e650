"""HPACK against RFC 7541's own examples (Appendix C), and the sans-IO HTTP/2 connection fed bytes by hand:
preface, SETTINGS, PING, flow control both ways, padding, CONTINUATION, and errors as GOAWAY."""
from __future__ import annotations

import os
import struct

import pytest

from mqtool_remoting import grpcwire, hpack, http2
from mqtool_remoting.http2 import DATA, REQUEST, RESET, Flag, Frame

H = bytes.fromhex


def pairs(*items: str) -> list[tuple[bytes, bytes]]:
    return [tuple(x.encode() for x in item.split("=", 1)) for item in items]


# C.3 / C.4: three requests on one connection, without and with Huffman strings
REQUESTS = [
    (pairs(":method=GET", ":scheme=http", ":path=/", ":authority=www.example.com"),
     H("828684410f7777772e6578616d706c652e636f6d"), H("828684418cf1e3c2e5f23a6ba0ab90f4ff"), 57),
    (pairs(":method=GET", ":scheme=http", ":path=/", ":authority=www.example.com", "cache-control=no-cache"),
     H("828684be58086e6f2d6361636865"), H("828684be5886a8eb10649cbf"), 110),
    (pairs(":method=GET", ":scheme=https", ":path=/index.html", ":authority=www.example.com",
           "custom-key=custom-value"),
     H("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"),
     H("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"), 164),
]


@pytest.mark.parametrize("huffman", [False, True])
def test_rfc7541_request_examples(huffman):
    decoder = hpack.Decoder()
    for headers, plain, packed, table_size in REQUESTS:
        assert decoder.decode(packed if huffman else plain) == headers
        assert decoder.size == table_size


def test_rfc7541_responses_evict_from_a_256_byte_table():
    """C.5: a table of 256 bytes; the second response evicts the first's :status 302."""
    decoder = hpack.Decoder(256)
    first = H("4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d54"
              "6e1768747470733a2f2f7777772e6578616d706c652e636f6d")
    assert decoder.decode(first) == pairs(":status=302", "cache-control=private",
                                          "date=Mon, 21 Oct 2013 20:13:21 GMT", "location=https://www.example.com")
    assert decoder.size == 222
    assert decoder.decode(H("4803333037c1c0bf")) == pairs(
        ":status=307", "cache-control=private", "date=Mon, 21 Oct 2013 20:13:21 GMT",
        "location=https://www.example.com")
    assert decoder.size == 222 and decoder.table[-1] == (b"cache-control", b"private")


def test_huffman_round_trip_and_what_it_refuses():
    assert hpack.huffman_encode(b"www.example.com") == H("f1e3c2e5f23a6ba0ab90f4ff")
    for data in (b"", b"x-mq-date-time", os.urandom(300), bytes(range(256))):
        assert hpack.huffman_decode(hpack.huffman_encode(data)) == data
    with pytest.raises(hpack.HpackError, match="padding"):
        hpack.huffman_decode(b"\x00")                       # '0' then 3 zero bits: not EOS's ones
    with pytest.raises(hpack.HpackError, match="padding"):
        hpack.huffman_decode(H("f1e3c2e5f23a6ba0ab90f4ff") + b"\xff")    # 8 bits of padding
    with pytest.raises(hpack.HpackError, match="EOS"):
        hpack.huffman_decode(b"\xff\xff\xff\xff")           # 30 ones is EOS itself


def test_decoder_errors_and_table_size_updates():
    with pytest.raises(hpack.HpackError, match="not in the table"):
        hpack.Decoder().decode(H("be"))                     # index 62, empty dynamic table
    with pytest.raises(hpack.HpackError, match="runs past"):
        hpack.Decoder().decode(H("410f7777"))               # a 15-byte string cut short
    with pytest.raises(hpack.HpackError, match="over"):
        hpack.Decoder(4096).decode(hpack.encode_int(8192, 5, 0x20))
    decoder = hpack.Decoder()
    decoder.decode(REQUESTS[0][1])
    decoder.decode(b"\x20")                                 # size 0 empties the table
    assert decoder.table == [] and decoder.size == 0
    assert hpack.encode_int(1337, 5, 0) == H("1f9a0a")      # C.1.2


def test_literal_fields_decode_back():
    block = grpcwire.trailers(13, "bad: 100% wrong", only=True)
    assert hpack.Decoder().decode(block) == [(b":status", b"200"), (b"content-type", b"application/grpc"),
                                             (b"grpc-status", b"13"), (b"grpc-message", b"bad: 100%25 wrong")]


# ---------------------------------------------------------------------- the connection

def frames(data: bytes) -> list[tuple[int, int, int, bytes]]:
    out, pos = [], 0
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 3], "big")
        kind, flags, sid = data[pos + 3], data[pos + 4], int.from_bytes(data[pos + 5:pos + 9], "big")
        out.append((kind, flags, sid, data[pos + 9:pos + 9 + length]))
        pos += 9 + length
    return out


def opened(settings: bytes = b"") -> http2.Connection:
    conn = http2.Connection()
    greeting = frames(conn.take())
    assert [f[0] for f in greeting] == [Frame.SETTINGS, Frame.WINDOW_UPDATE]
    assert conn.receive(http2.PREFACE[:10]) == []           # a preface in pieces
    assert conn.receive(http2.PREFACE[10:] + http2.frame(Frame.SETTINGS, 0, 0, settings)) == []
    assert frames(conn.take()) == [(Frame.SETTINGS, Flag.ACK, 0, b"")]
    return conn


def request(sid: int, end: bool = False) -> bytes:
    block = hpack.literal(b":path", b"/s/M") + H("83")      # :method POST
    return http2.frame(Frame.HEADERS, Flag.END_HEADERS | (Flag.END_STREAM if end else 0), sid, block)


def test_requests_data_padding_continuation_and_ping():
    conn = opened()
    block = hpack.literal(b":path", b"/s/M") + hpack.literal(b"x-mq-client-id", b"c" * 40)
    padded = bytes([3]) + b"hello" + b"\0\0\0"
    events = conn.receive(http2.frame(Frame.HEADERS, 0, 1, block[:10]) +
                          http2.frame(Frame.CONTINUATION, Flag.END_HEADERS, 1, block[10:]) +
                          http2.frame(Frame.DATA, Flag.PADDED | Flag.END_STREAM, 1, padded) +
                          http2.frame(Frame.PING, 0, 0, b"12345678"))
    assert events == [(REQUEST, 1, [(b":path", b"/s/M"), (b"x-mq-client-id", b"c" * 40)], False),
                      (DATA, 1, b"hello", True)]
    assert frames(conn.take()) == [(Frame.PING, Flag.ACK, 0, b"12345678")]


def test_sending_waits_for_the_peers_windows():
    conn = opened(struct.pack(">HL", http2.Setting.INITIAL_WINDOW_SIZE, 10))
    conn.receive(request(1, end=True))
    conn.send_headers(1, grpcwire.RESPONSE_HEADERS)
    conn.send_data(1, b"a" * 25)
    conn.send_headers(1, grpcwire.trailers(0), end_stream=True)     # behind the data
    sent = frames(conn.take())
    assert [(f[0], len(f[3])) for f in sent] == [(Frame.HEADERS, len(grpcwire.RESPONSE_HEADERS)), (Frame.DATA, 10)]
    assert conn.blocked(1) == 15
    conn.receive(http2.frame(Frame.WINDOW_UPDATE, 0, 1, struct.pack(">L", 10)))
    assert [(f[0], f[1], len(f[3])) for f in frames(conn.take())] == [(Frame.DATA, 0, 10)]
    conn.receive(http2.frame(Frame.SETTINGS, 0, 0, struct.pack(">HL", http2.Setting.INITIAL_WINDOW_SIZE, 100)))
    rest = frames(conn.take())                                      # the new initial size frees the rest
    assert [(f[0], f[1]) for f in rest] == [(Frame.DATA, 0), (Frame.HEADERS, Flag.END_STREAM | Flag.END_HEADERS),
                                            (Frame.SETTINGS, Flag.ACK)]
    assert len(rest[0][3]) == 5 and 1 not in conn.streams


def test_received_data_is_credited_back():
    conn = opened()
    conn.receive(request(1))
    chunk = b"x" * http2.MAX_FRAME
    sent = 0
    while sent <= http2.RECEIVE_WINDOW // 2:
        conn.receive(http2.frame(Frame.DATA, 0, 1, chunk))
        sent += len(chunk)
    updates = {f[2]: struct.unpack(">L", f[3])[0] for f in frames(conn.take()) if f[0] == Frame.WINDOW_UPDATE}
    assert updates == {0: sent, 1: sent}


def test_reset_and_protocol_errors():
    conn = opened()
    conn.receive(request(1))
    assert conn.receive(http2.frame(Frame.RST_STREAM, 0, 1, struct.pack(">L", 8))) == [(RESET, 1, 8)]
    assert conn.receive(http2.frame(Frame.DATA, 0, 1, b"late")) == []       # after the reset: dropped
    for bad, code in ((request(2), http2.ErrorCode.PROTOCOL_ERROR),        # an even (server) stream id
                      (http2.frame(Frame.RST_STREAM, 0, 1, bytes(4)) + request(1),   # a stream id used again
                       http2.ErrorCode.PROTOCOL_ERROR),
                      (http2.frame(Frame.DATA, 0, 7, b"x"), http2.ErrorCode.PROTOCOL_ERROR),   # idle stream
                      (http2.frame(Frame.HEADERS, Flag.END_HEADERS, 9, H("ff")), http2.ErrorCode.COMPRESSION_ERROR),
                      (b"\x00\x40\x01" + bytes(6), http2.ErrorCode.FRAME_SIZE_ERROR)):
        c = opened()
        c.receive(request(1))
        events = c.receive(bad)
        assert events[-1][0] == http2.CLOSED and events[-1][2] == code, bad
        goaway = frames(c.take())[-1]
        assert goaway[0] == Frame.GOAWAY and struct.unpack(">LL", goaway[3][:8]) == (1, code)
    junk = http2.Connection()
    assert junk.receive(b"GET / HTTP/1.1\r\n")[-1][0] == http2.CLOSED


def test_grpc_messages_split_and_joined():
    reader = grpcwire.MessageReader(100)
    wire = grpcwire.message(b"one") + grpcwire.message(b"") + grpcwire.message(b"three")
    assert [m for i in range(len(wire)) for m in reader.feed(wire[i:i + 1])] == [b"one", b"", b"three"]
    assert reader.feed(wire) == [b"one", b"", b"three"]
    with pytest.raises(grpcwire.GrpcWireError, match="larger than max"):
        reader.feed(grpcwire.message(b"x" * 101))
    with pytest.raises(grpcwire.GrpcWireError) as err:
        grpcwire.MessageReader(100).feed(b"\x01" + struct.pack(">L", 1) + b"x")
    assert err.value.status == grpcwire.StatusCode.UNIMPLEMENTED
    assert grpcwire.timeout_seconds(b"250m") == 0.25 and grpcwire.timeout_seconds(b"3S") == 3.0
    assert grpcwire.timeout_seconds(b"S") is None and grpcwire.timeout_seconds(b"1000000000n") is None


def test_goaway_either_way_lets_open_streams_finish():
    conn = opened()
    conn.receive(request(1))
    events = conn.receive(http2.frame(Frame.GOAWAY, 0, 0, struct.pack(">LL", 1, 0)) +
                          http2.frame(Frame.DATA, Flag.END_STREAM, 1, b"still"))
    assert events == [(http2.GOAWAY, 0, 0, ""), (DATA, 1, b"still", True)]
    ours = opened()
    ours.receive(request(1))
    ours.goaway()
    ours.goaway()                                                   # once only
    assert [f[0] for f in frames(ours.take())] == [Frame.GOAWAY]
    assert ours.receive(request(3, end=True) + http2.frame(Frame.DATA, Flag.END_STREAM, 1, b"x")) == [
        (DATA, 1, b"x", True)]                                       # stream 3 refused, stream 1 served
    assert frames(ours.take()) == [(Frame.RST_STREAM, 0, 3, struct.pack(">L", http2.ErrorCode.REFUSED_STREAM))]
    ours.send_data(1, b"answer", end_stream=True)
    assert frames(ours.take())[0][:3] == (Frame.DATA, Flag.END_STREAM, 1)
