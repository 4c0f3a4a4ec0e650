"""Benchmark: master/slave replication (HA) between `mqtool broker` processes on 127.0.0.1.

  A. keeping up: the C++ client (4 sync threads, 128 B and 1 KiB bodies) loads an ASYNC_MASTER with one
     slave for N s; the slave lag (master commitLogMaxOffset - slave's, and the master's own
     masterPutWhere - slaveAckOffset) is sampled every 100 ms; max/p50 lag and the slave's
     replicated bytes/s against the master's append bytes/s over the same window (the baseline).
  B. catch-up: a master store with one commit log file of ~1 GiB (64 MiB quick), written offline
     with the store engine, is copied to an empty slave; MB/s from the slave's process start until
     its max offset equals the master's. Baselines in the same run: the same bytes over a plain
     loopback socket in 32 KiB chunks (mmap to mmap, two processes) and raw disk write bandwidth.
     A second, profiled catch-up (py-spy, or cProfile with HA_BENCH_PROFILER=cprofile) gives the
     top functions of both brokers.
  C. send TPS of SYNC_MASTER against ASYNC_MASTER (each with a slave), C++ client, 1 and 4 threads,
     128 B, same duration, runs interleaved.

    python benchmarks/ha_replication.py [--seconds 15] [--mib 1024] [--quick] [--json] [--no-profile]
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mqtool_remoting import jsonbody  # noqa: E402
from mqtool_remoting.command import RemotingCommand  # noqa: E402
from mqtool_remoting.transport import RemotingClient  # noqa: E402
from mqtool_store.messagestore import Message, MessageStore  # noqa: E402
from mqtool_store.storeconfig import MessageStoreConfig  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from brokerproc import die_with_parent, free_port_pair  # noqa: E402 - this folder's scripts share them

GET_BROKER_HA_STATUS = 907
BATCH = 32 * 1024                      # haTransferBatchSize, and the loopback baseline's chunk
PROCS: list[subprocess.Popen] = []     # everything this script started, stopped by PID at exit
SPY_HZ = 50                            # py-spy's rate: it shares the 2 cores with both brokers

PRODUCER = r"""
import sys, time, json, threading
from rocketmq.client import Producer, Message
ns, topic, threads, seconds, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
p = Producer("PID_HA_BENCH_%d" % threading.get_ident()); p.set_namesrv_addr(ns); p.start()
body = "x" * size
m = Message(topic); m.set_body(body); p.send_sync(m)        # warm-up: route and connection before the clock
rts, statuses, errors = [], {}, {}
stop = time.perf_counter() + seconds
def run():
    while time.perf_counter() < stop:
        m = Message(topic); m.set_body(body)
        t0 = time.perf_counter()
        try:
            r = p.send_sync(m); rts.append(time.perf_counter() - t0)
            k = str(int(r.status)); statuses[k] = statuses.get(k, 0) + 1
        except Exception as e:
            k = str(e)[:120]; errors[k] = errors.get(k, 0) + 1
t0 = time.perf_counter()
ts = [threading.Thread(target=run) for _ in range(threads)]
[t.start() for t in ts]; [t.join() for t in ts]
dt = time.perf_counter() - t0
p.shutdown()
rts.sort()
pick = lambda q: round(1000 * rts[min(len(rts) - 1, int(len(rts) * q))], 3) if rts else None
print(json.dumps({"seconds": dt, "sent": len(rts), "statuses": statuses, "errors": errors,
                  "avg_rt_ms": round(1000 * sum(rts) / len(rts), 3) if rts else None,
                  "p99_rt_ms": pick(0.99), "max_rt_ms": pick(1.0)}))
"""

RECEIVER = r"""
import mmap, os, socket, sys
path, size, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644); os.ftruncate(fd, size)
mm = mmap.mmap(fd, size); mv = memoryview(mm)
s = socket.create_connection(("127.0.0.1", port))
got = 0
while got < size:
    n = s.recv_into(mv[got:got + (1 << 20)])
    if not n: raise SystemExit("sender closed early")
    got += n
