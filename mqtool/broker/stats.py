"""The broker's figures (StoreStatsService and BrokerStatsManager of 4.9.8): totals, TPS over
10 s / 60 s / 600 s from one snapshot a second, put latency per minute, per-key sums for the last
minute, hour and day (VIEW_BROKER_STATS_DATA), and the morning snapshots mqadmin clusterList reads."""
from __future__ import annotations

import bisect
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field

SAMPLES = 601                      # one a second, MAX_RECORDS_OF_SAMPLING + 1: enough for the 600 s TPS
TPS_WINDOWS = (10, 60, 600)
# VIEW_BROKER_STATS_DATA names (BrokerStatsManager): topic, topic@group, or the cluster name for BROKER_*.
TOPIC_PUT_NUMS, TOPIC_PUT_SIZE = "TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE"
GROUP_GET_NUMS, GROUP_GET_SIZE = "GROUP_GET_NUMS", "GROUP_GET_SIZE"
BROKER_PUT_NUMS, BROKER_GET_NUMS = "BROKER_PUT_NUMS", "BROKER_GET_NUMS"
PERIODS = (("statsMinute", 60), ("statsHour", 3600), ("statsDay", 86400))
# putMessageDistributeTime: the last minute's puts by entire time, with StoreStatsService's labels.
DISTRIBUTE_DESC = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
                   "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]")
DISTRIBUTE_BOUNDS = (1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
# putLatency99/999: PUT_MESSAGE_ENTIRE_TIME_BUCKETS, (step ms, count) -> upper bounds 1..20, 22..50, ...
_STEPS = ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9))


def _latency_bounds() -> list[int]:
    bounds, b = [], 0
    for step, n in _STEPS:
        for _ in range(n):
            b += step
            bounds.append(b)
    return bounds + [2**63 - 1]


LATENCY_BOUNDS = _latency_bounds()
_LATENCY_AT_0 = bisect.bisect_left(LATENCY_BOUNDS, 0)


def java_double(x: float) -> str:
    """`Double.toString`: "0.0", "12.5", "1.0E-5", "1.2345678E7"."""
    x = float(x)
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        text = repr(x)
        return text if "e" not in text else f"{x:.20f}".rstrip("0")
    mantissa, exp = f"{x:.16e}".split("e")
    digits = repr(float(mantissa))                      # shortest digits of the mantissa
    return f"{digits}E{int(exp)}"


@dataclass
class Totals:
    put_msgs: int = 0
    put_bytes: int = 0
    put_failed: int = 0
    put_max_ms: int = 0
    get_found: int = 0             # pulls that found messages
    get_miss: int = 0              # pulls that found none
    get_msgs: int = 0              # messages sent to consumers (getTransferedTps, msgGetTotal*)
    get_bytes: int = 0             # their bytes (the metrics endpoint's counters)


@dataclass
class KeyCounter:
    """Per-minute buckets of (sum, calls) for one stats key, a day deep."""
    buckets: deque = field(default_factory=lambda: deque(maxlen=1441))

    def add(self, n: int, minute: int, calls: int = 1) -> None:
        buckets = self.buckets
        if buckets:
            last = buckets[-1]            # [minute, sum, calls]: changed in place (once per put)
            if last[0] == minute:
                last[1] += n
                last[2] += calls
                return
        buckets.append([minute, n, calls])

    def window(self, now_minute: int, minutes: int) -> tuple[int, int]:
        s = c = 0
        for m, bs, bc in reversed(self.buckets):
            if m <= now_minute - minutes:
                break
            s, c = s + bs, c + bc
        return s, c


