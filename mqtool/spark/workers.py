"""Which interpreter a user's SparkSession runs mqtool's Python workers with.

PySpark fixes the workers' interpreter when the SparkContext starts: `SparkContext.pythonExec` is
PYSPARK_PYTHON, or `python3` from PATH (spark-submit sets PYSPARK_PYTHON from
`spark.pyspark.python`; a plain `python job.py` does not). Every Python function, a data source
included, carries the value it had when it was registered. So `.venv/bin/python job.py` without an
activated venv started workers from a `python3` that has no mqtool. `register(spark)` calls
`use_driver_python` first: a local master (its workers run on this machine) gets this interpreter.
"""
from __future__ import annotations

import os
import sys

PYTHON_CONF = "spark.pyspark.python"
PYTHON_ENV = "PYSPARK_PYTHON"


def cluster_hint(master: str) -> str:
    return (f"mqtool: the Spark master {master} starts Python workers with python3 from each executor's PATH; "
            f"if that interpreter lacks mqtool, set {PYTHON_CONF} (or {PYTHON_ENV}) to one that has it")


def use_driver_python(spark, warn=None) -> str | None:
    """The interpreter this session's Python workers will run, set to sys.executable on a local
    master when neither PYSPARK_PYTHON nor spark.pyspark.python names one (a `spark.pyspark.python`
    given to the builder is applied as spark-submit applies it). On a cluster master nothing is
    changed and `warn` (stderr by default) gets one line naming the setting. None for a session
    without a SparkContext (Spark Connect: the server picks its workers' interpreter)."""
    try:
        sc = spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect raises its own error type for sparkContext
        return None
    if os.environ.get(PYTHON_ENV):
        return sc.pythonExec
    chosen = sc.getConf().get(PYTHON_CONF)
    if chosen:
        sc.pythonExec = chosen
    elif sc.master.startswith("local"):
        sc.pythonExec = sys.executable
    else:
        (warn or _stderr)(cluster_hint(sc.master))
    return sc.pythonExec


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
