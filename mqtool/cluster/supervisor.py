"""Run a planned cluster's processes as children, restart the ones that die, stop them all in order.

Each child is `python -m mqtool namesrv|broker start -c <conf>` in a session of its own, so a Ctrl-C at
the terminal reaches the supervisor alone and the stop keeps its order: brokers first (each unregisters
from the name server, flushes its store and removes its `abort` file on SIGTERM), the name server last.
On Linux a child also gets SIGTERM when the supervisor dies without stopping it (PR_SET_PDEATHSIG).
A child's output goes to its log file; a child that dies is started again after a backoff (1 s, doubling
up to 30 s, back to 1 s once it has run 30 s). Only the supervisor's own children are ever signalled.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from mqtool_remoting.listen import listen_problem

from mqtool.cluster.lifeline import die_with_parent
from mqtool.cluster.plan import Member, Plan
from mqtool.cluster.state import write_state

READY_TIMEOUT = 120.0       # seconds for a process to answer on its ports (a broker recovers its store first)
STOP_TIMEOUT = 30.0         # seconds for a child to exit after SIGTERM before SIGKILL
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
STABLE_AFTER = 30.0         # seconds up after which the backoff starts again from BACKOFF_FIRST
TICK = 0.1


class ClusterStartError(Exception):
    """A port in use, a child that exits at start or never answers: reported in one line."""


@dataclass
class Child:
    member: Member
    proc: subprocess.Popen | None = None
    started: float = 0.0
    ready: bool = False
    backoff: float = BACKOFF_FIRST
    restart_at: float | None = None           # set while it waits to be started again

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None


def port_free(host: str, port: int) -> bool:
    """Whether the servers will be able to listen there: the brokers' and name server's own check."""
    return listen_problem(host, port) is None


def answers(host: str, port: int) -> bool:
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def last_line(path) -> str:
    """The last non-empty line of a child's log (what it said before exiting)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(f.tell() - 8192, 0))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Supervisor:
    def __init__(self, plan: Plan, report: Callable[[dict], None], stop_event: threading.Event | None = None):
        self.plan = plan
        self.report = report
        self.stopping = stop_event or threading.Event()
        self.children = [Child(m) for m in plan.members]

    # -- start ---------------------------------------------------------------------------------------
    def check_ports(self) -> None:
        for m in self.plan.members:
            for port in m.ports:
                if not port_free(m.host, port):
                    raise ClusterStartError(f"port {port} on {m.host} ({m.key}) is in use: stop what holds it "
                                            "or choose other ports (--namesrv, --base-port)")

    def spawn(self, child: Child, fresh: bool = False) -> None:
        m = child.member
        m.directory.mkdir(parents=True, exist_ok=True)
        with open(m.log, "wb" if fresh else "ab") as log:
            child.proc = subprocess.Popen(
                [sys.executable, "-m", "mqtool", *m.args], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGTERM))   # SIGTERM: a broker flushes its store
        child.started, child.ready, child.restart_at = time.monotonic(), False, None

    def _is_ready(self, child: Child) -> bool:
        return all(answers(child.member.host, p) for p in child.member.ready_ports)

    def wait_ready(self, children: list[Child]) -> bool:
        """Until every child answers (True), one exits or never answers (ClusterStartError), or a stop
        was asked for (False)."""
        deadline = time.monotonic() + READY_TIMEOUT
        waiting = list(children)
        while waiting:
            for child in list(waiting):
                code = child.proc.poll()
                if code is not None:
                    said = last_line(child.member.log)
                    raise ClusterStartError(f"{child.member.key} {exit_text(code)} at start"
                                            + (f": {said}" if said else f" (log: {child.member.log})"))
                if self._is_ready(child):
                    child.ready = True
                    waiting.remove(child)
            if not waiting:
                break
            if time.monotonic() > deadline:
                c = waiting[0]
                silent = [f"{c.member.host}:{p}" for p in c.member.ready_ports if not answers(c.member.host, p)]
                raise ClusterStartError(f"{c.member.key} did not answer on {', '.join(silent)} within "
                                        f"{READY_TIMEOUT:.0f} s (log: {c.member.log})")
            if self.stopping.wait(TICK):
                return False
        return True

    def start(self) -> bool:
        """Start the name server, then every broker; True once all answer, False if stopped meanwhile.
        On an error, whatever started is stopped before it is raised. (check_ports first.)"""
        try:
            ns, brokers = self.children[0], self.children[1:]
            self.spawn(ns, fresh=True)
            if not self.wait_ready([ns]):
                return False
            for child in brokers:
                self.spawn(child, fresh=True)
            if not self.wait_ready(brokers):
                return False
        except BaseException:
            self.stop(quiet=True)
            raise
        self.save("running")
        return True

    # -- run -----------------------------------------------------------------------------------------
    def run(self) -> None:
        """Watch the children until a stop is asked for."""
        while not self.stopping.wait(TICK):
            self.tick(time.monotonic())

    def tick(self, now: float) -> None:
        for child in self.children:
            m = child.member
            if child.proc is None:
                continue
            if child.restart_at is not None:
                if now >= child.restart_at:
                    self.spawn(child)
                    self.report({"event": "restarting", "key": m.key, "pid": child.pid, "address": m.address})
                continue
            code = child.proc.poll()
            if code is not None:
                child.restart_at = now + child.backoff
                self.report({"event": "died", "key": m.key, "pid": child.pid, "code": code,
                             "how": exit_text(code), "said": last_line(m.log), "restart_in": child.backoff})
                child.backoff = min(child.backoff * 2, BACKOFF_MAX)
                continue
            if not child.ready and self._is_ready(child):
                child.ready = True
                self.report({"event": "up", "key": m.key, "pid": child.pid, "address": m.address})
                self.save("running")
            if child.ready and child.backoff > BACKOFF_FIRST and now - child.started >= STABLE_AFTER:
                child.backoff = BACKOFF_FIRST

    # -- stop ----------------------------------------------------------------------------------------
    def stop(self, quiet: bool = False) -> list[str]:
        """SIGTERM every broker and wait, then the name server; returns what did not stop cleanly."""
        problems = []
        brokers = [c for c in self.children[1:] if c.proc is not None]
        for group in (brokers, [self.children[0]] if self.children[0].proc is not None else []):
            signalled = []
            for child in group:
                child.restart_at = None
                if child.proc.poll() is None:
                    child.proc.send_signal(signal.SIGTERM)
                    signalled.append(child)
            deadline = time.monotonic() + STOP_TIMEOUT
            for child in signalled:
                try:
                    code = child.proc.wait(max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    child.proc.kill()
                    code = child.proc.wait()
                    problems.append(f"{child.member.key} (pid {child.pid}) did not stop within "
                                    f"{STOP_TIMEOUT:.0f} s: killed")
                    continue
                if code != 0:
                    problems.append(f"{child.member.key} (pid {child.pid}) {exit_text(code)} while stopping: "
                                    f"{last_line(child.member.log)}")
                if not quiet:
                    self.report({"event": "stopped", "key": child.member.key, "pid": child.pid})
        if any(c.proc is not None for c in self.children):
            self.save("stopped", problems)
        return problems

    # -- state ---------------------------------------------------------------------------------------
    def rows(self) -> list[dict]:
        return rows_of(self.plan, {c.member.key: c.pid for c in self.children})

    def save(self, status: str, problems: list[str] | None = None) -> None:
        """cluster.json now; at the stop, `problems` says what did not stop cleanly (for `cluster stop`)."""
        state = {"status": status, "supervisor_pid": os.getpid(), "namesrv": self.plan.namesrv_addr,
                 "controller": self.plan.controller, "groups": self.plan.groups, "replicas": self.plan.replicas,
                 "updated": int(time.time() * 1000), "processes": self.rows()}
        if problems is not None:
            state["problems"] = problems
        write_state(self.plan.store_dir, state)


def rows_of(plan: Plan, pids: dict[str, int | None]) -> list[dict]:
    """The table's rows: the name server, its embedded controller (R > 1), then every broker."""
    rows = []
    for m in plan.members:
        rows.append({"role": m.role, "name": m.name, "id": m.ident, "address": m.address, "pid": pids.get(m.key),
                     "store": str(m.store), "log": str(m.log), "key": m.key})
        if m.kind == "namesrv" and plan.controller:
            rows.append(dict(rows[-1], role="controller", name="controller", id="n0", address=plan.controller,
                             key="controller"))
    return rows
