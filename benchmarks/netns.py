"""Hosts for benchmarks/chaos.py: one Linux network namespace a process, veth pairs on one bridge in
the root namespace, and the faults a network can have (a host cut off, two hosts cut from each
other, a congested link). Needs root, `ip` and `tc`.

Layout (every name starts with PREFIX, so a crashed run's leftovers are found and removed):

    root namespace: bridge mqcx-br 10.213.77.254/24 (the harness and its producer talk through it)
    host h: namespace mqcx-h, veth mqcx-h (root side, on the bridge) <-> eth0 (in mqcx-h) 10.213.77.N/24

The kernel this was written on has no netem, no gact (`action drop`), no prio qdisc and no
iptables binary, so a pair is cut with what it has: an htb root on the receiving host's root-side
veth whose u32 filter sends the other host's packets to a class whose leaf is `pfifo limit 0`
(every packet dropped, silently, as a real partition drops them). A congested host gets tbf on
both ends of its veth. A whole host is cut by taking its root-side veth down.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "mqcx"
BRIDGE = f"{PREFIX}-br"
SUBNET = "10.213.77"
BRIDGE_IP = f"{SUBNET}.254"
LOCK = Path("/tmp/mqtool-chaos.lock")
# PR_SET_PDEATHSIG through util-linux's setpriv, when it is there: a harness killed with SIGKILL
# takes its processes with it (its `finally` kills them otherwise)
DIE_WITH_US = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []


class NetError(RuntimeError):
    """A namespace, link or qdisc could not be made, or the machine cannot make them."""


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, check=False, capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise NetError(f"{' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def unavailable() -> str | None:
    """Why this machine cannot run the harness, or None."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"no {tool} command"
    name = f"{PREFIX}-probe{os.getpid() % 10000}"
    try:
        proc = run("ip", "netns", "add", name, check=False)
        if proc.returncode != 0:
            return f"cannot make a network namespace: {proc.stderr.strip()}"
        proc = run("ip", "link", "add", f"{PREFIX}-pv", "type", "veth", "peer", "name", f"{PREFIX}-pw", check=False)
        if proc.returncode != 0:
            return f"cannot make a veth pair: {proc.stderr.strip()}"
        for qdisc in (["htb", "default", "10"], ["tbf", "rate", "1mbit", "burst", "16k", "latency", "50ms"]):
            proc = run("tc", "qdisc", "add", "dev", f"{PREFIX}-pv", "root", "handle", "1:", *qdisc, check=False)
            if proc.returncode != 0:
                return f"no {qdisc[0]} qdisc: {proc.stderr.strip()}"
            run("tc", "qdisc", "del", "dev", f"{PREFIX}-pv", "root", check=False)
    finally:
        run("ip", "link", "del", f"{PREFIX}-pv", check=False)
        run("ip", "netns", "del", name, check=False)
    return None


def leftovers() -> list[str]:
    """Namespaces and links with our prefix (a crashed run's)."""
    ns = [line.split()[0] for line in run("ip", "netns", "list").stdout.splitlines() if line.startswith(PREFIX)]
    links = [line.split(":")[1].strip().split("@")[0] for line in run("ip", "-o", "link").stdout.splitlines()
             if line.split(":")[1].strip().startswith(PREFIX)]
    return ns + links


def remove_leftovers() -> None:
    for ns in run("ip", "netns", "list").stdout.splitlines():
        name = ns.split()[0] if ns.strip() else ""
        if name.startswith(PREFIX):
            for pid in run("ip", "netns", "pids", name, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)     # a crashed run's process, in our namespace only
                except ProcessLookupError:
                    pass
            run("ip", "netns", "del", name, check=False)
    for line in run("ip", "-o", "link").stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(PREFIX):
            run("ip", "link", "del", name, check=False)


@dataclass
class Host:
    name: str
    ip: str
    ns: str
    veth: str                       # the root-side end, on the bridge
    faults: set[str] = field(default_factory=set)


