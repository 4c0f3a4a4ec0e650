"""KV config (KVConfigManager.java): namespace -> key -> value, persisted as kvConfig.json."""
from __future__ import annotations

import json
from pathlib import Path

from store.configfiles import load_config, write_config

DEFAULT_PATH = Path.home() / "namesrv" / "kvConfig.json"


class KVConfig:
    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else DEFAULT_PATH
        self.table: dict[str, dict[str, str]] = {}
        loaded = load_config(self.path)
        for ns, kv in loaded.data.get("configTable", {}).items():
            self.table[ns] = {str(k): str(v) for k, v in kv.items()}

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        if self.table.get(namespace, {}).pop(key, None) is not None:
            if not self.table[namespace]:
                del self.table[namespace]
            self.persist()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        return self.table.get(namespace)

    def persist(self) -> None:
        write_config(self.path, json.dumps({"configTable": self.table}, indent="\t", ensure_ascii=False))
