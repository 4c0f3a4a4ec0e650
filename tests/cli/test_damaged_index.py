"""A damaged index file is reported and skipped; the other index files still answer (issue 10)."""
from __future__ import annotations

import json

from tests.conftest import run_cli


def damage(store_root, how: str):
    newest = sorted((store_root / "index").iterdir())[-1]
    data = bytearray(newest.read_bytes())
    if how == "short":
        newest.write_bytes(bytes(data[:1000]))            # size no longer matches any geometry
    else:                                  # every hash slot points at entry 2; entries 2 and 3 point at each other
        data[40:40 + 4000] = (2).to_bytes(4, "big") * 1000
        entries = 40 + 1000 * 4
        for n, prev in ((2, 3), (3, 2)):
            data[entries + n * 20:entries + n * 20 + 4] = (0x7FFFFFFF).to_bytes(4, "big")   # hash of no key
            data[entries + n * 20 + 12:entries + n * 20 + 16] = (0).to_bytes(4, "big")       # time diff
            data[entries + n * 20 + 16:entries + n * 20 + 20] = prev.to_bytes(4, "big")
        newest.write_bytes(bytes(data))
    return newest


def test_stats_reports_the_damaged_file_and_the_rest(basic_store, store_copy):
    root = store_copy(basic_store)
    bad = damage(root, "short")
    proc = run_cli("store", "stats", root, "--json")
    assert proc.returncode == 1 and f"damaged index file {bad.name}" in proc.stderr
    result = json.loads(proc.stdout)
    by_name = {i["file"]: i for i in result["index"]}
    assert "error" in by_name[bad.name]
    assert [i for i in result["index"] if "error" not in i][0]["index_count"] > 1
    assert sum(q["messages"] for q in result["commitlog"]["queues"] if q["topic"] == "TopicA") == 1500


def test_key_query_skips_a_damaged_file(basic_store, store_copy):
    root = store_copy(basic_store)
    bad = damage(root, "short")
    proc = run_cli("store", "query", root, "--topic", "TopicA", "--key", "A-3", "--json")
    assert proc.returncode == 1 and bad.name in proc.stderr and "Traceback" not in proc.stderr
    assert [json.loads(line)["keys"] for line in proc.stdout.splitlines()] == [["A-3"]]


def test_a_looping_hash_chain_ends(basic_store, store_copy):
    root = store_copy(basic_store)
    damage(root, "loop")
    proc = run_cli("store", "query", root, "--topic", "TopicA", "--key", "A-1499")
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1)
