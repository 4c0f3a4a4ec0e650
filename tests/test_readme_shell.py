"""The README's shell examples run as written after its install line (issue 31: the tour called
`mqtool` and `python` from a venv the install line never activates)."""
from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_bare_mqtool_and_python_lines_come_after_the_readme_says_to_activate_the_venv():
    activate = README.find(". .venv/bin/activate")
    assert activate != -1, "the README never says to activate the venv its install line makes"
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    bare = [ln for b in blocks for ln in b.splitlines() if re.match(r"\s*(mqtool|python) ", ln)]
    assert bare, "no example found: the pattern is stale"
    first = min(README.find(ln) for ln in bare)
    assert activate < first, f"{bare[0]!r} comes before the README says to activate the venv"
