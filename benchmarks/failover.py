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

With --cpp the official C++ client (PyPI rocketmq==0.4.4) sends beside mqtool's producer (a sync send
every 20 ms, tests/interop/cpp_client.py `steady`), and each event also gives its time until the C++
client's next SEND_OK and until the C++ client's own route refresh that saw the new master (read from
its log, ~/logs/rocketmq-cpp under a HOME of the run's own): that client refreshes a topic's route
only on its 30 s timer, so the difference is the client's, not the broker's.

    python benchmarks/failover.py [--kills 20] [--pauses 5] [--cpp] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import re
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


class CppLoad:
    """The C++ client's steady sync sends in a subprocess whose HOME is the run's, so its log is ours."""

    ROUTE_CHANGED = re.compile(r"^\[(\S+ \S+)\]\(info\):updateTopicRouteInfoFromNameServer changed:(\S+)\[")

    def __init__(self, ns: str, tmp: Path):
        self.tmp, self.stop_file = tmp, tmp / "cpp.stop"
        args = {"topic": TOPIC, "stop_file": str(self.stop_file), "interval_ms": 20, "prefix": "cpp"}
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.interop.cpp_client", "steady", ns, json.dumps(args)],
                                     cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     env={**os.environ, "HOME": str(tmp)}, start_new_session=True)
        PROCS["cpp"] = self.proc
        self.rows: list[dict] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.rows.append(json.loads(line))

    def finish(self) -> None:
        self.stop_file.touch()
        self.proc.wait(60)
        self.reader.join(10)

    @property
    def acked(self) -> list[str]:
        return [r["keys"] for r in self.rows if r.get("status") == 0]

    def next_ok_after(self, t_wall: float) -> float | None:
        done = [r["done"] for r in list(self.rows) if r.get("status") == 0 and r["at"] >= t_wall * 1000]
        return round(min(done) / 1000 - t_wall, 3) if done else None

    def route_refreshes(self) -> list[float]:
        """Wall times of the client's route refreshes that changed the topic's route."""
        times = []
        for log in (self.tmp / "logs" / "rocketmq-cpp").glob("*.log*"):
            for line in log.read_text(errors="replace").splitlines():
                m = self.ROUTE_CHANGED.match(line)
                if m and m.group(2) == TOPIC:
                    times.append(datetime.datetime.strptime(m.group(1), "%Y-%b-%d %H:%M:%S.%f").timestamp())
        return sorted(times)

    def refresh_after(self, t_wall: float) -> float | None:
        later = [t for t in self.route_refreshes() if t >= t_wall]
        return round(later[0] - t_wall, 3) if later else None


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
    ap.add_argument("--cpp", action="store_true", help="the official C++ client sends too (PyPI rocketmq==0.4.4)")
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
        cpp = CppLoad(ns, tmp) if args.cpp else None
        if cpp is not None:
            time.sleep(3)           # its first route and sends before the first event (a figure-free warm-up)
        kill_route, kill_send, restarts, pause_route, pause_send = [], [], [], [], []
        events: list[tuple[str, float, float]] = []      # (kind, fault wall time, routed wall time)
        for _ in range(kills):
            old = master()
            other = "b" if old == "a" else "a"
            t0, w0 = time.monotonic(), time.time()
            os.kill(PROCS[old].pid, signal.SIGKILL)
            PROCS[old].wait(10)
            wait("the other replica routed as master", lambda: route(ns).get(0) == addrs[other], 60, every=0.005)
            kill_route.append(time.monotonic() - t0)
            events.append(("kill", w0, time.time()))
            kill_send.append(load.next_ok_after(t0))
            restarts.append(start(old))
            wait(f"{old} back in sync", lambda: in_sync(addrs[other]), 120)
        for _ in range(pauses):
            old = master()
            other = "b" if old == "a" else "a"
            t0, w0 = time.monotonic(), time.time()
            os.kill(PROCS[old].pid, signal.SIGSTOP)
            wait("the other replica routed as master", lambda: route(ns).get(0) == addrs[other], 120, every=0.01)
            pause_route.append(time.monotonic() - t0)
            events.append(("pause", w0, time.time()))
            pause_send.append(load.next_ok_after(t0, 120))
            if cpp is not None:       # the C++ client keeps its route to the paused master until its next poll
                try:
                    wait("the C++ client's next SEND_OK", lambda: cpp.next_ok_after(w0) is not None, 60, every=0.2)
                except RuntimeError:
                    pass              # reported as no SEND_OK (null) for this event
            os.kill(PROCS[old].pid, signal.SIGCONT)
            wait(f"{old} back in sync", lambda: in_sync(addrs[other]), 120)
        load.stop.set()
        load.thread.join(30)
        if cpp is not None:
            cpp.finish()
        proc = subprocess.run([sys.executable, "-m", "mqtool", "consume", "-n", ns, "-t", TOPIC, "-e", "--json"],
                              capture_output=True, text=True, cwd=REPO, timeout=600)
        read = {k for line in proc.stdout.splitlines() if line.strip() for k in json.loads(line).get("keys") or ()}
        lost = sorted(set(load.acked) - read)
        cpp_result = None
        if cpp is not None:
            per = {"kill": {"send_ok": [], "refresh": []}, "pause": {"send_ok": [], "refresh": []}}
            for kind, fault_at, routed_at in events:
                per[kind]["send_ok"].append(cpp.next_ok_after(fault_at))
                per[kind]["refresh"].append(cpp.refresh_after(routed_at))
            cpp_lost = sorted(set(cpp.acked) - read)
            cpp_result = {
                "client": "rocketmq==0.4.4 (C++ core), sync send every 20 ms",
                "send_ok_after_fault": {k: summary([x for x in v["send_ok"] if x is not None]) for k, v in per.items()},
                "route_refresh_after_routed": {k: summary([x for x in v["refresh"] if x is not None])
                                               for k, v in per.items()},
                "events": [{"kind": k, "send_ok_s": so, "refresh_after_routed_s": rf}
                           for (k, _, _), so, rf in zip(events, per["kill"]["send_ok"] + per["pause"]["send_ok"],
                                                        per["kill"]["refresh"] + per["pause"]["refresh"])],
                "acked": len(cpp.acked), "errors": sum(1 for r in cpp.rows if "error" in r), "lost": len(cpp_lost)}
            lost += cpp_lost
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
        if cpp_result is not None:
            result["cpp"] = cpp_result
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
