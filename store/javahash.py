"""Java's String.hashCode, which RocketMQ uses for tags codes and index keys."""
from operator import mul


def java_string_hash(s: str) -> int:
    """h = 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


_POWERS: dict[int, tuple[int, ...]] = {}      # n -> (31^(n-1), ..., 31, 1) mod 2^32


def _powers(n: int) -> tuple[int, ...]:
    p = _POWERS.get(n)
    if p is None:
        p = _POWERS[n] = tuple(pow(31, n - 1 - i, 1 << 32) for i in range(n))
    return p


def _ascii_hash(s: str) -> int:
    """sum(c_i * 31^(n-1-i)) mod 2^32, multiplied and summed in C (map/sum) rather than a Python loop."""
    data = s.encode("ascii")
    h = sum(map(mul, data, _powers(len(data)))) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def string_hash(s: str) -> int:
    """java_string_hash with a faster path for ASCII strings (the common case)."""
    if s.isascii():
        return _ascii_hash(s)
    return java_string_hash(s)


def tags_code(tags: str | None) -> int:
    """MessageExtBrokerInner.tagsString2tagsCode: empty or absent tags give 0."""
    if not tags:
        return 0
    return string_hash(tags)


def index_key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod: abs(hashCode), and Integer.MIN_VALUE becomes 0."""
    h = abs(string_hash(key))
    return 0 if h > 0x7FFFFFFF else h
