"""Address whitelist patterns (RemoteAddressStrategyFactory, AclUtils; 4.9.8).

    blank                          matches nothing
    *  *.*.*.*  *:*:*:*:*:*:*:*    matches everything
    192.168.0.1  ::1               one address (IPv6 compared fully expanded)
    192.168.0.{1,2}  a,b           a set of addresses
    192.168.1.1-100  192.168.*.*   a range on the first `*` or `a-b` octet; later octets are ignored
    1050::5:600:300c:1-200         an IPv6 range; the bounds are hex

A pattern is compiled once into a predicate over the peer's IP text; a bad one raises AclError.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Callable

from mqtool.broker.acl.perms import AclError, split_nonempty

Matcher = Callable[[str], bool]
ANY_PATTERNS = {"*", "*.*.*.*", "*:*:*:*:*:*:*:*"}
_V4 = re.compile(r"([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\Z")


def is_ipv4(text: str) -> bool:
    """commons-validator isValidInet4Address: four decimal octets 0-255, no leading zeros."""
    m = _V4.match(text)
    return bool(m) and all(int(g) <= 255 and not (len(g) > 1 and g[0] == "0") for g in m.groups())


def is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
        return True
    except ValueError:
        return False


def expand_ip(text: str, parts: int) -> str:
    """AclUtils.expandIP: upper case, `::` widened to `parts` groups, each group padded to 4."""
    text = text.upper()
    pad = parts - text.count(":")
    if pad > 0:
        text = text.replace("::", ":" + ":" * pad)
    return ":".join(g.rjust(4, "0") if len(g) < 4 else g for g in text.split(":"))


def _bad(pattern: str) -> AclError:
    return AclError(f"Netaddress examine Exception netaddress is {pattern}")


def _java_int(text: str, base: int = 10) -> int:
    text = text.strip() if base == 10 else text
    if not re.fullmatch(r"[+-]?[0-9a-fA-F]+" if base == 16 else r"[+-]?[0-9]+", text):
        raise AclError(f'For input string: "{text}"')
    return int(text, base)


def compile_pattern(pattern: str | None) -> Matcher:
    """getRemoteAddressStrategy: the pattern as a predicate over a peer IP."""
    if pattern is None or not pattern.strip():
        return lambda ip: False
    if pattern in ANY_PATTERNS:
        return lambda ip: True
    if pattern.endswith("}"):
        sep = ":" if ":" in pattern else "."
        pieces = split_nonempty(pattern, sep)
        if sep == "." and len(pieces) < 4:
            raise AclError("MultipleRemoteAddressStrategy has got a/some wrong format IP(s) ")
        last = pieces[-1]
        if not last.startswith("{"):
            raise AclError("MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress")
        head = pattern[:pattern.index("{")]
        return _multiple([head + x for x in split_nonempty(last[1:-1], ",")])
    if "," in pattern:
        return _multiple(split_nonempty(pattern, ","))
    if "*" in pattern or "-" in pattern:
        return _range_v6(pattern) if ":" in pattern else _range_v4(pattern)
    if not (is_ipv4(pattern) or is_ipv6(pattern)):
        raise _bad(pattern)
    want = expand_ip(pattern, 8).upper()
    return lambda ip: expand_ip(ip, 8).upper() == want


def _multiple(addresses: list[str]) -> Matcher:
    allowed = set()
    for a in addresses:
        if is_ipv4(a):
            allowed.add(a)
        elif is_ipv6(a):
            allowed.add(expand_ip(a, 8))
        else:
            raise _bad(a)
    return lambda ip: (expand_ip(ip, 8) if is_ipv6(ip) else ip) in allowed


def _bounds(value: str, base: int, top: int) -> tuple[int, int] | None:
    """One octet/group of a range pattern: `*`, `a-b`, or None for a plain value."""
    value = value.strip()
    if value == "*":
        return 0, top
    if "-" not in value:
        return None
    if value.startswith("-"):
        raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {value} ")
    ends = split_nonempty(value, "-")
    start, end = _java_int(ends[0], base), _java_int(ends[1], base)
    if not (0 <= start <= top and 0 <= end <= top and start <= end):
        raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {start} , end is {end}")
    return start, end


def _range_v4(pattern: str) -> Matcher:
    parts = split_nonempty(pattern, ".")
    index, bounds = 0, None
    for index in (1, 2, 3):
        if index >= len(parts):
            raise AclError(f"Index {index} out of bounds for length {len(parts)}")
        bounds = _bounds(parts[index], 10, 255)
        if bounds is not None and bounds[1] > 0:
            break
    else:
        raise _bad(pattern)
    if len(parts) != 4 or not all(0 <= _java_int(p) <= 255 for p in parts[:index - 1]):
        raise AclError(f"Netaddress examine scope Exception netaddress is {pattern}")
    head = "".join(p.strip() + "." for p in parts[:index])
    start, end = bounds

    def match(ip: str) -> bool:
        if not is_ipv4(ip) or not ip.startswith(head):
            return False
        return start <= int(ip[len(head):].split(".")[0]) <= end
    return match


def _range_v6(pattern: str) -> Matcher:
    star, minus = pattern.find("*"), pattern.find("-")
    if star > -1 and star != len(pattern) - 1:
        raise _bad(pattern)
    if minus > -1:
        last = pattern.rfind(":")
        limit = last if star == -1 else pattern.rfind(":", 0, last)
        if minus <= limit:
            raise _bad(pattern)
    parts = split_nonempty(pattern, ":")
    bounds = None
    for i in range(1, len(parts)):
        bounds = _bounds(parts[i], 16, 0xFFFF)
        if bounds is not None and bounds[1] > 0:
            break
    else:
        raise _bad(pattern)
    groups = split_nonempty(expand_ip(pattern, 8), ":")
    for g in groups[:i - 1]:
        if not re.fullmatch(r"[0-9a-fA-F]{1,4}", g):
            raise _bad(pattern)
    if star > -1 and minus > -1:
        n, sub = 6, pattern[:pattern.rfind(":", 0, pattern.rfind(":"))]
    else:
        n, sub = 7, pattern[:pattern.rfind(":")]
    head = expand_ip(sub, n)
    index = len(split_nonempty(head, ":"))
    start, end = bounds

    def match(ip: str) -> bool:
        if not is_ipv6(ip):
            return False
        full = expand_ip(ip, 8).upper()
        if not full.startswith(head):
            return False
        return start <= int(full[5 * index:5 * index + 4], 16) <= end
    return match
