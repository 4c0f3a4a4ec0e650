"""The broker's day figures (msgPutTotalTodayMorning, ...YesterdayMorning) roll over at local midnight,
on any date: driven by an injected clock at fixed dates (a month end, a year end), never today's."""
from __future__ import annotations

import time

import pytest

from mqtool.broker.stats import BrokerStats


def local(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%d %H:%M:%S"))


@pytest.mark.parametrize("last_evening, next_morning", [
    ("2030-01-24 23:59:30", "2030-01-25 00:00:30"),      # the day UNIQ_KEY's month counter wraps
    ("2030-01-31 23:59:30", "2030-02-01 00:00:30"),      # a month change
    ("2030-12-31 23:59:30", "2031-01-01 00:00:30"),      # a year change
    ("2032-02-28 23:59:30", "2032-02-29 00:00:30"),      # a leap day
])
def test_the_morning_snapshot_moves_at_local_midnight(last_evening, next_morning):
    now = [local(last_evening)]
    stats = BrokerStats(clock=lambda: now[0])
    stats.put("T", 7, 700)
    now[0] += 10
    stats.sample()                                       # the same day: nothing moves
    assert (stats.morning["put"], stats.yesterday_morning["put"]) == (0, 0)
    now[0] = local(next_morning)
    stats.sample()
    assert (stats.morning["put"], stats.yesterday_morning["put"]) == (7, 0)
    stats.put("T", 3, 300)
    now[0] += 24 * 3600
    stats.sample()
    assert (stats.morning["put"], stats.yesterday_morning["put"]) == (10, 7)
