"""SQL92 filters on the broker (ConsumerFilterManager, ExpressionMessageFilter,
ExpressionForRetryMessageFilter of 4.9.8): one compiled filter per (topic, group), registered by
heartbeats, persisted to consumerFilter.json, and the per-pull test of a stored record.

Time is passed in where it matters; the file is written by `persist`. Bit maps (enableCalcFilterBitMap)
are not kept: every candidate record is read and evaluated, as 4.9.8 does when they are off.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mqtool.broker.filterbloom import BloomFilter
from mqtool.common.sql92 import SQL92, FilterCompileError, Sql92Filter, compile_sql92
from mqtool.common.sql92values import JavaError
from mqtool_store.codes import RETRY_GROUP_TOPIC_PREFIX, Prop
from mqtool_store.commitlog import decode_record
from mqtool_store.configfiles import dumps_fastjson, load_config, write_config

log = logging.getLogger("mqtool.broker")

LOAD_DEAD_BACK_MS = 30_000          # entries loaded from the file count as dead since 30 s before start
UNKNOWN_TYPE_NPE = ('Cannot invoke "org.apache.rocketmq.filter.FilterSpi.compile(String)" because the return value '
                    'of "org.apache.rocketmq.filter.FilterFactory.get(String)" is null')
_CACHE_SIZE = 100                   # SelectorParser's parse cache: results and failures, per exact text
_cache: dict[str, Sql92Filter | FilterCompileError] = {}


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: null, "" or exactly "TAG"."""
    return not expression_type or expression_type == "TAG"


def compile_filter(expression_type: str | None, text: str | None) -> Sql92Filter:
    """FilterFactory.get(type).compile(text): FilterCompileError as the broker's remark gives it
    (`str()` of it), remark None when Java's has none."""
    if expression_type != SQL92:
        raise FilterCompileError("java.lang.NullPointerException", UNKNOWN_TYPE_NPE)
    if text is None:
        raise FilterCompileError("java.lang.NullPointerException", "null")
    hit = _cache.get(text)
    if hit is None:
        try:
            hit = compile_sql92(text)
        except FilterCompileError as exc:
            hit = exc
        if len(_cache) >= _CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        _cache[text] = hit
    if isinstance(hit, FilterCompileError):
        raise hit
    return hit


def remark_of(exc: FilterCompileError) -> str | None:
    """e.getMessage() as CHECK_CLIENT_CONFIG answers it: a compile error's `<class>: <message>`;
    a bare NullPointerException's own message (none for a null text)."""
    if exc.java_class == "java.lang.NullPointerException":
        return None if exc.message == "null" else exc.message
    return str(exc)


@dataclass
class FilterData:
    """ConsumerFilterData."""
    consumerGroup: str
    topic: str
    expression: str
    expressionType: str
    bornTime: int
    clientVersion: int
    bloomFilterData: dict | None = None
    deadTime: int = 0
    compiled: Sql92Filter | None = None

    @property
    def dead(self) -> bool:
        return self.deadTime >= self.bornTime

    def to_json(self) -> dict:
        return {"bloomFilterData": self.bloomFilterData, "bornTime": self.bornTime,
                "clientVersion": self.clientVersion, "consumerGroup": self.consumerGroup, "dead": self.dead,
                "deadTime": self.deadTime, "expression": self.expression, "expressionType": self.expressionType,
                "topic": self.topic}