s.sendall(b"k"); s.close(); mv.release(); mm.close(); os.close(fd)
"""

# cProfile fallback: runs `python -m mqtool ...` under cProfile (main thread only), dumped at exit.
CPROFILE_WRAPPER = r"""
import cProfile, runpy, sys
out = sys.argv[1]; sys.argv = ["mqtool"] + sys.argv[2:]
prof = cProfile.Profile(); prof.enable()
try:
    runpy.run_module("mqtool", run_name="__main__")
finally:
    prof.disable(); prof.dump_stats(out)
"""


# ---------------------------------------------------------------------- processes

def spawn(cmd: list[str], **kw) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, cwd=REPO, preexec_fn=die_with_parent(), **kw)
    PROCS.append(proc)
    return proc


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    if proc in PROCS:
        PROCS.remove(proc)


class Server:
    """`python -m mqtool ...` (namesrv or broker); ready when stderr shows "boot success"."""

    def __init__(self, args: list[str], cprofile_out: Path | None = None):
        head = [sys.executable, "-c", CPROFILE_WRAPPER, str(cprofile_out)] if cprofile_out else \
            [sys.executable, "-m", "mqtool"]
        self.t_spawn = time.perf_counter()
        self.proc = spawn(head + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.t_boot = 0.0
        self._booted = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.tail.append(line)
            if "boot success" in line and not self._booted.is_set():
                self.t_boot = time.perf_counter()
                self._booted.set()

    def ready(self, timeout: float = 120) -> "Server":
        deadline = time.monotonic() + timeout
        while not self._booted.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("server did not boot:\n" + "".join(self.tail))
        return self

    def stop(self) -> None:
        stop(self.proc)


def mqtool(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "mqtool", *args], cwd=REPO, check=True, capture_output=True, timeout=60)


def broker(tmp: Path, ns: str, name: str, role: str, port: int, file_size: int, store: Path,
           master_ha: str = "", cprofile_out: Path | None = None) -> Server:
    conf = tmp / f"{name}-{role}-{port}.conf"
    conf.write_text(f"brokerClusterName=HABench\nbrokerName={name}\nbrokerId={1 if role == 'SLAVE' else 0}\n"
                    f"brokerRole={role}\nmappedFileSizeCommitLog={file_size}\nflushDiskType=ASYNC_FLUSH\n"
                    f"haTransferBatchSize={BATCH}\n" + (f"haMasterAddress={master_ha}\n" if master_ha else ""))
    return Server(["broker", "start", "-n", ns, "-c", str(conf), "--listen", f"127.0.0.1:{port}",
                   "--store-dir", str(store)], cprofile_out)


class Admin:
    """mqtool's remoting client on an event loop thread of its own, for this synchronous script."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.client = self._call(self._client())

    @staticmethod
    async def _client() -> RemotingClient:
        return RemotingClient()

    def _call(self, coro, timeout: float = 10):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def ha(self, addr: str) -> dict:
        async def go():
            resp = await self.client.invoke(addr, RemotingCommand.request(GET_BROKER_HA_STATUS), 3)
            if resp.code != 0:
                raise RuntimeError(f"GET_BROKER_HA_STATUS on {addr}: code {resp.code} {resp.remark}")
            return jsonbody.loads(resp.body)
        return self._call(go())

    def wait(self, what: str, check, timeout: float = 60, every: float = 0.1):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = check()
            except Exception:  # noqa: BLE001 - not up yet
                value = None
            if value:
                return value
            time.sleep(every)
        raise RuntimeError(f"timed out waiting for {what}")

    def close(self) -> None:
        try:
            self._call(self.client.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)


# ---------------------------------------------------------------------- A and C

def produce(ns: str, topic: str, threads: int, seconds: float, size: int) -> dict:
    proc = spawn([sys.executable, "-c", PRODUCER, ns, topic, str(threads), str(seconds), str(size)],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=seconds + 120)
    PROCS.remove(proc)
    if proc.returncode:
        raise RuntimeError(f"C++ producer failed: {err[-1500:]}")
    r = json.loads(out.strip().splitlines()[-1])
    r["tps"] = round(r["sent"] / r["seconds"])
    r["send_ok"] = r["statuses"].get("0", 0)
    return r


