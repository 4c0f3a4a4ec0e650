"""The store's threads named for the OS as well (`top -H`, `ps -L`, /proc/PID/task/*/comm), as a
Java broker's threads are: Python names a thread for itself only."""
from __future__ import annotations

import threading

COMM_MAX = 15          # the kernel keeps 15 bytes of a thread's name


def name_this_thread(name: str) -> None:
    """Give the calling thread `name` (cut to COMM_MAX bytes) in /proc; where that cannot be
    done (not Linux, no /proc) the thread keeps the process's name."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "wb") as f:
            f.write(name.encode("ascii", "replace")[:COMM_MAX])
    except OSError:
        pass


def named(target, name: str):
    """`target` wrapped to name its thread first (threading.Thread(target=named(f, name)))."""
    def run(*args, **kwargs):
        name_this_thread(name)
        return target(*args, **kwargs)
    return run
