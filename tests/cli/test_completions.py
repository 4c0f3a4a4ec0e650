"""Shell completion scripts: committed copies match what the CLI generates, and bash completes."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

COMPLETIONS = Path(__file__).parents[2] / "completions"
BIN = Path(sys.executable).parent


def generate(shell: str) -> str:
    env = dict(os.environ, _MQTOOL_COMPLETE=f"source_{shell}")
    return subprocess.run([sys.executable, "-m", "mqtool"], env=env, capture_output=True, text=True,
                          check=True, timeout=60).stdout


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_are_fresh(shell):
    committed = (COMPLETIONS / f"mqtool.{shell}").read_text()
    assert committed == generate(shell), (
        f"completions/mqtool.{shell} is stale: regenerate with "
        f"_MQTOOL_COMPLETE=source_{shell} mqtool > completions/mqtool.{shell}")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_a_subcommand():
    if not (BIN / "mqtool").exists():
        pytest.skip("the mqtool console script is not installed in this environment")
    script = f"""
source {COMPLETIONS / 'mqtool.bash'}
COMP_WORDS=(mqtool store ver)
COMP_CWORD=2
_mqtool_completion mqtool
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "verify" in out.stdout.split()
