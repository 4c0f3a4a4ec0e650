"""The broker's figures (StoreStatsService and BrokerStatsManager of 4.9.8): totals, TPS over
10 s / 60 s / 600 s from one snapshot a second, per-key sums for the last minute, hour and day
(VIEW_BROKER_STATS_DATA), and the morning snapshots mqadmin clusterList reads."""
from __future__ import annotations

import time
from collections import defaultdict, deque
from dataclasses import dataclass, field

SAMPLES = 601                      # one a second: enough for the 600 s TPS
TPS_WINDOWS = (10, 60, 600)
# VIEW_BROKER_STATS_DATA names (BrokerStatsManager), keyed by topic, or topic@group for groups.
TOPIC_PUT_NUMS, TOPIC_PUT_SIZE = "TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE"
GROUP_GET_NUMS, GROUP_GET_SIZE = "GROUP_GET_NUMS", "GROUP_GET_SIZE"
BROKER_PUT_NUMS, BROKER_GET_NUMS = "BROKER_PUT_NUMS", "BROKER_GET_NUMS"
PERIODS = (("statsMinute", 60), ("statsHour", 3600), ("statsDay", 86400))


@dataclass
class Totals:
    put_msgs: int = 0
    put_bytes: int = 0
    put_failed: int = 0
    put_max_ms: int = 0
    get_found: int = 0             # pulls that found messages
    get_miss: int = 0              # pulls that found none
    get_msgs: int = 0              # messages sent to consumers (getTransferedTps, msgGetTotal*)


@dataclass
class KeyCounter:
    """Per-minute buckets of (sum, calls) for one stats key, a day deep."""
    buckets: deque = field(default_factory=lambda: deque(maxlen=1441))

    def add(self, n: int, minute: int) -> None:
        if self.buckets and self.buckets[-1][0] == minute:
            m, s, c = self.buckets[-1]
            self.buckets[-1] = (m, s + n, c + 1)
        else:
            self.buckets.append((minute, n, 1))

    def window(self, now_minute: int, minutes: int) -> tuple[int, int]:
        s = c = 0
        for m, bs, bc in reversed(self.buckets):
            if m <= now_minute - minutes:
                break
            s, c = s + bs, c + bc
        return s, c


class BrokerStats:
    def __init__(self, clock=time.time):
        self.clock = clock
        self.totals = Totals()
        self.samples: deque = deque(maxlen=SAMPLES)        # (time, put_msgs, found, miss, get_msgs)
        self.keys: dict[tuple[str, str], KeyCounter] = defaultdict(KeyCounter)
        self.day = time.localtime(clock()).tm_yday
        self.morning = {"put": 0, "get": 0}
        self.yesterday_morning = {"put": 0, "get": 0}
        self.sample()

    # ------------------------------------------------------------ counting

    def _minute(self) -> int:
        return int(self.clock() // 60)

    def put(self, topic: str, msgs: int, nbytes: int, elapsed_ms: int = 0) -> None:
        t = self.totals
        t.put_msgs += msgs
        t.put_bytes += nbytes
        t.put_max_ms = max(t.put_max_ms, elapsed_ms)
        minute = self._minute()
        self.keys[(TOPIC_PUT_NUMS, topic)].add(msgs, minute)
        self.keys[(TOPIC_PUT_SIZE, topic)].add(nbytes, minute)

    def put_failed(self) -> None:
        self.totals.put_failed += 1

    def got(self, group: str, topic: str, msgs: int, nbytes: int) -> None:
        t = self.totals
        if msgs:
            t.get_found += 1
            t.get_msgs += msgs
            minute = self._minute()
            self.keys[(GROUP_GET_NUMS, f"{topic}@{group}")].add(msgs, minute)
            self.keys[(GROUP_GET_SIZE, f"{topic}@{group}")].add(nbytes, minute)
        else:
            t.get_miss += 1

    # ------------------------------------------------------------ sampling (once a second)

    def sample(self) -> None:
        now = self.clock()
        t = self.totals
        self.samples.append((now, t.put_msgs, t.get_found, t.get_miss, t.get_msgs))
        day = time.localtime(now).tm_yday
        if day != self.day:                     # a new day: this morning becomes yesterday morning
            self.day = day
            self.yesterday_morning = dict(self.morning)
            self.morning = {"put": t.put_msgs, "get": t.get_msgs}

    def tps(self, index: int, seconds: int) -> float:
        if len(self.samples) < 2:
            return 0.0
        last = self.samples[-1]
        before = self.samples[-min(seconds + 1, len(self.samples))]
        dt = last[0] - before[0]
        return (last[index] - before[index]) / dt if dt > 0 else 0.0

    def tps_text(self, index: int) -> str:
        """Java's "10s 60s 600s" form, e.g. "12.5 11.0 3.2"."""
        return " ".join(repr(round(self.tps(index, w), 4)) for w in TPS_WINDOWS)

    def key_stats(self, name: str, key: str) -> dict | None:
        """BrokerStatsData for one key, or None when nothing was ever counted under it."""
        counter = self.keys.get((name, key))
        if counter is None:
            return None
        minute = self._minute()
        out = {}
        for label, seconds in PERIODS:
            s, c = counter.window(minute, seconds // 60)
            out[label] = {"avgpt": s / c if c else 0.0, "sum": s, "tps": s / seconds}
        return out
