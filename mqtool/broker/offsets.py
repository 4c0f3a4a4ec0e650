"""Committed consumer offsets (ConsumerOffsetManager.java), persisted to consumerOffset.json.

Key `topic@group`, inner map queueId -> next offset to consume, written with fastjson's
unquoted integer keys so a Java broker reads the file back.
"""
from __future__ import annotations

import threading
from pathlib import Path

from mqtool_store.configfiles import dumps_fastjson, int_keys, load_config, write_config

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, config_dir: Path):
        self.path = Path(config_dir) / "consumerOffset.json"
        self.lock = threading.Lock()
        self.table: dict[str, dict[int, int]] = {}
        loaded = load_config(self.path)
        for key, queues in loaded.data.get("offsetTable", {}).items():
            self.table[key] = {q: int(v) for q, v in int_keys(queues).items()}
        self.dirty = False

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self.lock:
            self.table.setdefault(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})[queue_id] = offset
            self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """-1 when the group has no offset for the queue (QUERY_NOT_FOUND for the client)."""
        return self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id, -1)

    def groups_of_topic(self, topic: str) -> set[str]:
        return {k.split(TOPIC_GROUP_SEPARATOR, 1)[1] for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic}

    def topics_of_group(self, group: str) -> set[str]:
        return {k.split(TOPIC_GROUP_SEPARATOR, 1)[0] for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group}

    def remove_group(self, group: str) -> None:
        with self.lock:
            for key in [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group]:
                del self.table[key]
            self.dirty = True

    def remove_topic(self, topic: str) -> None:
        with self.lock:
            for key in [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic]:
                del self.table[key]
            self.dirty = True

    def persist(self) -> None:
        with self.lock:
            text = dumps_fastjson({"offsetTable": {k: dict(v) for k, v in self.table.items()}})
            self.dirty = False
        write_config(self.path, text)
