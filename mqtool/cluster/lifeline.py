"""Child processes that die with their parent, even when the parent is killed with SIGKILL.

Linux's PR_SET_PDEATHSIG, set in the child between fork and exec (exec keeps it): the kernel sends
the signal when the thread that started the child ends, so start children from a thread that lives
as long as they should (the main thread). Elsewhere nothing is set and `die_with_parent` is None.
The cluster supervisor starts its servers this way; so do the tests and benchmarks (issue 44).
"""
from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def _libc_prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up once, here in the parent: between fork and exec the child only calls it.
_PRCTL = _libc_prctl()


def die_with_parent(sig: int = signal.SIGKILL):
    """A `preexec_fn` for subprocess.Popen: the child gets `sig` when its parent dies. A parent
    that died before the child set this (the child then belongs to another process) ends the
    child before it execs. None where it cannot be set."""
    if _PRCTL is None:
        return None
    parent = os.getpid()

    def set_in_child() -> None:
        _PRCTL(PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent:
            os._exit(1)         # not a signal: the parent's handler for it would be ours until exec
    return set_in_child
