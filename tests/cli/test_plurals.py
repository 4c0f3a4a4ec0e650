"""Counts in the commands' output take the noun's number (issue 44): "1 message in 1 micro-batch",
never "1 messages in 1 micro-batches". One helper (mqtool/common/plural.py) makes every such phrase;
the commands are run for real on one-message stores and topics."""
from __future__ import annotations

import re

import pytest

from mqtool.common.plural import count
from tests.conftest import json_lines, run_cli
from tests.spark.genstore import write_store

# a count followed by a plural noun where the count is 1: what no output may say
ONE_PLURAL = re.compile(r"(?<![\d.])1 (\[/\] )?(messages|micro-batches|batches|splits|records|queues|files|units|"
                        r"keys|entries|topics|groups|bytes|commitlog files|index files|index keys|index entries|"
                        r"consume queue units|subscription groups)\b")


@pytest.mark.parametrize("n, noun, said", [
    (0, "message", "0 messages"), (1, "message", "1 message"), (2, "message", "2 messages"),
    (1, "micro-batch", "1 micro-batch"), (3, "micro-batch", "3 micro-batches"), (2, "batch", "2 batches"),
    (1, "index entry", "1 index entry"), (2, "index entry", "2 index entries"), (2, "key", "2 keys"),
    (2, "commitlog file", "2 commitlog files"), (1, "split", "1 split"), (2, "day", "2 days"),
    (2, "consumer offset entry", "2 consumer offset entries"), (1, "byte", "1 byte")])
def test_count(n, noun, said):
    assert count(n, noun) == said


@pytest.fixture(scope="module")
def one_message_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("one") / "store"
    write_store(root, n=1, bad_crc=False)
    return root


def test_store_stats_and_verify_of_one_message(one_message_store):
    stats = run_cli("store", "stats", one_message_store)
    assert stats.returncode == 0, stats.stderr
    assert "1 message in 1 commitlog file" in stats.stdout, stats.stdout
    verify = run_cli("store", "verify", one_message_store)
    assert "1 record, " in verify.stdout, verify.stdout
    for out in (stats.stdout, verify.stdout):
        assert not ONE_PLURAL.search(out), out


@pytest.mark.slow
def test_spark_export_and_rebuild_of_one_message(one_message_store, tmp_path):
    pytest.importorskip("pyspark")
    export = run_cli("spark", "export", one_message_store, "--out", tmp_path / "out", "--master", "local[1]")
    assert export.returncode == 0, export.stderr[-3000:]
    assert re.search(r"^1 message, \d+ bytes from 1 commitlog file \(1 split\) in ", export.stdout, re.MULTILINE), export.stdout
    rebuild = run_cli("spark", "rebuild-index", one_message_store, "--out", tmp_path / "rebuilt", "--master", "local[1]")
    assert rebuild.returncode == 0, rebuild.stderr[-3000:]
    assert re.search(r"^1 consume queue unit in 1 queue, \d+ index keys in 1 index file, from 1 record in ",
                     rebuild.stdout, re.MULTILINE), rebuild.stdout
    for out in (export.stdout, rebuild.stdout):
        assert not ONE_PLURAL.search(out), out


@pytest.mark.slow
def test_live_export_and_replay_of_one_message(cluster, tmp_path):
    pytest.importorskip("pyspark")
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "OnePlural", "-r", "1", "-w", "1", check=True)
    run_cli("send", "-n", ns, "-t", "OnePlural", "only one", check=True)
    out = tmp_path / "out"
    export = run_cli("spark", "export", "-n", ns, "-t", "OnePlural", "-o", out, "--checkpoint", tmp_path / "ck",
                     "--available-now", "--master", "local[1]")
    assert export.returncode == 0, export.stderr[-3000:]
    assert re.search(r"^batch 0: 1 message in ", export.stderr, re.MULTILINE), export.stderr
    assert re.search(r"^1 message in 1 micro-batch from 1 queue in ", export.stdout, re.MULTILINE), export.stdout
    replay = run_cli("spark", "replay", out, "-t", "OnePluralCopy", "-n", ns, "--master", "local[1]")
    assert replay.returncode == 0, replay.stderr[-3000:]
    assert re.search(r"^1 message sent to OnePluralCopy in ", replay.stdout, re.MULTILINE), replay.stdout
    got = json_lines(run_cli("consume", "-n", ns, "-t", "OnePluralCopy", "-e", "--json", check=True).stdout)
    assert [g["body"] for g in got] == ["only one"]
    for text in (export.stdout, export.stderr, replay.stdout):
        assert not ONE_PLURAL.search(text), text


def test_a_trace_record_of_one_field_says_so():
    """What `message trace` says on stderr of a record it reads around."""
    from mqtool.common.tracedata import TraceDecodeError, _record
    with pytest.raises(TraceDecodeError, match=r"^Pub record of 1 field \(at least 12\)$"):
        _record(["Pub"], 0)
