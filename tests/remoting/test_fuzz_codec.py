"""Property tests of the wire codec: frames, both header encodings, the extFields of every header.

Round trips (build -> parse -> the same command) and hostile input (random or mutated bytes): the
decoders may only raise the library's own errors (FrameError, HeaderError), never IndexError,
struct.error, UnicodeDecodeError, RecursionError or a hang. Profiles: tests/conftest.py.
"""
from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mqtool_remoting import headers
from mqtool_remoting.codes import FRAME_MAX_LENGTH, LanguageCode, SerializeType
from mqtool_remoting.command import RemotingCommand, decode_frame, decode_frame_body
from mqtool_remoting.errors import FrameError, HeaderError
from mqtool_remoting.extfields import _from_ext_fields, _spec, from_ext_fields, to_ext_fields
from mqtool_remoting.headers import _V2_BACK, SendMessageRequestHeader, send_header_from_v2
from mqtool_remoting.framing import FrameDecoder

I16 = st.integers(-(1 << 15), (1 << 15) - 1)
I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
TEXT = st.text(max_size=30)
WORD = st.text(min_size=1, max_size=20)
LANGS = st.sampled_from([lang.name for lang in LanguageCode])


@st.composite
def commands(draw, serialize_type: int | None = None) -> RemotingCommand:
    stype = draw(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ])) if serialize_type is None \
        else SerializeType(serialize_type)
    if stype == SerializeType.ROCKETMQ:   # a null or empty string is absent there: length 0 means null
        ext = draw(st.dictionaries(WORD, WORD, max_size=6))
        remark = draw(st.none() | WORD)
        code, version = draw(I16), draw(I16)
    else:
        ext = draw(st.dictionaries(TEXT, TEXT, max_size=6))
        remark = draw(st.none() | TEXT)
        code, version = draw(I32), draw(I32)
    return RemotingCommand(code, draw(I32), draw(I32), remark, ext, draw(st.binary(max_size=64)), draw(LANGS),
                           version, stype)


def _mutate(data: bytes, draw) -> bytes:
    """One to four random edits: flip a byte, insert, delete, or cut the tail."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "cut"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "flip" and out:
            out[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and out:
            del out[at:at + draw(st.integers(1, 8))]
        elif kind == "cut":
            del out[at:]
    return bytes(out)


def _feed_all(data: bytes, cuts: list[int]) -> list[RemotingCommand]:
    dec, out, prev = FrameDecoder(), [], 0
    for cut in sorted(c % (len(data) + 1) for c in cuts) + [len(data)]:
        out += dec.feed(data[prev:cut])
        prev = cut
    assert dec.pending == 0
    return out


def _reencodes(cmd: RemotingCommand) -> None:
    """Whatever decoded must be answerable: the command and a response to it encode, or FrameError."""
    for c in (cmd, cmd.response(1, cmd.remark, cmd.ext_fields)):
        try:
            frame = c.encode()
        except FrameError:
            continue
        decode_frame(frame)


# ------------------------------------------------------------------ round trips

@given(st.lists(commands(), max_size=5), st.lists(st.integers(0, 1 << 16), max_size=6))
def test_frames_round_trip_through_the_decoder_in_any_chunks(cmds, cuts):
    data = b"".join(c.encode() for c in cmds)
    assert _feed_all(data, cuts) == cmds


def _fed(feeder, data: bytes, cuts: list[int]):
    """(commands got, the FrameError's text or None) of feeding `data` in `cuts` chunks to `feeder`."""
    out, prev = [], 0
    try:
        for cut in sorted(c % (len(data) + 1) for c in cuts) + [len(data)]:
            out += feeder(data[prev:cut])
            prev = cut
    except FrameError as exc:
        return out + list(exc.decoded), str(exc)
    return out, None


def _bodies_then_decode(dec: FrameDecoder):
    """What a server with a fast path does that takes nothing: bodies, each decoded after."""
    def decode(bodies: list[bytes]) -> list[RemotingCommand]:
        out = []
        for body in bodies:
            try:
                out.append(decode_frame_body(body))
            except FrameError as exc:
                raise FrameError(str(exc), out) from None
        return out

    def feed(chunk: bytes) -> list[RemotingCommand]:
        try:
            bodies = dec.bodies(chunk)
        except FrameError as exc:          # the bodies before the bad length, then the length's error
            raise FrameError(str(exc), decode(exc.decoded)) from None
        return decode(bodies)
    return feed


@given(st.data(), st.sampled_from(["frames", "bytes", "mutated"]), st.lists(st.integers(0, 1 << 12), max_size=6))
def test_bodies_then_decode_is_feed(draw, kind, cuts):
    """FrameDecoder.bodies (the transport's way when a server has a fast path) cuts the same frames
    as feed, and fails on the same bytes after the same good frames."""
    frames = b"".join(c.encode() for c in draw.draw(st.lists(commands(), max_size=5)))
    data = frames if kind == "frames" else draw.draw(st.binary(max_size=300)) if kind == "bytes" else \
        _mutate(frames + draw.draw(commands()).encode(), draw.draw)
    assert _fed(_bodies_then_decode(FrameDecoder()), data, cuts) == _fed(FrameDecoder().feed, data, cuts)


@given(commands())
def test_decode_frame_is_the_inverse_of_encode(cmd):
    assert decode_frame(cmd.encode()) == cmd


# ------------------------------------------------------------------ hostile bytes

@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=5))
@example(b"\x7f\xff\xff\xff", [])                  # a 2 GiB length prefix
@example(b"\x00\x00\x00\x03abc", [])               # shorter than its own header-length field
@example(b"\x00\x00\x00\x08\x00\x00\x00\x09abcd", [])   # header length past the frame
@example(b"\x00\x00\x00\x06\x07\x00\x00\x00ab", [])     # serialize type 7
def test_random_bytes_only_raise_frame_error(data, cuts):
    dec, prev = FrameDecoder(), 0
    try:
        for cut in sorted(c % (len(data) + 1) for c in cuts) + [len(data)]:
            for cmd in dec.feed(data[prev:cut]):
                _reencodes(cmd)
            prev = cut
    except FrameError:
        with pytest.raises(FrameError):              # a failed decoder stays failed
            dec.feed(b"\x00\x00\x00\x08\x00\x00\x00\x00")
    assert dec.pending <= FRAME_MAX_LENGTH + 4


