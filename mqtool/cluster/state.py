"""<store-dir>/cluster.json: what a running `mqtool cluster start` supervises, for `mqtool cluster status`.

Rewritten (whole, then renamed into place) when the cluster is up, after every restart and at the stop.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

STATE_FILE = "cluster.json"


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
