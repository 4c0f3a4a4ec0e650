"""HPACK (RFC 7541), the header compression of HTTP/2, as much as a gRPC server needs: a decoder with the
static table, the dynamic table and Huffman strings, and an encoder of literal fields that never index.

    indexed field            1xxxxxxx  index (7-bit prefix)
    literal, indexed         01xxxxxx  name index (6-bit; 0 = literal name), value
    table size update        001xxxxx  new maximum size (5-bit)
    literal, not indexed     0000xxxx  name index (4-bit), value
    literal, never indexed   0001xxxx  name index (4-bit), value
    string                   Hxxxxxxx  H = Huffman-coded, length (7-bit prefix), octets

An integer with an N-bit prefix that fills the prefix continues in 7-bit groups, least significant first,
with the high bit set on every group but the last. A dynamic-table entry costs len(name) + len(value) + 32.
The Huffman code is canonical (Appendix B), so the code lengths alone define it."""
from __future__ import annotations


class HpackError(ValueError):
    """A header block that cannot be decoded: HTTP/2's COMPRESSION_ERROR."""


STATIC = (
    (b":authority", b""), (b":method", b"GET"), (b":method", b"POST"), (b":path", b"/"),
    (b":path", b"/index.html"), (b":scheme", b"http"), (b":scheme", b"https"), (b":status", b"200"),
    (b":status", b"204"), (b":status", b"206"), (b":status", b"304"), (b":status", b"400"),
    (b":status", b"404"), (b":status", b"500"), (b"accept-charset", b""), (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""), (b"accept-ranges", b""), (b"accept", b""), (b"access-control-allow-origin", b""),
    (b"age", b""), (b"allow", b""), (b"authorization", b""), (b"cache-control", b""),
    (b"content-disposition", b""), (b"content-encoding", b""), (b"content-language", b""),
    (b"content-length", b""), (b"content-location", b""), (b"content-range", b""), (b"content-type", b""),
    (b"cookie", b""), (b"date", b""), (b"etag", b""), (b"expect", b""), (b"expires", b""), (b"from", b""),
    (b"host", b""), (b"if-match", b""), (b"if-modified-since", b""), (b"if-none-match", b""),
    (b"if-range", b""), (b"if-unmodified-since", b""), (b"last-modified", b""), (b"link", b""),
    (b"location", b""), (b"max-forwards", b""), (b"proxy-authenticate", b""), (b"proxy-authorization", b""),
    (b"range", b""), (b"referer", b""), (b"refresh", b""), (b"retry-after", b""), (b"server", b""),
    (b"set-cookie", b""), (b"strict-transport-security", b""), (b"transfer-encoding", b""),
    (b"user-agent", b""), (b"vary", b""), (b"via", b""), (b"www-authenticate", b""),
)
STATIC_NAMES = {name: i + 1 for i, (name, _) in reversed(list(enumerate(STATIC)))}

# Appendix B: the code length in bits of symbols 0-255 and of EOS (256), in symbol order.
CODE_LENGTHS = bytes((
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28,
    28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15,
    6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22,
    20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23,
    23, 24, 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22,
    22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26,
    27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27,
    26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
))
EOS = 256


def huffman_codes() -> list[tuple[int, int]]:
    """(code, length) of every symbol, assigned canonically: by length, then by symbol."""
    codes = [(0, 0)] * 257
    code, previous = -1, 0
    for sym in sorted(range(257), key=lambda s: (CODE_LENGTHS[s], s)):
        length = CODE_LENGTHS[sym]
        code = (code + 1) << (length - previous)
        previous = length
        codes[sym] = (code, length)
    return codes


_nibbles: list | None = None        # state * 16 + nibble -> (next state, symbol or -1, accepting); built once


def _nibble_table() -> list:
    """A decoder that reads four bits a step: the states are the Huffman tree's inner nodes (0 = root).
    An entry is -1 where the input is invalid (it would reach EOS)."""
    children: list[list] = [[None, None]]       # inner node -> [child for 0, child for 1]; a leaf is ("sym", s)
    for sym, (code, length) in enumerate(huffman_codes()):
        node = 0
        for bit in range(length - 1, -1, -1):
            b = (code >> bit) & 1
            if bit == 0:
                children[node][b] = ("sym", sym)
            else:
                if children[node][b] is None:
                    children.append([None, None])
                    children[node][b] = len(children) - 1
                node = children[node][b]
    # an inner node is accepting (a valid place to stop) when only 1-bits led to it from the last symbol
    # and fewer than 8 of them: padding is the EOS code's most significant bits, all ones
    ones = {0: 0}
    for node in range(len(children)):
        for b in (0, 1):
            child = children[node][b]
            if isinstance(child, int):
                ones[child] = ones[node] + 1 if (b == 1 and node in ones) else -99
    table = []
    for state in range(len(children)):
        for nibble in range(16):
            node, emitted, bad = state, -1, False
            for bit in (3, 2, 1, 0):
                child = children[node][(nibble >> bit) & 1]
                if isinstance(child, tuple):
                    if child[1] == EOS:
                        bad = True
                        break
                    emitted, node = child[1], 0
                else:
                    node = child
            accepting = node == 0 or 0 < ones.get(node, -1) < 8
            table.append(-1 if bad else (node, emitted, accepting))
    return table


