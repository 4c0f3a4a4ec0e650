"""UNIQ_KEY as Java's MessageClientIDSetter makes it, driven by an injected clock (never today's date)."""
import os
import struct
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from mqtool.client.producer import UniqIdMaker, month_bounds

UTC = timezone.utc


def at(text: str, tz=UTC) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=tz).timestamp() * 1000)


class Clock:
    def __init__(self, ms: int):
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def time_part(uniq: str) -> str:
    return uniq[20:28]


def test_the_fixed_part_is_ip_then_the_low_16_bits_of_the_pid_then_a_hash():
    ids = UniqIdMaker("10.1.2.3", clock=Clock(at("2026-11-01T00:00:00")), tz=UTC)
    first, second = ids.next(), ids.next()
    assert len(first) == 32 and first == first.upper() and first[:8] == "0A010203"
    raw = bytes.fromhex(first)
    assert raw[4:6] == (os.getpid() & 0xFFFF).to_bytes(2, "big")       # (short) pid: all 16 bits
    assert struct.unpack(">H", bytes.fromhex(second)[14:])[0] == struct.unpack(">H", raw[14:])[0] + 1


@pytest.mark.parametrize("moment, hex_ms", [
    ("2026-11-01T00:00:00", "00000000"),          # day 1
    ("2026-11-24T00:00:00", "76724400"),          # day 24: 1,987,200,000 ms
    ("2026-11-25T00:00:00", "7B98A000"),          # day 25 at midnight: still below 2^31
    ("2026-11-25T20:31:23.648", "80000000"),      # 2^31 ms: Java's (int) cast turns negative here
    ("2026-11-27T11:32:24", "885F4140"),          # the day this test was written, as a fixed clock
    ("2026-12-31T23:59:59.999", "9FA523FF"),      # day 31, last millisecond
])
def test_ms_since_the_month_began_wraps_as_javas_int_cast(moment, hex_ms):
    assert time_part(UniqIdMaker("10.1.2.3", clock=Clock(at(moment)), tz=UTC).next()) == hex_ms


def test_a_long_running_producer_moves_to_the_next_month_and_the_next_year():
    clock = Clock(at("2026-11-30T23:59:59.999"))
    ids = UniqIdMaker("10.1.2.3", clock=clock, tz=UTC)
    assert time_part(ids.next()) == "9A7EC7FF"
    clock.ms += 1                                  # 2026-12-01 00:00:00.000
    assert time_part(ids.next()) == "00000000"
    clock.ms = at("2027-01-01T00:00:00.005")       # a year change
    assert time_part(ids.next()) == "00000005"
    assert ids.month_start == at("2027-01-01T00:00:00")


def test_the_month_starts_at_local_midnight_of_day_one_in_the_zone_given():
    shanghai = ZoneInfo("Asia/Shanghai")
    # 2026-11-01 00:30 in Shanghai is still October in UTC: Java's default zone decides the month
    ids = UniqIdMaker("10.1.2.3", clock=Clock(at("2026-11-01T00:30:00", shanghai)), tz=shanghai)
    assert time_part(ids.next()) == f"{30 * 60_000:08X}"
    # a month that crosses a DST change is an hour short, as Calendar counts it
    berlin = ZoneInfo("Europe/Berlin")
    start, following = month_bounds(at("2026-03-15T12:00:00", berlin), berlin)
    assert (start, following) == (at("2026-03-01T00:00:00", berlin), at("2026-04-01T00:00:00", berlin))
    assert following - start == 31 * 86_400_000 - 3_600_000


def test_without_a_zone_the_month_is_the_local_one(monkeypatch):
    import time
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        start, _ = month_bounds(at("2026-11-01T03:00:00"))     # 2026-10-31 23:00 in New York
        assert start == at("2026-10-01T00:00:00", ZoneInfo("America/New_York"))
    finally:
        monkeypatch.undo()
        time.tzset()


def test_take_gives_what_next_gives_in_the_same_ms():
    from mqtool.client.producer import UniqIdMaker
    a = UniqIdMaker("10.0.0.1", clock=lambda: 1_764_000_000_123)
    b = UniqIdMaker("10.0.0.1", clock=lambda: 1_764_000_000_123)
    b.fixed_hex = a.fixed_hex                      # the same class loader hash: id(self) differs
    assert a.take(3) + [a.next()] == [b.next() for _ in range(4)]