@given(st.data())
def test_mutated_frames_only_raise_frame_error(data):
    frame = data.draw(commands()).encode()
    bad = _mutate(frame, data.draw)
    try:
        for cmd in FrameDecoder().feed(bad):
            _reencodes(cmd)
    except FrameError:
        pass


def _json_values():
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10)
    return st.recursive(scalars, lambda kids: st.lists(kids, max_size=4) |
                        st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=12)


def _header_fields():
    keys = st.sampled_from(["code", "opaque", "flag", "remark", "extFields", "language", "version",
                            "serializeTypeCurrentRPC"]) | st.text(max_size=6)
    return st.dictionaries(keys, _json_values(), max_size=8)


@given(_header_fields(), st.binary(max_size=16))
@example({"code": 10, "remark": "\ud800", "extFields": {"topic": "\udfff"}}, b"")   # lone surrogates (escaped)
@example({"code": "1" * 5000}, b"")                 # longer than int()'s digit limit
@example({"code": 1, "opaque": 1e300}, b"")
def test_json_headers_of_any_shape_decode_or_raise_frame_error(obj, body):
    header = json.dumps(obj).encode()
    frame_body = ((len(header)).to_bytes(4, "big")) + header + body
    try:
        cmd = decode_frame_body(frame_body)
    except FrameError:
        return
    _reencodes(cmd)


@pytest.mark.parametrize("header", [b"[" * 100_000, b"{\"code\":" + b"[" * 100_000, b"{{" * 50_000])
def test_deeply_nested_json_header_is_a_frame_error(header):
    with pytest.raises(FrameError):
        decode_frame_body(len(header).to_bytes(4, "big") + header)


@given(st.binary(max_size=200))
def test_binary_headers_of_random_bytes_decode_or_raise_frame_error(header):
    mark = (int(SerializeType.ROCKETMQ) << 24) | len(header)
    try:
        cmd = decode_frame_body(mark.to_bytes(4, "big") + header)
    except FrameError:
        return
    _reencodes(cmd)


@given(st.data())
def test_mutated_binary_headers_only_raise_frame_error(data):
    frame = data.draw(commands(SerializeType.ROCKETMQ)).encode()
    try:
        FrameDecoder().feed(_mutate(frame, data.draw))
    except FrameError:
        pass


