"""What this folder's benchmarks share: free 127.0.0.1 ports, a process's CPU time, and one
`mqtool broker` process (embedded name server, a temporary store) started and stopped by its PID."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.ports import free_port, free_port_pair  # noqa: E402,F401 - this folder's scripts take them from here
from mqtool.cluster.lifeline import die_with_parent  # noqa: E402 - every server here dies with its benchmark
CLK = os.sysconf("SC_CLK_TCK")


def rss_anon_kib(pid: int) -> int:
    """Anonymous resident memory of process `pid` (RssAnon: what a leak grows; VmRSS also counts
    the commit log pages the broker has mapped)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return -1


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """User + system CPU time so far of process `pid`'s threads, summed by thread name
    (/proc/PID/task/*/comm; the main thread as "main"). Threads that ended are not counted."""
    out: dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = "main" if tid == str(pid) else f.read().strip()
        except OSError:          # the thread ended meanwhile
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLK
    return out


@dataclass
class BrokerProcess:
    proc: subprocess.Popen
    port: int
    namesrv: str          # the embedded name server, HOST:PORT
    tmp: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topic(self, topic: str, queues: int = 4) -> None:
        subprocess.run([sys.executable, "-m", "mqtool", "topic", "create", "-n", self.namesrv, "-t", topic,
                        "-r", str(queues), "-w", str(queues)], cwd=REPO, check=True, capture_output=True, timeout=60)


def tree_env(tree: Path, tmp: Path) -> dict:
    """The environment that runs `python -m mqtool` from another checkout `tree` (its mqtool, store
    and remoting, ahead of this one's installed packages): a before/after comparison in one run."""
    links = tmp / "tree"
    links.mkdir()
    for name, folder in (("mqtool", "mqtool"), ("mqtool_store", "store"), ("mqtool_remoting", "remoting")):
        (links / name).symlink_to(Path(tree).resolve() / folder)
    return {**os.environ, "PYTHONPATH": str(links)}


def _ports() -> tuple[int, int]:
    """A broker's listenPort and its embedded name server's port, none of the broker's three ports
    (listenPort - 2, listenPort, listenPort + 1) shared with the name server's."""
    port = free_port_pair()
    while True:
        ns_port = free_port_pair()
        if abs(ns_port - port) > 3:
            return port, ns_port


def _boot(cmd: list[str], tree: Path | None, env: dict | None, boot_timeout: float) -> tuple[subprocess.Popen, str]:
    """Start `cmd` and read its stderr until "boot success": (the process, "") once booted, or
    (the ended process, its last log line) if it ended first. Past `boot_timeout` it is killed."""
    proc = subprocess.Popen(cmd, cwd=tree or REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, preexec_fn=die_with_parent())
    deadline, last = time.monotonic() + boot_timeout, ""
    while True:
        line = proc.stderr.readline()
        if "boot success" in line:
            return proc, ""
        last = line.strip() or last
        if not line and proc.poll() is not None:
            return proc, last
        if time.monotonic() > deadline:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)
            return proc, f"no boot success in {boot_timeout:.0f} s; last line: {last}"


@contextmanager
def broker_process(*extra: str, prefix: str = "mqtool-bench-", boot_timeout: float = 60.0, tree: Path | None = None):
    """`python -m mqtool broker start` on free ports with `extra` options; yields once it logged
    "boot success" (its stderr then stays readable as `proc.stderr`). A port taken between choosing
    it and the broker binding it (another process got there first) means new ports, up to 3 tries.
    Afterwards: SIGTERM to its PID, SIGKILL if it has not ended in 30 s, and its store removed.
    With `tree`, the broker is that checkout's (`tree_env`)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    env = tree_env(tree, tmp) if tree else None
    try:
        for attempt in range(3):
            port, ns_port = _ports()
            proc, why = _boot([sys.executable, "-m", "mqtool", "broker", "start", "--listen", f"127.0.0.1:{port}",
                               "--store-dir", str(tmp / "store"), "--embedded-namesrv", f"127.0.0.1:{ns_port}",
                               *extra], tree, env, boot_timeout)
            if not why:
                break
            proc.stderr.close()
            if "address already in use" not in why or attempt == 2:
                raise SystemExit(f"the broker did not start (exit {proc.returncode}): {why}")
            shutil.rmtree(tmp / "store", ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        yield BrokerProcess(proc, port, f"127.0.0.1:{ns_port}", tmp)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)
