"""<store-dir>/cluster.json: what a running `mqtool cluster start` supervises, for `mqtool cluster status`.

Rewritten (whole, then renamed into place) when the cluster is up, after every restart and at the stop.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

STATE_FILE = "cluster.json"


class ClusterStopError(Exception):
    """`cluster stop` found nothing to stop, or the cluster did not stop cleanly."""


def state_path(store_dir: Path) -> Path:
    return Path(store_dir).expanduser().absolute() / STATE_FILE


def write_state(store_dir: Path, state: dict) -> None:
    path = state_path(store_dir)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_state(store_dir: Path) -> dict | None:
    """The state file, or None when there is none; ValueError when it is not one."""
    path = state_path(store_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a cluster state file ({exc})") from None
    if not isinstance(state, dict) or not isinstance(state.get("processes"), list):
        raise ValueError(f"{path}: not a cluster state file (no process list)")
    return state


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:         # alive, someone else's
        return True
    return True


def pid_running(pid: int | None) -> bool:
    """pid_alive, and not a zombie its parent has yet to reap (it has ended)."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True             # no /proc here: kill(pid, 0) is all there is


def runs_mqtool(pid: int, *words: str) -> bool:
    """Whether process `pid` runs `mqtool` with each of `words` among its arguments (a state file's
    pid may since have gone to another process); True where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode("utf-8", "replace").split("\0")
    except OSError:
        return True
    return any("mqtool" in a for a in args) and all(w in args for w in words)


def is_supervisor(pid: int) -> bool:
    return runs_mqtool(pid, "cluster", "start")
