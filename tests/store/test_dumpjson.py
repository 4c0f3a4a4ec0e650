"""`store dump --json`: the fast line writer (store/dumpjson.py) against the reference path
(dump_commitlog rows, the CLI's body rendering and JSON encoder), byte for byte."""
from __future__ import annotations

import shutil

import pytest

from mqtool.cli.output import json_line
from mqtool.cli.output import render_body as cli_render_body
from mqtool_store.dump import Filters, dump_commitlog
from mqtool_store.dumpjson import commitlog_json, render_body
from mqtool_store.layout import StorePaths
from mqtool_store.reader import CommitLogReader
from tests.conftest import run_cli
from tests.store.varied import damage, varied_records, write_commitlog


def reference_text(reader, f: Filters, body: str, cap) -> str:
    out = []
    for row in dump_commitlog(reader, f):
        if row["kind"] == "message":
            text, cut = cli_render_body(row.pop("body_bytes"), body, cap)
            row["body"], row["body_truncated"], row["body_encoding"] = text, cut, body
        out.append(json_line(row))
    return "".join(out)


def fast_text(reader, f: Filters, body: str, cap) -> str:
    def encode_row(row):
        text, cut = cli_render_body(row.pop("body_bytes"), body, cap)
        row["body"], row["body_truncated"], row["body_encoding"] = text, cut, body
        return json_line(row)
    return "".join(item if isinstance(item, str) else json_line(item)
                   for item in commitlog_json(reader, f, body, cap, encode_row))


def assert_same(directory, f: Filters, body: str = "none", cap=None):
    with CommitLogReader(directory) as reader:
        ref = reference_text(reader, f, body, cap)
        fast = fast_text(reader, f, body, cap)
    assert fast.splitlines() == ref.splitlines()     # a readable diff first
    assert fast == ref
    return ref


@pytest.fixture(scope="module")
def varied(tmp_path_factory):
    d = tmp_path_factory.mktemp("varied") / "commitlog"
    write_commitlog(d, varied_records(400), negative_phys_every=37)
    return d


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    d = tmp_path_factory.mktemp("damaged") / "commitlog"
    files = write_commitlog(d, varied_records(400), file_size=8 * 1024)
    for path, how in zip(files[1:], ["garbage", "size", "magic", "zeros", "body_len"]):
        damage(path, how, at_record=3)
    return d


@pytest.mark.parametrize("body,cap", [("none", None), ("text", None), ("hex", None), ("base64", None),
                                      ("text", 0), ("text", 5), ("hex", 3), ("base64", -1)])
def test_every_record_kind_and_body_mode(varied, body, cap):
    text = assert_same(varied, Filters(), body, cap)
    assert text.count('"kind": "message"') == 400


@pytest.mark.parametrize("body", ["none", "text"])
def test_damaged_files_stop_alike(damaged, body):
    text = assert_same(damaged, Filters(), body)
    assert '"clean": false' in text


@pytest.mark.parametrize("filters", [
    Filters(topic="Orders"), Filters(topic="话题"), Filters(queue=-1), Filters(tag="TagA"), Filters(tag="x"),
    Filters(key="k2"), Filters(key="ABCDEF0123"), Filters(key="only"), Filters(since=1_700_000_000_150),
    Filters(until=1_700_000_000_120), Filters(limit=0), Filters(limit=1), Filters(limit=57),
    Filters(topic="Orders", queue=1, limit=9), Filters(from_offset=20_000), Filters(from_offset=16_384),
    Filters(from_offset=17_000, to_offset=40_000), Filters(to_offset=16_384), Filters(to_offset=0),
    Filters(from_offset=10**9),
])
def test_filters_and_ranges(varied, damaged, filters):
    assert_same(varied, filters)
    assert_same(damaged, filters, "text")


@pytest.mark.parametrize("body", ["none", "text", "base64"])
def test_fixture_stores(basic_store, crashed_store, body):
    for store in (basic_store, crashed_store):
        assert_same(StorePaths.of(store).commitlog, Filters(), body)
    assert_same(StorePaths.of(basic_store).commitlog, Filters(topic="TopicA", tag="TagB"), body, 7)


@pytest.mark.parametrize("body", [b"", b"abc", "é✓".encode(), b"\xff\x00\x80", None])
@pytest.mark.parametrize("mode,cap", [("text", None), ("hex", 1), ("base64", 0), ("none", None), ("text", -1),
                                      ("text", 2)])
def test_render_body_is_the_clis(body, mode, cap):
    assert render_body(body, mode, cap) == cli_render_body(body, mode, cap)


def test_cli_writes_the_reference_bytes(damaged, tmp_path):
    root = tmp_path / "store"
    shutil.copytree(damaged, root / "commitlog")
    proc = run_cli("store", "dump", root, "--json", "--body", "text")
    with CommitLogReader(root / "commitlog") as reader:
        rows = []
        for row in dump_commitlog(reader, Filters()):
            if row["kind"] == "message":
                text, cut = cli_render_body(row.pop("body_bytes"), "text", None)
                row["body"], row["body_truncated"], row["body_encoding"] = text, cut, "text"
            elif row["clean"]:
                continue                  # the CLI shows clean ends only in its summary
            rows.append(json_line(row))
    assert proc.stdout == "".join(rows)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("mqtool: stopped reading") == "".join(rows).count('"kind": "stop"') >= 3
