"""The venv with the official RocketMQ 5 Python client (PyPI rocketmq-python-client 5.1.2), made once
and kept beside the repository's .venv (else under the temp dir). Its package is named `rocketmq`,
as the C++ client's in the main venv, so it lives apart and its scripts run as subprocesses.
Used by tests/proxy's fixture and benchmarks/grpc_send.py."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).parents[2]
CLIENT = "rocketmq-python-client==5.1.2"


def venv_dir() -> Path:
    base = REPO / ".venv" if (REPO / ".venv").is_dir() else Path(os.environ.get("TMPDIR", "/tmp"))
    return base / "rmq5-python-client-5.1.2"


INSTALL_TIMEOUT_S = 240       # within a test's 300 s (pytest-timeout): a slower index is a skip, not a failure
RETRY_AFTER_S = 3600          # a failed install is not tried again in the same hour (one run's tests)


def ensure() -> tuple[str | None, str]:
    """(the venv's python, "") once the client is installed there, else (None, why not)."""
    venv = venv_dir()
    python, marker, failed = venv / "bin" / "python", venv / "installed.ok", venv.with_name(venv.name + ".failed")
    if marker.exists():
        return str(python), ""
    if failed.exists() and time.time() - failed.stat().st_mtime < RETRY_AFTER_S:
        return None, failed.read_text()
    why = _install(venv, python)
    if why:
        failed.write_text(why)
        return None, why
    failed.unlink(missing_ok=True)
    marker.write_text(CLIENT)
    return str(python), ""


def _install(venv: Path, python: Path) -> str:
    made = subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a venv: {made.stderr.strip()[-300:]}"
    try:
        proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", CLIENT],
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"pip install {CLIENT} took more than {INSTALL_TIMEOUT_S} s"
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return f"pip install {CLIENT} failed: {lines[-1] if lines else proc.returncode}"
    return ""