def pct(values: list[int], q: float) -> int:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] if values else 0


def lag_run(admin: Admin, ns: str, master: str, slave: str, topic: str, seconds: float, size: int) -> dict:
    """Producer load while a thread samples both brokers every 100 ms (slave first, so a lag is never understated)."""
    samples, done = [], threading.Event()

    def sampler():
        while not done.is_set():
            t = time.perf_counter()
            try:
                s, m = admin.ha(slave), admin.ha(master)
            except Exception:  # noqa: BLE001 - a slow answer loses one sample, not the run
                continue
            conn = (m.get("haConnectionInfo") or [{}])[0]
            samples.append((t, m["masterCommitLogMaxOffset"], s["commitLogMaxOffset"], conn.get("diff", -1),
                            conn.get("transferredByteInSecond", 0)))
            done.wait(max(0.0, 0.1 - (time.perf_counter() - t)))
    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    prod = produce(ns, topic, 4, seconds, size)
    t_end = time.perf_counter()
    admin.wait("the slave to catch up", lambda: samples and samples[-1][2] >= samples[-1][1], timeout=60)
    drained = time.perf_counter() - t_end
    done.set()
    th.join()
    # The load window: from the sample before the master first grew to the one after it last grew.
    grew = [i for i in range(1, len(samples)) if samples[i][1] > samples[i - 1][1]]
    lo, hi = (grew[0] - 1, min(grew[-1] + 1, len(samples) - 1)) if grew else (0, len(samples) - 1)
    win = samples[lo:hi + 1]
    dt = win[-1][0] - win[0][0]
    lags = [m - s for _, m, s, _, _ in win]
    diffs = [d for _, _, _, d, _ in win if d >= 0]
    master_bps = (win[-1][1] - win[0][1]) / dt
    slave_bps = (win[-1][2] - win[0][2]) / dt
    return {"body_bytes": size, "threads": 4, "producer": prod, "window_s": round(dt, 2), "samples": len(win),
            "lag_max_bytes": max(lags), "lag_p50_bytes": pct(lags, 0.5), "lag_p99_bytes": pct(lags, 0.99),
            "master_view_diff_max_bytes": max(diffs, default=-1), "master_view_diff_p50_bytes": pct(diffs, 0.5),
            "master_transferredByteInSecond_max": max(x for *_, x in win),
            "master_append_MBps": round(master_bps / 1e6, 3), "replicated_MBps": round(slave_bps / 1e6, 3),
            "replicated_vs_append": round(slave_bps / master_bps, 3) if master_bps else None,
            "caught_up_s_after_load": round(drained, 2)}


# ---------------------------------------------------------------------- B

def build_store(root: Path, file_size: int, body_size: int = 1024) -> dict:
    """One commit log file filled to within a batch of its end (only one file: see the empty-slave rule)."""
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=file_size)
    body = os.urandom(body_size)
    n = 0
    t0 = time.perf_counter()
    with MessageStore(cfg) as s:
        s.put(Message("HABenchCatchUp", 0, body))
        rec = s.commitlog_max_offset
        per = 64
        while s.commitlog_max_offset + (per + 2) * rec < file_size:
            s.put_batch([Message("HABenchCatchUp", (n + i) & 3, body) for i in range(per)], batch=False)
            n += per
        size = s.commitlog_max_offset
    return {"commitlog_bytes": size, "file_bytes": file_size, "records": n + 1, "record_bytes": rec,
            "build_s": round(time.perf_counter() - t0, 1)}


def raw_write_mbps(d: Path, nbytes: int) -> float:
    path = d / "raw.bin"
    block = os.urandom(1 << 20)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, nbytes)
    t0 = time.perf_counter()
    for _ in range(nbytes >> 20):
        os.write(fd, block)
    os.fsync(fd)
    dt = time.perf_counter() - t0
    os.close(fd)
    path.unlink()
    return (nbytes >> 20 << 20) / dt / 1e6


