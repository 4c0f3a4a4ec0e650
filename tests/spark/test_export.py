"""`spark export` with real Spark in local mode, on the fixture stores."""
from __future__ import annotations

import base64
import shutil

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")
pq = pytest.importorskip("pyarrow.parquet")

from mqtool.spark.export import plan_splits, run_export  # noqa: E402
from mqtool.spark.session import spark_session  # noqa: E402
from tests.conftest import json_lines, run_cli  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    session, _log = spark_session("local[2]", log_dir=tmp_path_factory.mktemp("sparklog"))
    yield session
    session.stop()


def test_every_message_exported_once_with_its_columns(spark, basic_store, basic_truth, tmp_path):
    out = str(tmp_path / "all")
    res = run_export(spark, basic_store, out, include_system=True, split_bytes=256 * 1024)
    assert res["messages"] == 2371 and res["splits"] > 3          # files cut at record boundaries
    table = pq.read_table(out).to_pylist()
    assert len(table) == 2371 and len({r["commitlog_offset"] for r in table}) == 2371
    truth = {t["commit_log_offset"]: t for t in basic_truth}
    for r in table:
        t = truth[r["commitlog_offset"]]
        assert (r["topic"], r["queue_id"], r["queue_offset"], r["store_size"]) == (
            t["topic"], t["queue_id"], t["queue_offset"], t["store_size"])
        expected = base64.b64decode(t["raw"]["body_b64"]) if t["raw"].get("body_truncated_by_client") \
            else t["body"].encode()
        assert r["body"] == expected and r["crc_ok"]
        assert dict(r["properties"]) == t["properties"] and " ".join(r["keys"]) == t["keys"]


def test_filters_partitions_and_append(spark, basic_store, tmp_path):
    out = str(tmp_path / "part")
    res = run_export(spark, basic_store, out, topics=["Topic[AB]"], partition_by=["topic", "store_date"])
    assert res["per_topic"] == {"TopicA": 1500, "TopicB": 800}
    assert sorted(p.name for p in (tmp_path / "part").iterdir() if p.is_dir()) == ["topic=TopicA", "topic=TopicB"]
    run_export(spark, basic_store, out, topics=["TopicDelay"], partition_by=["topic", "store_date"], mode="append")
    assert pq.read_table(out).num_rows == 2310
    default = run_export(spark, basic_store, str(tmp_path / "nosys"))
    assert "%RETRY%GID_FIXTURE" not in default["per_topic"] and default["messages"] == 2331


def test_corrupt_commitlog(spark, basic_store, store_copy, tmp_path):
    s = store_copy(basic_store)
    f = s / "commitlog" / "00000000000002097152"
    data = bytearray(f.read_bytes())
    data[100_000:100_010] = b"\xff" * 10          # inside a record's fixed header
    f.write_bytes(bytes(data))
    res = run_export(spark, s, str(tmp_path / "bad"))
    assert not res["written"] and res["corrupt"][0]["file"].endswith("00000000000002097152")
    res = run_export(spark, s, str(tmp_path / "skip"), skip_corrupt=True)
    assert res["written"] and 2000 < res["messages"] < 2331


def test_cli_export_and_bad_input(basic_store, tmp_path):
    out = tmp_path / "cli"
    proc = run_cli("spark", "export", basic_store, "--out", out, "--master", "local[1]", "--topic", "TopicC", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json_lines(proc.stdout)[-1]
    assert summary["per_topic"] == {"TopicC": 21} and "Exception" not in proc.stderr
    import pandas
    assert len(pandas.read_parquet(out)) == 21
    again = run_cli("spark", "export", basic_store, "--out", out)
    assert again.returncode == 2 and "--mode" in again.stderr
    notstore = run_cli("spark", "export", tmp_path, "--out", tmp_path / "x")
    assert notstore.returncode == 2 and "not a store root" in notstore.stderr


def test_plan_splits_rejects_non_stores(tmp_path):
    from store.errors import NotFoundError, WrongKindError
    with pytest.raises(NotFoundError):
        plan_splits(tmp_path / "missing")
    with pytest.raises(WrongKindError):
        plan_splits(tmp_path)
    (tmp_path / "commitlog").mkdir()
    assert plan_splits(tmp_path) == []
    shutil.rmtree(tmp_path / "commitlog")


def test_rebuild_index_is_byte_identical(spark, basic_store, tmp_path):
    from mqtool.spark.rebuild import run_rebuild
    from store.query import query_by_key
    from store.verify import verify_store
    out = tmp_path / "rebuilt"
    res = run_rebuild(spark, basic_store, out, cq_file_size=6000, slots=1000, entries=4000, split_bytes=300_000)
    assert res["units"] == 2371
    original = {p.relative_to(basic_store): p.read_bytes() for p in (basic_store / "consumequeue").rglob("0000*")}
    rebuilt = {p.relative_to(out): p.read_bytes() for p in (out / "consumequeue").rglob("0000*")}
    assert rebuilt == original
    assert verify_store(out).ok
    assert [o for o, _ in query_by_key(out, "TopicA", "A-1234").records] == \
        [o for o, _ in query_by_key(basic_store, "TopicA", "A-1234").records]


def test_rebuild_in_place_refuses_unclean_store(crashed_store, store_copy):
    s = store_copy(crashed_store)
    proc = run_cli("spark", "rebuild-index", s, "--in-place")
    assert proc.returncode == 2 and "--yes" in proc.stderr
    proc = run_cli("spark", "rebuild-index", s, "--in-place", "--yes")
    assert proc.returncode == 1 and "abort file present" in proc.stderr
