"""ControllerConfig: the controller's settings under 5.3.0's property names (controller.md 1.3).

`controllerDLegerPeers` is `n0-127.0.0.1:9878;n1-127.0.0.1:9868`: each node answers controller
requests on its own peer address, as 5.3.0's DLedger controller does. mqtool's Raft (pysyncobj)
needs a port of its own beside it: the peer port + RAFT_PORT_OFFSET.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from mqtool_remoting.transport import parse_addr

RAFT_PORT_OFFSET = 1           # mqtool's: pysyncobj listens on peer port + 1 (DLedger shares the peer port)
DEFAULT_PEERS = "n0-127.0.0.1:9878"
CONFIG_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "rocketmqHome"})


class ControllerConfigError(ValueError):
    """A controller.conf that cannot start a controller (bad peers, self id not among them, a bad number)."""


@dataclass
class ControllerConfig:
    controllerDLegerGroup: str = "DefaultControllerGroup"
    controllerDLegerPeers: str = DEFAULT_PEERS
    controllerDLegerSelfId: str = "n0"
    controllerStorePath: str = ""           # "" -> ~/DLedgerController
    enableElectUncleanMaster: bool = False
    notifyBrokerRoleChanged: bool = True
    scanNotActiveBrokerInterval: int = 5000
    scanInactiveMasterInterval: int = 5000
    electMasterMaxRetryCount: int = 3

    @property
    def store_path(self) -> Path:
        return Path(self.controllerStorePath).expanduser() if self.controllerStorePath else \
            Path.home() / "DLedgerController"

    def peers(self) -> dict[str, str]:
        """{id: "host:port"} in the order written."""
        out = {}
        for item in self.controllerDLegerPeers.split(";"):
            item = item.strip()
            if not item:
                continue
            node, sep, addr = item.partition("-")
            if not sep or not node or not addr:
                raise ControllerConfigError(f"controllerDLegerPeers item {item!r} is not ID-HOST:PORT")
            try:
                parse_addr(addr)
            except Exception as exc:
                raise ControllerConfigError(f"controllerDLegerPeers item {item!r}: {exc}") from None
            out[node] = addr
        if not out:
            raise ControllerConfigError("controllerDLegerPeers is empty")
        if self.controllerDLegerSelfId not in out:
            raise ControllerConfigError(f"controllerDLegerSelfId {self.controllerDLegerSelfId!r} is not one of "
                                        f"controllerDLegerPeers' ids ({', '.join(out)})")
        return out

    @property
    def self_addr(self) -> str:
        return self.peers()[self.controllerDLegerSelfId]

    def update(self, props: dict[str, str]) -> None:
        """Set the keys this config has from property text; other keys are left out, as Java's
        Configuration.update merges only the keys its configs have."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        for key, raw in props.items():
            f = fields.get(key)
            if f is None:
                continue
            raw = raw.strip()
            if f.type == "bool":
                value = raw.lower() == "true"
            elif f.type == "int":
                try:
                    value = int(raw)
                except ValueError:
                    raise ControllerConfigError(f"{key} must be a whole number, not {raw!r}") from None
            else:
                value = raw
            setattr(self, key, value)

    def to_properties(self) -> dict[str, str]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["controllerStorePath"] = str(self.store_path)
        out["controllerType"] = "DLedger"
        out["configBlackList"] = ";".join(sorted(CONFIG_BLACK_LIST - {"rocketmqHome"}))
        return {k: (("true" if v else "false") if isinstance(v, bool) else str(v)) for k, v in sorted(out.items())}


CONTROLLER_KEYS = [f.name for f in dataclasses.fields(ControllerConfig)]


def load(props: dict[str, str], also_known: tuple[str, ...] = ()) -> tuple[ControllerConfig, list[str]]:
    """A config from a properties file's keys, and one warning line per key it does not take
    (mqtool/common/javakeys.py) and `also_known` does not name (a name server's own keys, when the
    controller is embedded in it)."""
    from mqtool.common.javakeys import check_keys
    config = ControllerConfig()
    config.update({k: v for k, v in props.items() if k in CONTROLLER_KEYS})
    config.peers()
    notes = check_keys({k: v for k, v in props.items() if k not in CONTROLLER_KEYS and k not in also_known},
                       CONTROLLER_KEYS + list(also_known), server="controller")
    return config, notes
