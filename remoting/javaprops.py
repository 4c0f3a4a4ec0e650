"""Java .properties text (broker.conf) read and written the way java.util.Properties does.

Enough of the format for broker configs: `key=value`, `key: value` and `key value`,
`#`/`!` comments, backslash line continuation and the common escapes.
"""
from __future__ import annotations

import re

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\f"        # Properties.LineReader's; not Python's str.isspace (\xa0, \x1c ...)


def _logical_lines(text: str):
    pending = ""
    for raw in _LINE_BREAK.split(text):
        line = raw.lstrip(_WHITESPACE)
        if not pending and (not line or line[0] in "#!"):
            continue
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2 == 1:
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "u" and i + 6 <= len(s):
                try:
                    out.append(chr(int(s[i + 2:i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def loads(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key = line[:i]
        j = i
        while j < n and line[j] in " \t\f":
            j += 1
        if j < n and line[j] in "=:":
            j += 1
            while j < n and line[j] in " \t\f":
                j += 1
        props[_unescape(key)] = _unescape(line[j:])
    return props


def dumps(props: dict[str, object]) -> str:
    """`k=v` lines, as RocketMQ's MixAll.properties2String writes them (no escaping needed for configs)."""
    return "".join(f"{k}={v}\n" for k, v in props.items() if v is not None)
