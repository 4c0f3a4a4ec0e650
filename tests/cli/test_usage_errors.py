"""A bad option value, an unknown option or a missing argument is one line on stderr naming the
command, the problem and its help, with exit code 2 (typer draws a boxed panel by default)."""
from __future__ import annotations

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize("args, says", [
    (["send", "-t", "T", "--count", "abc"], "mqtool send: error: Invalid value for '--count': 'abc'"),
    (["send", "--nope"], "mqtool send: error: No such option: --nope"),
    (["store", "dump"], "mqtool store dump: error: Missing argument 'path'"),
])
def test_a_usage_error_is_one_line_and_exit_2(args, says):
    proc = run_cli(*args)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(says), proc.stderr
    assert lines[0].endswith(f"(see: mqtool {' '.join(a for a in args if a in ('send', 'store', 'dump'))} -h)")
    assert "╭" not in proc.stderr and proc.stdout == ""
