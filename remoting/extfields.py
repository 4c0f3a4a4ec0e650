"""The one generic mapping between a header dataclass and extFields, with Java's coercions.

Java (`RemotingCommand.decodeCommandCustomHeader`) reads every extField as a string, then per field:
String as-is, Integer/Long via parseInt/parseLong (ASCII digits, optional sign, in range), Boolean
true only for case-insensitive "true" (no trimming), Double via parseDouble. It only logs a value it
cannot parse, or a missing @CFNotNull field, and leaves the field at its default; the request then
usually fails later. Here an optional field keeps its default the same way, and a required one
raises HeaderError right away, which a server answers with SYSTEM_ERROR.
"""
from __future__ import annotations

import dataclasses
import re
import types
import typing
from typing import Annotated

from mqtool_remoting.errors import HeaderError

Long = Annotated[int, "java.lang.Long"]
_INT_RANGE = (-(1 << 31), (1 << 31) - 1)
_LONG_RANGE = (-(1 << 63), (1 << 63) - 1)
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
_JAVA_DOUBLE = re.compile(r"\s*[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?\s*\Z")


def to_ext_fields(header) -> dict[str, str]:
    """Every non-None field as a string, the way `makeCustomHeaderToNet` writes it."""
    out = {}
    for f in dataclasses.fields(header):
        v = getattr(header, f.name)
        if v is None:
            continue
        out[f.name] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def from_ext_fields(cls, ext: dict[str, str], letters: dict[str, str] | None = None):
    """Build header `cls` from extFields; HeaderError names the missing or unparsable required field.
    `letters` maps a field to the key it travels under (SendMessageRequestHeaderV2's one-letter names)."""
    reader = _READERS.get((cls, id(letters)))
    if reader is None:
        reader = _READERS[(cls, id(letters))] = _compile(cls, letters)
    header = reader(ext)
    return header if header is not None else _from_ext_fields(cls, ext, letters)


def _from_ext_fields(cls, ext: dict[str, str], letters: dict[str, str] | None):
    """The general reader, and the reference for what `_compile`'s readers return."""
    kwargs = {}
    for name, key, kind, parse, required in _plan(cls, letters):
        raw = ext.get(key)
        if raw is not None:
            try:
                kwargs[name] = parse(raw if type(raw) is str else str(raw))
                continue
            except ValueError:
                if required:
                    raise HeaderError(f"the request header field {name!r} must be {_KIND_TEXT[kind]}, "
                                      f"not {raw!r}") from None
                continue
        if required:
            raise HeaderError(f"the request header misses required field {name!r}")
    return cls(**kwargs)


_PLANS: dict[tuple[type, int], list] = {}


def _plan(cls, letters: dict[str, str] | None) -> list:
    """(field, key, kind, parser, required) per field, worked out once per class and key mapping."""
    plan = _PLANS.get((cls, id(letters)))
    if plan is None:
        plan = [(name, (letters or {}).get(name, name), kind, _PARSERS[kind], required)
                for name, (kind, required) in _spec(cls).items()]
        _PLANS[(cls, id(letters))] = plan
    return plan


_READERS: dict[tuple[type, int], typing.Callable] = {}


def _compile(cls, letters: dict[str, str] | None):
    """A reader of `cls` as straight-line code, for the values every peer sends: each field present
    as a plain string, integers as ASCII digits short enough to be in range, or an optional field
    absent. It returns None for anything else (a sign, a number or bool sent as JSON, a field
    missing or unparsable), which the general reader then reads, raising HeaderError where due."""
    names = {"cls": cls, "parse_bool": _parse_bool, "parse_float": _parse_float}
    lines, args = ["def read(ext):", "    get = ext.get"], []
    for i, (name, key, kind, _parse, required) in enumerate(_plan(cls, letters)):
        v = f"v{i}"
        args.append(v)
        lines.append(f"    {v} = get({key!r})")
        if required:
            lines.append(f"    if type({v}) is not str: return None")
        else:
            names[f"d{i}"] = next(f.default for f in dataclasses.fields(cls) if f.name == name)
            lines.append(f"    if {v} is None: {v} = d{i}")
            lines.append(f"    elif type({v}) is not str: return None")
            lines.append("    else:")
        pad = "        " if not required else "    "
        if kind in ("int", "long"):
            digits = 10 if kind == "int" else 19
            lines.append(f"{pad}if len({v}) < {digits} and {v}.isdigit() and {v}.isascii(): {v} = int({v})")
            lines.append(f"{pad}else: return None")
        elif kind == "bool":
            lines.append(f"{pad}{v} = parse_bool({v})")
        elif kind == "float":
            lines.append(f"{pad}return None")
        elif not required:
            lines.append(f"{pad}pass")
    if hasattr(cls, "__post_init__") or not hasattr(cls, "__dict__"):
        lines.append(f"    return cls({', '.join(args)})")
    else:                              # what a frozen dataclass's __init__ does, minus a setattr per field
        fields = ", ".join(f"{f.name!r}: {a}" for f, a in zip(dataclasses.fields(cls), args))
        names["new"] = object.__new__
        lines += ["    h = new(cls)", f"    h.__dict__.update({{{fields}}})", "    return h"]
    exec("\n".join(lines), names)     # noqa: S102 - source built above from the class's own fields
    return names["read"]


_KIND_TEXT = {"str": "text", "int": "a 32-bit integer", "long": "a 64-bit integer", "bool": "true/false",
              "float": "a number"}
_SPECS: dict[type, dict[str, tuple[str, bool]]] = {}


def _spec(cls) -> dict[str, tuple[str, bool]]:
    """field name -> (kind, required), computed once per class."""
    spec = _SPECS.get(cls)
    if spec is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        spec = {}
        for f in dataclasses.fields(cls):
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            spec[f.name] = (_kind(hints[f.name]), required)
        _SPECS[cls] = spec
    return spec


def _kind(hint) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is Annotated:
        return "long"
    return {str: "str", int: "int", bool: "bool", float: "float"}[hint]


def _parse(kind: str, raw: str):
    return _PARSERS[kind](raw)


def _parse_bool(raw: str) -> bool:
    return raw.lower() == "true"          # Boolean.parseBoolean: no trimming, anything else is false


def _integer(lo: int, hi: int, digits: int):
    def parse(raw: str) -> int:
        # Common case first: plain ASCII digits short enough to be in range (Python's int() alone
        # would also take spaces, underscores and non-ASCII digits, which Java refuses).
        if len(raw) < digits and raw.isdigit() and raw.isascii():
            return int(raw)
        if not _JAVA_INT.match(raw):
            raise ValueError(raw)
        v = int(raw)
        if not lo <= v <= hi:
            raise ValueError(raw)
        return v
    return parse


def _parse_float(raw: str) -> float:
    if not _JAVA_DOUBLE.match(raw):
        raise ValueError(raw)
    return float(raw.strip().rstrip("fFdD"))


_PARSERS = {"str": str, "bool": _parse_bool, "int": _integer(*_INT_RANGE, 10), "long": _integer(*_LONG_RANGE, 19),
            "float": _parse_float}
