"""`spark rebuild-index`: consume queues byte-identical to the broker's, an index that answers the same."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")

from mqtool.spark.rebuild import run_rebuild  # noqa: E402
from mqtool_store.query import query_by_key  # noqa: E402
from mqtool_store.verify import verify_store  # noqa: E402
from tests.conftest import json_lines, run_cli  # noqa: E402
from tests.spark.genstore import write_store  # noqa: E402

pytestmark = pytest.mark.slow
FIXTURE_SIZES = dict(cq_file_size=6000, slots=1000, entries=4000)   # tests/data/README.md


def cq_files(root):
    return {p.relative_to(root): p.read_bytes() for p in (root / "consumequeue").rglob("*") if p.is_file()}


def keys_answer(root, topic, key):
    return sorted(o for o, _ in query_by_key(root, topic, key).records)


def test_rebuilt_consume_queues_are_the_brokers_bytes(spark, basic_store, tmp_path):
    out = tmp_path / "rebuilt"
    res = run_rebuild(spark, basic_store, out, split_bytes=300_000, **FIXTURE_SIZES)
    assert res["units"] == 2371 and res["splits"] > 3 and res["index_files"] >= 2     # 4000 entries per file
    original = cq_files(basic_store)
    assert len(original) > 20 and cq_files(out) == original
    assert verify_store(out).ok, verify_store(out).problems[:5]
    for topic, key in [("TopicA", "A-1234"), ("TopicA", "shared-3"), ("TopicB", "B-17"), ("TopicC", "C-0")]:
        assert keys_answer(out, topic, key) == keys_answer(basic_store, topic, key)
    assert keys_answer(out, "TopicA", "shared-3")                      # non-empty: the query really ran
    assert (out / "commitlog").samefile(out / "commitlog") and (out / "checkpoint").is_file()


def test_rebuild_generated_store_with_transactions_verifies(spark, tmp_path):
    root = tmp_path / "gen"
    truth = write_store(root, bad_crc=False)
    res = run_rebuild(spark, root, tmp_path / "out", cq_file_size=200, slots=100, entries=400, split_bytes=8192)
    assert res["units"] == sum(t["dispatched"] for t in truth) < len(truth)   # prepared/rollback left out
    report = verify_store(tmp_path / "out")
    assert report.ok, [str(p) for p in report.problems[:5]]
    assert len(list((tmp_path / "out" / "consumequeue" / "Orders" / "1").iterdir())) > 1   # several 200-byte files


def test_rebuild_in_place_on_a_stopped_store(spark, basic_store, store_copy):
    s = store_copy(basic_store)
    original = cq_files(s)
    run_rebuild(spark, s, in_place=True, split_bytes=300_000, **FIXTURE_SIZES)
    assert cq_files(s) == original
    [backup] = s.glob("rebuild-backup-*")
    assert (backup / "consumequeue").is_dir() and (backup / "index").is_dir()
    assert verify_store(s).ok


def test_cli_rebuild_reads_broker_conf(basic_store, tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=1000\nmaxIndexNum=4000\n")
    out = tmp_path / "out"
    proc = run_cli("spark", "rebuild-index", basic_store, "-c", conf, "--out", out, "--master", "local[2]", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json_lines(proc.stdout)[-1]
    assert summary["mapped_file_size_consume_queue"] == 6000 and summary["units"] == 2371
    assert cq_files(out) == cq_files(basic_store)
    verify = run_cli("store", "verify", out)
    assert verify.returncode == 0, verify.stdout[-2000:]


def test_cli_rebuild_refuses_live_or_unclean_stores(basic_store, crashed_store, store_copy, tmp_path):
    from mqtool_store.lockfile import StoreLock
    proc = run_cli("spark", "rebuild-index", crashed_store, "--in-place")
    assert proc.returncode == 2 and "--yes" in proc.stderr
    proc = run_cli("spark", "rebuild-index", crashed_store, "--in-place", "--yes")
    assert proc.returncode == 1 and "abort file present" in proc.stderr
    proc = run_cli("spark", "rebuild-index", crashed_store, "--in-place", "--yes", "--copy-commitlog")
    assert proc.returncode == 2 and "--copy-commitlog applies to a rebuild into --out" in proc.stderr
    s = store_copy(basic_store)
    lock = StoreLock(s)
    lock.acquire()
    try:
        proc = run_cli("spark", "rebuild-index", s, "--in-place", "--yes")
        assert proc.returncode == 3 and "lock is held" in proc.stderr
    finally:
        lock.release()
    proc = run_cli("spark", "rebuild-index", s, "--out", s / "inside")
    assert proc.returncode == 2 and "outside the store" in proc.stderr
    assert not (s / "inside").exists() and not list(s.glob("rebuild-backup-*"))


def index_sizes(root):
    return {p.stat().st_size for p in (root / "index").iterdir()}


def test_cli_rebuild_of_the_readme_sample_keeps_its_file_sizes(basic_store, tmp_path):
    """The README's own sample store, no config given (issue 44, item 8): its consume queue files
    are 6,000 bytes and its index files 84,040; the rebuild wrote 6,000,000-byte queue files."""
    out = tmp_path / "out"
    proc = run_cli("spark", "rebuild-index", basic_store, "--out", out, "--master", "local[2]")
    assert proc.returncode == 0, proc.stderr
    [line] = [ln for ln in proc.stderr.splitlines() if ln.startswith("sizes: ")]
    assert line == ("sizes: consume queue files of 6,000 bytes (the size of the store's consume queue files); "
                    "index files of 1,000 hash slots and 4,000 entries (the size of the store's index files)")
    assert cq_files(out) == cq_files(basic_store)
    assert index_sizes(out) == index_sizes(basic_store) == {84_040}


def test_cli_rebuild_takes_sizes_from_the_broker_conf_beside_the_store(basic_store, tmp_path):
    """`cluster start`'s layout: broker-a-0/broker.conf beside broker-a-0/store, and no consume
    queue or index files left to measure."""
    import shutil
    root = tmp_path / "broker-a-0" / "store"
    shutil.copytree(basic_store, root)
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    (root.parent / "broker.conf").write_text(f"storePathRootDir={root}\nmappedFileSizeConsumeQueue=6000\n"
                                             "maxHashSlotNum=1000\nmaxIndexNum=4000\n")
    out = tmp_path / "out"
    proc = run_cli("spark", "rebuild-index", root, "--out", out, "--master", "local[2]", "--json")
    assert proc.returncode == 0, proc.stderr
    beside = f"from {root.parent / 'broker.conf'}, beside the store"
    assert json_lines(proc.stdout)[-1]["sizes_from"] == {"mappedFileSizeConsumeQueue": beside, "index": beside}
    assert cq_files(out) == cq_files(basic_store)
    assert index_sizes(out) == {84_040}
