"""register()'s choice of the Python workers' interpreter, on a stand-in SparkContext (pure), and
the pandas advisory PySpark prints, kept out of a script that imports mqtool.spark."""
from __future__ import annotations

import subprocess
import sys

import pytest

from mqtool.spark.workers import use_driver_python


class Context:
    def __init__(self, master: str, conf: dict | None = None):
        self.master, self.conf, self.pythonExec = master, conf or {}, "python3"   # PySpark's own default

    def getConf(self):
        return self.conf


class Session:
    def __init__(self, sc):
        self.sparkContext = sc


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)


def choose(master: str, conf: dict | None = None):
    sc, lines = Context(master, conf), []
    return use_driver_python(Session(sc), lines.append), sc.pythonExec, lines


@pytest.mark.parametrize("master", ["local[*]", "local", "local[2,4]", "local-cluster[2,1,1024]"])
def test_a_local_master_runs_the_drivers_interpreter(master):
    assert choose(master) == (sys.executable, sys.executable, [])


def test_a_cluster_master_is_left_alone_with_one_line_naming_the_setting():
    chosen, exec_, lines = choose("spark://master:7077")
    assert chosen == exec_ == "python3"
    assert len(lines) == 1 and "spark.pyspark.python" in lines[0] and "spark://master:7077" in lines[0]


def test_what_the_user_set_wins(monkeypatch):
    assert choose("local[*]", {"spark.pyspark.python": "/opt/venv/bin/python"})[:2] == ("/opt/venv/bin/python",) * 2
    assert choose("spark://m:7077", {"spark.pyspark.python": "/opt/venv/bin/python"})[1:] == (
        "/opt/venv/bin/python", [])
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3.11")
    sc = Context("spark://m:7077")
    sc.pythonExec = "/usr/bin/python3.11"            # PySpark read it from the environment
    lines = []
    assert use_driver_python(Session(sc), lines.append) == "/usr/bin/python3.11" and lines == []
    assert choose("local[*]")[1] == "python3"        # the environment's choice is kept as PySpark made it


def test_a_session_without_a_context_is_left_alone():
    class Connect:
        @property
        def sparkContext(self):
            raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported in Spark Connect")
    assert use_driver_python(Connect(), print) is None


ADVISORY = """
import pandas
pandas.__version__ = "3.0.0"          # what PySpark warns about, whichever pandas is installed here
{imports}
from pyspark.sql.pandas.utils import require_minimum_pandas_version
require_minimum_pandas_version()
print("checked")
"""


def test_pysparks_pandas_advisory_does_not_reach_a_script_that_imports_mqtool_spark():
    pytest.importorskip("pyspark")

    def run(imports):
        return subprocess.run([sys.executable, "-c", ADVISORY.format(imports=imports)], capture_output=True,
                              text=True, timeout=60)
    bare = run("")
    assert bare.returncode == 0 and "FutureWarning" in bare.stderr      # PySpark does warn without mqtool
    quiet = run("from mqtool.spark import register")
    assert quiet.returncode == 0 and quiet.stdout == "checked\n" and quiet.stderr == "", quiet.stderr
