"""The fast port's address (MixAll.brokerVIPChannel of 4.9.8): a broker address with its port less 2."""
from __future__ import annotations


def vip_channel(addr: str) -> str:
    """HOST:PORT -> HOST:(PORT - 2), where every 4.9.8 broker serves its fast port."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"broker address {addr!r} is not HOST:PORT")
    return f"{host}:{int(port) - 2}"
