"""Every error the remoting package raises; OS and timeout errors are translated here, once."""
from __future__ import annotations

import asyncio
import contextlib


class RemotingError(Exception):
    """Base class."""


class FrameError(RemotingError):
    """Bytes that are not a valid frame; the connection must be closed."""


class RemotingConnectError(RemotingError):
    def __init__(self, addr: str, reason: str):
        self.addr = addr
        super().__init__(f"cannot connect to {addr}: {reason}")


class RemotingListenError(RemotingError):
    def __init__(self, addr: str, reason: str):
        super().__init__(f"cannot listen on {addr}: {reason}")


class RemotingTimeout(RemotingError):
    def __init__(self, addr: str, timeout_s: float, what: str = "request"):
        super().__init__(f"{what} to {addr} timed out after {timeout_s * 1000:.0f} ms")


class RemotingClosed(RemotingError):
    def __init__(self, addr: str):
        super().__init__(f"connection to {addr} closed")


class RemotingCommandError(RemotingError):
    """A response with a code other than the one expected; carries RocketMQ's code and remark."""

    def __init__(self, code: int, remark: str | None, what: str = ""):
        from remoting.codes import ResponseCode, named
        self.code = code
        self.remark = remark or ""
        name = named(ResponseCode, code)
        label = name.name if hasattr(name, "name") else str(code)
        super().__init__(f"{what + ': ' if what else ''}{label} ({code}){': ' + self.remark.strip() if self.remark else ''}")


class HeaderError(RemotingError):
    """A request header misses a required field or has a value of the wrong type."""


@contextlib.contextmanager
def map_os_errors(addr: str):
    """The one place OS-level failures become RemotingErrors."""
    try:
        yield
    except (ConnectionRefusedError, OSError) as exc:
        if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
            raise RemotingTimeout(addr, 0, "connect") from None
        raise RemotingConnectError(addr, exc.strerror or str(exc)) from None
