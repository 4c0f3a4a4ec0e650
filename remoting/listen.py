"""Whether a server could listen on HOST:PORT now, asked before anything starts. The probe binds as
the servers bind (remoting's Server, the HA and metrics ports' asyncio servers: SO_REUSEADDR, each
address the host resolves to, IPv6 sockets v6-only), so it answers exactly what they will meet."""
from __future__ import annotations

import socket

from mqtool_remoting.errors import _reason

# Every server binds with SO_REUSEADDR (asyncio's default on Unix, and Netty's in RocketMQ): a port
# whose old connections wait in TIME-WAIT after a stop is free; a port another socket listens on is not.
REUSE_ADDRESS = True


def listen_problem(host: str, port: int) -> str | None:
    """Why a server could not listen on host:port now, in a few words ("address already in use"),
    else None."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return _reason(exc)
    for family, kind, proto, _, addr in dict.fromkeys(infos):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, REUSE_ADDRESS)
            if family == socket.AF_INET6:         # as asyncio binds its IPv6 sockets
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, True)
            try:
                probe.bind(addr)
            except OSError as exc:
                return _reason(exc)
    return None
