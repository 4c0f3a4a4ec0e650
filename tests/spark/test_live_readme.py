"""The README's live-cluster Spark examples as a user runs them, against a name server and a broker
on 127.0.0.1: the data-source script started as `.venv/bin/python job.py` without an activated
venv, `spark export -n --interval` across an idle trigger, and `spark replay` into a new topic."""
from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")
pq = pytest.importorskip("pyarrow.parquet")

from mqtool.client.producer import OutMessage, Producer  # noqa: E402
from tests.conftest import json_lines, run_cli  # noqa: E402
from tests.servers import REPO, Process, die_with_parent, free_port, start_broker, wait_until  # noqa: E402

pytestmark = pytest.mark.slow


def _start_ns(tmp: Path) -> tuple[Process, str]:
    port = free_port()
    proc = Process(["namesrv", "start", "--listen", f"127.0.0.1:{port}", "--kv-config", str(tmp / "kv.json")],
                   "boot success")
    return proc, f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def ns(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readme")
    ns_proc, addr = _start_ns(tmp)
    broker = None
    try:
        broker, _ = start_broker(tmp, addr)
        yield addr
    finally:
        if broker is not None:
            broker.stop()
        ns_proc.stop()


def _send(ns: str, topic: str, n: int) -> None:
    async def go():
        producer = Producer(ns, "PID_README_TEST")
        try:
            await producer.send_batch([OutMessage(topic, f"m{i}".encode(), properties={"seq": str(i)})
                                       for i in range(n)])
        finally:
            await producer.close()
    asyncio.run(go())


def _readme_python_blocks() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def _python_without_mqtool(tmp: Path, env: dict) -> Path:
    """A directory whose `python3` is an interpreter with neither mqtool nor pyspark (a fresh venv)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "bare")], check=True, timeout=120)
    bare = tmp / "bare" / "bin"
    probe = subprocess.run([str(bare / "python3"), "-c", "import mqtool"], capture_output=True, text=True,
                           cwd=tmp, env=env)
    assert probe.returncode != 0 and "No module named 'mqtool'" in probe.stderr
    return bare


def test_the_readme_data_source_script_runs_as_written(ns, tmp_path):
    """The batch and streaming snippets as one script, run by the venv's python with PATH's python3
    lacking mqtool (no activated venv, no PYSPARK_PYTHON): the batch shows every message, the stream
    writes them and keeps running until Ctrl-C, and no pandas advisory reaches the terminal."""
    _send(ns, "Orders", 25)
    batch = next(b for b in _readme_python_blocks() if "register(spark)" in b)
    stream = next(b for b in _readme_python_blocks() if "readStream" in b)
    lake = tmp_path / "lake"
    script = (batch + stream).replace("h1:9876;h2:9876", ns).replace("h1:9876", ns).replace(
        "Orders,Pay*", "Orders").replace("/lake/", f"{lake}/").replace('"30 seconds"', '"1 second"')
    job = tmp_path / "job.py"
    job.write_text(script)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV", "SPARK_HOME")}
    env["PATH"] = f"{_python_without_mqtool(tmp_path, env)}:{os.environ.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.Popen([sys.executable, str(job)], cwd=tmp_path, stdout=o, stderr=e, env=env,
                                preexec_fn=die_with_parent())
    try:
        def written():
            assert proc.poll() is None, f"the script exited ({proc.returncode}):\n{err.read_text()[-3000:]}"
            return (lake / "orders" / "_spark_metadata" / "0").exists()
        wait_until("the stream's first micro-batch", written, timeout=240, every=0.2)
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    shown = out.read_text()
    assert re.search(r"\|\s*Orders\|\s*broker-a\|\s*25\|", shown), shown + err.read_text()[-3000:]
    stderr = err.read_text()
    assert "ModuleNotFoundError" not in stderr and "FutureWarning" not in stderr, stderr[-3000:]
    rows = pq.read_table(lake / "orders", columns=["properties"]).to_pylist()
    assert sorted(int(dict(r["properties"])["seq"]) for r in rows) == list(range(25))


def test_export_interval_counts_the_batch_that_follows_an_idle_trigger(ns, spark, tmp_path):
    """Idle triggers (nothing to read) report no batch; the batch that follows counts, once."""
    from mqtool.spark.livejobs import stream_export
    run_cli("topic", "create", "-n", ns, "-t", "Quiet", "-r", "2", "-w", "2", check=True)
    seen, sent, polls = [], [], []

    def stopping():
        """Send after a few idle triggers; stop once the batches reported every message."""
        polls.append(1)
        if not sent and len(polls) >= 10:
            assert not seen                                # idle triggers reported nothing
            _send(ns, "Quiet", 40)
            sent.append(40)
        return bool(sent) and sum(p["numInputRows"] for p in seen) >= 40
    result = stream_export(spark, {"namesrv": ns, "topics": "Quiet"}, str(tmp_path / "out"),
                           str(tmp_path / "ck"), [], 0.2, seen.append, stopping)
    assert sent and result["rows"] == 40 and result["batches"] == len(seen) >= 1
    assert sorted(p["batchId"] for p in seen) == list(range(len(seen)))
    assert len(result["offsets"]["Quiet"]) == 2 and sum(result["offsets"]["Quiet"].values()) == 40


def test_replay_into_a_topic_the_broker_creates_on_first_send(ns, spark, tmp_path):
    _send(ns, "ReplaySrc", 30)
    src = tmp_path / "src.parquet"
    from mqtool.spark import register
    register(spark)
    spark.read.format("rocketmq").option("namesrv", ns).option("topics", "ReplaySrc").load().write.parquet(str(src))
    proc = run_cli("spark", "replay", src, "-t", "BrandNewTopic", "-n", ns, "--master", "local[1]", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json_lines(proc.stdout)[-1]["rows"] == 30
    back = spark.read.format("rocketmq").option("namesrv", ns).option("topics", "BrandNewTopic").load().collect()
    assert sorted(int(r.properties["seq"]) for r in back) == list(range(30))


def test_replay_into_a_missing_topic_without_auto_create_is_one_line(tmp_path):
    import pyarrow as pa
    pq.write_table(pa.table({"body": [b"x"]}), tmp_path / "x.parquet")
    ns_proc, addr = _start_ns(tmp_path)
    broker = None
    try:
        broker, _ = start_broker(tmp_path, addr, "broker-strict", "autoCreateTopicEnable=false\n")
        wait_until("the broker in the route", lambda: "broker-strict" in run_cli(
            "cluster", "list", "-n", addr, "--json").stdout, timeout=30)
        proc = run_cli("spark", "replay", tmp_path / "x.parquet", "-t", "NotThere", "-n", addr)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "NotThere does not exist" in proc.stderr and "autoCreateTopicEnable" in proc.stderr, proc.stderr
    finally:
        if broker is not None:
            broker.stop()
        ns_proc.stop()
