"""The dependency direction is fixed: mqtool -> remoting, store; never the other way."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent
# folder -> import names its modules must not use (the folders install as mqtool_store, mqtool_remoting)
FORBIDDEN = {"store": {"mqtool_remoting", "remoting", "mqtool"}, "remoting": {"mqtool_store", "store", "mqtool"}}


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


def test_the_cli_loads_no_heavy_part_until_a_command_needs_it():
    """`mqtool --help` and completions run often: no client, server, store engine or Spark at import."""
    import subprocess
    import sys
    code = ("import sys, mqtool.cli; heavy = ('mqtool.client', 'mqtool.broker', 'mqtool.namesrv.server', "
            "'mqtool.spark', 'mqtool.ha', 'mqtool_store.commitlog', 'numpy', 'construct', 'pyspark', 'asyncio'); "
            "print(sorted(m for m in sys.modules if m.startswith(heavy)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "[]", out


def test_a_command_runs_without_pydantic(tmp_path):
    """Every command pays its imports at start-up: typer 0.29 brought pydantic (~0.09 s) and is
    held below it in pyproject.toml; a command run (its arguments parsed and coerced) must not
    import pydantic again."""
    import subprocess
    import sys
    (tmp_path / "commitlog").mkdir()
    code = ("import sys, runpy; sys.argv = ['mqtool', 'store', 'stats', sys.argv[1], '--json']\n"
            "try:\n    runpy.run_module('mqtool', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core')), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert '"commitlog"' in proc.stdout                  # the command ran
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


def test_store_help_lists_every_kind():
    from mqtool.cli.store import KIND_NAMES
    from mqtool_store.layout import Kind
    assert KIND_NAMES == ", ".join(k.value for k in Kind)


def test_the_client_stands_on_the_protocol_not_on_the_servers():
    """mqtool.client imports remoting, the store's formats and mqtool.common, never a server or Spark."""
    for f in (REPO / "mqtool" / "client").rglob("*.py"):
        tree = ast.parse(f.read_text(), filename=str(f))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            for name in names:
                assert not name.startswith(("mqtool.broker", "mqtool.namesrv", "mqtool.spark", "mqtool.ha")), \
                    f"{f.relative_to(REPO)} imports {name}"


def test_top_level_help_loads_no_command_module():
    import subprocess
    import sys
    code = ("import sys; from mqtool.cli import build; build(light=True); "
            "print(sorted(m for m in sys.modules if m.startswith('mqtool.cli.') and m != 'mqtool.cli.errors'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "[]", out


def test_the_lazy_table_matches_the_commands():
    """The help texts `mqtool --help` shows without loading a module are the modules' own."""
    from mqtool.cli import COMMANDS, GROUPS, _load
    for name, (module, attribute, _panel, text) in GROUPS.items():
        assert _load(module, attribute).info.help == text, name
    for name, (module, attribute, _panel, text) in COMMANDS.items():
        assert _load(module, attribute).__doc__.strip().splitlines()[0] == text, name


PACKAGES = {"mqtool": "mqtool", "mqtool_store": "store", "mqtool_remoting": "remoting"}   # import name -> folder


def module_files(root: Path = REPO, packages: dict[str, str] = PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the packages (a package is its __init__)."""
    out = {}
    for name, folder in packages.items():
        for f in sorted((root / folder).rglob("*.py")):
            parts = list(f.relative_to(root / folder).with_suffix("").parts)
            out[".".join([name, *(parts[:-1] if parts[-1] == "__init__" else parts)])] = f
    return out


def _module_level(body: list[ast.stmt]):
    """The import statements a module runs when it is imported: at its top, in its classes and in
    if/try/with blocks there, not in functions, nor under `if TYPE_CHECKING:`."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _module_level(node.orelse)
        else:
            for child in ("body", "orelse", "finalbody", "handlers"):
                if isinstance(getattr(node, child, None), list):
                    yield from _module_level(getattr(node, child))


def import_graph(modules: dict[str, Path], module_level: bool = True) -> dict[str, set[str]]:
    """Module -> the modules (of `modules`) it imports: with `module_level`, only where importing it
    runs the import (and then also the packages above each, whose __init__ runs too); otherwise
    at any level, inside functions too (an import put off to a call still ties the two together)."""
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        nodes = _module_level(tree.body) if module_level else ast.walk(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                wanted = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:                                  # from . import x, from .codes import y
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                # from mqtool.client import clientcalls: the module itself when it is one
                wanted = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in wanted:
                while target and target not in modules:        # a name inside a module: the module
                    target = target.rpartition(".")[0]
                while target:
                    if target in modules:
                        targets.add(target)
                    if not module_level:
                        break
                    target = target.rpartition(".")[0]
        graph[name] = targets - {name}
    return graph


def client_import_graph() -> dict[str, set[str]]:
    """mqtool.client module -> the mqtool.client modules it imports, at the top or inside a function."""
    modules = {n: f for n, f in module_files().items() if n.startswith("mqtool.client.")}
    return {n.rpartition(".")[2]: {t.rpartition(".")[2] for t in ts}
            for n, ts in import_graph(modules, module_level=False).items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}              # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None
    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_find_cycle_finds_one_and_only_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_client_modules_import_each_other_without_a_circle():
    """Issue 31: base -> trace -> producer -> consumer -> clientcalls -> base was a circle. The record
    decoder has a module of its own, and tracing is a layer the producer and consumer are given."""
    graph = client_import_graph()
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
    assert graph["base"] == set(), graph["base"]            # everything stands on it
    assert graph["trace"] == set(), graph["trace"]          # given a sender, it imports no client
    assert graph["records"] == set(), graph["records"]


def test_no_module_imports_itself_through_others():
    """Issue 44.11: no import circle among mqtool's, mqtool_store's and mqtool_remoting's modules
    where importing a module runs the import (imports inside functions may close a circle: they
    run after every module involved is loaded)."""
    graph = import_graph(module_files())
    assert len(graph) > 150 and graph["mqtool_store.verify"] >= {"mqtool_store.checkpoint", "mqtool_store"}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_the_cycle_check_sees_a_circle(tmp_path):
    """A package whose modules import each other at their tops (relatively, through the package
    and through a class body) fails the check; the same imports inside functions do not."""
    pkg = tmp_path / "p"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import a\n")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("class B:\n    from .. import c\n")
    (pkg / "c.py").write_text("import p.a\n")
    modules = module_files(tmp_path, {"p": "p"})
    assert find_cycle(import_graph(modules)) == ["p.a", "p.sub.b", "p.c", "p.a"]
    (pkg / "c.py").write_text("def later():\n    import p.a\n")
    assert find_cycle(import_graph(modules)) is None
    assert find_cycle(import_graph(modules, module_level=False)) == ["p.a", "p.sub.b", "p.c", "p.a"]


def test_the_spark_modules_import_each_other_without_a_circle():
    """Issue 44.11: spark.columns and spark.export imported each other (reference_batches one way,
    Timer and fast_batches the other), if only inside functions. The reference decoder has a module
    of its own; export stands on columns, columns on neither export nor the jobs."""
    modules = {n: f for n, f in module_files().items() if n.startswith("mqtool.spark.")}
    graph = import_graph(modules, module_level=False)
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
    assert "mqtool.spark.export" not in graph["mqtool.spark.columns"]
