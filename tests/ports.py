"""Free 127.0.0.1 ports for the servers tests and benchmarks start (stdlib only: the benchmarks use
it too). They are chosen below the kernel's ephemeral range, where neither connect() nor bind(0)
ever lands, so a port found free stays free until the server binds it. A port bind(0) hands out is
from that range, and any process's next outgoing connection can take it (or the one beside it, a
broker's HA port) in the meantime: that is how a benchmark's broker once failed to start in CI."""
from __future__ import annotations

import random
import socket

BELOW = 12_000      # how many ports under the ephemeral range to choose from


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768    # Linux's default


def _bindable(*ports: int) -> bool:
    socks = []
    try:
        for port in ports:
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def _kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _choose(offsets: tuple[int, ...]) -> int:
    """A port p with every p + offset free, from below the ephemeral range when it leaves room there."""
    high = _ephemeral_low() - 1 - max(offsets)
    low = max(1024 - min(offsets), high - BELOW)
    for _ in range(200):
        port = random.randrange(low, high) if high - low >= 1000 else _kernel_port()
        if 0 < port + min(offsets) and port + max(offsets) < 65536 and _bindable(*(port + o for o in offsets)):
            return port
    raise RuntimeError("no free port on 127.0.0.1")


def free_port() -> int:
    return _choose((0,))


def free_port_pair() -> int:
    """A broker's listenPort: the port after it is free too (a master's HA port, listenPort + 1), and
    so is the one two below it (every broker's fast port, listenPort - 2)."""
    return _choose((-2, 0, 1))
