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
