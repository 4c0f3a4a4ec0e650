"""The send hot path's C header reader (remoting/csrc/header.c) against its Python reference
(`fastsend.py_send_fields`, orjson and its checks): wherever the C reader answers, it answers what
the Python one does; it answers for the headers clients send (Java's, the C++ client's escapes);
and it never takes a header the Python reader refuses."""
from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings, strategies as st

from mqtool.broker import fastsend

_header = pytest.importorskip("mqtool_remoting._header")
c_fields = _header.send_v2_fields
C_READERS = {310: _header.send_v2_fields, 320: _header.send_batch_fields}   # SEND_MESSAGE_V2, SEND_BATCH_MESSAGE


def frame(header: bytes | str, body: bytes = b"hello") -> bytes:
    """A frame without its length field, as the fast path gets it."""
    if isinstance(header, str):
        header = header.encode()
    return struct.pack(">i", len(header)) + header + body


def java_header(ext: dict, opaque: int = 7, **top) -> dict:
    head = {"code": 310, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON", "version": 395}
    head.update(top)
    return head


EXT = {"a": "PG", "b": "TopicA", "c": "TBW102", "d": "4", "e": "-1", "f": "0", "g": "1700000000000", "h": "0",
       "i": "TAGS\x01T\x02KEYS\x01k1 k2\x02WAIT\x01true\x02", "j": "0", "k": "false", "m": "false"}


def same(body: bytes, code: int = 310) -> object:
    got, want = C_READERS[code](body), fastsend.py_send_fields(body, code)
    assert got is None or got == want, (body, got, want)
    return got


@pytest.mark.parametrize("text", [
    json.dumps(java_header(EXT), separators=(",", ":")),                      # fastjson's shape
    json.dumps(java_header(EXT)),                                            # with spaces
    json.dumps(java_header(dict(EXT, b="Tópico", i="KEYS\x01ключ\x02")), ensure_ascii=False),
    json.dumps(java_header(dict(EXT, b="Tópico", i="KEYS\x01ключ 🐇\x02"))),  # \\u escapes of BMP text only
    json.dumps(java_header({k: v for k, v in EXT.items() if k not in "ijkm"}), separators=(",", ":")),
    json.dumps(java_header(EXT, remark="r", extra=5), separators=(",", ":")),
])
def test_the_headers_clients_send_are_read_as_the_python_reader_reads_them(text):
    body = frame(text)
    want = fastsend.py_send_fields(body)
    assert want is not None
    if "\\ud83d" in text:                     # a surrogate pair: left to the Python reader
        assert c_fields(body) is None
    else:
        assert c_fields(body) == want


@pytest.mark.parametrize("change", [
    {"code": 311}, {"flag": 1}, {"opaque": "7"}, {"opaque": 7.0}, {"version": "1"}, {"language": 1},
    {"remark": None}, {"extFields": None},
])
def test_top_level_fields_it_refuses(change):
    assert same(frame(json.dumps(java_header(EXT, **change)))) is None


@pytest.mark.parametrize("ext", [
    {k: v for k, v in EXT.items() if k != "a"}, {k: v for k, v in EXT.items() if k != "g"},
    dict(EXT, e="+1"), dict(EXT, e="1.0"), dict(EXT, e="12345678901"), dict(EXT, g="12345678901234567890"),
    dict(EXT, m="TRUE"), dict(EXT, m="true"), dict(EXT, j="x"), dict(EXT, d=4), dict(EXT, h=""),
])
def test_ext_fields_it_refuses(ext):
    assert same(frame(json.dumps(java_header(ext)))) is None


@pytest.mark.parametrize("raw", [
    b"\x01\x00\x00\x02{}", b"\x00\x00\x00\x10{}",                      # binary header, length past the end
    frame(b'{"code":310,"extFields":{"a":"\\x"}}'), frame(b'{"code":310} trailing'),
    frame(json.dumps(java_header(EXT)).encode().replace(b"JAVA", b"J\xffVA")),   # not UTF-8
    frame(json.dumps(java_header(EXT)).encode().replace(b"JAVA", b"J\\ud800A")),  # a lone surrogate
    frame(json.dumps(java_header(EXT), separators=(",", ":")).encode().replace(b'"flag":0', b'"flag":00')),
])
def test_bytes_it_leaves_alone(raw):
    assert same(raw) is None


_ints = st.one_of(st.integers(-2 ** 40, 2 ** 40).map(str), st.sampled_from(["", "-", "-0", "007", "1e3", " 1", "٣"]))
_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries({"a": _text, "b": _text, "c": _text, "d": _ints, "e": _ints, "f": _ints,
                              "g": _ints, "h": _ints},
                             optional={"i": _text, "j": _ints, "m": st.sampled_from(["true", "True", "false", "x", "\u00e9"]),
                                       "zz": _text}),
       st.integers(-2 ** 31, 2 ** 31), st.booleans(), st.booleans(), st.sampled_from([310, 320]))
def test_any_header_is_read_as_the_python_reader_reads_it(ext, opaque, ascii_only, spaced, code):
    text = json.dumps(java_header(ext, opaque, code=code), ensure_ascii=ascii_only,
                      separators=(", ", ": ") if spaced else (",", ":"))
    for reader_code in (310, 320):
        got = same(frame(text), reader_code)
        assert got is None or reader_code == code


@pytest.mark.parametrize("m", [None, "true", "TRUE", "false", "x"])
def test_a_batch_header_is_read_whatever_its_batch_flag_says(m):
    """SEND_BATCH_MESSAGE is a batch whatever "m" says (send.py: `h.batch or` the code); a V2 send
    saying "m": "true" is one too, and neither fast reader takes it."""
    ext = {k: v for k, v in EXT.items() if k != "m"} if m is None else dict(EXT, m=m)
    body = frame(json.dumps(java_header(ext, code=320), separators=(",", ":")))
    assert same(body, 320) == fastsend.py_send_fields(body, 320) is not None
    assert same(body, 310) is None
    v2 = frame(json.dumps(java_header(ext), separators=(",", ":")))
    assert same(v2, 320) is None
    assert (same(v2, 310) is None) == (m is not None and m.lower() == "true")


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 400), st.binary(min_size=1, max_size=3))
def test_a_damaged_header_is_never_read_otherwise(at, junk):
    text = json.dumps(java_header(EXT), separators=(",", ":")).encode()
    at %= len(text)
    same(frame(text[:at] + junk + text[at + len(junk):]))
