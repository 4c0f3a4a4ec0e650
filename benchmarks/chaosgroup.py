"""The processes of benchmarks/chaos.py, each on a host of its own (benchmarks/netns.py): a name
server with the controller embedded (or a name server and three controllers), and R replicas of one
broker group in controller mode. Started, killed, paused and restarted by PID; asked what the
controller and the name server say."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from netns import Network

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient

from mqtool.client.controller import ControllerAdmin

CLUSTER, GROUP = "ChaosCluster", "broker-cx"
NS_PORT, CTL_PORT, BROKER_PORT = 9876, 9878, 10911
# Short timings, as tests/ha/controller_group.py: elections in seconds, not tens of seconds.
BROKER_TIMINGS = {"controllerHeartBeatTimeoutMills": 3000, "syncBrokerMetadataPeriod": 1000,
                  "checkSyncStateSetPeriod": 1000, "brokerHeartbeatInterval": 500,
                  "syncControllerMetadataPeriod": 2000, "registerNameServerPeriod": 5000,
                  "haMaxTimeSlaveNotCatchup": 5000, "mappedFileSizeCommitLog": 4 * 1024 * 1024}
CONTROLLER_TIMINGS = {"scanNotActiveBrokerInterval": 1000, "scanInactiveMasterInterval": 1000}
READY = "boot success"


@dataclass
class Proc:
    name: str                       # also its host's name
    kind: str                       # namesrv, controller, broker
    argv: list[str]
    log: Path
    store: Path | None = None
    popen: subprocess.Popen | None = None
    starts: int = 0
    exits: list[str] = field(default_factory=list)     # how each earlier run ended

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


class ChaosGroup:
    def __init__(self, tmp: Path, replicas: int, controllers: int, all_ack: bool):
        self.tmp, self.replicas, self.controllers = tmp, replicas, controllers
        self.host_names = ["ns", *(f"c{i}" for i in range(controllers if controllers > 1 else 0)),
                           *(f"b{i}" for i in range(replicas))]
        self.net: Network | None = None
        self.procs: dict[str, Proc] = {}
        self.all_ack = all_ack

    def plan(self, net: Network) -> None:
        self.net = net
        ip = {n: h.ip for n, h in net.hosts.items()}
        self.ns_addr = f"{ip['ns']}:{NS_PORT}"
        ctl_hosts = ["ns"] if self.controllers == 1 else [f"c{i}" for i in range(self.controllers)]
        peers = ";".join(f"n{i}-{ip[h]}:{CTL_PORT}" for i, h in enumerate(ctl_hosts))
        self.controller_addrs = ";".join(f"{ip[h]}:{CTL_PORT}" for h in ctl_hosts)
        self.controller_hosts = ctl_hosts
        py = [sys.executable, "-m", "mqtool"]
        ns_dir = self.tmp / "ns"
        ns_dir.mkdir()
        ns_props = {"listenPort": NS_PORT, "kvConfigPath": ns_dir / "kvConfig.json"}
        if self.controllers == 1:
            ns_props |= {"enableControllerInNamesrv": "true", "controllerDLegerGroup": "group1",
                         "controllerDLegerPeers": peers, "controllerDLegerSelfId": "n0",
                         "controllerStorePath": ns_dir / "controller", **CONTROLLER_TIMINGS}
        write_props(ns_dir / "namesrv.conf", ns_props)
        self.procs["ns"] = Proc("ns", "namesrv", py + ["namesrv", "start", "-c", str(ns_dir / "namesrv.conf"),
                                                      "--listen", self.ns_addr], ns_dir / "namesrv.log")
        if self.controllers > 1:
            for i, h in enumerate(ctl_hosts):
                d = self.tmp / h
                d.mkdir()
                write_props(d / "controller.conf", {
                    "controllerDLegerGroup": "group1", "controllerDLegerPeers": peers,
                    "controllerDLegerSelfId": f"n{i}", "controllerStorePath": d / "store", **CONTROLLER_TIMINGS})
                self.procs[h] = Proc(h, "controller", py + ["controller", "start", "-c", str(d / "controller.conf")],
                                     d / "controller.log")
        for i in range(self.replicas):
            h = f"b{i}"
            d = self.tmp / h
            d.mkdir()
            write_props(d / "broker.conf", {
                "brokerClusterName": CLUSTER, "brokerName": GROUP, "brokerId": -1, "brokerRole": "SLAVE",
                "enableControllerMode": "true", "controllerAddr": self.controller_addrs,
                "namesrvAddr": self.ns_addr, "allAckInSyncStateSet": str(self.all_ack).lower(),
                "storePathRootDir": d / "store", **BROKER_TIMINGS})
            self.procs[h] = Proc(h, "broker", py + ["broker", "start", "-c", str(d / "broker.conf"), "--listen",
                                                    f"{ip[h]}:{BROKER_PORT}"], d / "broker.log", d / "store")

    @property
    def brokers(self) -> list[str]:
        return [n for n, p in self.procs.items() if p.kind == "broker"]

    def addr(self, name: str) -> str:
        return f"{self.net.hosts[name].ip}:{BROKER_PORT}"

    # ------------------------------------------------------------------ processes

    def start(self, name: str, timeout: float = 60) -> None:
        p = self.procs[name]
        seen = p.log.stat().st_size if p.log.exists() else 0
        p.popen = self.net.popen(name, p.argv, p.log, REPO)
        p.starts += 1
        deadline = time.monotonic() + timeout
        while True:
            text = p.log.read_bytes()[seen:].decode(errors="replace")
            if READY in text:
                return
            if p.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start (exit {p.popen.poll()}): {text[-1500:]}")
            time.sleep(0.05)

    def signal(self, name: str, sig: int) -> None:
        p = self.procs[name]
        if p.alive:
            os.kill(p.popen.pid, sig)

    def kill(self, name: str) -> None:
        p = self.procs[name]
        if p.alive:
            os.kill(p.popen.pid, signal.SIGKILL)
            p.popen.wait(10)
            p.exits.append("SIGKILL")

    def stop(self, name: str, timeout: float = 30) -> str:
        """SIGTERM (after SIGCONT, if paused); how it ended: "exit 0", "exit N", "killed after T s"."""
        p = self.procs[name]
        if not p.alive:
            return "not running"
        os.kill(p.popen.pid, signal.SIGCONT)
        os.kill(p.popen.pid, signal.SIGTERM)
        try:
            return f"exit {p.popen.wait(timeout)}"
        except subprocess.TimeoutExpired:
            os.kill(p.popen.pid, signal.SIGKILL)
            p.popen.wait(10)
            return f"killed after {timeout} s"

    def kill_all(self) -> None:
        for p in self.procs.values():
            if p.alive:
                os.kill(p.popen.pid, signal.SIGKILL)
                p.popen.wait(10)

    def controller_ids(self) -> dict[int, str]:
        """controller brokerId -> host, from each replica's brokerIdentity file."""
        out = {}
        for b in self.brokers:
            f = self.procs[b].store / "brokerIdentity"
            if f.exists() and f.read_text().strip():
                out[int(f.read_text().split("#")[2])] = b
        return out

    # ------------------------------------------------------------------ what the cluster says

    def sync_state(self) -> dict | None:
        """The controller's view: {"master": host|None, "epoch", "in_sync": [hosts]}, None unanswered."""
        try:
            info = asyncio.run(_sync_state(self.controller_addrs))
        except Exception:  # noqa: BLE001 - no leader now (killed, cut off): nothing this time
            return None
        ids = self.controller_ids()
        return {"master": ids.get(info.masterBrokerId) if info.masterBrokerId else None,
                "epoch": info.masterEpoch,
                "in_sync": sorted(ids.get(r.brokerId, str(r.brokerId)) for r in info.inSyncReplicas)}

    def full(self, state: dict | None) -> bool:
        return bool(state and state["master"] and len(state["in_sync"]) == self.replicas
                    and all(self.procs[b].alive for b in self.brokers))

    def routed_master(self) -> str | None:
        try:
            addrs = asyncio.run(_route(self.ns_addr))
        except Exception:  # noqa: BLE001 - the name server is down or cut off
            return None
        return next((b for b in self.brokers if addrs.get(0) == self.addr(b)), None)

    def elect(self, name: str) -> str | None:
        """An admin switchover to `name`; None, or why it was refused."""
        ids = {h: i for i, h in self.controller_ids().items()}
        try:
            asyncio.run(_elect(self.controller_addrs, ids[name]))
        except Exception as exc:  # noqa: BLE001 - reported as the reason
            return f"{type(exc).__name__}: {exc}"
        return None


async def _sync_state(addrs: str):
    admin = ControllerAdmin(addrs)
    try:
        return (await admin.sync_state_sets([GROUP])).replicasInfoTable[GROUP]
    finally:
        await admin.close()


async def _elect(addrs: str, broker_id: int) -> dict:
    admin = ControllerAdmin(addrs)
    try:
        return await admin.elect_master(CLUSTER, GROUP, broker_id)
    finally:
        await admin.close()


async def _route(ns: str) -> dict[int, str]:
    client = RemotingClient()
    try:
        resp = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 2)
        table = jsonbody.loads(resp.body).get("brokerAddrTable", {})
        return {int(k): v for k, v in table.get(GROUP, {}).get("brokerAddrs", {}).items()}
    finally:
        await client.close()


def write_props(path: Path, props: dict) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