class ConsumerFilterManager:
    def __init__(self, config_dir: Path, error_rate: int = 20, expected_consumers: int = 32,
                 clean_span_ms: int = 86_400_000, now_ms: int | None = None):
        self.path = Path(config_dir) / "consumerFilter.json"
        self.bloom = BloomFilter(error_rate, expected_consumers)
        self.clean_span_ms = clean_span_ms
        self.lock = threading.Lock()
        self.table: dict[str, dict[str, FilterData]] = {}        # topic -> group -> filter
        self.dirty = False
        self._refused: set[tuple[str, str, str]] = set()     # (group, topic, text) already said
        self._load(int(time.time() * 1000) if now_ms is None else now_ms)

    # ---------------------------------------------------------------- registration

    def register(self, group: str, subscriptions, now_ms: int) -> list[str]:
        """A heartbeat's subscriptions (REGISTER event): one warning line for each expression that
        does not compile or that 4.9.8 reads otherwise than it looks; topics the group no longer
        subscribes to are marked dead."""
        notes = []
        with self.lock:
            topics = set()
            for sub in subscriptions:
                topics.add(sub.topic)
                note = self._register_one(group, sub.topic, sub.sub_string, sub.expression_type, sub.sub_version,
                                          now_ms)
                if note:
                    notes.append(note)
            for by_group in self.table.values():
                data = by_group.get(group)
                if data is not None and data.topic not in topics and not data.dead:
                    data.deadTime = now_ms
                    self.dirty = True
        return notes

    def _register_one(self, group, topic, expression, expression_type, version, now_ms) -> str | None:
        if is_tag_type(expression_type) or not expression:
            return None
        bloom = self.bloom.data(f"{group}#{topic}")
        by_group = self.table.setdefault(topic, {})
        old = by_group.get(group)
        if old is not None:
            if version <= old.clientVersion:
                if version == old.clientVersion and old.dead:
                    old.deadTime, self.dirty = 0, True
                return None
            if old.expression == expression and old.expressionType == expression_type and old.bloomFilterData == bloom:
                old.clientVersion, self.dirty = version, True
                old.deadTime = 0 if old.dead else old.deadTime
                return None
        self.dirty = True
        try:
            compiled = compile_filter(expression_type, expression)
        except FilterCompileError as exc:
            if old is not None:
                del by_group[group]          # a changed expression that does not compile: the old one goes too
            if (group, topic, expression) in self._refused:
                return None                  # said once; every heartbeat brings it again
            self._refused.add((group, topic, expression))
            return (f"SQL92 filter of group {group} on topic {topic} refused, its pulls answer "
                    f"FILTER_DATA_NOT_EXIST: {expression!r}: {exc}")
        by_group[group] = FilterData(group, topic, expression, expression_type, now_ms, version, bloom,
                                     compiled=compiled)
        if compiled.quirks:
            reading = f" is read as {compiled.read_as!r}" if compiled.read_as != expression.strip() else ""
            return (f"SQL92 filter of group {group} on topic {topic}: {expression!r}{reading}: "
                    f"{'; '.join(compiled.quirks)}")
        return None

    def unregister(self, group: str, now_ms: int) -> None:
        """The group's last client left (UNREGISTER / CLIENT_UNREGISTER): its filters are dead."""
        with self.lock:
            for by_group in self.table.values():
                data = by_group.get(group)
                if data is not None and not data.dead:
                    data.deadTime, self.dirty = now_ms, True

    def get(self, topic: str, group: str) -> FilterData | None:
        return self.table.get(topic, {}).get(group)

    # ---------------------------------------------------------------- the file

    def clean(self, now_ms: int) -> None:
        """Drop filters dead for filterDataCleanTimeSpan, and topics left with none."""
        with self.lock:
            for topic in list(self.table):
                by_group = self.table[topic]
                for group, data in list(by_group.items()):
                    if data.dead and now_ms - data.deadTime > self.clean_span_ms:
                        del by_group[group]
                        self.dirty = True
                if not by_group:
                    del self.table[topic]

    def to_json(self) -> dict:
        return {"filterDataByTopic": {
            topic: {"groupFilterData": {g: d.to_json() for g, d in by_group.items()}, "topic": topic}
            for topic, by_group in self.table.items()}}

    def persist(self, now_ms: int | None = None) -> None:
        self.clean(int(time.time() * 1000) if now_ms is None else now_ms)
        with self.lock:
            write_config(self.path, dumps_fastjson(self.to_json()))
            self.dirty = False

    def _load(self, now_ms: int) -> None:
        """Each expression recompiled; everything ignored when the file's bloom sizes differ from
        ours; live entries marked dead (at most 30 s back) until a heartbeat revives them."""
        loaded = load_config(self.path)
        table: dict[str, dict[str, FilterData]] = {}
        for topic, by_topic in (loaded.data.get("filterDataByTopic") or {}).items():
            for group, d in ((by_topic or {}).get("groupFilterData") or {}).items():
                bloom = d.get("bloomFilterData")
                if not bloom or bloom.get("bitNum") != self.bloom.m or len(bloom.get("bitPos") or []) != self.bloom.k:
                    log.warning("%s: bloom filter sizes differ from this broker's, its filters are ignored", self.path)
                    return
                try:
                    compiled = compile_filter(d.get("expressionType"), d.get("expression"))
                except FilterCompileError as exc:
                    log.warning("%s: filter of %s on %s does not compile: %s", self.path, group, topic, exc)
                    continue
                data = FilterData(group, topic, d["expression"], d["expressionType"], int(d.get("bornTime") or 0),
                                  int(d.get("clientVersion") or 0), bloom, int(d.get("deadTime") or 0), compiled)
                if not data.dead:
                    data.deadTime = max(now_ms - LOAD_DEAD_BACK_MS, data.bornTime)
                table.setdefault(topic, {})[group] = data
        self.table = table


# -------------------------------------------------------------------- the per-record test

class RecordFilter:
    """isMatchedByCommitLog over a stored record's properties: callable(record bytes) -> bool."""

    def __init__(self, filters: ConsumerFilterManager, group: str, data: FilterData | None, retry: bool):
        self.filters, self.group, self.data, self.retry = filters, group, data, retry
        self.errors = 0

    def __call__(self, record: bytes) -> bool:
        props = decode_record(record).properties
        data = self.data
        if self.retry:                           # filterSupportRetry: the original topic's filter
            data = self.filters.get(props.get(Prop.RETRY_TOPIC) or "", self.group)
        if data is None or data.compiled is None:
            return True
        try:
            return data.compiled.evaluate(props) is True
        except JavaError as exc:
            self.errors += 1
            if self.errors == 1:
                log.info("Message Filter error, group %s, expression %r: %s (the message is skipped)",
                         self.group, data.expression, exc)
            return False


def record_filter(filters: ConsumerFilterManager, support_retry: bool, group: str, topic: str,
                  expression_type: str, data: FilterData | None) -> RecordFilter | None:
    """The commit-log stage of a pull, or None when every record passes (TAG, or no compiled filter)."""
    if support_retry and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RecordFilter(filters, topic[len(RETRY_GROUP_TOPIC_PREFIX):], None, True)
    if is_tag_type(expression_type) or data is None or data.compiled is None:
        return None
    return RecordFilter(filters, group, data, False)
