"""Committed consumer offsets (ConsumerOffsetManager.java), persisted to consumerOffset.json.

Key `topic@group`, inner map queueId -> next offset to consume, written with fastjson's
unquoted integer keys so a Java broker reads the file back. As in 4.9.8 the file is written every
flushConsumerOffsetInterval (and at a clean stop), so a kill -9 loses the commits of the last
interval at most (their consumers read those messages again). The keys are indexed by topic and by
group, so a group's or a topic's offsets are found, and removed, without a scan of the table.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

from mqtool_store.configfiles import int_keys, load_config, write_config

TOPIC_GROUP_SEPARATOR = "@"


def offsets_text(table: dict[str, dict[int, int]]) -> str:
    """What dumps_fastjson({"offsetTable": table}) writes, at a tenth of its cost (tests hold them equal)."""
    if not table:
        return '{\n\t"offsetTable":{}\n}'
    items = []
    for key, queues in table.items():
        name = json.dumps(key, ensure_ascii=False)
        if queues:
            items.append(f"\t\t{name}:{{{','.join(f'{q}:{o}' for q, o in queues.items())}\n\t\t}}")
        else:
            items.append(f"\t\t{name}:{{}}")
    return '{\n\t"offsetTable":{\n' + ",\n".join(items) + "\n\t}\n}"


class ConsumerOffsetManager:
    def __init__(self, config_dir: Path):
        self.path = Path(config_dir) / "consumerOffset.json"
        self.lock = threading.Lock()
        self.table: dict[str, dict[int, int]] = {}
        self._by_topic: dict[str, set[str]] = {}
        self._by_group: dict[str, set[str]] = {}
        self._write_lock = threading.Lock()
        self._seq = self._written = 0       # snapshots are numbered: an older one never overwrites a newer
        loaded = load_config(self.path)
        for key, queues in loaded.data.get("offsetTable", {}).items():
            self._add_key(key)[key] = {q: int(v) for q, v in int_keys(queues).items()}
        self.dirty = False

    def _add_key(self, key: str) -> dict:
        if key not in self.table:
            self.table[key] = {}
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            self._by_topic.setdefault(topic, set()).add(key)
            self._by_group.setdefault(group, set()).add(key)
        return self.table

    def _drop_key(self, key: str) -> None:
        if self.table.pop(key, None) is None:
            return
        topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
        for index, name in ((self._by_topic, topic), (self._by_group, group)):
            keys = index.get(name)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[name]

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        with self.lock:
            queues = self.table.get(key)
            if queues is None:
                queues = self._add_key(key)[key]
            queues[queue_id] = offset
            self.dirty = True

    def replace(self, key: str, queues: dict[int, int]) -> None:
        """A slave's copy of one key from its master."""
        with self.lock:
            self._add_key(key)[key] = queues
            self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """-1 when the group has no offset for the queue (QUERY_NOT_FOUND for the client)."""
        return self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id, -1)

    def groups_of_topic(self, topic: str) -> set[str]:
        return {k.partition(TOPIC_GROUP_SEPARATOR)[2] for k in self._by_topic.get(topic, ())}

    def topics_of_group(self, group: str) -> set[str]:
        return {k.partition(TOPIC_GROUP_SEPARATOR)[0] for k in self._by_group.get(group, ())}

    def remove_group(self, group: str) -> None:
        with self.lock:
            for key in list(self._by_group.get(group, ())):
                self._drop_key(key)
            self.dirty = True

    def remove_topic(self, topic: str) -> None:
        with self.lock:
            for key in list(self._by_topic.get(topic, ())):
                self._drop_key(key)
            self.dirty = True

    def copy(self) -> dict[str, dict[int, int]]:
        with self.lock:
            return {k: dict(v) for k, v in self.table.items()}

    def snapshot(self) -> tuple[int, dict[str, dict[int, int]]]:
        """A numbered copy to write: the loop goes on committing while a thread writes it."""
        with self.lock:
            self.dirty = False
            self._seq += 1
            return self._seq, {k: dict(v) for k, v in self.table.items()}

    def write(self, snap: tuple[int, dict[str, dict[int, int]]]) -> None:
        """Any thread: consumerOffset.json from a snapshot (unless a newer one was written)."""
        seq, table = snap
        text = offsets_text(table)
        with self._write_lock:
            if seq > self._written:
                write_config(self.path, text)
                self._written = seq

    def persist(self) -> None:
        self.write(self.snapshot())
