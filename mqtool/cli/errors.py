"""The one place where library errors become a one-line message and an exit code."""
from __future__ import annotations

import errno
import os
import sys

from rich.console import Console

from mqtool_store.errors import NotFoundError, StoreError, StoreLockedError, WrongKindError

err_console = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_PROBLEMS = 1   # bad data found, or an operation failed
EXIT_USAGE = 2      # bad arguments, missing path, wrong kind of file
EXIT_LOCKED = 3     # the store is in use by another process

# (exception type, exit code), most specific first.
_EXIT_CODES: list[tuple[type[BaseException], int]] = [
    (StoreLockedError, EXIT_LOCKED),
    (NotFoundError, EXIT_USAGE),
    (WrongKindError, EXIT_USAGE),
    (StoreError, EXIT_PROBLEMS),
]


def register(exc_type: type[BaseException], code: int) -> None:
    """Other packages' errors (remoting, client) join the table here."""
    _EXIT_CODES.insert(0, (exc_type, code))


class UsageError(Exception):
    """A bad combination of options, found after parsing."""


class StartError(Exception):
    """A server that could not start (a port in use, a store it cannot open): exit 1, like a failed operation."""


class NothingChanged(Exception):
    """A change a server took none of (every key one it does not have): exit 1, it did nothing."""


register(UsageError, EXIT_USAGE)
register(StartError, EXIT_PROBLEMS)
register(NothingChanged, EXIT_PROBLEMS)


# Errors of modules the CLI may never load (loading them costs start-up time): looked up only when
# their module is already imported, which it is whenever one of them was raised.
_LAZY_EXIT_CODES = [("mqtool_remoting.errors", "RemotingError", EXIT_PROBLEMS)]


def register_lazy(module: str, name: str, code: int) -> None:
    """Like `register`, for an error class whose module the CLI should not load just to know it."""
    _LAZY_EXIT_CODES.insert(0, (module, name, code))


def exit_code_for(exc: BaseException) -> int | None:
    for module, name, code in _LAZY_EXIT_CODES:
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, getattr(loaded, name)):
            return code
    for exc_type, code in _EXIT_CODES:
        if isinstance(exc, exc_type):
            return code
    return None


def _file_problem(exc: OSError) -> str:
    """One line for an OSError about a path: the path the user can act on, then why."""
    path = os.fsdecode(exc.filename)
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        # A store or config directory given as (or inside) a plain file: name that file, not the
        # path below it that could not be made.
        parent = path
        while parent and not os.path.exists(parent):
            parent = os.path.dirname(parent.rstrip(os.sep))
        if parent and not os.path.isdir(parent):
            return f"{parent} is a file, where a directory is needed"
    reason = (exc.strerror or type(exc).__name__).lower()
    return f"{path}: {reason}"


def fail(exc: BaseException) -> int:
    """Print one line for `exc` and return the exit code."""
    code = exit_code_for(exc)
    if code is None and isinstance(exc, OSError) and exc.filename is not None:
        err_console.print(f"mqtool: error: {_file_problem(exc)}", markup=False)
        return EXIT_PROBLEMS
    if code is None:
        if os.environ.get("MQTOOL_DEBUG"):
            raise exc
        err_console.print(f"mqtool: internal error: {type(exc).__name__}: {exc} "
                          "(set MQTOOL_DEBUG=1 to see the traceback)", markup=False)
        return EXIT_PROBLEMS
    err_console.print(f"mqtool: error: {exc}", markup=False)
    return code


def usage_line(exc) -> None:
    """A bad option value, an unknown option, a missing argument (click's UsageError and the like,
    which typer draws as a boxed panel with the usage above it): one line naming the command,
    the problem and where the help is. Typer exits with the error's code (2) after it."""
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "mqtool"
    message = " ".join(exc.format_message().split())
    err_console.print(f"{where}: error: {message} (see: {where} -h)", markup=False)


def quiet_broken_pipe() -> None:
    """Output piped into `head` closed early: exit quietly as other Unix tools do."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