class Network:
    """The bridge and the hosts; `close()` removes all of it (and is safe to call twice)."""

    def __init__(self) -> None:
        self.hosts: dict[str, Host] = {}
        self._lock = None
        self.up = False

    def open(self, names: list[str]) -> Network:
        self._lock = open(LOCK, "w")        # noqa: SIM115 - held (flock) until close()
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NetError(f"another chaos run holds {LOCK}: one at a time") from None
        if leftovers():
            remove_leftovers()
            if left := leftovers():
                raise NetError(f"a crashed run's {', '.join(left)} could not be removed")
        self.up = True
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        for i, name in enumerate(names, start=1):
            host = Host(name, f"{SUBNET}.{i}", f"{PREFIX}-{name}", f"{PREFIX}-{name}")
            assert len(host.veth) <= 15, host.veth
            run("ip", "netns", "add", host.ns)
            run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", f"{PREFIX}-p{i}")
            run("ip", "link", "set", f"{PREFIX}-p{i}", "netns", host.ns)
            run("ip", "-n", host.ns, "link", "set", f"{PREFIX}-p{i}", "name", "eth0")
            run("ip", "-n", host.ns, "addr", "add", f"{host.ip}/24", "dev", "eth0")
            run("ip", "-n", host.ns, "link", "set", "eth0", "up")
            run("ip", "-n", host.ns, "link", "set", "lo", "up")
            run("ip", "link", "set", host.veth, "master", BRIDGE)
            run("ip", "link", "set", host.veth, "up")
            self.hosts[name] = host
        return self

    def close(self) -> None:
        if self.up:
            for host in self.hosts.values():
                run("ip", "netns", "del", host.ns, check=False)
            run("ip", "link", "del", BRIDGE, check=False)
            remove_leftovers()
            self.up = False
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    # ------------------------------------------------------------------ processes

    def popen(self, host: str, argv: list[str], log: Path, cwd: Path) -> subprocess.Popen:
        """argv run in the host's namespace, in a session of its own (killable by PID, its group
        apart from ours), killed by the kernel if the harness dies: setpriv sets PR_SET_PDEATHSIG
        and execs `ip netns exec`, which execs the program in place, so the PID is the program's
        (a preexec_fn would do the same, but is not safe in a process with threads)."""
        with open(log, "ab") as out:
            return subprocess.Popen([*DIE_WITH_US, "ip", "netns", "exec", self.hosts[host].ns, *argv], cwd=cwd,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    # ------------------------------------------------------------------ faults

    def isolate(self, name: str) -> None:
        """The host cut from everyone, the harness included."""
        run("ip", "link", "set", self.hosts[name].veth, "down")
        self.hosts[name].faults.add("down")

    def cut(self, name: str, others: list[str]) -> None:
        """Packets between `name` and each of `others` dropped, both ways; everyone else (the
        harness's producer) still reaches it."""
        for to, sources in [(name, others)] + [(o, [name]) for o in others]:
            self._drop_from(to, [self.hosts[s].ip for s in sources])

    def _drop_from(self, name: str, ips: list[str]) -> None:
        host = self.hosts[name]
        dev = host.veth                     # its egress is what reaches the host
        if "drop" not in host.faults:
            run("tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10", "r2q", "100000")
            run("tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit")
            run("tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb", "rate", "10gbit")
            run("tc", "qdisc", "add", "dev", dev, "parent", "1:20", "handle", "20:", "pfifo", "limit", "0")
            host.faults.add("drop")
        for ip in ips:
            run("tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                "match", "ip", "src", f"{ip}/32", "flowid", "1:20")

    def congest(self, name: str, rate: str = "256kbit", latency_ms: int = 300) -> None:
        """A slow, queueing link both ways (tbf: no netem here)."""
        host = self.hosts[name]
        tbf = ["tbf", "rate", rate, "burst", "8kb", "latency", f"{latency_ms}ms"]
        run("tc", "qdisc", "add", "dev", host.veth, "root", *tbf)
        run("tc", "-n", host.ns, "qdisc", "add", "dev", "eth0", "root", *tbf)
        host.faults.add("congest")

    def heal(self) -> None:
        for host in self.hosts.values():
            if "down" in host.faults:
                run("ip", "link", "set", host.veth, "up")
            if host.faults & {"drop", "congest"}:
                run("tc", "qdisc", "del", "dev", host.veth, "root", check=False)
            if "congest" in host.faults:
                run("tc", "-n", host.ns, "qdisc", "del", "dev", "eth0", "root", check=False)
            host.faults.clear()

