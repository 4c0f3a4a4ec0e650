"""The dependency direction is fixed: mqtool -> remoting, store; never the other way."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent
FORBIDDEN = {"store": {"remoting", "mqtool"}, "remoting": {"store", "mqtool"}}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_library_packages_stay_independent(package):
    files = list((REPO / package).rglob("*.py"))
    if not files:
        pytest.skip(f"{package}/ has no modules yet")
    for f in files:
        bad = imported_packages(f) & FORBIDDEN[package]
        assert not bad, f"{f.relative_to(REPO)} imports {bad}"


def test_store_has_no_sockets_or_asyncio():
    for f in (REPO / "store").rglob("*.py"):
        assert not imported_packages(f) & {"socket", "asyncio", "typer", "rich"}, f
