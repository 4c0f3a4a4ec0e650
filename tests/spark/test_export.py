"""`spark export` with real Spark in local mode, on the broker's fixture stores and generated ones."""
from __future__ import annotations

import base64
import datetime as dt
import json
import os
import sys
import threading
from io import StringIO

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")
pq = pytest.importorskip("pyarrow.parquet")

from mqtool.spark.export import run_export  # noqa: E402
from mqtool.spark.selection import Selection, parse_queue_offsets  # noqa: E402
from mqtool.spark.source import list_commitlog, local_plan  # noqa: E402
from tests.conftest import REPO, json_lines, run_cli  # noqa: E402
from tests.spark.genstore import DAY_MS, write_store  # noqa: E402

pytestmark = pytest.mark.slow


def damage_record(path, near: int) -> int:
    """Give the first record at or after `near` an impossible TOTALSIZE; returns its position."""
    from mqtool_store.logscan import walk
    data = bytearray(path.read_bytes())
    pos = next(p for p in walk(data)[0] if p >= near)
    data[pos:pos + 4] = (5).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    return pos


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen") / "store"
    return root, write_store(root)


def test_fixture_every_message_once_with_its_columns(spark, basic_store, basic_truth, tmp_path):
    out = str(tmp_path / "all")
    res = run_export(spark, basic_store, out, Selection(include_system=True), split_bytes=256 * 1024)
    assert res["messages"] == 2371 and res["splits"] > 3 and res["corrupt"] == []
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 2371 and len({r["commitlog_offset"] for r in rows}) == 2371
    truth = {t["commit_log_offset"]: t for t in basic_truth}
    for r in rows:
        t = truth[r["commitlog_offset"]]
        raw = t["raw"]
        assert (r["topic"], r["queue_id"], r["queue_offset"], r["store_size"], r["store_timestamp"]) == (
            t["topic"], t["queue_id"], t["queue_offset"], t["store_size"], t["store_timestamp"])
        expected = base64.b64decode(raw["body_b64"]) if raw.get("body_truncated_by_client") else t["body"].encode()
        assert r["body"] == expected and r["crc_ok"] and r["body_crc"] == raw["body_crc"]
        assert (r["sys_flag"], r["flag"], r["born_host"], r["store_host"]) == (
            raw["sys_flag"], raw["flag"], raw["born_host"], raw["store_host"])
        assert dict(r["properties"]) == t["properties"] and " ".join(r["keys"]) == t["keys"]
        assert r["tags"] == t["properties"].get("TAGS") and r["uniq_key"] == t["properties"].get("UNIQ_KEY")
        assert r["msg_id"].endswith(f"{r['commitlog_offset']:016X}") and len(r["msg_id"]) == 32
        assert r["store_date"] == dt.datetime.fromtimestamp(t["store_timestamp"] / 1000, dt.timezone.utc).date()
    assert sum(1 for r in rows if r["sys_flag"] & 1) == 21   # TopicC: 20 zlib sends + the batch, inflated above
    # Spark reads it back too, with the declared types.
    back = spark.read.parquet(out)
    assert back.count() == 2371 and dict(back.dtypes)["properties"] == "map<string,string>"


