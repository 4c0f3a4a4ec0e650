"""The official RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8: @grpc/grpc-js over Node's
own HTTP/2, which Huffman-codes its headers, unlike grpcio), installed once beside the repository's .venv
(else under the temp dir). Used by tests/proxy/test_node_client.py; a machine without node and npm, or
without the npm registry, skips."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).parents[2]
PACKAGE = "rocketmq-client-nodejs@1.0.8"
INSTALL_TIMEOUT_S = 240
RETRY_AFTER_S = 3600          # a failed install is not tried again in the same hour (one run's tests)


def install_dir() -> Path:
    base = REPO / ".venv" if (REPO / ".venv").is_dir() else Path(os.environ.get("TMPDIR", "/tmp"))
    return base / "rmq5-node-client-1.0.8"


def ensure() -> tuple[Path | None, str]:
    """(the folder holding node_modules, "") once the client is installed, else (None, why not)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return None, "node and npm are not installed"
    where = install_dir()
    marker, failed = where / "installed.ok", where.with_name(where.name + ".failed")
    if marker.exists():
        return where, ""
    if failed.exists() and time.time() - failed.stat().st_mtime < RETRY_AFTER_S:
        return None, failed.read_text()
    where.mkdir(parents=True, exist_ok=True)
    (where / "package.json").write_text('{"name": "mqtool-node-test", "private": true}\n')
    try:
        proc = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", PACKAGE], cwd=where,
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        why = "" if proc.returncode == 0 else f"npm install {PACKAGE} failed: {proc.stderr.strip()[-300:]}"
    except subprocess.TimeoutExpired:
        why = f"npm install {PACKAGE} took more than {INSTALL_TIMEOUT_S} s"
    if why:
        failed.write_text(why)
        return None, why
    failed.unlink(missing_ok=True)
    marker.write_text(PACKAGE)
    return where, ""