def loopback_mbps(src: Path, nbytes: int, dst: Path) -> float:
    """The same bytes, mmap -> 32 KiB sendall -> recv_into an mmap in another process."""
    import mmap
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    rx = spawn([sys.executable, "-c", RECEIVER, str(dst), str(nbytes), str(srv.getsockname()[1])])
    conn, _ = srv.accept()
    with open(src, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        mv = memoryview(mm)
        t0 = time.perf_counter()
        for pos in range(0, nbytes, BATCH):
            conn.sendall(mv[pos:min(pos + BATCH, nbytes)])
        conn.recv(1)
        dt = time.perf_counter() - t0
        mv.release()
    conn.close()
    srv.close()
    rx.wait(60)
    PROCS.remove(rx)
    dst.unlink(missing_ok=True)
    return nbytes / dt / 1e6


def py_spy() -> str | None:
    if os.environ.get("HA_BENCH_PROFILER") == "cprofile":
        return None
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return exe if os.access(exe, os.X_OK) else None


def catch_up(admin: Admin, tmp: Path, ns: str, ha_addr: str, file_size: int, target: int, tag: str,
             master_pid: int, profile: bool) -> dict:
    """An empty slave copies the master's one file; timed from the slave's process start."""
    store = tmp / f"slave-{tag}"
    spy_exe, spies, cprof = py_spy() if profile else None, {}, None
    if profile and spy_exe is None:
        cprof = tmp / f"slave-{tag}.cprofile"
    if spy_exe:
        spies["master"] = (start_spy(spy_exe, master_pid, tmp / f"master-{tag}.txt"), tmp / f"master-{tag}.txt",
                           time.perf_counter())
    port = free_port_pair()
    slave = broker(tmp, ns, "ha-catchup", "SLAVE", port, file_size, store, ha_addr, cprof)
    addr = f"127.0.0.1:{port}"
    t0 = slave.t_spawn
    try:
        slave.ready()
        if spy_exe:
            spies["slave"] = (start_spy(spy_exe, slave.pid, tmp / f"slave-{tag}.txt"), tmp / f"slave-{tag}.txt",
                              time.perf_counter())
        first = []                      # when the slave first had bytes

        def progress():
            have = admin.ha(addr)["commitLogMaxOffset"]
            if have and not first:
                first.append(time.perf_counter())
            return have >= target
        admin.wait("the slave to catch up", progress, timeout=1800, every=0.05)
        t_done = time.perf_counter()
        for proc, _, _ in spies.values():
            stop(proc, signal.SIGINT)
        admin.wait("the slave's dispatch", lambda: admin.ha(addr)["haClientRuntimeInfo"]["dispatchBehindBytes"] == 0,
                   timeout=1800, every=0.1)
        t_dispatch = time.perf_counter()
    finally:
        slave.stop()
        for proc, _, _ in spies.values():
            stop(proc, signal.SIGINT)
    res = {"seconds_from_slave_start": round(t_done - t0, 2), "MBps": round(target / (t_done - t0) / 1e6, 1),
           "seconds_from_boot_success": round(t_done - slave.t_boot, 2),
           "MBps_from_boot": round(target / (t_done - slave.t_boot) / 1e6, 1),
           "slave_boot_s": round(slave.t_boot - t0, 2), "first_bytes_s_from_slave_start": round(first[0] - t0, 2),
           "MBps_from_first_bytes": round(target / max(t_done - first[0], 1e-3) / 1e6, 1),
           "dispatch_done_s_from_slave_start": round(t_dispatch - t0, 2)}
    if spies:
        res["profile"] = {who: top_py_spy(out, t_done - t) for who, (_, out, t) in spies.items()}
        res["profiler"] = f"py-spy ({SPY_HZ} Hz, --nonblocking, all threads)"
    elif cprof:
        res["profile"] = {"slave": top_cprofile(cprof)}
        res["profiler"] = "cProfile (slave main thread only)"
    shutil.rmtree(store, ignore_errors=True)
    return res


def start_spy(exe: str, pid: int, out: Path) -> subprocess.Popen:
    return spawn([exe, "record", "--pid", str(pid), "--format", "raw", "--output", str(out), "--rate", str(SPY_HZ),
                  "--nonblocking", "--threads"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def short(path: str) -> str:
    p = path.replace(str(REPO) + "/", "")
    m = re.search(r"(?:site-packages|python3\.\d+)/(.*)$", p)
    return m.group(1) if m else p


def top_py_spy(path: Path, seconds: float, n: int = 12) -> dict:
    """Self and inclusive shares per function from py-spy's collapsed stacks; thread shares; how busy
    the process was (non-idle samples per thread-second, 1.0 = one thread always running)."""
    self_c, incl_c, threads = collections.Counter(), collections.Counter(), collections.Counter()
    total = 0
    if not path.exists():
        return {"error": "py-spy wrote nothing (attach failed?)"}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        c = int(count)
        frames = stack.split(";")
        if frames and frames[0].startswith(("thread (", "process ")):
            threads[frames[0]] += c
            frames = [f for f in frames if not f.startswith(("thread (", "process "))]
        names = []
        for f in frames:
            m = FRAME.match(f)
            names.append(f"{m['func']} ({short(m['file'])})" if m else f)
        if not names:
            continue
        total += c
        self_c[names[-1]] += c
        for name in set(names):
            incl_c[name] += c

    def share(counter, only=None):
        rows = [(k, v) for k, v in counter.most_common() if only is None or only(k)]
        return [[k, round(100 * v / total, 1)] for k, v in rows[:n]]
    ours = (lambda k: "(mqtool/" in k or "(store/" in k or "(remoting/" in k)
    return {"samples": total, "seconds": round(seconds, 2), "busy_threads": round(total / (SPY_HZ * seconds), 2),
            "self_pct": share(self_c), "inclusive_pct_mqtool_store_remoting": share(incl_c, ours),
            "thread_pct": [[k, round(100 * v / total, 1)] for k, v in threads.most_common(6)]}


def top_cprofile(path: Path, n: int = 12) -> dict:
    import pstats
    if not path.exists():
        return {"error": "no cProfile output"}
    st = pstats.Stats(str(path)).stats
    total = sum(v[2] for v in st.values()) or 1
    rows = sorted(st.items(), key=lambda kv: kv[1][2], reverse=True)[:n]
    return {"self_pct": [[f"{fn} ({short(file)})", round(100 * v[2] / total, 1)] for (file, _, fn), v in rows]}


# ---------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=15.0, help="load per run in A (C uses 2/3 of it)")
    ap.add_argument("--mib", type=int, default=1024, help="commit log file size for the catch-up (B)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    seconds = 2.0 if args.quick else args.seconds
    c_seconds = 1.5 if args.quick else round(args.seconds * 2 / 3, 1)
    mib = 64 if args.quick else args.mib
    try:
        import rocketmq.client  # noqa: F401
        have_cpp = ""
    except Exception as exc:  # noqa: BLE001
        have_cpp = f"C++ client not loadable: {exc}"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # so `finally` stops what was started
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-bench-ha-"))
    admin = Admin()
    try:
        ns_port = free_port_pair()
        ns = f"127.0.0.1:{ns_port}"
        Server(["namesrv", "start", "--listen", ns, "--kv-config", str(tmp / "kv.json")]).ready()
        result = {"machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                              "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
                  "mode": {"flushDiskType": "ASYNC_FLUSH (master and slave)", "haTransferBatchSize": BATCH,
                           "network": "127.0.0.1", "disk": str(tmp), "lag_sample_interval_ms": 100,
                           "client": "C++ client rocketmq==0.4.4, sync sends"}}

        # ---- B first: its 1 GiB store and profile are independent of the client.
        b_file = mib << 20
        data = build_store(tmp / "master-b", b_file)
        cl_file = next((tmp / "master-b" / "commitlog").iterdir())
        base = {"raw_disk_write_MBps": round(raw_write_mbps(tmp, b_file), 1),
                "loopback_socket_MBps": round(loopback_mbps(cl_file, data["commitlog_bytes"], tmp / "rx.bin"), 1)}
        port = free_port_pair()
        master = broker(tmp, ns, "ha-catchup", "ASYNC_MASTER", port, b_file, tmp / "master-b").ready()
        target = admin.ha(f"127.0.0.1:{port}")["commitLogMaxOffset"]
        ha_addr = f"127.0.0.1:{port + 1}"
        runs = [catch_up(admin, tmp, ns, ha_addr, b_file, target, "plain", master.pid, False)]
        if not args.no_profile:
            runs.append(catch_up(admin, tmp, ns, ha_addr, b_file, target, "profiled", master.pid, True))
        master.stop()
        shutil.rmtree(tmp / "master-b", ignore_errors=True)
        plain = runs[0]
        result["B_catch_up"] = {"data": data, "baseline": base, "run": plain,
                                "vs_loopback_socket": round(plain["MBps"] / base["loopback_socket_MBps"], 3),
                                "vs_raw_disk_write": round(plain["MBps"] / base["raw_disk_write_MBps"], 3),
                                "target_MBps": 200, "target_met": plain["MBps"] >= 200}
        if len(runs) > 1:
            result["B_catch_up"]["profiled_run"] = runs[1]
        result["baseline"] = dict(base)

        if have_cpp:
            result["A_async_keeps_up"] = result["C_sync_vs_async"] = {"skipped": have_cpp}
        else:
            groups = {}
            for role in ("ASYNC_MASTER", "SYNC_MASTER"):
                mport, sport = free_port_pair(), free_port_pair()
                name = "ha-" + role.split("_")[0].lower()
                m = broker(tmp, ns, name, role, mport, 1 << 30, tmp / f"{name}-m")
                s = broker(tmp, ns, name, "SLAVE", sport, 1 << 30, tmp / f"{name}-s", f"127.0.0.1:{mport + 1}")
                m.ready(), s.ready()
                maddr, saddr, topic = f"127.0.0.1:{mport}", f"127.0.0.1:{sport}", f"HABench_{role}"
                mqtool("topic", "create", "-n", ns, "-t", topic, "-b", maddr, "-r", "4", "-w", "4")
                admin.wait(f"the {role} slave to connect", lambda: admin.ha(maddr)["haConnectionInfo"])
                groups[role] = (maddr, saddr, topic)
            maddr, saddr, topic = groups["ASYNC_MASTER"]
            a_runs = [lag_run(admin, ns, maddr, saddr, topic, seconds, size) for size in (128, 1024)]
            result["A_async_keeps_up"] = {
                "baseline": "the master's own append bytes/s over the same window",
                "runs": a_runs, "targets": {"lag_max_bytes": 1 << 20, "replicated_vs_append": 0.8},
                "targets_met": all(r["lag_max_bytes"] < 1 << 20 and (r["replicated_vs_append"] or 0) >= 0.8
                                   for r in a_runs)}
            c = {"seconds_per_run": c_seconds, "body_bytes": 128}
            for threads in (1, 4):
                for role in ("ASYNC_MASTER", "SYNC_MASTER"):
                    c[f"{role}_{threads}"] = produce(ns, groups[role][2], threads, c_seconds, 128)
                a, s_ = c[f"ASYNC_MASTER_{threads}"]["tps"], c[f"SYNC_MASTER_{threads}"]["tps"]
                c[f"sync_vs_async_{threads}"] = round(s_ / a, 3) if a else None
            c["target"] = 0.7
            c["target_met"] = all((c[f"sync_vs_async_{t}"] or 0) >= 0.7 for t in (1, 4))
            result["C_sync_vs_async"] = c
            result["baseline"]["async_master_tps_1_thread"] = c["ASYNC_MASTER_1"]["tps"]
        print(json.dumps(result) if args.json else json.dumps(result, indent=2))
        return 0
    finally:
        for proc in reversed(list(PROCS)):
            stop(proc)
        admin.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
