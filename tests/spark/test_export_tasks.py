"""The export's fast path: the vectorised decoder against the reference, the task-written files
against Spark's JVM writer (the previous path), and the commit protocol when a task fails."""
from __future__ import annotations

import zlib
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from mqtool.spark.columns import Timer, fast_batches  # noqa: E402
from mqtool.spark.export import (arrow_schema, export_local, plan_export, run_export, split_batches,  # noqa: E402
                                 write_export)
from mqtool.spark.selection import Selection, parse_queue_offsets  # noqa: E402
from mqtool.spark.source import local_plan  # noqa: E402
from mqtool.spark.writer import Job, escape_path_name, output_fs, write_task  # noqa: E402
from mqtool_store.commitlog import encode_blank, encode_record, new_record  # noqa: E402
from mqtool_store.mappedfiles import offset_to_file_name  # noqa: E402
from tests.spark.genstore import T0, V6, write_store  # noqa: E402

pytestmark = pytest.mark.slow
EVERYTHING = Selection(include_system=True)


def odd_store(root: Path) -> None:
    """Records whose properties and fields take every branch of the fast decoder, in one file."""
    specs = [
        dict(properties_text="TAGS\x01a\x02KEYS\x01 x  y \x02UNIQ_KEY\x01u1\x02"),    # trailing separator, spaces
        dict(properties_text="\x02\x02TAGS\x01b\x02\x02"),                             # empty pieces
        dict(properties_text="KEYS\x01\x02\x01v\x02novalue\x02TAGS\x01c\x01d"),      # dropped pieces, 0x01 in a value
        dict(properties_text=""),                                                       # none at all
        dict(properties={"TAGS": "é ü", "KEYS": "ключ", "n": "1"}, body=b""),           # UTF-8, empty body
        dict(properties={"TAGS": "t"}, topic="T" * 200),                                # V2 magic: 2-byte topic length
        dict(properties={"TAGS": "t"}, store_host=V6, born_host=V6),                    # IPv6 both
        dict(properties={"TAGS": "z"}, body=zlib.compress(b"inflated " * 20), sys_flag=0x1),
        dict(properties={"TAGS": "bad"}, body=b"not zlib at all", sys_flag=0x1),        # kept as stored
        dict(properties={"TAGS": "%DLQ%"}, topic="%DLQ%g=1/x"),
        dict(properties_text=""),                  # last: its properties end the split's buffer (URI)
    ]
    data = bytearray()
    for i, spec in enumerate(specs):
        kw = {k: v for k, v in spec.items() if k in ("properties_text", "store_host", "born_host", "sys_flag")}
        rec = new_record(spec.get("topic", "Odd"), spec.get("body", f"body {i}".encode()), spec.get("properties"),
                         queue_id=i % 3, queue_offset=i, store_timestamp=T0 + i, born_timestamp=T0, **kw)
        rec.physical_offset = len(data)
        data += encode_record(rec)
    cl = root / "commitlog"
    cl.mkdir(parents=True)
    (cl / offset_to_file_name(0)).write_bytes(bytes(data) + encode_blank(8192 - len(data)))


def dup_and_latin1_store(root: Path) -> None:
    """A key twice in one record, and properties that are not UTF-8: both go to the reference."""
    data = bytearray()
    for i, text in enumerate(["TAGS\x01a\x02TAGS\x01b", "TAGS\x01c\x02KEYS\x01k\xe9y"]):
        rec = new_record("Odd", b"x", properties_text=text, queue_offset=i, store_timestamp=T0)
        rec.physical_offset = len(data)
        raw = bytearray(encode_record(rec))
        if i == 1:
            raw[raw.rindex("é".encode()):raw.rindex("é".encode()) + 2] = b"\xe9\xe9"   # invalid UTF-8
        data += raw
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / offset_to_file_name(0)).write_bytes(bytes(data) + bytes(4096))