def test_generated_store_columns_and_system_topics(spark, gen, tmp_path):
    root, truth = gen
    res = run_export(spark, root, str(tmp_path / "g"), split_bytes=8192)
    user = [t for t in truth if t["topic"] in ("Orders", "Logs")]
    assert res["per_topic"].keys() == {"Orders", "Logs"} and res["messages"] == len(user)
    rows = {r["commitlog_offset"]: r for r in pq.read_table(tmp_path / "g").to_pylist()}
    assert rows.keys() == {t["commitlog_offset"] for t in user}
    for t in user:
        r = rows[t["commitlog_offset"]]
        assert r["body"] == t["body"]                                 # inflated when zlib-compressed
        assert r["sys_flag"] & ~0x30 == t["sys_flag"] and r["crc_ok"] == (not t["bad_crc"])   # 0x30: IPv6 hosts
        assert r["born_host"] == ("[2001:db8::1]:40000" if t["born_host"] else "127.0.0.1:0")
        assert r["keys"] == [f"k-{t['properties']['n']}", "common"]
        assert r["store_date"] == dt.date(1970, 1, 1) + dt.timedelta(days=t["store_timestamp"] // DAY_MS)
    with_sys = run_export(spark, root, str(tmp_path / "s"), Selection(include_system=True), split_bytes=8192)
    assert with_sys["messages"] == len(truth) and {"%DLQ%g1", "RMQ_SYS_TRACE_TOPIC"} <= with_sys["per_topic"].keys()


def test_filters_partitioning_and_modes(spark, gen, tmp_path):
    root, truth = gen
    out = str(tmp_path / "p")
    since, until = truth[100]["store_timestamp"], truth[299]["store_timestamp"]
    sel = Selection(("Ord*",), since, until)
    res = run_export(spark, root, out, sel, partition_by=["topic", "store_date"])
    expected = [t for t in truth[100:300] if t["topic"] == "Orders"]
    assert res["messages"] == len(expected) == pq.read_table(out).num_rows
    days = {dt.date(1970, 1, 1) + dt.timedelta(days=t["store_timestamp"] // DAY_MS) for t in expected}
    assert len(days) >= 2
    assert sorted(p.name for p in (tmp_path / "p" / "topic=Orders").iterdir()) == sorted(f"store_date={d}" for d in days)
    with pytest.raises(Exception, match="already exists"):
        run_export(spark, root, out, sel, partition_by=["topic", "store_date"])
    run_export(spark, root, out, Selection(("Logs",)), partition_by=["topic", "store_date"], mode="append")
    table = pq.read_table(out)
    logs = sum(1 for t in truth if t["topic"] == "Logs")
    assert table.num_rows == len(expected) + logs
    run_export(spark, root, out, Selection(("Logs",)), partition_by=["topic", "store_date"], mode="overwrite")
    assert pq.read_table(out).num_rows == logs
    # queue-offset ranges: only listed topics and queues, [from, to)
    qo = parse_queue_offsets('{"Orders": {"1": [2, 5], "3": [[0, 1], [10, null]]}}')
    res = run_export(spark, root, str(tmp_path / "q"), Selection(queue_offsets=qo))
    got = sorted((r["queue_id"], r["queue_offset"]) for r in pq.read_table(tmp_path / "q").to_pylist())
    want = sorted((t["queue_id"], t["queue_offset"]) for t in truth if t["topic"] == "Orders" and t["dispatched"]
                  and ((t["queue_id"] == 1 and 2 <= t["queue_offset"] < 5)
                       or (t["queue_id"] == 3 and (t["queue_offset"] < 1 or t["queue_offset"] >= 10))))
    assert got == want and res["messages"] == len(want)


def test_corrupt_commitlog_exports_intact_records(spark, basic_store, store_copy, tmp_path):
    s = store_copy(basic_store)
    f = s / "commitlog" / "00000000000001048576"
    pos = damage_record(f, 100_000)
    clean = {fs.file.start: fs.records for fs in local_plan(str(basic_store))}
    res = run_export(spark, s, str(tmp_path / "bad"), Selection(include_system=True), split_bytes=128 * 1024)
    [bad] = res["corrupt"]
    assert bad["file"].endswith("00000000000001048576") and bad["position"] == pos
    assert bad["offset"] == 1048576 + bad["position"] and bad["invalid_bytes"] > 0
    rows = pq.read_table(tmp_path / "bad").to_pylist()
    before = [r for r in rows if 1048576 <= r["commitlog_offset"] < 2097152]
    assert max(r["commitlog_offset"] + r["store_size"] for r in before) == 1048576 + bad["position"]
    assert len(rows) == res["messages"] == sum(clean.values()) - clean[1048576] + len(before)


def test_remote_uri_source_reads_the_same(gen, tmp_path):
    """A URI store root (read through pyarrow's filesystems) plans like the local path."""
    root, _ = gen
    local, uri = local_plan(str(root), 8192), local_plan(f"file://{root}", 8192)
    assert [(s.file.start, [(x.start, x.end) for x in s.splits], s.records) for s in local] == \
        [(s.file.start, [(x.start, x.end) for x in s.splits], s.records) for s in uri]
    assert list_commitlog(f"file://{root}")[0].path.startswith("file://")


def test_progress_bar_follows_stages_and_tasks(spark, tmp_path):
    from rich.console import Console

    from mqtool.spark.progress import StageProgress
    flag = tmp_path / "go"
    sink = StringIO()
    bar = StageProgress(spark, Console(file=sink, force_terminal=True, width=100), transient=False)

    def wait_for_flag(i):
        import time
        while not os.path.exists(flag):
            time.sleep(0.02)
        return i

    job = threading.Thread(target=lambda: spark.sparkContext.parallelize(range(3), 3).map(wait_for_flag).collect())
    job.start()
    try:
        for _ in range(600):              # until the stage is running (a condition, not a fixed wait)
            bar.poll()
            if bar.rows:
                break
            threading.Event().wait(0.05)
        [task] = [bar.bar.tasks[i] for i in bar.rows.values()]
        assert task.total == 3 and task.completed < 3
    finally:
        flag.touch()
        job.join(60)
    bar.poll()
    assert task.completed == task.total == 3


def test_cli_export_corrupt_store_json_and_exit_code(basic_store, store_copy, tmp_path):
    s = store_copy(basic_store)
    f = s / "commitlog" / "00000000000002097152"
    damage_record(f, 50_000)
    out = tmp_path / "cli"
    proc = run_cli("spark", "export", s, "--out", out, "--master", "local[1]", "--topic", "Topic*", "--json")
    assert proc.returncode == 1, proc.stderr
    summary = json_lines(proc.stdout)[-1]
    assert summary["corrupt"] and "corrupt data in" in proc.stderr and "00000000000002097152" in proc.stderr
    assert "Exception" not in proc.stderr and "at org.apache" not in proc.stderr and os.path.isfile(summary["spark_log"])
    import pandas
    assert len(pandas.read_parquet(out)) == summary["messages"] > 1000
    assert {"TopicA", "TopicB"} <= set(summary["per_topic"]) <= {"TopicA", "TopicB", "TopicC", "TopicDelay"}


def test_cli_bad_input_one_line_each(basic_store, tmp_path):
    def one_line(proc, code, text):
        assert proc.returncode == code, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and text in lines[0], proc.stderr

    (tmp_path / "exists").mkdir()
    (tmp_path / "exists" / "part-0.parquet").write_bytes(b"x")
    one_line(run_cli("spark", "export", basic_store, "--out", tmp_path / "exists"), 2, "--mode overwrite")
    one_line(run_cli("spark", "export", basic_store, "--out", tmp_path / "exists", "--mode", "error"), 2, "exists")
    one_line(run_cli("spark", "export", tmp_path, "--out", tmp_path / "x"), 2, "not a store root")
    one_line(run_cli("spark", "export", tmp_path / "nope", "--out", tmp_path / "x"), 2, "no such store")
    (tmp_path / "empty" / "commitlog").mkdir(parents=True)
    one_line(run_cli("spark", "export", tmp_path / "empty", "--out", tmp_path / "x"), 2, "no commitlog files")
    one_line(run_cli("spark", "export", basic_store, "--out", tmp_path / "x", "--queue-offsets", "{bad"), 2, "JSON")
    one_line(run_cli("spark", "export", basic_store, "--out", tmp_path / "x", "--partition-by", "body"), 2, "body")
    # Without pyspark, or without Java: how to get them, exit 2, before anything is written.
    code = ("import sys; sys.modules['pyspark'] = None; from mqtool.cli import main; "
            f"sys.argv = ['mqtool', 'spark', 'export', {str(basic_store)!r}, '--out', {str(tmp_path / 'y')!r}]; main()")
    import subprocess
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    one_line(proc, 2, "pip install 'mqtool[spark]'")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "mqtool", "spark", "export", str(basic_store), "--out",
                           str(tmp_path / "y")], capture_output=True, text=True, cwd=REPO, timeout=60, env=env)
    one_line(proc, 2, "Java is not installed")
    assert not (tmp_path / "y").exists()


def test_queue_offsets_json_is_checked():
    assert parse_queue_offsets('{"T": [1, null]}') == {"T": {-1: [(1, 2**63 - 1)]}}
    for bad in ('[]', '{"T": {"x": [0, 1]}}', '{"T": {"0": [0]}}', '{"T": {"0": ["a", 1]}}'):
        with pytest.raises(ValueError):
            parse_queue_offsets(bad)
    assert json.loads('{"a": 1}')
