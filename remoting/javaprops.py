"""Java .properties text (broker.conf) read and written the way java.util.Properties does.

Enough of the format for broker configs: `key=value`, `key: value` and `key value`,
`#`/`!` comments, backslash line continuation and the common escapes.
"""
from __future__ import annotations

import re

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\f"        # Properties.LineReader's; not Python's str.isspace (\xa0, \x1c ...)


def _entries(lines: list[str]):
    """(first, end, logical line) for each entry of the physical `lines` (lines[first:end]): physical
    lines joined where one ends in an odd number of backslashes; "" for a comment or a blank line."""
    i, n = 0, len(lines)
    while i < n:
        start, logical = i, ""
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            yield start, i, ""
            continue
        while True:
            backslashes = len(line) - len(line.rstrip("\\"))
            if backslashes % 2 == 0:
                logical += line
                break
            logical += line[:-1]
            if i == n:
                break
            line = lines[i].lstrip(_WHITESPACE)
            i += 1
        yield start, i, logical


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


def _split(line: str) -> tuple[str, str]:
    """A logical line's key and value, unescaped (java.util.Properties.load's rules)."""
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    j = i
    while j < n and line[j] in " \t\f":
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in " \t\f":
            j += 1
    return _unescape(line[:i]), _unescape(line[j:])


def loads(text: str) -> dict[str, str]:
    return dict(_split(line) for _, _, line in _entries(_LINE_BREAK.split(text)) if line)


def _escape_value(v: str) -> str:
    out = v.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return "\\" + out if out[:1] in (" ", "\f") else out


def update(text: str, changes: dict[str, str]) -> str:
    """`text` (a .properties file) with each key of `changes` set: its entries rewritten in place as
    `key=value` (every one, continuation lines included), comments, order and other keys kept; keys
    it lacks appended. `loads` of the result gives `changes` over `loads(text)`."""
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    out, seen = [], set()
    for start, end, logical in _entries(lines):
        key = _split(logical)[0] if logical else None
        if key is not None and key in changes:
            out.append(f"{key}={_escape_value(str(changes[key]))}")
            seen.add(key)
        else:
            out.extend(lines[start:end])
    added = [f"{k}={_escape_value(str(v))}" for k, v in changes.items() if k not in seen]
    if added and out and (len(out[-1]) - len(out[-1].rstrip("\\"))) % 2:
        out.append("")                    # a last line that continues would take the first added one in
    out += added
    return "".join(line + "\n" for line in out)


def dumps(props: dict[str, object]) -> str:
    """`k=v` lines, as RocketMQ's MixAll.properties2String writes them (no escaping needed for configs)."""
    return "".join(f"{k}={v}\n" for k, v in props.items() if v is not None)
