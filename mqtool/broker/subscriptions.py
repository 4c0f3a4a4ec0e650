"""Subscription groups (SubscriptionGroupManager.java), persisted to subscriptionGroup.json."""
from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from mqtool.broker.topics import DataVersion
from mqtool_store.configfiles import dumps_fastjson, load_config, write_config

SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER", "CLIENT_INNER_PRODUCER",
                 "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION",
                 "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS")


@dataclass
class SubscriptionGroupConfig:
    groupName: str
    brokerId: int = 0
    consumeBroadcastEnable: bool = True
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    notifyConsumerIdsChangedEnable: bool = True
    retryMaxTimes: int = 16
    retryQueueNums: int = 1
    whichBrokerWhenConsumeSlowly: int = 1

    def to_json(self) -> dict:
        return asdict(self)   # fields are declared in fastjson's alphabetical order

    @classmethod
    def from_json(cls, d: dict) -> "SubscriptionGroupConfig":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


class SubscriptionGroupManager:
    def __init__(self, config_dir: Path, auto_create: bool = True):
        self.path = Path(config_dir) / "subscriptionGroup.json"
        self.auto_create = auto_create
        self.lock = threading.RLock()
        self.table: dict[str, SubscriptionGroupConfig] = {g: SubscriptionGroupConfig(g) for g in SYSTEM_GROUPS}
        self.data_version = DataVersion()
        loaded = load_config(self.path)
        for name, d in loaded.data.get("subscriptionGroupTable", {}).items():
            self.table[name] = SubscriptionGroupConfig.from_json(d)

    def persist(self) -> None:
        with self.lock:
            write_config(self.path, dumps_fastjson({
                "dataVersion": self.data_version.to_json(),
                "subscriptionGroupTable": {k: v.to_json() for k, v in self.table.items()}}))

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """findSubscriptionGroupConfig: auto-created when autoCreateSubscriptionGroup."""
        with self.lock:
            cfg = self.table.get(group)
            if cfg is None and self.auto_create:
                cfg = self.table[group] = SubscriptionGroupConfig(group)
                self.data_version.next()
                self.persist()
            return cfg

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        with self.lock:
            self.table[cfg.groupName] = cfg
            self.data_version.next()
            self.persist()

    def delete(self, group: str) -> bool:
        with self.lock:
            if self.table.pop(group, None) is None:
                return False
            self.data_version.next()
            self.persist()
            return True
