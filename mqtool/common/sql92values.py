"""Java's value rules for SQL92 filters (RocketMQ 4.9.8 filter module): the classes a value can
have, how two of them compare (ComparisonExpression.__compare with string conversion on), how
Java parses numbers out of a property's text, and how Java prints a value in an error message.

Values are plain Python objects standing for Java ones: None (null), bool (Boolean), int (Integer),
JLong (Long), float (Double), str (String). No I/O.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
DOUBLE_MIN = 5e-324                   # Double.MIN_VALUE, printed by Java as 4.9E-324
DOUBLE_MAX = 1.7976931348623157e308


class JLong(int):
    """A Java Long (a plain int stands for an Integer)."""


class JavaError(Exception):
    """An exception as the Java evaluator would throw it: `java_class` and its message."""

    def __init__(self, java_class: str, message: str):
        super().__init__(f"{java_class}: {message}")
        self.java_class, self.message = java_class, message


def nfe(text: str) -> JavaError:
    return JavaError("java.lang.NumberFormatException", f'For input string: "{text}"')


_CLASSES = {bool: "Boolean", int: "Integer", JLong: "Long", float: "Double", str: "String"}


def java_class(v) -> str:
    return _CLASSES.get(type(v), "String")


_INT_TEXT = re.compile(r"[+-]?\d+")      # Character.digit accepts any Unicode decimal digit, as \d does


def parse_int(text: str, lo: int = INT_MIN, hi: int = INT_MAX) -> int:
    """Integer.valueOf / Long.valueOf: no blanks, no decimals, no range overflow."""
    if not _INT_TEXT.fullmatch(text):
        raise nfe(text)
    n = int(text)
    if not lo <= n <= hi:
        raise nfe(text)
    return n


_DOUBLE_TEXT = re.compile(r"[+-]?(?:NaN|Infinity|(?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?"
                          r"|(?P<hex>0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?)")


def parse_double(text: str) -> float:
    """Double.valueOf: blanks (chars up to U+0020) trimmed; NaN, Infinity, exponents, hex and the
    f/d suffixes accepted; ASCII digits only."""
    t = text.strip("".join(chr(c) for c in range(33)))
    m = _DOUBLE_TEXT.fullmatch(t)
    if m is None:
        raise nfe(text) if t else JavaError("java.lang.NumberFormatException", "empty String")
    sign = -1.0 if t.startswith("-") else 1.0
    if m.group("dec") is not None:
        return sign * float(m.group("dec"))
    if m.group("hex") is not None:
        return sign * float.fromhex(m.group("hex"))
    return math.nan if "NaN" in t else sign * math.inf


def _double_cmp(x: float, y: float) -> int:
    """Double.compareTo: NaN above everything and equal to itself, -0.0 below 0.0."""
    if math.isnan(x) or math.isnan(y):
        return (1 if math.isnan(x) else 0) - (1 if math.isnan(y) else 0)
    if x != y:
        return -1 if x < y else 1
    return (math.copysign(1, x) > 0) - (math.copysign(1, y) > 0)


def _string_cmp(a: str, b: str) -> int:
    """String.compareTo: by UTF-16 code units."""
    ea, eb = a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass")
    return (ea > eb) - (ea < eb)


def _same_class_cmp(lv, rv, cls: str) -> int:
    if cls == "Double":
        return _double_cmp(lv, rv)
    if cls == "String":
        return _string_cmp(lv, rv)
    return (lv > rv) - (lv < rv)             # Integer, Long, Boolean (false < true)


def java_equals(lv, rv) -> bool:
    """Object.equals for the value classes here: same class and same value (Double by its bits)."""
    cls = java_class(lv)
    return cls == java_class(rv) and _same_class_cmp(lv, rv, cls) == 0


def compare(lv, rv) -> int:
    """ComparisonExpression.__compare with string conversion on (as 4.9.8's parser always sets it):
    a String meeting a number or a Boolean is parsed as that class; Integer and Long widen; a
    number meeting a Double becomes a Double; any other mix is "less than". A Boolean on the left
    of a String is the source's ClassCastException."""
    lc, rc = java_class(lv), java_class(rv)
    if lc != rc:
        if lc == "Boolean":
            if rc == "String":
                raise JavaError("java.lang.ClassCastException",
                                "class java.lang.Boolean cannot be cast to class java.lang.String")
            return -1
        if lc == "String":
            lv = _from_string(lv, rc)
        elif rc == "String":
            if lc not in ("Integer", "Long", "Double"):
                return -1
            rv = _from_string(rv, lc)
        elif lc == "Double" or rc == "Double":
            lv, rv = float(lv), float(rv)
        elif lc in ("Integer", "Long") and rc in ("Integer", "Long"):
            lv, rv = JLong(lv), JLong(rv)
        else:
            return -1
    return _same_class_cmp(lv, rv, java_class(lv))


def _from_string(text: str, cls: str):
    try:
        if cls == "Boolean":
            return text.lower() == "true"
        if cls == "Integer":
            return parse_int(text)
        if cls == "Long":
            return JLong(parse_int(text, LONG_MIN, LONG_MAX))
        return parse_double(text)
    except JavaError as exc:                  # __compare wraps it: new RuntimeException(e)
        raise JavaError("java.lang.RuntimeException", str(exc)) from None


def java_double_text(x: float) -> str:
    """Double.toString: positional between 10^-3 and 10^7, else d.dddE<n>; shortest digits."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    _s, digits, exp = Decimal(repr(abs(x))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + exp              # digits before the decimal point
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{text}"
        whole, frac = text[:point].ljust(point, "0"), text[point:]
        return f"{sign}{whole}.{frac or '0'}"
    return f"{sign}{text[0]}.{text[1:] or '0'}E{point - 1}"


def java_text(v) -> str:
    """String.valueOf / ConstantExpression.toString of a value."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, float):
        return java_double_text(v)
    if isinstance(v, int):
        return str(int(v))
    return "'" + v.replace("'", "''") + "'"
