"""JSON bodies the way fastjson writes and reads them.

fastjson writes Integer map keys bare (`{0:"127.0.0.1:10911"}`) and object map keys as JSON
objects (`{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}`). `loads` accepts both; `dumps`
writes compact JSON with an option for bare integer keys.
"""
from __future__ import annotations

import json


class ObjectKey(tuple):
    """A map key that was a JSON object: a tuple of sorted (name, value) pairs."""

    def as_dict(self) -> dict:
        return dict(self)


def loads(data: bytes | str):
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    value, end = _Parser(text).value(0)
    return value


def dumps(obj, bare_int_keys: bool = False) -> bytes:
    """Compact JSON; with `bare_int_keys`, int dict keys are written unquoted (legacy fastjson)."""
    return _dump(obj, bare_int_keys).encode()


def _dump(obj, bare: bool) -> str:
    if isinstance(obj, dict):
        parts = []
        for k, v in obj.items():
            if isinstance(k, ObjectKey):
                key = _dump(k.as_dict(), bare)
            elif isinstance(k, int) and not isinstance(k, bool) and bare:
                key = str(k)
            else:
                key = json.dumps(str(k), ensure_ascii=False)
            parts.append(f"{key}:{_dump(v, bare)}")
        return "{" + ",".join(parts) + "}"
    if isinstance(obj, (list, tuple)) and not isinstance(obj, ObjectKey):
        return "[" + ",".join(_dump(v, bare) for v in obj) + "]"
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class _Parser:
    """A small recursive parser for fastjson's non-standard keys; values go through json."""

    def __init__(self, text: str):
        self.t = text
        self.dec = json.JSONDecoder()

    def ws(self, i: int) -> int:
        t = self.t
        while i < len(t) and t[i] in " \t\r\n":
            i += 1
        return i

    def value(self, i: int):
        i = self.ws(i)
        c = self.t[i] if i < len(self.t) else ""
        if c == "{":
            return self.obj(i + 1)
        if c == "[":
            return self.arr(i + 1)
        if not c:
            raise ValueError("unexpected end of JSON")
        return self.dec.raw_decode(self.t, i)

    def obj(self, i: int):
        out = {}
        i = self.ws(i)
        if self.t[i] == "}":
            return out, i + 1
        while True:
            i = self.ws(i)
            c = self.t[i]
            if c == '"':
                key, i = self.dec.raw_decode(self.t, i)
            elif c == "{":
                d, i = self.obj(i + 1)
                key = ObjectKey(sorted((k, _hashable(v)) for k, v in d.items()))
            else:
                j = i
                while j < len(self.t) and self.t[j] not in ": \t\r\n":
                    j += 1
                key, i = self.t[i:j], j
            i = self.ws(i)
            if self.t[i] != ":":
                raise ValueError(f"expected ':' at {i}")
            val, i = self.value(i + 1)
            out[key] = val
            i = self.ws(i)
            if self.t[i] == ",":
                i += 1
                continue
            if self.t[i] == "}":
                return out, i + 1
            raise ValueError(f"expected ',' or '}}' at {i}")

    def arr(self, i: int):
        out = []
        i = self.ws(i)
        if self.t[i] == "]":
            return out, i + 1
        while True:
            val, i = self.value(i)
            out.append(val)
            i = self.ws(i)
            if self.t[i] == ",":
                i += 1
                continue
            if self.t[i] == "]":
                return out, i + 1
            raise ValueError(f"expected ',' or ']' at {i}")


def _hashable(v):
    if isinstance(v, dict):
        return ObjectKey(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v