class BrokerStats:
    def __init__(self, clock=time.time, cluster: str = "DefaultCluster"):
        self.clock = clock
        self.cluster = cluster
        self.totals = Totals()
        self.samples: deque = deque(maxlen=SAMPLES)        # (time, put_msgs, found, miss, get_msgs)
        self.keys: dict[tuple[str, str], KeyCounter] = defaultdict(KeyCounter)
        self._put_counters: dict[str, tuple[KeyCounter, ...]] = {}   # topic -> its three put keys' counters
        # Totals since start for the metrics endpoint's counters: topic -> [msgs, bytes], (topic, group) -> same.
        self.topic_totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.group_totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        self.day = time.localtime(clock()).tm_yday
        self.morning = {"put": 0, "get": 0}
        self.yesterday_morning = {"put": 0, "get": 0}
        self.minute = self._minute()
        self.distribute = [0] * len(DISTRIBUTE_DESC)
        self.last_distribute: list[int] | None = None      # Java prints "null" until a minute has passed
        self.latency = [0] * len(LATENCY_BOUNDS)
        self.last_latency = [0] * len(LATENCY_BOUNDS)
        self.sample()

    # ------------------------------------------------------------ counting

    def _minute(self) -> int:
        return int(self.clock() // 60)

    def put(self, topic: str, msgs: int, nbytes: int, elapsed_ms: int | None = None) -> None:
        t = self.totals
        t.put_msgs += msgs
        t.put_bytes += nbytes
        per_topic = self.topic_totals[topic]
        per_topic[0] += msgs
        per_topic[1] += nbytes
        minute = self._minute()
        counters = self._put_counters.get(topic)
        if counters is None:
            counters = self._put_counters[topic] = (self.keys[(TOPIC_PUT_NUMS, topic)],
                                                    self.keys[(TOPIC_PUT_SIZE, topic)],
                                                    self.keys[(BROKER_PUT_NUMS, self.cluster)])
        counters[0].add(msgs, minute)
        counters[1].add(nbytes, minute)
        counters[2].add(msgs, minute, 0)    # incBrokerPutNums adds no call
        if elapsed_ms is not None:
            self.put_time(elapsed_ms)

    def put_one(self, topic: str, nbytes: int, elapsed_ms: int) -> None:
        """put(topic, 1, nbytes, elapsed_ms) in one call (the send fast path's): this minute's
        buckets, where they exist, added to in place."""
        counters = self._put_counters.get(topic)
        if counters is None:
            self.put(topic, 1, nbytes, elapsed_ms)
            return
        t = self.totals
        t.put_msgs += 1
        t.put_bytes += nbytes
        per_topic = self.topic_totals[topic]
        per_topic[0] += 1
        per_topic[1] += nbytes
        minute = self._minute()
        nums, size, broker = counters[0].buckets, counters[1].buckets, counters[2].buckets
        if nums and size and broker and nums[-1][0] == size[-1][0] == broker[-1][0] == minute:
            nums, size, broker = nums[-1], size[-1], broker[-1]
            nums[1] += 1
            nums[2] += 1
            size[1] += nbytes
            size[2] += 1
            broker[1] += 1                  # (incBrokerPutNums adds no call)
        else:
            counters[0].add(1, minute)
            counters[1].add(nbytes, minute)
            counters[2].add(1, minute, 0)
        if elapsed_ms == 0:
            self.distribute[0] += 1
            self.latency[_LATENCY_AT_0] += 1
        else:
            self.put_time(elapsed_ms)

    def put_run(self, tally: dict[str, list[int]], zeros: int, slow: list[int]) -> None:
        """put_one for each of a run of puts: tally {topic: [messages, bytes]}, how many took 0 ms,
        the others' times (the send fast path's run over one read, counted once it ends)."""
        t = self.totals
        minute = self._minute()
        for topic, (msgs, nbytes) in tally.items():
            t.put_msgs += msgs
            t.put_bytes += nbytes
            per_topic = self.topic_totals[topic]
            per_topic[0] += msgs
            per_topic[1] += nbytes
            counters = self._put_counters.get(topic)
            if counters is None:
                counters = self._put_counters[topic] = (self.keys[(TOPIC_PUT_NUMS, topic)],
                                                        self.keys[(TOPIC_PUT_SIZE, topic)],
                                                        self.keys[(BROKER_PUT_NUMS, self.cluster)])
            counters[0].add(msgs, minute, msgs)
            counters[1].add(nbytes, minute, msgs)
            counters[2].add(msgs, minute, 0)    # incBrokerPutNums adds no call
        self.distribute[0] += zeros
        self.latency[_LATENCY_AT_0] += zeros
        for elapsed_ms in slow:
            self.put_time(elapsed_ms)

    def put_time(self, elapsed_ms: int) -> None:
        """setPutMessageEntireTimeMax + incPutMessageEntireTime: one put's entire time."""
        if elapsed_ms == 0:                # nearly every put: the first bucket of each
            self.distribute[0] += 1
            self.latency[_LATENCY_AT_0] += 1
            return
        self.totals.put_max_ms = max(self.totals.put_max_ms, elapsed_ms)
        self.distribute[bisect.bisect_right(DISTRIBUTE_BOUNDS, elapsed_ms) if elapsed_ms > 0 else 0] += 1
        self.latency[bisect.bisect_left(LATENCY_BOUNDS, elapsed_ms)] += 1

    def put_failed(self) -> None:
        self.totals.put_failed += 1

    def got(self, group: str, topic: str, msgs: int, nbytes: int) -> None:
        t = self.totals
        if msgs:
            t.get_found += 1
            t.get_msgs += msgs
            t.get_bytes += nbytes
            per_group = self.group_totals[(topic, group)]
            per_group[0] += msgs
            per_group[1] += nbytes
            minute = self._minute()
            self.keys[(GROUP_GET_NUMS, f"{topic}@{group}")].add(msgs, minute)
            self.keys[(GROUP_GET_SIZE, f"{topic}@{group}")].add(nbytes, minute)
            self.keys[(BROKER_GET_NUMS, self.cluster)].add(msgs, minute, 0)
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
        minute = int(now // 60)
        if minute != self.minute:               # printTps once a minute swaps the latency tables
            self.minute = minute
            self.last_distribute, self.distribute = self.distribute, [0] * len(DISTRIBUTE_DESC)
            self.last_latency, self.latency = self.latency, [0] * len(LATENCY_BOUNDS)

    def tps(self, index: int, seconds: int) -> float | None:
        """CallSnapshot.getTPS over the last `seconds` samples; None until that many were taken."""
        if len(self.samples) <= seconds:
            return None
        last, before = self.samples[-1], self.samples[-(seconds + 1)]
        dt = last[0] - before[0]
        return (last[index] - before[index]) / dt if dt > 0 else 0.0

    def tps_text(self, index: int) -> str:
        """Java's "10s 60s 600s" string; a window not yet sampled is empty, as in Java ("3.5  ")."""
        return " ".join("" if v is None else java_double(v) for v in (self.tps(index, w) for w in TPS_WINDOWS))

    def total_tps_text(self, found: int, miss: int) -> str:
        """getGetTotalTps: found + miss per window, 0.0 for a window not yet sampled."""
        return " ".join(java_double((self.tps(found, w) or 0.0) + (self.tps(miss, w) or 0.0)) for w in TPS_WINDOWS)

    def distribute_text(self) -> str:
        if self.last_distribute is None:
            return "null"
        return "".join(f"{d}:{n} " for d, n in zip(DISTRIBUTE_DESC, self.last_distribute))

    def latency_px(self, px: float) -> float:
        """findPutMessageEntireTimePX over the last minute's buckets, interpolated within a bucket."""
        total = sum(self.last_latency)
        index, passed = int(total * px), 0
        for i, count in enumerate(self.last_latency):
            if index <= passed + count:
                lo = LATENCY_BOUNDS[i - 1] if i else 0
                return lo + ((LATENCY_BOUNDS[i] - lo) * (index - passed) / count if count else 0)
            passed += count
        return 0.0

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

    def minute_tps(self, name: str, key: str) -> float:
        """tpsGroupGetNums and the like: the last minute's sum per second (statsMinute's tps)."""
        counter = self.keys.get((name, key))
        return counter.window(self._minute(), 1)[0] / 60 if counter is not None else 0.0


SENT_CODES = frozenset({0, 10, 11, 12})      # SUCCESS, FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT


def timed_put(handler):
    """A send handler whose stored puts count their entire time (putMessageEntireTimeMax,
    putMessageDistributeTime, putLatency99): measured around the request, as the broker has no
    hook inside the store's put."""
    async def timed(ctrl, conn, cmd):
        start = time.monotonic()
        resp = await handler(ctrl, conn, cmd)
        if resp is not None and resp.code in SENT_CODES:
            ctrl.stats.put_time(int((time.monotonic() - start) * 1000))
        return resp
    timed.__name__ = timed.__qualname__ = getattr(handler, "__name__", "timed")
    return timed
