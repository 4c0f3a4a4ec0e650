"""Every benchmark runs in quick mode, so none of them can rot (figures are not checked here)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parent.parent / "benchmarks"


@pytest.mark.slow
@pytest.mark.parametrize("script", ["store_scan.py", "store_append.py", "store_verify.py", "broker_produce.py",
                                    "ha_replication.py", "broker_capacity.py", "metrics_scrape.py", "soak.py",
                                    "consumer_drain.py", "spark_live.py", "crash_restart.py", "metadata_scale.py",
                                    "failover.py", "broker_inprocess.py",
                                    "store_open.py", "page_touch.py"])
def test_benchmark_quick_mode(script):
    proc = subprocess.run([sys.executable, str(BENCH / script), "--quick", "--json"], capture_output=True, text=True,
                          timeout=300, cwd=BENCH.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "skipped" in result or "baseline" in result
