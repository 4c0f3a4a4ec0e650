"""The same export submitted to a real standalone Spark cluster (master + worker) on 127.0.0.1."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")

from tests.conftest import json_lines, run_cli  # noqa: E402
from tests.servers import free_port  # noqa: E402

pytestmark = pytest.mark.slow
SPARK_HOME = Path(pyspark.__file__).parent


def start(args: list[str], log: Path, ready: str, timeout: float = 90) -> subprocess.Popen:
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
    out = open(log, "w")
    proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=out, stderr=subprocess.STDOUT,
                            env=env)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ready in log.read_text(errors="replace"):
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"{args[0]} did not start:\n{log.read_text(errors='replace')[-3000:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_export_on_a_standalone_cluster(basic_store, tmp_path):
    port, ui, wui = free_port(), free_port(), free_port()
    master = start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                    "--webui-port", str(ui)], tmp_path / "master.log", "I have been elected leader")
    try:
        worker = start(["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                        "--webui-port", str(wui), "--cores", "1", "--memory", "1g", "--work-dir",
                        str(tmp_path / "work")], tmp_path / "worker.log", "Successfully registered with master")
        try:
            out = tmp_path / "out"
            proc = run_cli("spark", "export", basic_store, "--out", out, "--master", f"spark://127.0.0.1:{port}",
                           "--include-system-topics", "--json", "--conf", "spark.cores.max=1")
            assert proc.returncode == 0, proc.stderr[-3000:]
            assert json_lines(proc.stdout)[-1]["messages"] == 2371
            import pyarrow.parquet as pq
            assert pq.read_table(out).num_rows == 2371
        finally:
            stop(worker)
    finally:
        stop(master)
