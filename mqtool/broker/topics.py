"""Topic configs: the system topics a 4.9.8 broker creates, auto-creation, persistence to topics.json
(a journal line per change, the file rewritten at most once per short interval: configjournal.py)."""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mqtool.broker.configjournal import JournaledTable
from mqtool_store.codes import SYSTEM_TOPIC_PREFIX, SYSTEM_TOPICS, Perm
from mqtool_store.configfiles import load_config

TOPIC_MAX_LENGTH = 127
_VALID_TOPIC = re.compile(r"^[%|a-zA-Z0-9_-]+$")
DEFAULT_TOPIC = "TBW102"
NOT_ALLOWED_SEND_TOPICS = frozenset({
    "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
})
PERM_RW = int(Perm.PERM_READ | Perm.PERM_WRITE)


def is_system_topic(topic: str) -> bool:
    """TopicValidator.isSystemTopic: admin requests may not create or delete these."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


@dataclass
class TopicConfig:
    topicName: str
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = PERM_RW
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False
    attributes: dict[str, str] | None = None     # 5.x topic attributes ({"message.type": "FIFO"}); None: none

    def to_json(self) -> dict:
        """fastjson's bean order: alphabetical. `attributes` (5.x) only when the topic has some, so a
        topics.json without them stays 4.9.8's bytes."""
        d = {"attributes": dict(self.attributes)} if self.attributes else {}
        d.update({"order": self.order, "perm": self.perm, "readQueueNums": self.readQueueNums,
                  "topicFilterType": self.topicFilterType, "topicName": self.topicName,
                  "topicSysFlag": self.topicSysFlag, "writeQueueNums": self.writeQueueNums})
        return d

    @classmethod
    def from_json(cls, d: dict) -> "TopicConfig":
        attrs = d.get("attributes")
        return cls(d["topicName"], int(d.get("readQueueNums", 16)), int(d.get("writeQueueNums", 16)),
                   int(d.get("perm", PERM_RW)), d.get("topicFilterType", "SINGLE_TAG"),
                   int(d.get("topicSysFlag", 0)), bool(d.get("order", False)),
                   {str(k): str(v) for k, v in attrs.items()} if isinstance(attrs, dict) and attrs else None)


def check_topic_name(topic: str) -> str | None:
    """Why a topic name is not allowed (TopicValidator.validateTopic), or None."""
    if not topic:
        return "the topic name is blank"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"the topic name is longer than {TOPIC_MAX_LENGTH} characters"
    if not _VALID_TOPIC.match(topic):
        return f"the topic name {topic!r} contains characters other than %|a-zA-Z0-9_-"
    return None


class DataVersion:
    """4.9.8's counter and timestamp; controller mode adds 5.x's stateVersion (the master epoch), which
    a name server compares so that a lower epoch never takes brokerId 0 back (None: not sent, as 4.9.8)."""

    def __init__(self, counter: int = 0, timestamp: int | None = None, state_version: int | None = None):
        self.counter = counter
        self.timestamp = timestamp if timestamp is not None else int(time.time() * 1000)
        self.state_version = state_version

    def next(self, state_version: int | None = None) -> None:
        self.counter += 1
        self.timestamp = int(time.time() * 1000)
        if state_version is not None:
            self.state_version = state_version

    def to_json(self) -> dict:
        d = {"counter": self.counter}
        if self.state_version is not None:
            d["stateVersion"] = self.state_version
        d["timestamp"] = self.timestamp
        return d

    @classmethod
    def from_json(cls, d: dict) -> "DataVersion":
        state = d.get("stateVersion")
        return cls(int(d.get("counter", 0)), int(d.get("timestamp", 0)), None if state is None else int(state))


