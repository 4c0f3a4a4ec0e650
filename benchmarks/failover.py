"""Benchmark: a controller-mode broker group that loses its master (issue 32), real processes on 127.0.0.1.

One name server, one controller (a one-node group) and two replicas of one broker group
(allAckInSyncStateSet=true, every other timing at its default) under a steady send load from
mqtool's producer (one message in flight at a time, 128 B bodies). Then:

  * N kills of the master with SIGKILL; each killed broker is started again and waits until it is
    back in the SyncStateSet before the next round;
  * M pauses of the master with SIGSTOP, resumed with SIGCONT once the other replica is routed.

Per event: the time until the name server routes brokerId 0 to the other replica, and the time until
the producer's next SEND_OK. At the end every acknowledged (SEND_OK) key is read back from the group.
Baseline in the same run: the time a killed broker takes to be back in service by a restart (process
start until the name server routes it again), what a group without failover waits for.

    python benchmarks/failover.py [--kills 20] [--pauses 5] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from brokerproc import die_with_parent, free_port, free_port_pair  # noqa: E402 - this folder's scripts share them
from mqtool.client.producer import OutMessage, Producer  # noqa: E402
from mqtool_remoting import jsonbody  # noqa: E402
from mqtool_remoting.codes import RequestCode  # noqa: E402
from mqtool_remoting.command import RemotingCommand  # noqa: E402
from mqtool_remoting.transport import RemotingClient  # noqa: E402

GROUP, TOPIC = "broker-fo", "FailoverBench"
PROCS: dict[str, subprocess.Popen] = {}


def spawn(name: str, args: list[str], log: Path, ready: str, timeout: float = 60) -> subprocess.Popen:
    f = open(log, "a")
    proc = subprocess.Popen([sys.executable, "-m", "mqtool", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=f, start_new_session=True, preexec_fn=die_with_parent())
    PROCS[name] = proc
    deadline = time.monotonic() + timeout
    while ready not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.02)
    return proc


def stop_all() -> None:
    for proc in PROCS.values():
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGCONT)
                os.kill(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for proc in PROCS.values():
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)


async def _ask(addr: str, code: int, ext: dict | None = None):
    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.request(code, ext), 2)
    finally:
        await client.close()


def route(ns: str) -> dict[int, str]:
    try:
        resp = asyncio.run(_ask(ns, RequestCode.GET_BROKER_CLUSTER_INFO))
    except Exception:  # noqa: BLE001 - the name server is busy: nothing routed this time
        return {}
    table = jsonbody.loads(resp.body).get("brokerAddrTable", {})
    return {int(k): v for k, v in table.get(GROUP, {}).get("brokerAddrs", {}).items()}


def in_sync(addr: str) -> bool:
    try:
        info = jsonbody.loads(asyncio.run(_ask(addr, RequestCode.GET_BROKER_HA_STATUS)).body)
    except Exception:  # noqa: BLE001 - not answering yet
        return False
    return len(info.get("syncStateSet", [])) == 2 and all(
        c["slaveAckOffset"] == info["masterCommitLogMaxOffset"] for c in info["haConnectionInfo"])


def wait(what: str, check, timeout: float, every: float = 0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = check()
        if v:
            return v
        time.sleep(every)
    raise RuntimeError(f"timed out waiting for {what}")


class Load:
    """Sends one message at a time, each key retried until SEND_OK; keeps when each SEND_OK came."""

    def __init__(self, ns: str):
        self.ns, self.acked, self.ok_times, self.stop = ns, [], [], threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        p = Producer(self.ns, timeout_s=3, retries=0)
        i = 0
        try:
            while not self.stop.is_set():
                key = f"k-{i}"
                try:
                    r = await p.send(OutMessage(TOPIC, key.encode() + b"x" * 124, keys=[key]))
                except Exception:  # noqa: BLE001 - no master routed, a dead connection: again
                    r = None
                if r is not None and r.status == "SEND_OK":
                    self.acked.append(key)
                    self.ok_times.append(time.monotonic())
                    i += 1
                else:
                    await asyncio.sleep(0.02)
        finally:
            await p.close()

    def next_ok_after(self, t: float, timeout: float = 60) -> float:
        def find():
            return next((x for x in reversed(self.ok_times[-50:]) if x > t), None) and \
                min(x for x in self.ok_times[-500:] if x > t)
        return wait("the next SEND_OK", find, timeout) - t


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))], 3)


def summary(xs: list[float]) -> dict:
    return {"n": len(xs), "p50_s": pct(xs, 0.5), "p99_s": pct(xs, 0.99), "max_s": round(max(xs), 3) if xs else None}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--pauses", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="2 kills, 1 pause, short heartbeat timeouts")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    kills, pauses = (2, 1) if args.quick else (args.kills, args.pauses)
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-failover-"))
    # --quick: a 3 s heartbeat timeout and 1 s scans, so that a pause ends in seconds
    ctl_timing = "scanNotActiveBrokerInterval=1000\nscanInactiveMasterInterval=1000\n" if args.quick else ""
    broker_timing = "controllerHeartBeatTimeoutMills=3000\nsyncBrokerMetadataPeriod=1000\n" if args.quick else ""
    heartbeat_timeout_s = 3.0 if args.quick else 10.0
    scan_s = 1.0 if args.quick else 5.0
    try:
        ns = f"127.0.0.1:{free_port()}"
        spawn("namesrv", ["namesrv", "start", "--listen", ns, "--kv-config", str(tmp / "kv.json")],
              tmp / "namesrv.log", "boot success")
        ctl = f"127.0.0.1:{free_port_pair()}"
        (tmp / "controller.conf").write_text(f"controllerDLegerPeers=n0-{ctl}\ncontrollerDLegerSelfId=n0\n"
                                             f"controllerStorePath={tmp / 'controller'}\n{ctl_timing}")
        spawn("controller", ["controller", "start", "-c", str(tmp / "controller.conf")], tmp / "controller.log",
              "is the leader")
        addrs = {who: f"127.0.0.1:{free_port_pair()}" for who in ("a", "b")}

        def start(who: str) -> float:
            conf = tmp / f"{who}.conf"
            conf.write_text(f"brokerClusterName=FOCluster\nbrokerName={GROUP}\nbrokerId=-1\nbrokerRole=SLAVE\n"
                            f"enableControllerMode=true\ncontrollerAddr={ctl}\nallAckInSyncStateSet=true\n"
                            f"{broker_timing}")
            t0 = time.monotonic()
            spawn(who, ["broker", "start", "-n", ns, "-c", str(conf), "--listen", addrs[who], "--store-dir",
                        str(tmp / f"store-{who}")], tmp / f"{who}.log", "boot success")
            wait(f"{who} routed", lambda: addrs[who] in route(ns).values(), 60)
            return time.monotonic() - t0

        def master() -> str | None:
            return next((w for w, a in addrs.items() if route(ns).get(0) == a), None)

        start("a")
        wait("a master", lambda: master() == "a", 30)
        start("b")
        wait("b in sync", lambda: in_sync(addrs["a"]), 60)
        load = Load(ns)
        load.thread.start()
        wait("the load to run", lambda: len(load.acked) > 20, 30)
        kill_route, kill_send, restarts, pause_route, pause_send = [], [], [], [], []
        for _ in range(kills):
            old = master()
            other = "b" if old == "a" else "a"
            t0 = time.monotonic()
            os.kill(PROCS[old].pid, signal.SIGKILL)
            PROCS[old].wait(10)
            wait("the other replica routed as master", lambda: route(ns).get(0) == addrs[other], 60, every=0.005)
            kill_route.append(time.monotonic() - t0)
            kill_send.append(load.next_ok_after(t0))
            restarts.append(start(old))
            wait(f"{old} back in sync", lambda: in_sync(addrs[other]), 120)
        for _ in range(pauses):
            old = master()
            other = "b" if old == "a" else "a"
            t0 = time.monotonic()
            os.kill(PROCS[old].pid, signal.SIGSTOP)
            wait("the other replica routed as master", lambda: route(ns).get(0) == addrs[other], 120, every=0.01)
            pause_route.append(time.monotonic() - t0)
            pause_send.append(load.next_ok_after(t0, 120))
            os.kill(PROCS[old].pid, signal.SIGCONT)
            wait(f"{old} back in sync", lambda: in_sync(addrs[other]), 120)
        load.stop.set()
        load.thread.join(30)
        proc = subprocess.run([sys.executable, "-m", "mqtool", "consume", "-n", ns, "-t", TOPIC, "-e", "--json"],
                              capture_output=True, text=True, cwd=REPO, timeout=600)
        read = {k for line in proc.stdout.splitlines() if line.strip() for k in json.loads(line).get("keys") or ()}
        lost = sorted(set(load.acked) - read)
        result = {
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_implementation()} "
                       f"{platform.python_version()}",
            "mode": f"one controller, 2 replicas, allAckInSyncStateSet=true, ASYNC_FLUSH, "
                    f"controllerHeartBeatTimeoutMills={int(heartbeat_timeout_s * 1000)}, "
                    f"scanNotActiveBrokerInterval={int(scan_s * 1000)}",
            "baseline": {"restart_to_routed": summary(restarts)},
            "kill": {"route": summary(kill_route), "send_ok": summary(kill_send)},
            "pause": {"route": summary(pause_route), "send_ok": summary(pause_send),
                      "bound_s": heartbeat_timeout_s + scan_s},
            "acked": len(load.acked), "read_back": len(read & set(load.acked)), "lost": len(lost),
            "ratio_kill_route_p99_vs_restart_p50": round(pct(kill_route, 0.99) / pct(restarts, 0.5), 3)
            if restarts else None,
        }
    finally:
        stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    if result["lost"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
