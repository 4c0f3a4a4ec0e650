"""What a local cluster runs, worked out before anything starts: every process's ports, directories,
config file and command line. Pure: no process, no socket; `write_files` is the only disk access.

Layout under the store directory:
    cluster.json                     the state file (state.py)
    namesrv/namesrv.conf, namesrv.log, kvConfig.json, controller/ (controllerStorePath, R > 1)
    broker-a-0/broker.conf, broker.log, store/ (storePathRootDir)     one per broker, replica 0..R-1

Ports: the name server on --namesrv (127.0.0.1:9876); with R > 1 the controller embedded in it on the
name server's port + 2 (9878, as RocketMQ's quick start; its Raft on the port after it); broker number i
(i = group * R + replica, from 0) on listenPort = base + 10 * i (10911, 10921, ...), so that its fast port
(listenPort - 2) and HA port (listenPort + 1) never meet another broker's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mqtool.common.plural import count

CLUSTER_NAME = "DefaultCluster"
DEFAULT_NAMESRV = "127.0.0.1:9876"
DEFAULT_BASE_PORT = 10911
DEFAULT_STORE_DIR = "~/mqtool-cluster"
PORT_STEP = 10                  # between two brokers' listenPorts: room for listenPort - 2 .. listenPort + 1
CONTROLLER_PORT_OFFSET = 2      # the embedded controller's peer port beside the name server's (9876 -> 9878)
CONTROLLER_GROUP = "group1"     # controllerDLegerGroup, as RocketMQ's quick-start namesrv.conf
CONTROLLER_SELF_ID = "n0"
RAFT_PORT_OFFSET = 1            # the controller's Raft (pysyncobj) listens on its peer port + 1: checked free too
WILDCARDS = ("0.0.0.0", "::", "")

# Keys the cluster sets for every broker whatever the template says (template values ignored, one warning).
FORCED_KEYS = ("brokerName", "brokerId", "brokerRole", "listenPort", "namesrvAddr", "storePathRootDir",
               "enableControllerMode", "controllerAddr")
# Keys that would make two brokers share a port or a file: dropped from the template (one warning).
DROPPED_KEYS = ("fastListenPort", "haListenPort", "storePathCommitLog", "storePathConsumeQueue", "storePathIndex",
                "storeCheckpoint", "abortFile", "storePathEpochFile", "storePathBrokerIdentity")


class ClusterInputError(ValueError):
    """A bad option or template: reported in one line before anything starts."""


@dataclass
class Member:
    """One process of the cluster, and what the table shows of it."""
    key: str                    # unique: "namesrv", "broker-a-0"
    kind: str                   # "namesrv" or "broker"
    role: str                   # namesrv, master (R = 1), replica (R > 1: the controller picks the master)
    name: str                   # namesrv, broker-a
    ident: str                  # "-", brokerId "0", or "r0", "r1" (replica number; the controller gives the id)
    host: str
    port: int
    directory: Path
    conf: Path
    log: Path
    store: Path
    args: list[str]             # after `python -m mqtool`
    ports: list[int] = field(default_factory=list)         # every port it listens on (checked free first)
    ready_ports: list[int] = field(default_factory=list)   # answering on all of them = ready

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class Plan:
    groups: int
    replicas: int
    store_dir: Path
    namesrv: Member
    brokers: list[Member]
    controller: str | None                  # HOST:PORT of the embedded controller, R > 1
    files: dict[Path, str]                  # config file -> its text
    ignored: list[str]                      # template keys the cluster overrides or drops

    @property
    def members(self) -> list[Member]:
        return [self.namesrv, *self.brokers]

    @property
    def namesrv_addr(self) -> str:
        return f"{_reach(self.namesrv.host)}:{self.namesrv.port}"


def group_name(index: int) -> str:
    """broker-a ... broker-z, broker-aa, broker-ab, ... (bijective base 26, as spreadsheet columns)."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return f"broker-{letters}"


