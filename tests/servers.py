"""Real `mqtool namesrv` and `mqtool broker` processes on 127.0.0.1 for end-to-end tests."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mqtool.cluster.lifeline import die_with_parent
from tests.ports import free_port, free_port_pair  # noqa: F401 - the tests take them from here

REPO = Path(__file__).parent.parent

# Short delay levels so retries and delayed messages arrive within the test's time.
FAST_LEVELS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


def wait_until(what: str, check, timeout: float = 30, every: float = 0.05):
    """Poll `check` until it returns something true (returned), or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def wait_for_line(proc, needle: str, timeout: float = 30) -> list[str]:
    lines, deadline = [], time.time() + timeout
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"never saw {needle!r}; output:\n{''.join(lines)}")


class Process:
    """A server started with `python -m mqtool ...`; stopped by its PID with SIGTERM."""

    def __init__(self, args: list[str], ready: str, env: dict | None = None):
        self.proc = subprocess.Popen([sys.executable, "-m", "mqtool", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env=env, preexec_fn=die_with_parent())
        self.startup = wait_for_line(self.proc, ready)

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.proc.stderr.close()
        return self.proc.returncode


def drain(proc: Process) -> list[str]:
    """The server's log lines from now on, read on a thread: an undrained pipe would block its logging."""
    lines: list[str] = []

    def read():
        try:
            for line in proc.proc.stderr:
                lines.append(line)
        except ValueError:          # closed by Process.stop
            pass
    threading.Thread(target=read, daemon=True).start()
    return lines


def on_free_ports(choose, args_for) -> tuple[Process, int]:
    """A server started with `args_for(port)` on `port = choose()`, booted: (it, port). A port can be
    taken between choosing it and the server binding it (by any process on the machine), so a server
    that ends saying "address already in use" is started again on a new port, up to 3 tries."""
    for attempt in range(3):
        port = choose()
        try:
            return Process(args_for(port), "boot success"), port
        except AssertionError as exc:
            if "address already in use" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def start_namesrv(tmp: Path) -> tuple[Process, str]:
    """A name server process on a free loopback port, its kvConfig.json in `tmp`: (it, its address)."""
    proc, port = on_free_ports(free_port, lambda port: ["namesrv", "start", "--listen", f"127.0.0.1:{port}",
                                                        "--kv-config", str(tmp / "kv.json")])
    return proc, f"127.0.0.1:{port}"


def start_broker(tmp: Path, ns: str, name: str = "broker-a", extra: str = "") -> tuple[Process, str]:
    conf = tmp / f"{name}.conf"
    conf.write_text(f"brokerClusterName=DefaultCluster\nbrokerName={name}\nmessageDelayLevel={FAST_LEVELS}\n"
                    f"transactionCheckInterval=1000\ntransactionTimeOut=500\n{extra}")
    proc, port = on_free_ports(free_port_pair,          # a master also listens on listenPort + 1 (HA)
                               lambda port: ["broker", "start", "-n", ns, "-c", str(conf), "--listen",
                                             f"127.0.0.1:{port}", "--store-dir", str(tmp / f"store-{name}")])
    return proc, f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    ns, ns_addr = start_namesrv(tmp)
    broker, broker_addr = start_broker(tmp, ns_addr)
    yield {"namesrv": ns_addr, "broker": broker_addr, "tmp": tmp, "broker_proc": broker}
    assert broker.stop() == 0
    assert ns.stop() == 0


def spy_handlers(monkeypatch, codes) -> list[int]:
    """The code of every request of `codes` a broker's main port handles from now on."""
    from mqtool.broker import controller
    seen: list[int] = []
    for code in codes:
        def spy(ctrl, conn, cmd, real=controller.HANDLERS[code]):
            seen.append(cmd.code)
            return real(ctrl, conn, cmd)
        monkeypatch.setitem(controller.HANDLERS, code, spy)
    return seen