def assert_fast_equals_reference(root, selection=EVERYTHING, split_bytes=8192, batch_rows=97) -> int:
    rows = 0
    for scan in local_plan(str(root), split_bytes, selection):
        for sp in scan.splits:
            want = pa.Table.from_batches(list(split_batches(sp, selection)), schema=arrow_schema())
            got = pa.Table.from_batches(list(fast_batches(sp, selection, batch_rows=batch_rows)), schema=arrow_schema())
            assert got.num_rows == want.num_rows
            for name in want.column_names:
                assert got[name].to_pylist() == want[name].to_pylist(), name
            rows += got.num_rows
    return rows


def test_fast_decoder_matches_reference_row_for_row(basic_store, tmp_path):
    assert assert_fast_equals_reference(basic_store, split_bytes=300_000) == 2371
    truth = write_store(tmp_path / "gen")
    assert assert_fast_equals_reference(tmp_path / "gen") == len(truth)
    odd_store(tmp_path / "odd")
    assert assert_fast_equals_reference(tmp_path / "odd") == 11
    assert assert_fast_equals_reference(f"file://{tmp_path / 'odd'}") == 11    # buffers of exactly the split
    dup_and_latin1_store(tmp_path / "dup")
    assert assert_fast_equals_reference(tmp_path / "dup") == 2
    assert assert_fast_equals_reference(tmp_path / "dup", batch_rows=1) == 2     # each reason on its own
    # The odd store is decoded by the fast path itself; only the dup store needs the reference.
    for name, fallback in (("odd", False), ("dup", True)):
        timer = Timer()
        list(fast_batches(local_plan(str(tmp_path / name))[0].splits[0], EVERYTHING, batch_rows=1, timer=timer))
        assert ("reference" in timer.seconds) == fallback
    [table] = list(fast_batches(local_plan(str(tmp_path / "odd"))[0].splits[0], EVERYTHING))
    rows = table.to_pylist()
    assert rows[0]["keys"] == ["x", "y"] and rows[2]["properties"] == [("TAGS", "c\x01d")]
    assert rows[2]["keys"] == [] and rows[3]["tags"] is None and rows[7]["body"] == b"inflated " * 20
    assert rows[6]["store_host"] == "[2001:db8::1]:40000" and len(rows[6]["msg_id"]) == 56
    assert rows[10]["properties"] == [] and rows[10]["keys"] == [] and rows[10]["uniq_key"] is None
    # With filters: the same rows as the reference picks.
    sel = Selection(("Ord*", "Logs"), T0 + 1_000_000, None, queue_offsets=parse_queue_offsets(
        '{"Orders": {"1": [2, 50], "3": [[0, 1], [10, null]]}, "Logs": [0, 30]}'))
    assert 0 < assert_fast_equals_reference(tmp_path / "gen", sel) < len(truth)


def test_fast_decoder_refuses_a_file_changed_since_the_plan(tmp_path):
    write_store(tmp_path / "gen")
    [scan, *_] = local_plan(str(tmp_path / "gen"), 8192)
    f = Path(scan.file.path)
    data = bytearray(f.read_bytes())
    sp = scan.splits[-1]
    data[sp.start:sp.start + 4] = (7).to_bytes(4, "big")
    f.write_bytes(bytes(data))
    with pytest.raises(Exception, match="changed since the plan"):
        list(fast_batches(sp, EVERYTHING))


def files_of(out: Path) -> dict[str, int]:
    """Parquet files by partition directory: how many."""
    got: dict[str, int] = {}
    for p in out.rglob("*.parquet"):
        rel = str(p.parent.relative_to(out))
        got[rel] = got.get(rel, 0) + 1
    return got


def sorted_rows(path) -> list[dict]:
    return sorted(pq.read_table(path).to_pylist(), key=lambda r: r["commitlog_offset"])