class TopicConfigManager:
    """TopicConfigManager.java: system topics at start, then topics.json on top."""

    def __init__(self, config_dir: Path, cluster: str, broker_name: str, auto_create: bool = True,
                 default_queue_nums: int = 8, cluster_topic: bool = True, broker_topic: bool = True,
                 trace_topic: str | None = None):
        self.path = Path(config_dir) / "topics.json"
        self.file = JournaledTable(self.path, "topicConfigTable")
        self.lock = threading.RLock()
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.warnings: list[str] = []
        self.on_change = None      # on_change(cfg): a topic was created or changed (register it)
        inherit = int(Perm.PERM_INHERIT)
        system = [TopicConfig("SELF_TEST_TOPIC", 1, 1)]
        if auto_create:
            system.append(TopicConfig(DEFAULT_TOPIC, default_queue_nums, default_queue_nums, PERM_RW | inherit))
        system += [
            TopicConfig("BenchmarkTest", 1024, 1024),
            TopicConfig(cluster, 16, 16, inherit | (PERM_RW if cluster_topic else 0)),
            TopicConfig(broker_name, 1, 1, inherit | (PERM_RW if broker_topic else 0)),
            TopicConfig("OFFSET_MOVED_EVENT", 1, 1),
            TopicConfig("SCHEDULE_TOPIC_XXXX", 18, 18),
            TopicConfig(f"{cluster}_REPLY_TOPIC", 1, 1),
        ]
        if trace_topic:         # traceTopicEnable: msgTraceTopicName
            system.append(TopicConfig(trace_topic, 1, 1))
        for t in system:
            self.table[t.topicName] = t
        self.load()

    def load(self) -> None:
        loaded = load_config(self.path)
        self.warnings += loaded.warnings if loaded.used_backup else []
        version = self.file.load_into(self.table, loaded.data, TopicConfig.from_json)
        if version is not None:
            self.data_version = DataVersion.from_json(version)
        self.file.reset({k: v.to_json() for k, v in self.table.items()})

    def text(self) -> str:
        return self.file.text(self.data_version.to_json())

    def persist(self) -> None:
        """The whole file now, journal dropped (start, stop, a slave's copy)."""
        with self.lock:
            self.file.write_now(self.text())

    def begin_compact(self):
        with self.lock:
            return self.file.begin_compact(self.data_version.to_json())

    def replace_all(self, table: dict[str, TopicConfig], version: DataVersion) -> None:
        """A slave's copy of its master's table (its file is rewritten within CONFIG_REWRITE_S)."""
        with self.lock:
            self.table = table
            self.data_version = version
            self.file.reset({k: v.to_json() for k, v in table.items()})
            self.file.mark_stale()            # written by the next rewrite, off the loop

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def update(self, cfg: TopicConfig) -> None:
        with self.lock:
            self.table[cfg.topicName] = cfg
            self.data_version.next()
            self.file.record(cfg.topicName, cfg.to_json(), self.data_version.to_json())
        if self.on_change:
            self.on_change(cfg)

    def delete(self, topic: str) -> bool:
        """deleteTopicConfig: a new data version, no registration (as 4.9.8: the name server keeps
        the route until DELETE_TOPIC_IN_NAMESRV)."""
        with self.lock:
            if self.table.pop(topic, None) is None:
                return False
            self.data_version.next()
            self.file.record(topic, None, self.data_version.to_json())
        return True

    def create_in_send(self, topic: str, default_topic: str, queue_nums: int, sys_flag: int = 0) -> TopicConfig | None:
        """createTopicInSendMessageMethod: inherit from `default_topic` if it has PERM_INHERIT."""
        with self.lock:
            existing = self.table.get(topic)
            if existing:
                return existing
            base = self.table.get(default_topic)
            if base is None or not base.perm & Perm.PERM_INHERIT:
                return None
            nums = min(queue_nums, base.writeQueueNums)
            cfg = TopicConfig(topic, nums, nums, base.perm & ~int(Perm.PERM_INHERIT), topicSysFlag=sys_flag)
            self.update(cfg)
            return cfg

    def create_system(self, topic: str, queue_nums: int, perm: int = PERM_RW) -> TopicConfig:
        """Retry, DLQ and transaction topics, created on demand."""
        with self.lock:
            existing = self.table.get(topic)
            if existing:
                return existing
            cfg = TopicConfig(topic, queue_nums, queue_nums, perm)
            self.update(cfg)
            return cfg

    def cover_held_queues(self, held: dict[str, int]) -> list[tuple[str, int, int]]:
        """Widen (or create) the config of every topic whose messages this store holds in queues its
        config does not list; `held`: topic -> highest queue id with messages + 1. Returns (topic,
        queues before, after) for each change. A promoted replica uses it: the old master's topic
        config reaches a replica only with the next metadata sync (every 10 s), its messages at once."""
        changed = []
        with self.lock:
            for topic, queues in sorted(held.items()):
                cfg = self.table.get(topic)
                before = 0 if cfg is None else min(cfg.readQueueNums, cfg.writeQueueNums)
                if cfg is not None and cfg.readQueueNums >= queues and cfg.writeQueueNums >= queues:
                    continue
                new = TopicConfig(topic, queues, queues) if cfg is None else TopicConfig(
                    topic, max(cfg.readQueueNums, queues), max(cfg.writeQueueNums, queues), cfg.perm,
                    cfg.topicFilterType, cfg.topicSysFlag, cfg.order, cfg.attributes)
                self.update(new)
                changed.append((topic, before, min(new.readQueueNums, new.writeQueueNums)))
        return changed
