"""Every error the remoting package raises. OS and timeout errors become these in `map_os_errors`,
the one boundary where the socket world is translated, so callers catch RemotingError only."""
from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket

from mqtool_remoting.codes import ResponseCode, code_name


class RemotingError(Exception):
    """Base class of every remoting failure."""


class FrameError(RemotingError):
    """Bytes that are not a valid frame: the connection must be closed.

    `decoded` holds the commands that were complete before the bad bytes, so a transport can still
    dispatch them (they arrived intact) before it closes.
    """

    def __init__(self, message: str, decoded: list | None = None):
        super().__init__(message)
        self.decoded = decoded or []


class HeaderError(RemotingError):
    """A request header misses a required field or holds a value Java could not parse."""


class BodyError(RemotingError, ValueError):
    """A body (JSON, batch, register) that is not what its request says: bad bytes, bad JSON, wrong shape.

    A ValueError too, so handlers that answer ValueError with SYSTEM_ERROR keep doing so.
    """


class RemotingConnectError(RemotingError):
    def __init__(self, addr: str, reason: str):
        self.addr = addr
        super().__init__(f"cannot connect to {addr}: {reason}")


class RemotingListenError(RemotingError):
    def __init__(self, addr: str, reason: str):
        self.addr = addr
        super().__init__(f"cannot listen on {addr}: {reason}")


class RemotingTimeout(RemotingError):
    def __init__(self, addr: str, timeout_s: float, what: str = "request"):
        self.addr = addr
        self.timeout_s = timeout_s
        super().__init__(f"{what} to {addr} timed out after {timeout_s * 1000:.0f} ms")


class RemotingClosed(RemotingError):
    """The connection closed before the response arrived (or was already closed)."""

    def __init__(self, addr: str):
        self.addr = addr
        super().__init__(f"connection to {addr} closed")


class BrokerUnreachable(RemotingError):
    """A broker stopped answering a client mid-run: which, why, and what it had acknowledged."""

    def __init__(self, broker: str, addr: str, cause: RemotingError, acked: int, route_note: str = ""):
        self.broker, self.addr, self.cause, self.acked = broker, addr, cause, acked
        self.route_gone = bool(route_note)      # the name server dropped it too: nothing left to retry
        super().__init__(f"broker {broker} at {addr} stopped answering ({why_unanswered(cause)}) after {acked} "
                         f"{'message was' if acked == 1 else 'messages were'} acknowledged{route_note}")


def why_unanswered(exc: RemotingError) -> str:
    """A transport failure in a few words: connection refused, reset, timed out."""
    if isinstance(exc, RemotingConnectError):
        return str(exc).split(": ", 1)[-1]
    if isinstance(exc, RemotingClosed):
        return "connection reset: it closed before answering"
    if isinstance(exc, RemotingTimeout):
        return f"no answer in {exc.timeout_s * 1000:.0f} ms"
    return str(exc)


# Java's FAQUrl.suggestTodo appends "\nSee http://rocketmq.apache.org/docs/faq/ for further details." to
# many remarks (a missing route, a refused send): a hint for Java stack traces, a second line in ours.
_FAQ_HINT = re.compile(r"\s*See https?://\S+ for further details\.?\s*$")


def one_line_remark(remark: str) -> str:
    """A response's remark as one line: Java's FAQ link dropped, any other line breaks made spaces."""
    return " ".join(part.strip() for part in _FAQ_HINT.sub("", remark).splitlines() if part.strip())


class RemotingCommandError(RemotingError):
    """A response whose code is not the one the caller expected; carries RocketMQ's code and remark."""

    def __init__(self, code: int, remark: str | None, what: str = ""):
        self.code = code
        self.remark = remark or ""
        line = one_line_remark(self.remark)
        # the answer alone (for a caller whose line already says what was asked of whom)
        self.answer = f"{code_name(ResponseCode, code)} ({code}){': ' + line if line else ''}"
        super().__init__(f"{what + ': ' if what else ''}{self.answer}")


def _reason(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc})"
    if exc.errno:       # asyncio wraps bind errors in long text; the errno's own words are clearer
        return os.strerror(exc.errno).lower()
    return (exc.strerror or str(exc) or type(exc).__name__).lower()


@contextlib.contextmanager
def map_os_errors(addr: str, what: str = "connect", timeout_s: float = 0.0, listen: bool = False):
    """Turn the OS's exceptions inside the block into RemotingErrors naming `addr`."""
    try:
        yield
    except RemotingError:
        raise
    except (asyncio.TimeoutError, TimeoutError):
        raise RemotingTimeout(addr, timeout_s, what) from None
    except OSError as exc:
        if listen:
            raise RemotingListenError(addr, _reason(exc)) from None
        raise RemotingConnectError(addr, _reason(exc)) from None
