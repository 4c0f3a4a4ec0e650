"""An Apache RocketMQ 4.9.8 broker and name server from a local install, for side-by-side runs.

`java_broker_process(home)` starts `bin/mqnamesrv` and `bin/mqbroker` of the install at `home` on
free 127.0.0.1 ports with a temporary store (ASYNC_MASTER, ASYNC_FLUSH, as mqtool's benchmark
broker), yields once the broker's port answers, and stops both by their process ids. The measured
pid is the broker's JVM (the child of the start scripts), so /proc gives every JVM thread's CPU.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from brokerproc import REPO, free_port_pair


@dataclass
class JavaBroker:
    pid: int              # the broker's JVM
    port: int
    namesrv: str

    def create_topic(self, topic: str, queues: int = 4) -> None:
        subprocess.run([sys.executable, "-m", "mqtool", "topic", "create", "-n", self.namesrv, "-t", topic,
                        "-r", str(queues), "-w", str(queues)], cwd=REPO, check=True, capture_output=True, timeout=60)


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _jvm_of(pid: int, main_class: str) -> int | None:
    """The JVM under `pid` (itself included): a java process whose command line names `main_class`
    (the official scripts' shells name it too: runbroker.sh gets it as an argument)."""
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if main_class.encode() in b" ".join(argv) and argv[0].rsplit(b"/", 1)[-1] == b"java":
                return p
        except OSError:
            pass
        todo += _children(p)
    return None


def _wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the Java {what} exited ({proc.returncode}) before it listened on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"the Java {what} did not listen on {port} within {timeout:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the start script's process group (the JVM is in it), SIGKILL after 30 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


@contextmanager
def java_broker_process(home: Path):
    for script in ("bin/mqnamesrv", "bin/mqbroker"):
        if not (home / script).is_file():
            raise SystemExit(f"{home} is not an Apache RocketMQ install: {script} is missing")
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-bench-java-"))
    ns_port, port = free_port_pair(), free_port_pair()
    conf = tmp / "broker.conf"
    conf.write_text(f"brokerClusterName=DefaultCluster\nbrokerName=broker-java\nbrokerId=0\nbrokerIP1=127.0.0.1\n"
                    f"listenPort={port}\nnamesrvAddr=127.0.0.1:{ns_port}\nstorePathRootDir={tmp / 'store'}\n"
                    f"storePathCommitLog={tmp / 'store' / 'commitlog'}\nbrokerRole=ASYNC_MASTER\n"
                    f"flushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=true\n")
    env = {**os.environ, "ROCKETMQ_HOME": str(home)}    # the scripts find java by JAVA_HOME (or ~/jdk, /usr/java)
    ns_props = tmp / "namesrv.properties"
    ns_props.write_text(f"listenPort={ns_port}\n")
    procs = []
    try:
        ns = subprocess.Popen(["sh", str(home / "bin/mqnamesrv"), "-c", str(ns_props)], cwd=tmp, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        procs.append(ns)
        _wait_port(ns_port, ns, "name server")
        broker = subprocess.Popen(["sh", str(home / "bin/mqbroker"), "-c", str(conf)], cwd=tmp, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        procs.append(broker)
        _wait_port(port, broker, "broker")
        jvm = _jvm_of(broker.pid, "BrokerStartup")
        if jvm is None:
            raise SystemExit("the Java broker's JVM was not found under its start script")
        time.sleep(3)                              # its first name server registration
        yield JavaBroker(jvm, port, f"127.0.0.1:{ns_port}")
    finally:
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