def huffman_decode(data: bytes) -> bytes:
    global _nibbles
    if _nibbles is None:
        _nibbles = _nibble_table()
    table = _nibbles
    out = bytearray()
    state, accepting = 0, True
    for byte in data:
        for nibble in (byte >> 4, byte & 15):
            entry = table[state * 16 + nibble]
            if entry == -1:
                raise HpackError("Huffman string holds EOS")
            state, sym, accepting = entry
            if sym >= 0:
                out.append(sym)
    if not accepting:
        raise HpackError("Huffman string ends with bad padding")
    return bytes(out)


def huffman_encode(data: bytes) -> bytes:
    codes = huffman_codes()
    acc, bits = 0, 0
    for byte in data:
        code, length = codes[byte]
        acc, bits = (acc << length) | code, bits + length
    pad = -bits % 8
    acc = (acc << pad) | ((1 << pad) - 1)
    return acc.to_bytes((bits + pad) // 8, "big")


def encode_int(value: int, prefix: int, first: int) -> bytes:
    """`value` with a `prefix`-bit prefix; `first` holds the bits above the prefix."""
    top = (1 << prefix) - 1
    if value < top:
        return bytes((first | value,))
    out = bytearray((first | top,))
    value -= top
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name: bytes, value: bytes) -> bytes:
    """A literal field that is not indexed, its name by static index where the table has it."""
    index = STATIC_NAMES.get(name)
    head = encode_int(index, 4, 0) if index else b"\x00" + encode_int(len(name), 7, 0) + name
    return head + encode_int(len(value), 7, 0) + value


class Decoder:
    """One connection's decoder: its dynamic table lives as long as the connection."""

    def __init__(self, max_size: int = 4096):
        self.table: list[tuple[bytes, bytes]] = []      # newest first
        self.size = 0
        self.max_size = max_size                         # our SETTINGS_HEADER_TABLE_SIZE: the cap on updates
        self.limit = max_size

    def _add(self, name: bytes, value: bytes) -> None:
        self.table.insert(0, (name, value))
        self.size += len(name) + len(value) + 32
        self._evict()

    def _evict(self) -> None:
        while self.size > self.limit and self.table:
            name, value = self.table.pop()
            self.size -= len(name) + len(value) + 32

    def _field(self, index: int) -> tuple[bytes, bytes]:
        if 0 < index <= 61:
            return STATIC[index - 1]
        try:
            return self.table[index - 62]
        except IndexError:
            raise HpackError(f"header index {index} is not in the table") from None

    def decode(self, block: bytes) -> list[tuple[bytes, bytes]]:
        headers = []
        pos, end = 0, len(block)
        try:
            while pos < end:
                b = block[pos]
                if b & 0x80:
                    index, pos = _int(block, pos, 7)
                    headers.append(self._field(index))
                    continue
                if b & 0x40:
                    prefix, add = 6, True
                elif b & 0x20:
                    size, pos = _int(block, pos, 5)
                    if size > self.max_size:
                        raise HpackError(f"table size {size} is over the {self.max_size} allowed")
                    self.limit = size
                    self._evict()
                    continue
                else:
                    prefix, add = 4, False
                index, pos = _int(block, pos, prefix)
                if index:
                    name = self._field(index)[0]
                else:
                    name, pos = _string(block, pos)
                value, pos = _string(block, pos)
                if add:
                    self._add(name, value)
                headers.append((name, value))
        except IndexError:
            raise HpackError("header block ends inside a field") from None
        return headers


def _int(data: bytes, pos: int, prefix: int) -> tuple[int, int]:
    top = (1 << prefix) - 1
    value = data[pos] & top
    pos += 1
    if value < top:
        return value, pos
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        value += (b & 127) << shift
        shift += 7
        if not b & 128:
            return value, pos
        if shift > 28:
            raise HpackError("integer too large")


def _string(data: bytes, pos: int) -> tuple[bytes, int]:
    huffman = data[pos] & 0x80
    length, pos = _int(data, pos, 7)
    end = pos + length
    if end > len(data):
        raise HpackError("string runs past the header block")
    raw = data[pos:end]
    return (huffman_decode(raw) if huffman else raw), end