@pytest.mark.parametrize("partition_by", [None, ["topic", "store_date", "queue_id"]])
def test_task_writer_output_equals_the_jvm_writer(spark, tmp_path, partition_by):
    """Same rows, same partition directories, same schema as Spark's own writer (the previous path)."""
    write_store(tmp_path / "gen")
    odd_store(tmp_path / "odd")
    for root in (tmp_path / "gen", tmp_path / "odd"):
        jvm, tasks = tmp_path / f"{root.name}-jvm", tmp_path / f"{root.name}-tasks"
        a = run_export(spark, root, str(jvm), EVERYTHING, partition_by, split_bytes=8192, writer="jvm")
        b = run_export(spark, root, str(tasks), EVERYTHING, partition_by, split_bytes=8192)
        assert a["messages"] == b["messages"]
        assert sorted_rows(tasks) == sorted_rows(jvm) and len(sorted_rows(tasks)) == a["messages"]
        assert files_of(tasks).keys() == files_of(jvm).keys()
        assert (tasks / "_SUCCESS").exists() and not (tasks / "_temporary").exists()
        assert spark.read.parquet(str(tasks)).dtypes == spark.read.parquet(str(jvm)).dtypes
        one = next(tasks.rglob("*.parquet"))
        assert one.name.startswith("part-") and one.name.endswith(".c000.snappy.parquet")
        assert pq.read_schema(one).remove_metadata() == pq.read_schema(next(jvm.rglob("*.parquet"))).remove_metadata()
    if partition_by:
        assert (tmp_path / "gen-tasks" / "topic=%25DLQ%25g1").is_dir()
        assert escape_path_name("%DLQ%g=1/x") == "%25DLQ%25g%3D1%2Fx"
        assert (tmp_path / "odd-tasks" / "topic=%25DLQ%25g%3D1%2Fx").is_dir()


def test_single_process_baseline_writes_the_same_rows(spark, tmp_path):
    write_store(tmp_path / "gen")
    res = export_local(tmp_path / "gen", str(tmp_path / "local"), EVERYTHING, 8192)
    run_export(spark, tmp_path / "gen", str(tmp_path / "spark"), EVERYTHING, split_bytes=8192)
    assert sorted_rows(tmp_path / "local") == sorted_rows(tmp_path / "spark") and res["messages"] == 400
    assert files_of(tmp_path / "local") == {".": 1}


def test_a_failed_task_leaves_no_partial_output(spark, tmp_path):
    """A split whose file changed after the plan fails its task: nothing is committed, an existing
    output stays as it was, and no staging directory is left behind."""
    root = tmp_path / "gen"
    write_store(root, file_size=16 * 1024)
    scans = plan_export(spark, root, EVERYTHING, 4096)
    assert len(scans) > 3
    last = Path(scans[-1].file.path)
    last.write_bytes(last.read_bytes()[:scans[-1].splits[-1].start + 10])      # torn after the plan
    out = tmp_path / "out"
    with pytest.raises(Exception, match="changed since the plan"):
        write_export(spark, scans, str(out), EVERYTHING, ["topic"])
    assert not out.exists()
    run_export(spark, tmp_path / "gen", str(out), Selection(("Logs",)), ["topic"], split_bytes=4096)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for mode in ("overwrite", "append"):
        with pytest.raises(Exception, match="changed since the plan"):
            write_export(spark, scans, str(out), EVERYTHING, ["topic"], mode)
        assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_failing_attempt_removes_its_own_files(tmp_path):
    """The task side of the commit: an attempt that fails half-way deletes what it wrote, and
    files of an attempt the driver was not told about are never moved into the output."""
    write_store(tmp_path / "gen")
    [sp, *_] = [s for scan in local_plan(str(tmp_path / "gen"), 8192) for s in scan.splits]
    job = Job(str(tmp_path / "out"), "error")
    job.start()

    def batches_then_error():
        yield from fast_batches(sp, EVERYTHING, batch_rows=5)
        raise OSError("disk full")
    with pytest.raises(OSError):
        write_task(job.fs, job.staging, job.job, 0, 0, batches_then_error(), arrow_schema(), ["topic"])
    assert list(Path(job.staging).iterdir()) == []
    stale = write_task(job.fs, job.staging, job.job, 0, 1, fast_batches(sp, EVERYTHING), arrow_schema(), [])
    good = write_task(job.fs, job.staging, job.job, 0, 2, fast_batches(sp, EVERYTHING), arrow_schema(), [])
    assert stale[1] and Path(stale[0]).is_dir()
    job.commit([good], arrow_schema(), [])
    out = tmp_path / "out"
    assert files_of(out) == {".": 1} and not (out / "_temporary").exists()
    assert pq.read_table(out).num_rows == sum(n for _, n in good[1])
    assert output_fs(str(out))[1] == str(out)
