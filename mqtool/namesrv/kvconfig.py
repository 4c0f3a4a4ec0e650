"""KV config (KVConfigManager.java): namespace -> key -> value, persisted as kvConfig.json.

The file is what Java writes: compact fastjson `{"configTable":{ns:{k:v}}}` in HashMap order,
replaced through `<file>.tmp` with the previous content kept in `<file>.bak` (MixAll.string2File).
Java refuses to start on a file it cannot parse; so does this (KVConfigError), naming the file.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from mqtool_remoting import jsonbody

DEFAULT_PATH = Path.home() / "namesrv" / "kvConfig.json"
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"    # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
log = logging.getLogger("mqtool.namesrv")


class KVConfigError(Exception):
    """The KV config file exists but cannot be read or parsed, or cannot be written."""


class KVConfig:
    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path).expanduser() if path else DEFAULT_PATH
        self.table: dict[str, dict[str, str]] = {}
        self._load()

    def _load(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            raise KVConfigError(f"cannot read KV config {self.path}: {exc}") from None
        if not text.strip():
            return
        try:
            data = jsonbody.loads(text)
            table = data.get("configTable") or {}
            self.table = {str(ns): {str(k): str(v) for k, v in (kv or {}).items() if v is not None}
                          for ns, kv in table.items()}
        except (ValueError, AttributeError, TypeError) as exc:
            raise KVConfigError(f"KV config {self.path} is not valid JSON of a config table: {exc}") from None

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        log.info("put KV config: %s %s=%s", namespace, key, value)
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        """Java keeps an emptied namespace (its KV list is then an empty table, not "not found")."""
        kv = self.table.get(namespace)
        if kv is not None:
            kv.pop(key, None)
        self.persist()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        return self.table.get(namespace)

    def to_json_bytes(self) -> bytes:
        return jsonbody.dumps({"configTable": {ns: jsonbody.java_map(kv)
                                               for ns, kv in jsonbody.java_map(self.table).items()}})

    def persist(self) -> None:
        data = self.to_json_bytes()
        tmp, bak = self.path.with_name(self.path.name + ".tmp"), self.path.with_name(self.path.name + ".bak")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            try:
                bak.write_bytes(self.path.read_bytes())
            except FileNotFoundError:
                pass
            os.replace(tmp, self.path)      # atomic, where Java deletes then renames
        except OSError as exc:
            raise KVConfigError(f"cannot write KV config {self.path}: {exc.strerror or exc}") from None
