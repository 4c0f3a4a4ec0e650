"""`store dump --json`: the fast line writer (store/dumpjson.py) against the reference path
(dump_commitlog rows, the CLI's body rendering and JSON encoder), byte for byte."""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from mqtool.cli.output import json_line
from mqtool.cli.output import render_body as cli_render_body
from mqtool_store.dump import Filters, dump_commitlog, render_body
from mqtool_store import dumpjson
from mqtool_store.commitlog import new_record
from mqtool_store.dumpcols import ColumnWriter, _hex16, _ints
from mqtool_store.dumpjson import commitlog_json
from mqtool_store.layout import StorePaths
from mqtool_store.reader import CommitLogReader
from mqtool_store.rowgroups import group_rows
from tests.conftest import run_cli
from tests.store.varied import PLACEHOLDER, damage, varied_records, write_commitlog


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


# Runs of plain records, the column writer's input (store/dumpcols.py), mixed with records it
# must leave to the record-by-record path; each layout comes in runs of varying length so runs
# start and end everywhere (inside a column chunk, at its edges, at file ends).
PLAIN_LAYOUTS = [
    "KEYS\x01k{i}\x02TAGS\x01Tag{t}\x02UNIQ_KEY\x01{u}\x02CLUSTER\x01DefaultCluster",
    "UNIQ_KEY\x01{u}\x02CLUSTER\x01c\x02TAGS\x01Tag{t}",                    # no KEYS
    "KEYS\x01k{i} k{i}x\x02WAIT\x01true",                                   # two keys; no TAGS, UNIQ_KEY
    "KEYS\x01k{i}\x02TAGS\x01Tag{t}\x02",                                   # the C++ client's trailing 0x02
    "TAGS\x01标签{t}\x02KEYS\x01ключ{i}\x02note\x01🎉 \u2028 é",
    "TAGS\x01" + PLACEHOLDER.decode() + "{t}\x02KEYS\x01k{i}",              # invalid UTF-8 (replaced)
    "KEYS\x01  k{i}  lead\x02TAGS\x01t",                                    # keys with runs of spaces
    "KEYS\x01k{i}",
    "a\x01b\x02a\x01c{i}",                                                  # a key twice: the last wins
    "TAGS\x01\x02KEYS\x01k{i}",                                             # an empty value
    "TAGS\x01x\x02\x02KEYS\x01k{i}",                                        # an empty piece
    'TAGS\x01q"uote{t}',                                                    # something to escape
    "TAGS\x01Tag{t}\x02KEYS\x01k{i}\x02TAGS\x01Tag2",                          # TAGS twice: the last wins
    "xTAGS\x01Tag{t}\x02v\x01TAGS\x01Tag{t}",                                  # "TAGS\x01" in a key and a value
    "TAGS\x01Tag{t}\x01more\x02TAGS\x01",                                     # 0x01 in a value; an empty TAGS
    "",                                                                     # no properties
]
PLAIN_TOPICS = ["Orders", "话题", "T" * 15, "T" * 16, "%RETRY%GID_long_consumer_group", "Orders"]


def plain_records(n: int, seed: int = 11) -> list:
    rnd = random.Random(seed)
    out = []
    layout, left = 0, 0
    for i in range(n):
        if left == 0:
            layout, left = rnd.randrange(len(PLAIN_LAYOUTS)), rnd.choice([1, 2, 3, 7, 30, 90])
        left -= 1
        body = rnd.choice([b"", b"body %d" % i, "ünï ✓".encode(), bytes(rnd.randrange(256) for _ in range(33)),
                           b"x" * 5000])
        rec = new_record(rnd.choice(PLAIN_TOPICS), body,
                         properties_text=PLAIN_LAYOUTS[layout].format(i=i, t=i % 3, u=f"{i:032X}"),
                         queue_id=rnd.choice([0, 1, 3, -1, 2**31 - 1]), queue_offset=rnd.choice([i, -i, 2**40 + i]),
                         flag=rnd.choice([0, 0, 0, 7, -1]), born_timestamp=rnd.choice([1_700_000_000_000 + i, -5, 0]),
                         store_timestamp=1_700_000_000_100 + i if i % 50 else -1,
                         born_host=(bytes([10, 0, 0, 1 + i % 2]), rnd.choice([50000, 50001, 2**31 - 1])),
                         store_host=(b"\x7f\0\0\x01", 10911), reconsume_times=rnd.choice([0, 0, 0, 2]),
                         sys_flag=rnd.choice([0, 0, 0, 0x4, 0x8, 0x2, 0x1]),
                         prepared_transaction_offset=rnd.choice([0, 0, 0, 123456]))
        if i % 41 == 5:
            rec.body_crc ^= 1                 # a wrong body CRC
        out.append(rec)
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    d = tmp_path_factory.mktemp("plain") / "commitlog"
    write_commitlog(d, plain_records(3000), file_size=256 * 1024)
    return d


