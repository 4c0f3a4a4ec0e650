"""Running servers from the CLI: logging, --listen parsing, clean stop on SIGINT/SIGTERM."""
from __future__ import annotations

import logging
import signal
import sys

from mqtool.cli.errors import UsageError


def parse_listen(text: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = default_host, text
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--listen must be HOST:PORT or PORT, not {text!r}")
    return (host or default_host).strip("[]"), int(port)


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def taken_port(host: str, ports: list[tuple[int, str]]) -> str | None:
    """The first of `ports` ((port, how to name it), 0 skipped) that cannot be bound on `host` now,
    as "cannot listen on NAME: reason", else None: checked before anything starts, so a taken port
    starts nothing."""
    from mqtool_remoting.listen import listen_problem
    for port, name in ports:
        if not port:
            continue
        problem = listen_problem(host, port)
        if problem:
            return f"cannot listen on {name}: {problem}"
    return None


async def run_until_signal(start, stop) -> None:
    """await start(); wait for SIGINT/SIGTERM; await stop()."""
    import asyncio
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, done.set)
    await start()
    try:
        await done.wait()
    finally:
        await stop()
