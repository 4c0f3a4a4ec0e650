"""The same export submitted to a real standalone Spark cluster (master + worker) on 127.0.0.1.

Each started in the foreground with pyspark's own `bin/spark-class` (which execs the JVM), as a child
that dies with this process even when it is killed (a daemon started by `sbin/spark-daemon.sh`
outlived a killed pytest); stopped by their PIDs.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")

from mqtool.cluster.lifeline import die_with_parent  # noqa: E402
from tests.conftest import json_lines, run_cli  # noqa: E402
from tests.servers import free_port  # noqa: E402

pytestmark = pytest.mark.slow
SPARK_HOME = Path(pyspark.__file__).parent
MASTER, WORKER = "org.apache.spark.deploy.master.Master", "org.apache.spark.deploy.worker.Worker"


class Daemons:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_PID_DIR=str(tmp / "pids"), SPARK_LOG_DIR=str(tmp / "logs"),
                        SPARK_IDENT_STRING="mqtooltest", SPARK_CONF_DIR=str(tmp / "conf"))
        (tmp / "conf").mkdir()
        self.pids: list[int] = []

    def start(self, cls: str, args: list[str], ready: str, timeout: float = 120) -> None:
        log = self.tmp / f"{cls}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), cls, *args], env=self.env,
                                    stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent())
        pid = proc.pid
        logs = lambda: log.read_text(errors="replace")  # noqa: E731
        self.pids.append(pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready in logs():
                return
            if not _alive(pid):
                break
            time.sleep(0.2)
        raise AssertionError(f"{cls} did not start:\n{logs()[-3000:]}")

    def stop(self) -> None:
        for pid in reversed(self.pids):
            if not _alive(pid):
                continue
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)     # our own child (foreground mode)
        if done:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))


def start_master_and_worker(cluster: Daemons, tmp_path: Path) -> int:
    """A master and one worker (1 core, work dir tmp_path/work) on 127.0.0.1; the master's port."""
    port, ui, wui = free_port(), free_port(), free_port()
    cluster.start(MASTER, ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
                  "I have been elected leader")
    cluster.start(WORKER, [f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--webui-port", str(wui),
                           "--cores", "1", "--memory", "1g", "--work-dir", str(tmp_path / "work")],
                  "Successfully registered with master")
    return port


def test_export_on_a_standalone_cluster(basic_store, tmp_path):
    cluster = Daemons(tmp_path)
    try:
        port = start_master_and_worker(cluster, tmp_path)
        out = tmp_path / "out"
        proc = run_cli("spark", "export", basic_store, "--out", out, "--master", f"spark://127.0.0.1:{port}",
                       "--include-system-topics", "--json", "--conf", "spark.cores.max=1",
                       "--conf", "spark.executor.memory=512m")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert json_lines(proc.stdout)[-1]["messages"] == 2371
        import pyarrow.parquet as pq
        assert pq.read_table(out).num_rows == 2371
        # The tasks really ran on the worker's executor, not in the driver.
        assert list((tmp_path / "work").glob("app-*/*/stderr"))
    finally:
        cluster.stop()
    assert not any(_alive(p) for p in cluster.pids)
