"""Replay's driver side without a cluster: which files (a sink log's, when there is one), and
their rows cut into equal ranges, one per task, read back whole and once."""
from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from mqtool.spark import livereplay  # noqa: E402
from mqtool.spark.sinklog import SinkLog  # noqa: E402


def _write(path, first: int, n: int, group: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"body": [f"m{i}".encode() for i in range(first, first + n)]}), path,
                   row_group_size=group)
    return str(path)


def test_rows_cut_into_equal_ranges_read_back_once(tmp_path, monkeypatch):
    monkeypatch.setattr(livereplay, "ROWS_PER_TASK", 10)
    a = _write(tmp_path / "lake" / "part-0.parquet", 0, 25, 10)
    b = _write(tmp_path / "lake" / "q=1" / "part-1.parquet", 25, 14, 4)
    _write(tmp_path / "lake" / "_temporary" / "part-x.parquet", 99, 5, 5)        # skipped, as Spark skips it
    _write(tmp_path / "lake" / ".hidden.parquet", 99, 5, 5)
    paths = livereplay.files(str(tmp_path / "lake"))
    assert paths == [a, b]
    tasks, total = livereplay.plan(paths, 3)
    assert total == 39 and len(tasks) == 3
    sizes = [sum(r for *_x, r in t) for t in tasks]
    assert sizes == [13, 13, 13]
    got = [row for t in tasks for rb in livereplay.read(t, ["body"]) for row in rb.column(0).to_pylist()]
    assert got == [f"m{i}".encode() for i in range(39)]
    assert len(livereplay.plan(paths, 64)[0]) == 4                 # no task of fewer than ROWS_PER_TASK rows
    monkeypatch.setattr(livereplay, "ROWS_PER_TASK", 65_536)
    assert len(livereplay.plan(paths, 2)[0]) == 1


def test_a_lake_with_a_sink_log_replays_only_what_the_log_lists(tmp_path):
    lake = tmp_path / "lake"
    kept = _write(lake / "topic=%25DLQ%25g1" / "part-0.parquet", 0, 3, 3)
    _write(lake / "part-orphan.parquet", 3, 3, 3)                 # a killed batch's file: not in the log
    SinkLog(str(lake)).add(0, [kept])
    assert livereplay.files(str(lake)) == [kept]
    more = _write(lake / "topic=%25RETRY%25g1" / "part-1.parquet", 6, 3, 3)
    spark_style = lake / "_spark_metadata" / "1"                  # Spark's own entries are escaped URIs
    spark_style.write_text('v1\n{"path":"file:' + str(lake).replace("%", "%25") +
                           '/topic=%2525RETRY%2525g1/part-1.parquet","action":"add"}')
    assert livereplay.files(str(lake)) == [kept, more]


def test_the_sink_log_names_files_as_uris_spark_can_read(tmp_path, spark):
    """Partition directories hold escapes (`topic=%25DLQ%25g1`) and OUT may hold a space: the log
    lists percent-escaped URIs, which Spark decodes back to the files (it read none before)."""
    from mqtool.spark.sinklog import local_path
    lake = tmp_path / "my lake"
    f = _write(lake / "topic=%25DLQ%25g1" / "part-0.parquet", 0, 2, 2)
    SinkLog(str(lake)).add(0, [f])
    entry = SinkLog(str(lake)).all_files()[0]["path"]
    assert entry.startswith("file:///") and "%2525DLQ" in entry and " " not in entry
    assert local_path(entry) == f and local_path("file://" + f) == f        # a log written before: plain paths
    assert spark.read.parquet(str(lake)).count() == 2
