"""The venv with the official RocketMQ 5 Python client (PyPI rocketmq-python-client 5.1.2), made once
and kept beside the repository's .venv (else under the temp dir). Its package is named `rocketmq`,
as the C++ client's in the main venv, so it lives apart and its scripts run as subprocesses.
Used by tests/proxy's fixture and benchmarks/grpc_send.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[2]
CLIENT = "rocketmq-python-client==5.1.2"


def venv_dir() -> Path:
    base = REPO / ".venv" if (REPO / ".venv").is_dir() else Path(os.environ.get("TMPDIR", "/tmp"))
    return base / "rmq5-python-client-5.1.2"


def ensure() -> tuple[str | None, str]:
    """(the venv's python, "") once the client is installed there, else (None, why not)."""
    venv = venv_dir()
    python, marker = venv / "bin" / "python", venv / "installed.ok"
    if marker.exists():
        return str(python), ""
    made = subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        return None, f"cannot make a venv: {made.stderr.strip()[-300:]}"
    try:
        proc = subprocess.run([str(python), "-m", "pip", "install", "-q", CLIENT], capture_output=True, text=True,
                              timeout=900)
    except subprocess.TimeoutExpired:
        return None, f"pip install {CLIENT} took more than 900 s"
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return None, f"pip install {CLIENT} failed: {lines[-1] if lines else proc.returncode}"
    marker.write_text(CLIENT)
    return str(python), ""