def parse_hostport(text: str, option: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterInputError(f"{option} must be HOST:PORT, not {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _reach(host: str) -> str:
    return "127.0.0.1" if host in WILDCARDS else host


def plan_cluster(groups: int, replicas: int, store_dir: Path, namesrv: str = DEFAULT_NAMESRV,
                 base_port: int = DEFAULT_BASE_PORT, template: dict[str, str] | None = None) -> Plan:
    if groups < 1:
        raise ClusterInputError(f"--groups must be 1 or more, not {groups}")
    if replicas < 1:
        raise ClusterInputError(f"--replicas must be 1 or more, not {replicas}")
    host, ns_port = parse_hostport(namesrv, "--namesrv")
    last = base_port + PORT_STEP * (groups * replicas - 1)
    if base_port - 2 < 1 or last + 1 > 65535:
        raise ClusterInputError(f"--base-port {base_port} with {count(groups * replicas, 'broker')} needs ports "
                                f"{base_port - 2}..{last + 1}: outside 1..65535")
    template = dict(template or {})
    store_dir = Path(store_dir).expanduser().absolute()
    files: dict[Path, str] = {}
    controller = None
    ns_dir = store_dir / "namesrv"
    ns_props = {"listenPort": ns_port, "kvConfigPath": ns_dir / "kvConfig.json"}
    ns_ports = [ns_port]
    if replicas > 1:
        ctl_port = ns_port + CONTROLLER_PORT_OFFSET
        if ctl_port + RAFT_PORT_OFFSET > 65535:
            raise ClusterInputError(f"--namesrv port {ns_port}: the controller's ports {ctl_port}, {ctl_port + 1} "
                                    "go above 65535")
        controller = f"{_reach(host)}:{ctl_port}"
        ns_props |= {"enableControllerInNamesrv": "true", "controllerDLegerGroup": CONTROLLER_GROUP,
                     "controllerDLegerPeers": f"{CONTROLLER_SELF_ID}-{controller}",
                     "controllerDLegerSelfId": CONTROLLER_SELF_ID, "controllerStorePath": ns_dir / "controller"}
        ns_ports.append(ctl_port)
    ns_conf = ns_dir / "namesrv.conf"
    files[ns_conf] = _props_text(ns_props)
    ns_member = Member("namesrv", "namesrv", "namesrv", "namesrv", "-", host, ns_port, ns_dir, ns_conf,
                       ns_dir / "namesrv.log", ns_dir, ["namesrv", "start", "-c", str(ns_conf), "--listen",
                                                         f"{host}:{ns_port}"], [], list(ns_ports))
    ns_member.ports = ns_ports + ([ns_ports[-1] + RAFT_PORT_OFFSET] if controller else [])
    ns_addr = f"{_reach(host)}:{ns_port}"
    ignored = [k for k in (*FORCED_KEYS, *DROPPED_KEYS) if k in template]
    if host not in WILDCARDS and "brokerIP1" in template:
        ignored.append("brokerIP1")       # --listen HOST sets it
    for k in DROPPED_KEYS:
        template.pop(k, None)
    raw_metrics = template.get("metricsPort", "").strip()
    metrics = int(raw_metrics) if raw_metrics.isdigit() else 0      # broker i gets metricsPort + i
    grpc_base = 0
    if template.get("enableProxy", "").strip().lower() == "true":     # broker i serves gRPC on grpcServerPort + i
        from mqtool.broker.config import BrokerConfig
        raw_grpc = template.get("grpcServerPort", str(BrokerConfig.grpcServerPort)).strip()
        if not raw_grpc.isdigit() or not 0 < int(raw_grpc) <= 65535 - (groups * replicas - 1):
            raise ClusterInputError(f"grpcServerPort={raw_grpc} with {count(groups * replicas, 'broker')}: "
                                    "broker i takes grpcServerPort + i, which must stay within 1..65535")
        grpc_base = int(raw_grpc)
    brokers = []
    for g in range(groups):
        name = group_name(g)
        for r in range(replicas):
            i = g * replicas + r
            port = base_port + PORT_STEP * i
            directory = store_dir / f"{name}-{r}"
            props = {"brokerClusterName": CLUSTER_NAME, **template, "brokerName": name, "listenPort": port,
                     "namesrvAddr": ns_addr, "storePathRootDir": directory / "store"}
            props.pop("enableControllerMode", None)
            props.pop("controllerAddr", None)
            if replicas == 1:
                props |= {"brokerId": 0, "brokerRole": "ASYNC_MASTER"}
            else:   # the spec's quick-start broker-n0.conf: the controller assigns the id and the role
                props = {"allAckInSyncStateSet": "true", **props, "brokerId": -1, "brokerRole": "SLAVE",
                         "enableControllerMode": "true", "controllerAddr": controller}
            if metrics:
                props["metricsPort"] = metrics + i
            if grpc_base:
                props["grpcServerPort"] = grpc_base + i
            conf = directory / "broker.conf"
            files[conf] = _props_text(props)
            brokers.append(Member(
                f"{name}-{r}", "broker", "master" if replicas == 1 else "replica", name,
                "0" if replicas == 1 else f"r{r}", host, port, directory, conf, directory / "broker.log",
                directory / "store", ["broker", "start", "-c", str(conf), "--listen", f"{host}:{port}"],
                [port - 2, port, port + 1, *([metrics + i] if metrics else []), *([grpc_base + i] if grpc_base else [])],
                [port]))
    return Plan(groups, replicas, store_dir, ns_member, brokers, controller, files, ignored)


def _props_text(props: dict[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def write_files(plan: Plan) -> None:
    for path, text in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