def test_an_oversized_ext_key_is_a_frame_error_when_encoding():
    cmd = RemotingCommand(1, 1, 0, None, {"k" * 40_000: "v"}, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(FrameError):
        cmd.encode()


# ------------------------------------------------------------------ extFields <-> every header class

HEADER_CLASSES = sorted((c for c in vars(headers).values() if dataclasses.is_dataclass(c) and isinstance(c, type)
                         and c.__module__ == headers.__name__), key=lambda c: c.__name__)
_VALUES = {"str": st.text(max_size=20), "int": I32, "long": I64, "bool": st.booleans(),
           "float": st.floats(allow_nan=False, allow_infinity=False)}


@st.composite
def header_instances(draw, cls):
    kwargs = {}
    for name, (kind, required) in _spec(cls).items():
        if required or draw(st.booleans()):
            kwargs[name] = draw(_VALUES[kind])
    return cls(**kwargs)


def test_every_header_class_is_covered():
    assert len(HEADER_CLASSES) >= 40


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_header_round_trips_through_ext_fields(cls, data):
    h = data.draw(header_instances(cls))
    assert from_ext_fields(cls, to_ext_fields(h)) == h


_EXT_VALUES = st.sampled_from(["", "0", "-1", "true", "TRUE", "2147483648", "-9223372036854775809", "1e5", "NaN",
                               " 1", "+7", "1_0", "\u0661", "0x10", "1.5f"]) | st.text(max_size=8)


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_header_from_any_ext_fields_raises_only_header_error(cls, data):
    names = list(_spec(cls)) + ["unknown"]
    ext = data.draw(st.dictionaries(st.sampled_from(names), _EXT_VALUES, max_size=len(names)))
    try:
        h = from_ext_fields(cls, ext)
    except HeaderError:
        return
    from_ext_fields(cls, to_ext_fields(h))


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_the_compiled_reader_reads_what_the_general_reader_reads(cls, data):
    names = list(_spec(cls)) + ["unknown"]
    values = _EXT_VALUES | st.integers(-(1 << 65), 1 << 65) | st.booleans() | st.integers(0, 10**12).map(str)
    ext = data.draw(st.dictionaries(st.sampled_from(names), values, max_size=len(names)))
    assert _outcome(lambda: from_ext_fields(cls, ext)) == _outcome(lambda: _from_ext_fields(cls, ext, None))


def test_a_v2_send_header_reads_the_same_both_ways():
    ext = {"a": "G", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1795444190857", "h": "0",
           "i": "WAIT\x01true", "j": "0", "k": "false", "m": "false"}
    assert send_header_from_v2(ext) == _from_ext_fields(SendMessageRequestHeader, ext, _V2_BACK)
    assert send_header_from_v2(ext).queueId == 3 and send_header_from_v2(ext).maxReconsumeTimes is None


def _outcome(read):
    try:
        h = read()
    except HeaderError as exc:
        return "HeaderError", str(exc)
    return h, type(h), {f: type(v) for f, v in vars(h).items()}


def _read_into(dec: FrameDecoder, stream: bytes, cuts: list[int]):
    """The stream read into dec.space() as a socket would: at most the space each time, cut at
    `cuts` (sizes); every body out, or the FrameError met (with what came before it)."""
    out, at = [], 0
    sizes = iter(cuts)
    while at < len(stream):
        space = dec.space()
        n = min(len(space), len(stream) - at, max(1, next(sizes, len(stream))))
        space[:n] = stream[at:at + n]
        del space
        at += n
        try:
            out += dec.filled(n)
        except FrameError as exc:
            return out + exc.decoded, exc
    return out, None


@given(st.lists(st.binary(max_size=300), max_size=12), st.lists(st.integers(1, 400), max_size=40),
       st.sampled_from([0, 1, 2, 3]))
def test_reads_into_the_decoders_space_cut_the_frames_bodies_cuts(bodies, cuts, bad):
    """FrameDecoder.space/filled (a server's reads: asyncio.BufferedProtocol) give the bodies that
    `bodies` gives for the same stream, however the reads cut it; a bad length raises the same
    FrameError with the bodies before it."""
    stream = b"".join(len(b).to_bytes(4, "big") + b for b in (x + b"\0\0\0\0" for x in bodies))
    if bad:                            # a length outside 4..max_frame after the good frames
        stream += (b"\0\0\0\1", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xf0")[bad - 1] + b"rest"
    want_error = None
    try:
        want = FrameDecoder().bodies(stream)
    except FrameError as exc:
        want, want_error = exc.decoded, exc
    got, error = _read_into(FrameDecoder(), stream, cuts)
    assert got == want and [b[:-4] for b in got] == bodies
    assert (error is None) == (want_error is None) and str(error) == str(want_error)


def test_a_frame_larger_than_a_read_gets_room_and_the_buffer_goes_back_when_drained():
    from mqtool_remoting import framing
    big = bytes(range(256)) * 2000                     # 512,000 bytes: past READ_SIZE
    stream = len(big).to_bytes(4, "big") + big + (4).to_bytes(4, "big") + b"end!"
    dec = FrameDecoder()
    got, error = _read_into(dec, stream, [1, 5, 100_000])
    assert error is None and got == [big, b"end!"] and dec.pending == 0 and dec._read is None
    spare = framing._SPARE[-1]
    assert len(spare) == framing.READ_SIZE and dec.space().obj is spare    # lent again
