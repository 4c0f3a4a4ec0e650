"""The `rocketmq` data source against a live cluster on 127.0.0.1: a name server, broker group
broker-a (master and slave) and broker group broker-b. Batch and streaming reads, the sink, the
CLI's live export (exactly once across a SIGKILL of the driver) and replay, and reading from the
slave once broker-a's master is gone (the last test: it kills that master)."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")

from mqtool.client.admin import Admin  # noqa: E402
from mqtool.client.producer import OutMessage, Producer  # noqa: E402
from mqtool.spark import register  # noqa: E402
from mqtool.spark.liveoptions import parse_options  # noqa: E402
from mqtool.spark.schema import LIVE_COLUMNS, live_arrow_schema  # noqa: E402
from tests.conftest import json_lines, run_cli  # noqa: E402
from tests.ha.groups import Group  # noqa: E402
from tests.servers import REPO, FAST_LEVELS, Process, die_with_parent, free_port, wait_until  # noqa: E402

pytestmark = pytest.mark.slow


class Cluster(Group):
    """A name server and brokers of cluster LiveCluster (tests/ha/groups.py)."""

    def start(self, who: str, broker: str, broker_id: int, role: str) -> None:
        self.launch(who, self.tmp / f"{who}.conf",
                    f"brokerClusterName=LiveCluster\nbrokerName={broker}\nbrokerId={broker_id}\n"
                    f"brokerRole={role}\nmessageDelayLevel={FAST_LEVELS}\n")

    @property
    def addrs(self) -> dict[str, str]:
        return {who: self.addr(who) for who in self.ports}


def _run(coro):
    return asyncio.run(coro)


async def _create(ns: str, topic: str, queues: int = 4) -> None:
    admin = Admin(ns)
    try:
        await admin.create_topic(topic, queues, queues)
    finally:
        await admin.close()


async def _send(ns: str, topic: str, n: int, start: int = 0, tags=("A", "B")) -> list[dict]:
    producer = Producer(ns, "PID_LIVE_TEST")
    sent = []
    try:
        for i in range(start, start + n, 50):
            msgs = [OutMessage(topic, f"m{j}".encode(), keys=[f"k{j}", "shared"], tags=tags[j % len(tags)],
                               properties={"seq": str(j)}) for j in range(i, min(i + 50, start + n))]
            r = await producer.send_batch(msgs)
            sent += [{"seq": int(m.properties["seq"]), "broker": r.broker} for m in msgs]
    finally:
        await producer.close()
    return sent


@pytest.fixture(scope="module")
def live(tmp_path_factory, spark):
    c = Cluster(tmp_path_factory.mktemp("live"))
    try:
        c.start("a-master", "broker-a", 0, "ASYNC_MASTER")
        c.start("a-slave", "broker-a", 1, "SLAVE")
        c.start("b-master", "broker-b", 0, "ASYNC_MASTER")
        wait_until("both broker groups in the route", lambda: run_cli(
            "cluster", "list", "-n", c.ns, "--json").stdout.count("broker-") >= 3, timeout=30)
        for t in ("Orders", "PayIn", "PayOut", "Copy", "Sunk"):
            _run(_create(c.ns, t))
        _run(_send(c.ns, "PayIn", 100))         # read by several tests (each may run alone: -k)
        _run(_send(c.ns, "PayOut", 60))
        register(spark)
        yield c
    finally:
        c.close()


def _read(spark, ns: str, **options):
    reader = spark.read.format("rocketmq").option("namesrv", ns)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_a_batch_read_of_an_empty_topic_is_no_rows(live, spark):
    """No queue range to read: Spark still runs one task, with InputPartition(None)."""
    _run(_create(live.ns, "EmptyTopic"))
    assert _read(spark, live.ns, topics="EmptyTopic").collect() == []


def test_batch_read_has_the_export_columns_and_every_message(live, spark):
    sent = _run(_send(live.ns, "Orders", 400))
    df = _read(spark, live.ns, topics="Orders")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == LIVE_COLUMNS
    rows = df.collect()
    assert sorted(int(r.properties["seq"]) for r in rows) == list(range(400))
    assert {r.broker_name for r in rows} == {"broker-a", "broker-b"}
    by_seq = {int(r.properties["seq"]): r for r in rows}
    for s in sent[:20]:
        r = by_seq[s["seq"]]
        assert r.broker_name == s["broker"]
        assert r.body == f"m{s['seq']}".encode() and r.crc_ok
        assert r.keys == [f"k{s['seq']}", "shared"] and r.tags == ("A", "B")[s["seq"] % 2]
        assert r.uniq_key and len(r.msg_id) == 32
    # Every (broker, queue) holds offsets 0..n-1 once: the source read whole queues, no more, no less.
    per_queue: dict = {}
    for r in rows:
        per_queue.setdefault((r.broker_name, r.queue_id), []).append(r.queue_offset)
    for offs in per_queue.values():
        assert sorted(offs) == list(range(len(offs)))
    # Arrow end to end: the same rows through toArrow, in the shared schema.
    assert df.toArrow().schema.equals(live_arrow_schema())


def test_offsets_json_tags_globs_and_min_partitions(live, spark):
    both = _read(spark, live.ns, topics="Pay*")
    assert both.count() == 160
    only_a = _read(spark, live.ns, topics="Pay*", tags="A").collect()
    assert len(only_a) == 80 and {r.tags for r in only_a} == {"A"}
    q = _read(spark, live.ns, topics="PayIn", startingOffsets='{"PayIn": {"broker-a:0": 2}}',
              endingOffsets='{"PayIn": {"broker-a:0": 5}}')
    got = [(r.broker_name, r.queue_id, r.queue_offset) for r in q.collect() if (r.broker_name, r.queue_id) == ("broker-a", 0)]
    assert sorted(got) == [("broker-a", 0, 2), ("broker-a", 0, 3), ("broker-a", 0, 4)]
    # startingTimestamp: per queue from the offset SEARCH_OFFSET_BY_TIMESTAMP names for it.
    pay_in = _read(spark, live.ns, topics="PayIn").collect()
    ts = sorted(r.store_timestamp for r in pay_in)[len(pay_in) // 2]
    starts = _run(_offsets_by_time(live.ns, "PayIn", {(r.broker_name, r.queue_id) for r in pay_in}, ts))
    since = _read(spark, live.ns, topics="PayIn", startingTimestamp=str(ts)).collect()
    want = sorted(r.queue_offset for r in pay_in if r.queue_offset >= starts[(r.broker_name, r.queue_id)])
    assert sorted(r.queue_offset for r in since) == want and 0 < len(since) < len(pay_in)
    split = _read(spark, live.ns, topics="PayIn", minPartitions="24")
    assert split.rdd.getNumPartitions() >= 24
    assert sorted(int(r.properties["seq"]) for r in split.collect()) == list(range(100))


def test_stream_picks_up_new_topics_of_a_glob_with_once_and_available_now(live, spark, tmp_path):
    def run(**trigger):
        q = (spark.readStream.format("rocketmq").option("namesrv", live.ns).option("topics", "New*").load()
             .writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(**trigger).start())
        q.awaitTermination()
        assert q.exception() is None
        return sorted((r.topic, int(r.properties["seq"])) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    _run(_create(live.ns, "NewA"))
    _run(_send(live.ns, "NewA", 30))
    assert run(availableNow=True) == [("NewA", i) for i in range(30)]
    _run(_create(live.ns, "NewB", 2))
    _run(_send(live.ns, "NewB", 20))
    _run(_send(live.ns, "NewA", 5, start=30))
    # Once more with the same checkpoint: what is new since, the new topic's messages too, each once.
    assert run(once=True) == sorted([("NewA", i) for i in range(35)] + [("NewB", i) for i in range(20)])


async def _offsets_by_time(ns: str, topic: str, queues, ts: int) -> dict:
    from mqtool.client.base import MessageQueue
    from mqtool.client.consumer import Consumer
    c = Consumer(ns)
    try:
        return {q: await c.offset_by_time(MessageQueue(topic, *q), ts) for q in queues}
    finally:
        await c.close()


def test_sink_sends_rows_and_they_read_back(live, spark):
    df = spark.createDataFrame([("Sunk", f"row{i}", "T" if i % 2 else None, [f"id{i}"], {"p": str(i)})
                                for i in range(300)], "topic string, body string, tags string, keys array<string>, "
                               "properties map<string,string>")
    df.write.format("rocketmq").option("namesrv", live.ns).mode("append").save()
    back = _read(spark, live.ns, topics="Sunk").collect()
    assert sorted(r.body for r in back) == sorted(f"row{i}".encode() for i in range(300))
    for r in back:
        i = int(r.properties["p"])
        assert r.keys == [f"id{i}"] and r.tags == ("T" if i % 2 else None)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        f = task / "children"
        if f.exists():
            out += [int(x) for x in f.read_text().split()]
    return out


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split(") ")[-1].startswith("Z")


def test_live_export_is_exactly_once_across_a_driver_kill(live, spark, tmp_path):
    topic = "OrdersKill"
    _run(_create(live.ns, topic))
    _run(_send(live.ns, topic, 400))
    out, ck = tmp_path / "out", tmp_path / "ck"
    cmd = [sys.executable, "-m", "mqtool", "spark", "export", "-n", live.ns, "-t", topic, "-o", str(out),
           "--checkpoint", str(ck), "--interval", "200ms", "--max-messages-per-trigger", "50", "--master", "local[2]"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=die_with_parent())
    lines = []
    try:
        while len([ln for ln in lines if ln.startswith("batch ")]) < 3:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "".join(lines)
            lines.append(line)
        jvms = _children(proc.pid)
        _run(_send(live.ns, topic, 200, start=400))     # more while it runs
        time.sleep(0.3)                                 # let it be inside a micro-batch; any moment will do
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        for pid in jvms:                                # Spark's JVM exits when its driver's pipe closes
            wait_until("the killed driver's JVM to exit", lambda: _gone(pid), timeout=60)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.stderr.close()
    again = run_cli("spark", "export", "-n", live.ns, "-t", topic, "-o", out, "--checkpoint", ck, "--available-now",
                    "--master", "local[2]", "--json", "-g", "spark-export")
    assert again.returncode == 0, again.stderr[-3000:]
    assert json_lines(again.stdout)[-1]["group_offsets_committed"] == 8
    rows = spark.read.parquet(str(out)).select("broker_name", "queue_id", "queue_offset", "properties").collect()
    keys = [(r.broker_name, r.queue_id, r.queue_offset) for r in rows]
    assert len(keys) == len(set(keys)) == 600                      # each exactly once
    assert sorted(int(r.properties["seq"]) for r in rows) == list(range(600))
    progress = run_cli("group", "progress", "-n", live.ns, "-g", "spark-export", "--json")
    assert sum(r["lag"] for r in json_lines(progress.stdout)) == 0, progress.stdout


def test_a_batch_killed_before_its_commit_is_not_seen_and_its_rerun_lands_once(live, spark, tmp_path, monkeypatch):
    """The driver dies after moving batch 1's files into the lake, before its `_spark_metadata`
    entry: a reader honouring the log sees batch 0 only; a rerun replaces the orphans, each message once."""
    import pyarrow.dataset as ds

    from mqtool.spark import sinklog
    from mqtool.spark.livejobs import stream_export
    _run(_create(live.ns, "Killed"))
    _run(_send(live.ns, "Killed", 120))
    out, ck = tmp_path / "out", tmp_path / "ck"
    options = {"namesrv": live.ns, "topics": "Killed", "maxMessagesPerTrigger": "50"}
    real_add = sinklog.SinkLog.add

    def dies_at_batch_1(self, batch_id, paths):
        if batch_id == 1:
            raise SystemExit("killed")
        real_add(self, batch_id, paths)
    monkeypatch.setattr(sinklog.SinkLog, "add", dies_at_batch_1)
    with pytest.raises(SystemExit):
        stream_export(spark, options, str(out), str(ck), ["queue_id"], None)
    monkeypatch.setattr(sinklog.SinkLog, "add", real_add)
    on_disk = ds.dataset(out, format="parquet", partitioning="hive", ignore_prefixes=["_", "."]).count_rows()
    assert on_disk == 100                                          # batch 1's files are in the lake ...
    assert spark.read.parquet(str(out)).count() == 50              # ... but a reader honouring the log sees batch 0
    seen = []
    result = stream_export(spark, options, str(out), str(ck), ["queue_id"], None, seen.append)
    assert [p["batchId"] for p in seen] == [1, 2] and result["rows"] == 70
    rows = spark.read.parquet(str(out)).select("queue_id", "queue_offset", "properties").collect()
    assert sorted(int(r.properties["seq"]) for r in rows) == list(range(120))
    on_disk = ds.dataset(out, format="parquet", partitioning="hive", ignore_prefixes=["_", "."]).count_rows()
    assert on_disk == 120                                          # the orphans were removed by the rerun


def test_the_export_continues_a_checkpoint_of_sparks_own_file_sink(live, spark, tmp_path):
    """A lake and checkpoint Spark's file sink started (the previous write path) are continued:
    the new messages only, each once, across a compaction of the metadata log (batch 9)."""
    from mqtool.spark.livejobs import stream_export
    _run(_create(live.ns, "Handed"))
    _run(_send(live.ns, "Handed", 30))
    out, ck = tmp_path / "out", tmp_path / "ck"
    q = (spark.readStream.format("rocketmq").option("namesrv", live.ns).option("topics", "Handed").load()
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ck))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None and spark.read.parquet(str(out)).count() == 30
    _run(_send(live.ns, "Handed", 130, start=30))
    seen = []
    result = stream_export(spark, {"namesrv": live.ns, "topics": "Handed", "maxMessagesPerTrigger": "13"},
                           str(out), str(ck), [], None, seen.append)
    assert result["rows"] == 130 and seen[0]["batchId"] == 1 and seen[-1]["batchId"] >= 10
    assert (out / "_spark_metadata" / "9.compact").exists()
    rows = spark.read.parquet(str(out)).select("properties").collect()
    assert sorted(int(r.properties["seq"]) for r in rows) == list(range(160))


def _jobs(spark) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def _batches(ck: Path, kind: str) -> list[str]:
    return sorted(p.name for p in (ck / kind).iterdir() if p.name.isdigit())


def test_a_small_available_now_export_is_one_batch_without_an_extra_job_or_look(live, spark, tmp_path,
                                                                                monkeypatch):
    """A few hundred messages with availableNow: one micro-batch in the checkpoint and the lake's
    log, one look at the cluster's latest offsets, and no Spark job (a one-task batch on a local
    master is written by the driver); a batch of several tasks is one Spark job of one stage."""
    from mqtool.spark import datasource
    from mqtool.spark.livejobs import stream_export
    _run(_create(live.ns, "Small"))
    _run(_send(live.ns, "Small", 300))
    looks = []
    real_latest = datasource.StreamReader.latestOffset
    monkeypatch.setattr(datasource.StreamReader, "latestOffset",
                        lambda self, *a: looks.append(1) or real_latest(self, *a))
    out, ck = tmp_path / "out", tmp_path / "ck"
    before = _jobs(spark)
    result = stream_export(spark, {"namesrv": live.ns, "topics": "Small"}, str(out), str(ck), [], None)
    assert result["rows"] == 300 and result["batches"] == 1
    assert _jobs(spark) == before                                  # no Spark job at all
    assert _batches(ck, "offsets") == _batches(ck, "commits") == ["0"]
    assert sorted(p.name for p in (out / "_spark_metadata").iterdir()) == ["0"]
    assert len(looks) == 1                                         # no second look once the target is in
    assert spark.read.parquet(str(out)).count() == 300

    _run(_send(live.ns, "Small", 300, start=300))
    monkeypatch.setattr(datasource, "ROWS_PER_TASK", 100)          # the same size in several tasks
    before = _jobs(spark)
    result = stream_export(spark, {"namesrv": live.ns, "topics": "Small"}, str(out), str(ck), [], None)
    assert result["rows"] == 300 and result["batches"] == 1
    jobs = _jobs(spark) - before
    assert len(jobs) == 1                                          # one job ...
    assert len(spark.sparkContext.statusTracker().getJobInfo(jobs.pop()).stageIds) == 1   # ... of one stage
    assert _batches(ck, "offsets") == _batches(ck, "commits") == ["0", "1"]
    rows = spark.read.parquet(str(out)).select("properties").collect()
    assert sorted(int(r.properties["seq"]) for r in rows) == list(range(600))


def test_replay_sends_an_export_back_with_keys_tags_and_properties(live, spark, tmp_path):
    _run(_create(live.ns, "CopySrc"))
    _run(_send(live.ns, "CopySrc", 600))
    src = tmp_path / "orders.parquet"
    _read(spark, live.ns, topics="CopySrc").write.parquet(str(src))
    proc = run_cli("spark", "replay", src, "-t", "Copy", "-n", live.ns, "--master", "local[2]", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json_lines(proc.stdout)[-1]["rows"] == 600
    orig = {int(r.properties["seq"]): r for r in _read(spark, live.ns, topics="CopySrc").collect()}
    copy = _read(spark, live.ns, topics="Copy").collect()
    assert len(copy) == 600
    for r in copy:
        o = orig[int(r.properties["seq"])]
        assert (r.body, r.keys, r.tags) == (o.body, o.keys, o.tags)
        assert r.uniq_key != o.uniq_key                 # a new message, with its own id


@pytest.mark.parametrize("args, says", [
    (["-t", "Orders", "--checkpoint", "CK"], "cannot connect"),
    (["-t", "NoSuchTopic", "--checkpoint", "CK"], "topic NoSuchTopic does not exist"),
    (["-t", "Zz*", "--checkpoint", "CK"], "no topic matches Zz*"),
    (["-t", "Orders", "--checkpoint", "CK", "--starting-offsets", "{oops"], "startingOffsets must be earliest"),
    (["-t", "Orders", "--checkpoint", "CK", "--starting-offsets", '{"Orders": {"broker-z:0": 1}}'], "broker-z:0"),
    (["-t", "Orders"], "needs --checkpoint"),
])
def test_live_export_bad_input_is_one_line(live, tmp_path, args, says):
    ns = f"127.0.0.1:{free_port()}" if says == "cannot connect" else live.ns
    args = [str(tmp_path / "ck") if a == "CK" else a for a in args]
    proc = run_cli("spark", "export", "-n", ns, "-o", tmp_path / "out", *args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_replay_on_a_local_master_is_sent_by_the_driver_without_a_spark_job(live, spark, tmp_path, monkeypatch):
    """Several tasks' row ranges, no Spark job (a job's first Python workers cost 2-3 s on a
    machine that would run the tasks anyway); each row once, and a failing task is tried again as
    local[N,F] tries it (at-least-once, as through Spark)."""
    from mqtool.spark import livereplay, livesink
    from mqtool.spark.livejobs import replay
    _run(_create(live.ns, "ReplaySrc"))
    _run(_send(live.ns, "ReplaySrc", 600))
    src = tmp_path / "src.parquet"
    _read(spark, live.ns, topics="ReplaySrc").write.parquet(str(src))
    monkeypatch.setattr(livereplay, "ROWS_PER_TASK", 150)
    assert len(livereplay.plan(livereplay.files(str(src)), 4)[0]) == 4
    before = _jobs(spark)
    assert replay(spark, str(src), {"namesrv": live.ns, "topic": "DriverCopy"}) == {"rows": 600}
    assert _jobs(spark) == before                                   # no Spark job
    seqs = sorted(int(r.properties["seq"]) for r in _read(spark, live.ns, topics="DriverCopy").collect())
    assert seqs == list(range(600))
    real, failures = livesink.send_batches, []

    def fails_once(opts, batches):
        if not failures:
            failures.append(1)
            raise ConnectionError("the broker went away")
        return real(opts, batches)
    monkeypatch.setattr(livesink, "send_batches", fails_once)
    opts = parse_options({"namesrv": live.ns, "topic": "Retried"}, writing=True)
    whole = livereplay.plan(livereplay.files(str(src)), 1)[0][0]
    with pytest.raises(ConnectionError):            # local[N]: a task runs once
        livereplay._in_driver(opts, ["body"], whole, attempts=1)
    failures.clear()
    assert livereplay._in_driver(opts, ["body"], whole, attempts=2) == 600     # local[N,2]: tried again


def test_replay_without_a_body_column_is_one_line(live, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"payload": [b"x"]}), tmp_path / "x.parquet")
    proc = run_cli("spark", "replay", tmp_path / "x.parquet", "-t", "Copy", "-n", live.ns)
    assert proc.returncode == 2 and "has no body column" in proc.stderr and "Traceback" not in proc.stderr


async def _slave_max(live, topic: str) -> dict[int, int]:
    from mqtool.client.consumer import Consumer
    from mqtool_remoting.codes import RequestCode
    from mqtool_remoting.command import RemotingCommand
    c = Consumer(live.ns)
    try:
        out = {}
        for q in range(4):
            resp = await c.invoke(live.addrs["a-slave"], RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": q}))
            out[q] = int(resp.ext_fields.get("offset", 0))
        return {q: o for q, o in out.items() if o}
    finally:
        await c.close()


def test_streaming_export_on_a_standalone_spark_cluster(live, spark, tmp_path):
    """The live export submitted to a real master + worker: the executors pull from both groups."""
    from tests.spark.test_standalone import Daemons, _alive, start_master_and_worker
    daemons = Daemons(tmp_path)
    try:
        port = start_master_and_worker(daemons, tmp_path)
        out = tmp_path / "out"
        proc = run_cli("spark", "export", "-n", live.ns, "-t", "Pay*", "-o", out, "--checkpoint", tmp_path / "ck",
                       "--available-now", "--partition-by", "topic,broker_name", "--master",
                       f"spark://127.0.0.1:{port}", "--conf", "spark.cores.max=1", "--conf",
                       "spark.executor.memory=512m", "--json")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert json_lines(proc.stdout)[-1]["rows"] == 160
        assert list((tmp_path / "work").glob("app-*/*/stderr"))       # tasks ran on the worker's executor
        # a replay on a cluster master: its task runs on the executor, not in the driver
        apps = set((tmp_path / "work").glob("app-*"))
        proc = run_cli("spark", "replay", out, "-t", "CopiedPay", "-n", live.ns, "--master", f"spark://127.0.0.1:{port}",
                       "--conf", "spark.cores.max=1", "--conf", "spark.executor.memory=512m", "--json")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert json_lines(proc.stdout)[-1]["rows"] == 160
        assert list(p for app in set((tmp_path / "work").glob("app-*")) - apps for p in app.glob("*/stderr"))
    finally:
        daemons.stop()
    assert not any(_alive(p) for p in daemons.pids)
    df = spark.read.parquet(str(out))
    assert sorted(r.topic for r in df.select("topic").distinct().collect()) == ["PayIn", "PayOut"]
    key = lambda d: sorted((r.broker_name, r.queue_id, r.queue_offset, r.topic) for r in  # noqa: E731
                           d.select("broker_name", "queue_id", "queue_offset", "topic").collect())
    assert key(df) == key(_read(spark, live.ns, topics="Pay*"))
    assert sorted(r.body for r in _read(spark, live.ns, topics="CopiedPay").collect()) == sorted(
        r.body for r in _read(spark, live.ns, topics="Pay*").collect())


async def _gets(addr: str, ns: str) -> int:
    """Messages a broker has handed to pullers so far (its runtime info's msgGetTotalTodayNow)."""
    admin = Admin(ns)
    try:
        return int((await admin.broker_runtime(addr)).get("msgGetTotalTodayNow", 0))
    finally:
        await admin.close()


def test_a_master_killed_while_tasks_read_is_read_from_its_slave(live, spark):
    """broker-a's master dies while the read is under way (pulls of one message each, so the read
    takes thousands of round trips): the tasks go on against the slave; every row exactly once."""
    import threading
    _run(_create(live.ns, "OrdersHA"))
    _run(_send(live.ns, "OrdersHA", 3000, tags=("C",)))
    before = sorted((r.broker_name, r.queue_id, r.queue_offset, r.body)
                    for r in _read(spark, live.ns, topics="OrdersHA").collect())
    held = {(q, o) for b, q, o, _ in before if b == "broker-a"}
    wait_until("the slave to hold every message of broker-a", lambda: _run(_slave_max(live, "OrdersHA")) == {
        q: max(o for qq, o in held if qq == q) + 1 for q, _ in held}, timeout=30)
    master_gets = _run(_gets(live.addrs["a-master"], live.ns))
    slave_gets = _run(_gets(live.addrs["a-slave"], live.ns))
    got: list = []
    reader = threading.Thread(target=lambda: got.extend(
        _read(spark, live.ns, topics="OrdersHA", pullBatchSize="1").collect()))
    reader.start()
    # Kill it once it has served part of this read, not all of it.
    wait_until("the read to be under way on broker-a's master", lambda: _run(
        _gets(live.addrs["a-master"], live.ns)) - master_gets >= 200, timeout=120, every=0.02)
    live.kill("a-master")
    reader.join(240)
    assert not reader.is_alive()
    after = sorted((r.broker_name, r.queue_id, r.queue_offset, r.body) for r in got)
    assert after == before                                  # nothing lost, nothing twice
    assert _run(_gets(live.addrs["a-slave"], live.ns)) > slave_gets        # the slave served the rest


ACL = """\
globalWhiteRemoteAddresses: []
accounts:
  - {accessKey: sparkadmin, secretKey: "12345678", admin: true}
  - accessKey: sparkreader
    secretKey: "12345678"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [AclLive=PUB|SUB]
"""


def test_acl_keys_sign_the_reads_and_a_refusal_is_one_line(spark, tmp_path, monkeypatch):
    from tests.servers import start_broker
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    monkeypatch.setenv("ROCKETMQ_HOME", str(home))
    port = free_port()
    ns_proc = Process(["namesrv", "start", "--listen", f"127.0.0.1:{port}", "--kv-config", str(tmp_path / "kv.json")],
                      "boot success")
    ns = f"127.0.0.1:{port}"
    broker = None
    try:
        broker, _ = start_broker(tmp_path, ns, "broker-acl", "aclEnable=true\n")
        admin = ("--access-key", "sparkadmin", "--secret-key", "12345678")
        run_cli("topic", "create", "-n", ns, "-t", "AclLive", "-r", "2", "-w", "2", *admin, check=True)
        run_cli("send", "-n", ns, "-t", "AclLive", "--access-key", "sparkreader", "--secret-key", "12345678",
                input="".join(f"a{i}\n" for i in range(10)), check=True)
        register(spark)
        rows = (spark.read.format("rocketmq").option("namesrv", ns).option("topics", "AclLive")
                .option("accessKey", "sparkreader").option("secretKey", "12345678").load().collect())
        assert sorted(r.body for r in rows) == sorted(f"a{i}".encode() for i in range(10))
        bad = run_cli("spark", "export", "-n", ns, "-t", "AclLive", "-o", tmp_path / "out", "--checkpoint",
                      tmp_path / "ck", "--access-key", "sparkreader", "--secret-key", "wrong")
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and "signature" in bad.stderr.lower(), bad.stderr
    finally:
        if broker is not None:
            broker.stop()
        ns_proc.stop()
