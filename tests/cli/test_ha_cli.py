"""`mqtool ha status --store A --store B`: two stores compared offline, as a user runs it."""
from __future__ import annotations

import json

from tests.conftest import run_cli


def test_identical_stores_are_in_sync(basic_store, tmp_path):
    proc = run_cli("ha", "status", "--store", basic_store, "--store", basic_store, "--json", check=True)
    diff = json.loads(proc.stdout)
    assert diff["in_sync"] and diff["slave_lacks_bytes"] == 0 and diff["first_difference"] is None


def test_a_lagging_copy_and_a_diverged_copy(basic_store, store_copy):
    slave = store_copy(basic_store)
    last = sorted((slave / "commitlog").iterdir())[-1]
    data = bytearray(last.read_bytes())
    data[100] ^= 0xFF                               # inside the first record of the last file
    last.write_bytes(bytes(data))
    proc = run_cli("ha", "status", "--store", basic_store, "--store", slave)
    assert proc.returncode == 1, proc.stderr
    assert "first_difference" in proc.stdout and "Traceback" not in proc.stderr
    diff = json.loads(run_cli("ha", "status", "--store", basic_store, "--store", slave, "--json").stdout)
    assert diff["first_difference"]["offset"] == int(last.name) + 100


def test_bad_usage_is_one_line(basic_store, tmp_path):
    for args in (["--store", str(basic_store)], ["--store", str(basic_store), "--store", str(tmp_path / "nope")],
                 ["--store", str(basic_store), "--store", str(basic_store), "--watch", "1"],
                 ["--store", str(basic_store), "--store", str(basic_store), "--cluster", "DefaultCluster"]):
        proc = run_cli("ha", "status", *args)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("mqtool: error:")


def test_a_cluster_with_no_name_server_is_one_line():
    proc = run_cli("ha", "status", "-n", "127.0.0.1:1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
