"""A controller-mode broker group of real processes on 127.0.0.1: a name server, a controller and
replicas of one broker name, each restartable on its own store, killable and pausable by PID."""
from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from tests.ha.groups import FILE_SIZE, Group
from tests.servers import FAST_LEVELS, Process, drain, free_port_pair, wait_until

GROUP = "broker-fo"
# Short timings so a test sees elections in seconds; their defaults are in controller.md §8.
BROKER_TIMINGS = ("controllerHeartBeatTimeoutMills=3000\nsyncBrokerMetadataPeriod=1000\ncheckSyncStateSetPeriod=1000\n"
                  "brokerHeartbeatInterval=500\nsyncControllerMetadataPeriod=2000\n")


class ControllerGroup(Group):
    def __init__(self, tmp: Path, controller_extra: str = ""):
        super().__init__(tmp)
        self.controller_addr = f"127.0.0.1:{free_port_pair()}"      # pysyncobj takes the port after it
        conf = tmp / "controller.conf"
        conf.write_text(f"controllerDLegerPeers=n0-{self.controller_addr}\ncontrollerDLegerSelfId=n0\n"
                        f"controllerStorePath={tmp / 'controller-store'}\nscanNotActiveBrokerInterval=1000\n"
                        f"scanInactiveMasterInterval=1000\n{controller_extra}")
        self.controller = Process(["controller", "start", "-c", str(conf)], "is the leader")
        drain(self.controller)
        self.logs: dict[str, list[str]] = {}

    def start(self, who: str, extra: str = "") -> Process:
        proc = self.launch(who, self.tmp / f"{who}.conf",
                           f"brokerClusterName=FOCluster\nbrokerName={GROUP}\nbrokerId=-1\nbrokerRole=SLAVE\n"
                           f"enableControllerMode=true\ncontrollerAddr={self.controller_addr}\n"
                           f"allAckInSyncStateSet=true\nmappedFileSizeCommitLog={FILE_SIZE}\n"
                           f"messageDelayLevel={FAST_LEVELS}\n{BROKER_TIMINGS}{extra}")
        self.logs[who] = drain(proc)
        return proc

    def pause(self, who: str) -> None:
        os.kill(self.procs[who].proc.pid, signal.SIGSTOP)

    def resume(self, who: str) -> None:
        os.kill(self.procs[who].proc.pid, signal.SIGCONT)

    def close(self) -> None:
        for who in list(self.procs):
            self.resume(who)
        super().close()
        self.controller.stop()

    # ---------------------------------------------------------------- what the cluster says

    def route(self) -> dict[int, str]:
        """brokerId -> address of the group in the name server's cluster info."""
        return asyncio.run(cluster_addrs(self.ns))

    def master(self) -> str | None:
        addr = self.route().get(0)
        return next((who for who in self.ports if self.addr(who) == addr), None)

    def wait_master(self, who: str, timeout: float = 30) -> None:
        wait_until(f"{who} to be the master in the route", lambda: self.master() == who, timeout)

    def ha(self, who: str) -> dict:
        return asyncio.run(ha_runtime(self.addr(who)))

    def in_sync(self, members: set[int]) -> bool:
        master = self.master()
        if master is None:
            return False
        info = self.ha(master)
        return set(info.get("syncStateSet", [])) == members and all(
            c["slaveAckOffset"] == info["masterCommitLogMaxOffset"] for c in info["haConnectionInfo"])

    def controller_id(self, who: str) -> int:
        return int((self.store(who) / "brokerIdentity").read_text().split("#")[2])


async def cluster_addrs(ns: str) -> dict[int, str]:
    from mqtool_remoting import jsonbody
    from mqtool_remoting.codes import RequestCode
    from mqtool_remoting.command import RemotingCommand
    from mqtool_remoting.transport import RemotingClient
    client = RemotingClient()
    try:
        resp = await client.invoke(ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3)
        table = jsonbody.loads(resp.body).get("brokerAddrTable", {})
        return {int(k): v for k, v in table.get(GROUP, {}).get("brokerAddrs", {}).items()}
    finally:
        await client.close()


async def ha_runtime(addr: str) -> dict:
    from mqtool_remoting import jsonbody
    from mqtool_remoting.codes import RequestCode
    from mqtool_remoting.command import RemotingCommand
    from mqtool_remoting.transport import RemotingClient
    client = RemotingClient()
    try:
        resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS), 3)
        return jsonbody.loads(resp.body)
    finally:
        await client.close()


async def send_direct(addr: str, topic: str, body: bytes, keys: str) -> tuple[int, str]:
    """One SEND_MESSAGE_V2 straight to a broker, bypassing the route: (response code, remark)."""
    from mqtool.client.producer import send_request
    from mqtool_remoting.transport import RemotingClient
    client = RemotingClient()
    try:
        cmd = send_request("PID_FO", topic, 0, 0, 0, f"KEYS\x01{keys}\x02WAIT\x01true", body, False, False)
        resp = await client.invoke(addr, cmd, 10)
        return resp.code, resp.remark or ""
    finally:
        await client.close()
