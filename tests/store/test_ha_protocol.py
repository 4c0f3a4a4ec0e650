"""The HA wire codec (spec ha.md §2-§3): golden bytes one field a line, and readers fed in pieces."""
from __future__ import annotations

import pytest

from mqtool_store.ha.protocol import (FRAME_HEADER_SIZE, FrameReader, HAProtocolError, ReportReader, encode_frame_header,
                               encode_report)


def test_report_is_eight_big_endian_bytes():
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert encode_report(0) == bytes(8)


def test_frame_header_golden_bytes():
    golden = bytes.fromhex(
        "0000000040000000"      # phyOffset 1 GiB (int64 BE)
        "00008000")             # size 32768 (int32 BE)
    assert encode_frame_header(1 << 30, 32768) == golden
    assert FRAME_HEADER_SIZE == 12


def test_report_reader_takes_the_last_complete_value():
    r = ReportReader()
    assert r.feed(encode_report(100)[:5]) is None          # a partial value is kept, not read
    assert r.feed(encode_report(100)[5:]) == 100
    # Several reports in one read: only the last complete one counts (ReadSocketService).
    assert r.feed(encode_report(200) + encode_report(300) + encode_report(400)[:3]) == 300
    assert r.feed(encode_report(400)[3:]) == 400
    assert r.reports == 4


def test_report_reader_rejects_a_negative_offset():
    with pytest.raises(HAProtocolError):
        ReportReader().feed(encode_report(-1))


def test_frame_reader_reassembles_frames_split_anywhere():
    stream = (encode_frame_header(1000, 5) + b"hello" + encode_frame_header(1005, 0)
              + encode_frame_header(1005, 3) + b"abc")
    for cut in range(1, len(stream)):
        r = FrameReader()
        frames = r.feed(stream[:cut]) + r.feed(stream[cut:])
        assert [(f.offset, f.data) for f in frames] == [(1000, b"hello"), (1005, b""), (1005, b"abc")]
        assert frames[1].heartbeat and not frames[0].heartbeat
        assert r.buffered == 0


@pytest.mark.parametrize("header", [encode_frame_header(0, -1), encode_frame_header(-8, 4),
                                    encode_frame_header(0, 0x7FFFFFFF)])
def test_frame_reader_rejects_impossible_headers(header):
    with pytest.raises(HAProtocolError):
        FrameReader(max_size=1 << 20).feed(header)


def test_reading_in_place_with_a_small_buffer_grows_and_compacts():
    frames = [(i * 1000, bytes([i]) * (i * 7 % 50)) for i in range(40)]
    stream = b"".join(encode_frame_header(o, len(d)) + d for o, d in frames)
    r = FrameReader(capacity=16)
    got, pos = [], 0
    while pos < len(stream):
        room = r.writable()
        n = min(len(room), 13, len(stream) - pos)       # short reads, as a socket gives them
        room[:n] = stream[pos:pos + n]
        pos += n
        got += [(o, bytes(d)) for o, d in r.filled(n)]
    assert got == frames and r.buffered == 0