@pytest.fixture
def taken(monkeypatch):
    """How many records the column writer wrote (the tests must exercise it, not only the
    record-by-record path). The store kernel, which writes --body none lines first where it is
    built, is off (tests/store/test_dumplines_kernel.py holds it to the same bytes)."""
    monkeypatch.setattr(dumpjson, "kernel", None)
    counts = {"records": 0, "runs": 0}
    lines = ColumnWriter.lines

    def counting(self, *args):
        text, n = lines(self, *args)
        counts["records"] += n
        counts["runs"] += n > 0
        return text, n
    monkeypatch.setattr(ColumnWriter, "lines", counting)
    return counts


@pytest.mark.parametrize("body,cap", [("none", None), ("text", None), ("hex", None), ("base64", None),
                                      ("text", 0), ("text", 6), ("hex", 3), ("base64", -1), ("none", 2)])
def test_column_runs_are_the_reference_bytes(plain, taken, body, cap):
    text = assert_same(plain, Filters(), body, cap)
    assert text.count('"kind": "message"') == 3000
    assert taken["records"] > 1000 and taken["runs"] > 20


@pytest.mark.parametrize("chunk,span,singles", [(1, 200, 1), (7, 3000, 2), (64, 1 << 20, 5)])
def test_column_runs_cut_anywhere(plain, damaged, taken, monkeypatch, chunk, span, singles):
    monkeypatch.setattr(dumpjson, "_COLUMN_CHUNK", chunk)
    monkeypatch.setattr(dumpjson, "_FIRST_SPAN", span)
    monkeypatch.setattr(dumpjson, "_MAX_SPAN", span * 4)
    monkeypatch.setattr(dumpjson, "_RETRY_SPAN", span // 2)
    monkeypatch.setattr(dumpjson, "_MOST_SINGLES_LOG2", singles)
    assert_same(plain, Filters(), "text", 5)
    for f in (Filters(limit=1), Filters(limit=333), Filters(from_offset=300_000, to_offset=700_001),
              Filters(to_offset=256 * 1024), Filters(from_offset=256 * 1024 + 1, limit=1000)):
        assert_same(plain, f)
    assert_same(damaged, Filters(), "none")
    assert taken["records"] > 1000


@pytest.mark.parametrize("f", [
    Filters(topic="Orders"), Filters(topic="话题"), Filters(topic="T" * 16), Filters(topic="T" * 15 + "x"),
    Filters(topic=""), Filters(queue=3), Filters(queue=-1), Filters(since=1_700_000_001_000),
    Filters(until=1_700_000_000_900), Filters(since=1_700_000_000_500, until=1_700_000_000_600),
    Filters(topic="Orders", queue=1, limit=40), Filters(topic="Orders", limit=1), Filters(queue=0, limit=500),
    Filters(topic="Orders", from_offset=300_000, to_offset=600_001), Filters(topic="%RETRY%GID_long_consumer_group"),
    Filters(topic="Orders", tag="Tag1"), Filters(topic="Or\ufffders"),
    # tags and keys: found by their bytes, then checked on the parsed properties
    Filters(tag="Tag1"), Filters(tag="标签2"), Filters(tag="t"), Filters(tag="x"), Filters(tag='q"uote1'),
    Filters(tag=""), Filters(tag="Tag"), Filters(tag="Tag2\x01more"), Filters(tag="Tag1\x02"),
    Filters(key="k5"), Filters(key="k788x"), Filters(key="lead"),
    Filters(key="k1"),                  # its bytes are in k10, k100, ...: found, then refused
    Filters(key="ключ340"), Filters(key=f"{149:032X}"), Filters(key="DefaultCluster"), Filters(key="c1"),
    Filters(tag="Tag1", key="k148"), Filters(topic="话题", tag="Tag2", queue=1), Filters(tag="Tag0", limit=25),
    Filters(tag="\ufffd1"), Filters(key="k\ufffd"),
])
def test_filters_take_column_runs(plain, damaged, taken, f):
    """Every filter selects rows of each column run (the others are skipped unread), with the
    reference's bytes; a topic, tag or key with U+FFFD stays record by record."""
    text = assert_same(plain, f, "text", 5)
    assert_same(damaged, f)
    odd = any("\ufffd" in v for v in (f.topic, f.tag, f.key) if v is not None)
    if not odd and text.count('"kind": "message"') > 300:
        assert taken["records"] > 0
    if odd:
        assert taken["records"] == 0


@pytest.mark.parametrize("chunk,span", [(1, 200), (7, 3000)])
def test_filtered_column_runs_cut_anywhere(plain, taken, monkeypatch, chunk, span):
    monkeypatch.setattr(dumpjson, "_COLUMN_CHUNK", chunk)
    monkeypatch.setattr(dumpjson, "_FIRST_SPAN", span)
    monkeypatch.setattr(dumpjson, "_MAX_SPAN", span * 4)
    monkeypatch.setattr(dumpjson, "_RETRY_SPAN", span // 2)
    for f in (Filters(topic="Orders"), Filters(queue=3, limit=77), Filters(topic="话题", since=1_700_000_001_500)):
        assert_same(plain, f, "none")
    assert taken["records"] > 100


def test_layouts_of_one_shape_with_other_names(tmp_path, taken):
    """Records whose properties have the same shape but other names in the first pairs and the
    same last name (three producers' orders): the run is cut where the names change (this
    crashed the column writer once)."""
    layouts = ["KEYS\x01k{i}\x02TAGS\x01A\x02UNIQ_KEY\x01u{i}", "TAGS\x01B\x02WAIT\x01true\x02UNIQ_KEY\x01u{i}",
               "KEYS\x01k{i}\x02WAIT\x01false\x02UNIQ_KEY\x01u{i}"]
    recs = [new_record("T", b"b%d" % i, properties_text=layouts[(i // 7) % 3].format(i=i), physical_offset=0)
            for i in range(200)]
    d = tmp_path / "commitlog"
    write_commitlog(d, recs, file_size=64 * 1024)
    assert assert_same(d, Filters(), "text").count('"kind": "message"') == 200
    assert taken["records"] > 100


def test_a_value_holding_the_run_separator(tmp_path, taken):
    """The column writer joins a run's properties with 0x03 between records: a record whose own
    properties hold a 0x03 ended its properties there (its line lost the rest)."""
    recs = [new_record("T", b"b", properties_text=f"KEYS\x01k{i}" + ("\x03x\x02TAGS\x01t" if i % 5 == 3 else ""))
            for i in range(40)]
    d = tmp_path / "commitlog"
    write_commitlog(d, recs, file_size=64 * 1024)
    assert assert_same(d, Filters(), "text").count("\\u0003") == 2 * 8
    assert taken["records"] > 20


def test_column_runs_on_fixture_stores(basic_store, crashed_store, taken):
    for store in (basic_store, crashed_store):
        assert_same(StorePaths.of(store).commitlog, Filters(), "text")
    assert taken["records"] > 2000


def test_hex16_and_small_ints():
    values = np.array([0, 1, 255, 0x7FFFFFFFFFFFFFFF, 4095, 4096, 123456789012], dtype=np.int64)
    assert _hex16(values) == [f"{v:016X}" for v in values.tolist()]
    assert _ints(values) == [str(v) for v in values.tolist()]
    assert _ints(np.array([-1, 3])) == ["-1", "3"]
    assert _hex16(values[:1]) == ["0000000000000000"] and _ints(values[:0]) == []


def test_group_rows_is_exact():
    rnd = np.random.default_rng(5)
    a = rnd.integers(0, 5, 5000)
    b = rnd.integers(-3, 3, 5000).astype(">i4")
    group, reps = group_rows([a, b])
    assert len(reps) == len({(x, y) for x, y in zip(a.tolist(), b.tolist())})
    for g, r in enumerate(reps.tolist()):
        rows = np.flatnonzero(group == g)
        assert (a[rows] == a[r]).all() and (b[rows] == b[r]).all()
    # Different rows that share a slot: undecided, never merged.
    many = np.arange(100_000, dtype=np.int64)
    assert group_rows([many]) is None
    one = np.full(10, 7)
    assert group_rows([one])[1].tolist() == [0]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A store root whose commit log mixes runs of plain records (the store kernel's) with every
    other kind (the Python writer's), over several files, two of them damaged (stop rows between)."""
    root = tmp_path_factory.mktemp("mixed") / "store"
    recs, plain, odd = [], plain_records(1200, seed=23), varied_records(240, seed=29)
    for i in range(0, 1200, 50):
        recs += plain[i:i + 50] + odd[i // 5:i // 5 + 10]
    files = write_commitlog(root / "commitlog", recs, file_size=96 * 1024)
    for path, how in zip(files[2:4], ["garbage", "magic"]):
        damage(path, how, at_record=40)
    return root


@pytest.mark.parametrize("body", ["none", "text"])
def test_cli_json_over_a_pipe_is_the_reference_bytes(mixed, body):
    """`mqtool store dump ROOT --json` read from a pipe as bytes (no decoding, no newline
    translation) is the reference rendering's UTF-8, the unclean stop rows in their places."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}    # (stdout buffered, as usual)
    proc = subprocess.run([sys.executable, "-m", "mqtool", "store", "dump", str(mixed), "--json", "--body", body],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, timeout=120, env=env)
    with CommitLogReader(mixed / "commitlog") as reader:
        want = "".join(line for line in reference_text(reader, Filters(), body, None).splitlines(keepends=True)
                       if '"kind": "stop"' not in line or '"clean": false' in line)
    assert want.count('"clean": false') == 2 and "标签" in want
    assert proc.stdout == want.encode()
    assert proc.returncode == 1 and proc.stderr.decode().count("mqtool: stopped reading") == 2


def test_cli_json_store_dump_into_head_exits_0_quietly(mixed):
    """`mqtool store dump ROOT --json --body none | head -1` over more lines than a pipe holds: the
    bytes written to stdout's binary layer meet the closed pipe, and the CLI still exits 0 quietly."""
    import subprocess
    import sys

    from tests.conftest import REPO
    proc = subprocess.Popen([sys.executable, "-m", "mqtool", "store", "dump", str(mixed), "--json", "--body", "none"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b'{"kind": "message"')
    proc.stdout.close()
    assert proc.wait(60) == 0
    assert proc.stderr.read() == b""


@pytest.mark.parametrize("encoding,binary", [("utf-8", True), ("UTF8", True), ("latin-1", False), ("utf-16", False)])
def test_bulk_bytes_go_to_stdout_only_where_they_are_its_text(monkeypatch, encoding, binary):
    """utf8_stdout: the binary layer (its text layer flushed first, so the order stays) only
    under a UTF-8 text layer; otherwise None, and the CLI writes text."""
    import io
    import sys

    from mqtool.cli.output import utf8_stdout
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding=encoding)
    monkeypatch.setattr(sys, "stdout", out)
    out.write("before\n")
    got = utf8_stdout()
    if binary:
        assert got is out.buffer and raw.getvalue() == b"before\n"
    else:
        assert got is None
