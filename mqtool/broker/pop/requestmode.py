"""How each group consumes each topic, PULL or POP (5.x MessageRequestModeManager; rocketmq5.md 2.2),
kept in `config/messageRequestMode.json` as Java writes it:
`{"messageRequestModeMap":{<topic>:{<group>:{"consumerGroup":…,"mode":"POP","popShareQueueNum":0,"topic":…}}}}`.
Set by SET_MESSAGE_REQUEST_MODE (mqadmin setConsumeMode), read by QUERY_ASSIGNMENT, copied by a slave
from its master (GET_ALL_MESSAGE_REQUEST_MODE)."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from mqtool_remoting import jsonbody
from mqtool_store.configfiles import dumps_fastjson, load_config, write_config

from mqtool.broker.clients import enum_name

FILE = "messageRequestMode.json"
PULL, POP = "PULL", "POP"
MODES = (PULL, POP)                 # MessageRequestMode, in ordinal order


@dataclass
class RequestMode:
    """SetMessageRequestModeRequestBody. `mode` None: a name fastjson could not map to the enum (it
    sets null, and Java's broker keeps and answers that)."""
    topic: str | None
    consumerGroup: str | None
    mode: str | None = PULL
    popShareQueueNum: int = 0

    @classmethod
    def from_json(cls, d: dict) -> "RequestMode":
        if not isinstance(d, dict):
            raise ValueError("a message request mode is a JSON object")
        mode = d.get("mode", PULL)
        if mode is not None:
            mode = enum_name(mode, MODES)
            mode = mode if mode in MODES else None
        return cls(_text(d.get("topic")), _text(d.get("consumerGroup")), mode, int(d.get("popShareQueueNum") or 0))

    def to_json(self) -> dict:
        """fastjson's bean order (alphabetical), nulls left out."""
        out = {"consumerGroup": self.consumerGroup, "mode": self.mode, "popShareQueueNum": self.popShareQueueNum,
               "topic": self.topic}
        return {k: v for k, v in out.items() if v is not None}


def _text(v) -> str | None:
    return None if v is None else str(v)


class MessageRequestModeManager:
    def __init__(self, config_dir: Path):
        self.path = Path(config_dir) / FILE
        self.lock = threading.Lock()
        self.table: dict[str, dict[str, RequestMode]] = table_from_json(load_config(self.path).data)

    def get(self, topic: str, group: str) -> RequestMode | None:
        return self.table.get(topic, {}).get(group)

    def set(self, topic: str, group: str, mode: RequestMode) -> None:
        with self.lock:
            self.table.setdefault(topic, {})[group] = mode

    def replace(self, table: dict[str, dict[str, RequestMode]]) -> bool:
        """A slave's copy of its master's table (SlaveSynchronize.syncMessageRequestMode: topics the
        master lacks go, the master's replace ours); True when it changed anything."""
        with self.lock:
            before = self.encode()
            for topic in [t for t in self.table if t not in table]:
                del self.table[topic]
            self.table.update(table)
            return self.encode() != before

    def encode(self, pretty: bool = False) -> str:
        """ConfigManager.encode: the whole table; ConcurrentHashMap's iteration order, as fastjson writes it."""
        data = {"messageRequestModeMap": {
            topic: {group: m.to_json() for group, m in jsonbody.java_map(groups).items()}
            for topic, groups in jsonbody.java_map(self.table).items()}}
        return dumps_fastjson(data) if pretty else jsonbody.dumps(data).decode()

    def persist(self) -> None:
        """ConfigManager.persist (pretty), under the lock so a later set is never overwritten by an
        earlier one's file."""
        with self.lock:
            write_config(self.path, self.encode(pretty=True))


def table_from_json(data: dict) -> dict[str, dict[str, RequestMode]]:
    table = data.get("messageRequestModeMap") or {}
    if not isinstance(table, dict):
        raise ValueError("messageRequestModeMap is not a JSON object")
    return {str(topic): {str(g): RequestMode.from_json(m) for g, m in groups.items()}
            for topic, groups in table.items() if isinstance(groups, dict)}
