"""Property tests of every body decoder: JSON bodies (bodies.py over jsonbody.py), the compressed
register body, the batch body, the message properties string and Java .properties text.

Round trips (object -> bytes -> the same object, in each encoding the peers use) and hostile input:
decoding may only raise BodyError (BatchFormatError is one), never TypeError, AttributeError,
UnicodeDecodeError, RecursionError, struct.error or zlib.error. Profiles: tests/conftest.py.
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
import zlib

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mqtool_remoting import bodies, javaprops, jsonbody
from mqtool_remoting.batch import BatchFormatError, decode_batch, encode_batch
from mqtool_remoting.bodies import RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, decode_body
from mqtool_remoting.errors import BodyError
from mqtool_store.properties import _parse_strict, format_properties, parse_properties

I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
NAME = st.text(min_size=1, max_size=12)
ENUMS = {"topicFilterType": bodies.TOPIC_FILTER_TYPES, "consumeType": bodies.CONSUME_TYPES,
         "messageModel": bodies.MESSAGE_MODELS, "consumeFromWhere": bodies.CONSUME_FROM_WHERE}

# Every body a peer sends us (has from_json) and that we also write (has to_json).
DECODED = sorted({c for c in vars(bodies).values() if isinstance(c, type) and dataclasses.is_dataclass(c)
                  and hasattr(c, "from_json")}, key=lambda c: c.__name__)   # a set: aliases count once
ROUND_TRIP = [c for c in DECODED if hasattr(c, "to_json")]


def _for_hint(hint) -> st.SearchStrategy:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = next(a for a in args if a is not type(None))
        return st.none() | _for_hint(inner)
    if origin is list:
        return st.lists(_for_hint(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(_for_hint(args[0]), _for_hint(args[1]), max_size=3)
    if dataclasses.is_dataclass(hint):
        return st.deferred(lambda: instances(hint))
    return {str: NAME, int: I64, bool: st.booleans()}[hint]


@st.composite
def instances(draw, cls):
    hints = typing.get_type_hints(cls, vars(bodies))
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in ENUMS:
            names = st.sampled_from(ENUMS[f.name])
            kwargs[f.name] = draw(names if hints[f.name] is str else st.none() | names)
        else:
            kwargs[f.name] = draw(_for_hint(hints[f.name]))
    return cls(**kwargs)


def test_the_body_lists_are_complete():
    assert len(ROUND_TRIP) >= 18 and bodies.CheckClientRequestBody in DECODED


@pytest.mark.parametrize("cls", ROUND_TRIP, ids=lambda c: c.__name__)
@given(data=st.data())
def test_json_bodies_round_trip_in_every_encoding(cls, data):
    obj = data.draw(instances(cls))
    for kw in ({}, {"bare_int_keys": True}, {"ascii_only": True}):
        assert decode_body(cls, jsonbody.dumps(obj.to_json(), **kw)) == obj


def _json_values():
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    return st.recursive(scalars, lambda kids: st.lists(kids, max_size=4) |
                        st.dictionaries(st.text(max_size=10), kids, max_size=5), max_leaves=16)


def _fields_of(cls) -> list[str]:
    names = [f.name for f in dataclasses.fields(cls)]
    return names + ["topicName", "brokerAddrs", "queueId", "groupName", "value", "subscriptionDataSet"]


@pytest.mark.parametrize("cls", DECODED, ids=lambda c: c.__name__)
@given(data=st.data())
def test_json_bodies_of_any_shape_decode_or_raise_body_error(cls, data):
    """Right keys, wrong values: the usual hostile body (a list for an object, text for a number)."""
    obj = data.draw(_json_values() | st.dictionaries(st.sampled_from(_fields_of(cls)), _json_values(), max_size=6))
    try:
        decode_body(cls, json.dumps(obj).encode())
    except BodyError:
        pass


@pytest.mark.parametrize("cls", DECODED, ids=lambda c: c.__name__)
@given(st.binary(max_size=120))
@example(b"[" * 50_000)
@example(b"{{" * 30_000)
@example(b"\xff\xfe")
@example(b'{"topicConfigTable":{"t":{"readQueueNums":1e400}}}')
def test_json_bodies_of_random_bytes_decode_or_raise_body_error(cls, raw):
    try:
        decode_body(cls, raw)
    except BodyError:
        pass


@given(data=st.data())
def test_mutated_json_bodies_decode_or_raise_body_error(data):
    cls = data.draw(st.sampled_from(ROUND_TRIP))
    raw = bytearray(jsonbody.dumps(data.draw(instances(cls)).to_json(), bare_int_keys=data.draw(st.booleans())))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if data.draw(st.booleans()) and raw:
            raw[at] = data.draw(st.sampled_from(b'{}[]:,"0a\\ '))
        else:
            del raw[at:]
    try:
        decode_body(cls, bytes(raw))
    except BodyError:
        pass


# ------------------------------------------------------------------ compressed register body

SPACELESS = st.text(st.characters(blacklist_characters=" ", blacklist_categories=("Cs",)), min_size=1, max_size=10)


@st.composite
def compressible_bodies(draw) -> RegisterBrokerBody:
    """What the compressed form carries: no topicSysFlag or order (TopicConfig.encode leaves them out)."""
    names = draw(st.lists(SPACELESS, max_size=4, unique=True))
    table = {n: TopicConfig(n, draw(I32), draw(I32), draw(I32), draw(st.sampled_from(bodies.TOPIC_FILTER_TYPES)))
             for n in names}
    return RegisterBrokerBody(TopicConfigSerializeWrapper(table, bodies.DataVersion(draw(I64), draw(I64))),
                              draw(st.lists(NAME, max_size=3)))


@given(compressible_bodies())
def test_compressed_register_body_round_trips(body):
    assert RegisterBrokerBody.decode(body.encode(compress=True), compressed=True) == body


@given(st.binary(max_size=200), st.booleans())
def test_compressed_register_body_of_random_bytes_raises_body_error(raw, deflate_first):
    try:
        RegisterBrokerBody.decode(zlib.compress(raw) if deflate_first else raw, compressed=True)
    except BodyError:
        pass


def test_a_register_body_that_inflates_to_gigabytes_is_refused(monkeypatch):
    monkeypatch.setattr(bodies, "MAX_INFLATED_REGISTER_BODY", 1 << 20)     # the real limit is 128 MiB
    bomb = zlib.compress(b"\0" * ((1 << 20) + 1), 9)
    assert len(bomb) < 2000
    with pytest.raises(BodyError, match="inflates past"):
        RegisterBrokerBody.decode(bomb, compressed=True)
    assert RegisterBrokerBody.decode(RegisterBrokerBody().encode(compress=True), compressed=True)


# ------------------------------------------------------------------ batch body

BATCH = st.lists(st.tuples(I32, st.binary(max_size=40), st.text(max_size=20)), max_size=5)


@given(BATCH)
def test_batch_body_round_trips(messages):
    assert decode_batch(encode_batch(messages)) == messages


@given(st.binary(max_size=200))
@example(b"\x00\x00\x00\x16" + b"\x00" * 16 + b"\xff\xff")     # negative properties length
@example(b"\x00\x00\x00\x16" + b"\x00" * 12 + b"\x7f\xff\xff\xff")   # body length 2 GiB
def test_batch_body_of_random_bytes_raises_only_batch_format_error(raw):
    try:
        decode_batch(raw)
    except BatchFormatError:
        pass


@given(BATCH.filter(bool), st.data())
def test_mutated_batch_body_raises_only_batch_format_error(messages, data):
    raw = bytearray(encode_batch(messages))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1)) if raw else 0
        if raw and data.draw(st.booleans()):
            raw[at] = data.draw(st.integers(0, 255))
        else:
            del raw[at:at + data.draw(st.integers(1, 6))]
    try:
        decode_batch(bytes(raw))
    except BatchFormatError:
        pass


def test_batch_format_error_is_a_body_error_and_a_value_error():
    assert issubclass(BatchFormatError, BodyError) and issubclass(BatchFormatError, ValueError)


# ------------------------------------------------------------------ properties string (0x01 / 0x02)

PROP_TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1,
                    max_size=12)


@given(st.dictionaries(PROP_TEXT, PROP_TEXT, max_size=6), st.booleans())
def test_properties_round_trip(props, trailing):
    assert parse_properties(format_properties(props, trailing)) == props


@given(st.text(st.sampled_from("\x01\x02ab="), max_size=30) | st.text(max_size=30))
@example("a\x01\x02\x01b")
@example("\x01a\x02b\x01")
def test_properties_fast_path_agrees_with_the_exact_rule(text):
    assert parse_properties(text) == _parse_strict(text)


# ------------------------------------------------------------------ Java .properties text (broker.conf)

KEY = st.text(st.characters(blacklist_characters=" \t\f\r\n=:\\#!", blacklist_categories=("Cs", "Zl", "Zp", "Cc")),
              min_size=1, max_size=12)
VALUE = st.text(st.characters(blacklist_characters="\r\n\\", blacklist_categories=("Cs", "Zl", "Zp", "Cc")),
                max_size=12).map(str.lstrip)


@given(st.dictionaries(KEY, VALUE, max_size=6))
@example({"\xa0": ""})                  # found by this test: str.lstrip/splitlines are not Java's whitespace
@example({"k": "a\x1cb\x85c\u2028"})      # nor Java's line breaks
def test_java_properties_round_trip(props):
    assert javaprops.loads(javaprops.dumps(props)) == props


@given(st.text(max_size=80) | st.text(st.sampled_from("a=:\\ \t\n#!u0"), max_size=40))
@example("key=\\u12")
@example("trailing\\")
def test_java_properties_of_any_text_never_raise(text):
    assert isinstance(javaprops.loads(text), dict)


@given(st.text(max_size=80) | st.text(st.sampled_from("ab=:\\ \t\n\r#!u0"), max_size=60),
       st.dictionaries(st.text(st.sampled_from("abXY._"), min_size=1, max_size=6), st.text(max_size=12), max_size=4))
@example("a=b\\\n", {"k": "v"})                 # a last line that continues
@example("a=1\n#a=2\n a = 3 \\\n  4\n", {"a": " x\\"})
def test_java_properties_update_sets_its_keys_and_keeps_the_rest(text, changes):
    """updateBrokerConfig's rewrite of broker.conf: read back, it is the old file with the changes over it."""
    assert javaprops.loads(javaprops.update(text, changes)) == {**javaprops.loads(text), **changes}
