"""Pyflakes' checks (ruff's F rules) over the tree: an undefined name, an unused import or a
redefinition fails here instead of in the one code path that reaches it."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_no_undefined_names_or_unused_imports():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "F", "--no-cache", "--quiet",
                           "mqtool", "store", "remoting", "benchmarks", "tests"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


def test_no_asyncio_wait_for():
    """asyncio.wait_for can swallow a cancellation on Python 3.11 (when what it waits for finishes
    in the same loop turn as the cancel): a Ctrl-C that asyncio.run turned into a cancel was lost
    and `--watch` kept running. `async with asyncio.timeout(...)` never loses one."""
    offenders = [f"{p.relative_to(REPO)}:{n}" for d in ("mqtool", "store", "remoting")
                 for p in sorted((REPO / d).rglob("*.py"))
                 for n, line in enumerate(p.read_text().splitlines(), 1) if "wait_for(" in line]
    assert not offenders, offenders
