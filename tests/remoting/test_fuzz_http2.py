"""Property tests of the HTTP/2 and HPACK decoders on hostile input: random or mutated bytes may end a
connection (a CLOSED event, GOAWAY sent) or be refused as HpackError, never raise anything else.
Profiles: tests/conftest.py."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqtool_remoting import grpcwire, hpack, http2
from mqtool_remoting.http2 import Flag, Frame

FRAME_KINDS = st.sampled_from(list(Frame) + [10, 255])


@st.composite
def frames(draw):
    """Frames with random kinds, flags, stream ids and payloads: each well framed, most nonsense."""
    kind = draw(FRAME_KINDS)
    sid = draw(st.sampled_from([0, 1, 2, 3, 5, 0x7FFF_FFFF]))
    payload = draw(st.binary(max_size=64))
    return http2.frame(kind, draw(st.integers(0, 255)), sid, payload)


@given(st.lists(frames(), max_size=12), st.integers(1, 40))
def test_any_frames_end_in_events_never_in_an_exception(parts, chunk):
    conn = http2.Connection()
    data = http2.PREFACE + b"".join(parts)
    for i in range(0, len(data), chunk):             # fed in pieces, as the socket delivers them
        for event in conn.receive(data[i:i + chunk]):
            assert event[0] in (http2.REQUEST, http2.DATA, http2.RESET, http2.GOAWAY, http2.CLOSED)
        conn.take()


@given(st.binary(max_size=200))
def test_random_bytes_after_the_preface(junk):
    conn = http2.Connection()
    conn.receive(http2.PREFACE + junk)
    conn.take()


@given(st.binary(max_size=120))
def test_hpack_decodes_or_refuses(block):
    try:
        for name, value in hpack.Decoder().decode(block):
            assert isinstance(name, bytes) and isinstance(value, bytes)
    except hpack.HpackError:
        pass


@given(st.binary(max_size=60))
def test_huffman_decodes_or_refuses(data):
    try:
        hpack.huffman_decode(data)
    except hpack.HpackError:
        pass


@given(st.lists(st.tuples(st.sampled_from([b":path", b"x-mq-client-id", b"grpc-timeout", b"te"]),
                          st.binary(max_size=40)), max_size=6))
def test_a_request_with_any_literal_headers_comes_out_as_sent(fields):
    conn = http2.Connection()
    conn.take()
    block = b"".join(hpack.literal(n, v) for n, v in fields)
    events = conn.receive(http2.PREFACE + http2.frame(Frame.SETTINGS, 0, 0) +
                          http2.frame(Frame.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, 1, block))
    assert events == [(http2.REQUEST, 1, list(fields), True)]


@given(st.binary(max_size=80), st.integers(1, 10))
def test_grpc_message_reader_yields_or_refuses(data, chunk):
    reader = grpcwire.MessageReader(32)
    try:
        for i in range(0, len(data), chunk):
            reader.feed(data[i:i + chunk])
    except grpcwire.GrpcWireError:
        pass
