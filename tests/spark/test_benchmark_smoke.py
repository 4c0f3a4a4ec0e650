"""benchmarks/spark_export.py in quick mode, so the script cannot rot."""
from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import REPO
from tests.test_benchmarks import run_quick     # its own process group, killed whole at the timeout

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")
pytestmark = pytest.mark.slow


def test_spark_export_benchmark_quick_mode():
    proc = run_quick([sys.executable, str(REPO / "benchmarks" / "spark_export.py"), "--quick", "--json"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["data"]["records"] > 100_000 and result["machine"]["cores"]
    assert result["baseline"]["single_process_pyarrow"]["msg_per_s"] > 0
    assert result["baseline"]["single_process_pyarrow"]["phases_seconds"]["parquet"] > 0
    for run in ("local[1]", "local[2]"):
        assert result["spark"][run]["MBps"] > 0 and result["spark"][run]["splits"] >= 4
        assert result["spark"][run]["vs_single_process"] > 0
        assert result["spark"][run]["stages_seconds"]["tasks_seconds"] > 0 and result["spark"][run]["cpu_seconds"]
