"""JSON the way fastjson 1.2.69 (pinned by RocketMQ 4.9.8) writes and reads it.

Writing: compact, bean properties in alphabetical order (the body classes build their dicts that
way), and optionally fastjson's non-standard map keys: Integer/Long keys bare (`{0:"127.0.0.1:10911"}`,
the "legacy" encoding) and object keys as JSON objects (`{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}`).
Reading: standard JSON first, then a small tolerant parser for those two key forms.

Java's HashMap iterates in bucket order, not insertion order, and fastjson writes maps in iteration
order; `java_order` reproduces that for String and small Long keys so output can match Java's bytes.
"""
from __future__ import annotations

import functools
import json

from mqtool_remoting.errors import BodyError


class ObjectKey(tuple):
    """A map key that was a JSON object: a tuple of sorted (name, value) pairs, hashable."""

    @classmethod
    def of(cls, d: dict) -> "ObjectKey":
        return cls(sorted((k, _hashable(v)) for k, v in d.items()))

    def as_dict(self) -> dict:
        return dict(self)


# ------------------------------------------------------------------ Java HashMap order

@functools.lru_cache(maxsize=8192)
def java_string_hash(s: str) -> int:
    """`String.hashCode()`: over UTF-16 code units, 32-bit wrapping (as an unsigned int)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def _java_hash(key) -> int:
    if isinstance(key, bool):
        return 1231 if key else 1237
    if isinstance(key, int):           # Long.hashCode
        v = key & 0xFFFFFFFFFFFFFFFF
        return (v ^ (v >> 32)) & 0xFFFFFFFF
    return java_string_hash(str(key))


def java_order(keys, capacity: int = 16) -> list:
    """Keys in the order a java.util.HashMap built by inserting them (in this order) iterates them.

    `capacity` is the constructor's initial capacity; the table doubles past a 0.75 load factor and
    a resize keeps the relative order inside a bucket, so order = (bucket, insertion). Bins that Java
    would turn into trees (8+ colliding keys) are not modelled.
    """
    keys = tuple(keys)
    try:
        return list(_order(keys, capacity))
    except TypeError:                  # an unhashable key: no cache
        return list(_order.__wrapped__(keys, capacity))


@functools.lru_cache(maxsize=1024)
def _order(keys: tuple, capacity: int) -> tuple:
    """The same few key sets (a response's extFields) come back on every request: cached."""
    n = 1
    while n < capacity:
        n <<= 1
    while len(keys) > n * 0.75:
        n <<= 1

    def bucket(k) -> int:
        h = _java_hash(k)
        return (h ^ (h >> 16)) & (n - 1)
    return tuple(k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(keys)))


def java_map(d: dict, capacity: int = 16) -> dict:
    """A copy of `d` whose iteration order is Java's HashMap order for the same insertions."""
    return {k: d[k] for k in java_order(d, capacity)}


# ------------------------------------------------------------------ reading

def loads(data: bytes | bytearray | str):
    """Parse a body: standard JSON, or fastjson's bare-number and object map keys.

    Anything else (bad UTF-8, bad JSON, nesting too deep for the parser) raises BodyError.
    """
    try:
        return _loads(data)
    except (ValueError, RecursionError) as exc:      # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise BodyError(f"not a JSON body: {str(exc)[:200]}") from None


def _loads(data):
    text = bytes(data).decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    p = _Parser(text)
    value, end = p.value(0)
    if p.ws(end) != len(text):
        raise ValueError(f"extra data after JSON value at {end}")
    return value


class _Parser:
    """Recursive descent over objects/arrays; scalars and string keys go through the json module."""

    def __init__(self, text: str):
        self.t = text
        self.dec = json.JSONDecoder()

    def ws(self, i: int) -> int:
        t = self.t
        while i < len(t) and t[i] in " \t\r\n":
            i += 1
        return i

    def char(self, i: int) -> str:
        if i >= len(self.t):
            raise ValueError("unexpected end of JSON")
        return self.t[i]

    def value(self, i: int):
        i = self.ws(i)
        c = self.char(i)
        if c == "{":
            return self.obj(i + 1)
        if c == "[":
            return self.arr(i + 1)
        return self.dec.raw_decode(self.t, i)

    def key(self, i: int):
        c = self.char(i)
        if c == '"':
            return self.dec.raw_decode(self.t, i)
        if c == "{":
            d, i = self.obj(i + 1)
            return ObjectKey.of(d), i
        j = i
        while j < len(self.t) and self.t[j] not in ": \t\r\n,{}[]\"":
            j += 1
        if j == i:
            raise ValueError(f"expected a key at {i}")
        return self.t[i:j], j

    def obj(self, i: int):
        out: dict = {}
        i = self.ws(i)
        if self.char(i) == "}":
            return out, i + 1
        while True:
            key, i = self.key(self.ws(i))
            i = self.ws(i)
            if self.char(i) != ":":
                raise ValueError(f"expected ':' at {i}")
            out[key], i = self.value(i + 1)
            i = self.ws(i)
            c = self.char(i)
            if c == ",":
                i += 1
            elif c == "}":
                return out, i + 1
            else:
                raise ValueError(f"expected ',' or '}}' at {i}")

    def arr(self, i: int):
        out = []
        i = self.ws(i)
        if self.char(i) == "]":
            return out, i + 1
        while True:
            val, i = self.value(i)
            out.append(val)
            i = self.ws(i)
            c = self.char(i)
            if c == ",":
                i += 1
            elif c == "]":
                return out, i + 1
            else:
                raise ValueError(f"expected ',' or ']' at {i}")


def _hashable(v):
    if isinstance(v, dict):
        return ObjectKey.of(v)
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


# ------------------------------------------------------------------ writing

def dumps(obj, bare_int_keys: bool = False, ascii_only: bool = False) -> bytes:
    """Compact JSON bytes.

    bare_int_keys: int map keys unquoted, as `RemotingSerializable.encode` (legacy fastjson) writes.
    ascii_only: non-ASCII as \\uXXXX, as fastjson's BrowserCompatible feature does.
    ObjectKey map keys are always written as JSON objects (fastjson's only form for them).
    """
    return _dump(obj, bare_int_keys, ascii_only).encode()


def _dump(obj, bare: bool, ascii_only: bool) -> str:
    if isinstance(obj, dict):
        parts = []
        for k, v in obj.items():
            if isinstance(k, ObjectKey):
                key = _dump(k.as_dict(), bare, ascii_only)
            elif isinstance(k, int) and not isinstance(k, bool) and bare:
                key = str(k)
            else:
                key = json.dumps(_key_text(k), ensure_ascii=ascii_only)
            parts.append(f"{key}:{_dump(v, bare, ascii_only)}")
        return "{" + ",".join(parts) + "}"
    if isinstance(obj, (list, tuple, set, frozenset)) and not isinstance(obj, ObjectKey):
        return "[" + ",".join(_dump(v, bare, ascii_only) for v in obj) + "]"
    if isinstance(obj, ObjectKey):
        return _dump(obj.as_dict(), bare, ascii_only)
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))


def _key_text(k) -> str:
    if isinstance(k, bool):
        return "true" if k else "false"
    return str(k)
