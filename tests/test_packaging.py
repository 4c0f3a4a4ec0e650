"""How the packages are named and installed: nothing in the current directory can shadow them (issue 10)."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent
FIXTURE = REPO / "tests" / "data" / "rocketmq-4.9.8" / "basic.tar.gz"


def test_every_package_folder_is_installed():
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {v: k for k, v in conf["package-dir"].items()}
    found = set()
    for top in ("mqtool", "store", "remoting"):
        for init in (REPO / top).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO).parts
            found.add(".".join((mapped.get(parts[0], parts[0]),) + parts[1:]))
    assert found == set(conf["packages"])


def user_dir(tmp_path: Path) -> Path:
    """A directory like ~ where RocketMQ keeps its store: `store/` (and a `remoting/`) beside the user."""
    import tarfile
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    (tmp_path / "remoting").mkdir()
    return tmp_path


def test_the_cli_runs_from_a_directory_holding_store(tmp_path):
    cwd = user_dir(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "mqtool", "store", "stats", "store", "--json"], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '"TopicA"' in proc.stdout
    proc = subprocess.run([sys.executable, "-c", "import mqtool_store.commitlog as c, mqtool_remoting.codes as r; "
                           "print(c.__file__); print(r.__file__)"], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0 and str(cwd) not in proc.stdout


@pytest.mark.slow
def test_spark_export_runs_from_a_directory_holding_store(tmp_path):
    pytest.importorskip("pyspark")
    cwd = user_dir(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "mqtool", "spark", "export", "store", "--out", "out", "--master",
                           "local[1]", "--json"], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (cwd / "out").is_dir() and any((cwd / "out").rglob("*.parquet"))
