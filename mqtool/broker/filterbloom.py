"""The bloom filter positions RocketMQ 4.9.8 records for each SQL92 filter (filter/util/BloomFilter):
`bloomFilterData` in consumerFilter.json. mqtool keeps no bit maps (enableCalcFilterBitMap is not
implemented); it writes the same numbers so that a file it writes reads back in a Java broker.
Pure: guava's murmur3_128 (x64, seed 0) in Python."""
from __future__ import annotations

import math
import struct

_M64 = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def murmur3_128_low(data: bytes) -> int:
    """Hashing.murmur3_128().hashBytes(data).asLong(): the first 64 bits, as an unsigned number."""
    h1 = h2 = 0
    n = len(data) // 16
    for i in range(n):
        k1, k2 = struct.unpack_from("<QQ", data, i * 16)
        h1 ^= _rotl((k1 * _C1) & _M64, 31) * _C2 & _M64
        h1 = (_rotl(h1, 27) + h2) & _M64
        h1 = (h1 * 5 + 0x52DCE729) & _M64
        h2 ^= _rotl((k2 * _C2) & _M64, 33) * _C1 & _M64
        h2 = (_rotl(h2, 31) + h1) & _M64
        h2 = (h2 * 5 + 0x38495AB5) & _M64
    tail = data[n * 16:]
    k1 = int.from_bytes(tail[:8], "little")
    k2 = int.from_bytes(tail[8:], "little")
    if k2:
        h2 ^= _rotl((k2 * _C2) & _M64, 33) * _C1 & _M64
    if tail:
        h1 ^= _rotl((k1 * _C1) & _M64, 31) * _C2 & _M64
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    return h1


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


class BloomFilter:
    """BloomFilter.createByFn(f, n): k hash positions in m bits (m a multiple of 8)."""

    def __init__(self, error_rate_percent: int = 20, expected: int = 32):
        if not 1 <= error_rate_percent < 100 or expected < 1:
            raise ValueError("maxErrorRateOfBloomFilter must be 1-99 and expectConsumerNumUseFilter at least 1")
        rate = error_rate_percent / 100.0
        self.k = math.ceil(math.log(rate) / math.log(0.5))
        m = math.ceil(expected * (math.log(1 / rate) / math.log(2)) * (math.log(math.e) / math.log(2)))
        self.m = 8 * math.ceil(m / 8.0)

    def positions(self, text: str) -> list[int]:
        """calcBitPositions: Kirsch-Mitzenmacher double hashing over the murmur3 halves."""
        h = murmur3_128_low(text.encode("utf-8"))
        h1, h2 = _int32(h), _int32(h >> 32)
        out = []
        for i in range(1, self.k + 1):
            combined = _int32(h1 + i * h2)
            if combined < 0:
                combined = ~combined
            out.append(combined % self.m)
        return out

    def data(self, text: str) -> dict:
        """BloomFilterData as fastjson writes it."""
        return {"bitNum": self.m, "bitPos": self.positions(text)}
