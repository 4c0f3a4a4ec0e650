"""A real `mqtool namesrv` and `mqtool broker` on 127.0.0.1, and a runner for C++ client scenarios."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.servers import cluster, free_port, start_broker  # noqa: F401 - fixtures shared with the CLI tests

REPO = Path(__file__).parents[2]

try:
    import rocketmq.client  # noqa: F401
    HAVE_CPP = True
except Exception as exc:  # noqa: BLE001 - the wheel is x86_64-only; its library may fail to load
    HAVE_CPP = False
    CPP_REASON = f"the official C++ client (rocketmq==0.4.4) cannot be loaded here: {exc}"


def run_cpp(scenario: str, namesrv: str, args: dict, timeout: float = 60) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "tests.interop.cpp_client", scenario, namesrv, json.dumps(args)],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def start_cpp(scenario: str, namesrv: str, args: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.interop.cpp_client", scenario, namesrv, json.dumps(args)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_cpp(proc: subprocess.Popen, timeout: float = 60) -> list[dict]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-2000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]
