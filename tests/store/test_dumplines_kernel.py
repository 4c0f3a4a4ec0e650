"""`store dump --json --body none` through the store kernel (store/csrc/dumplines.c): each plain
record's line written in C, held byte for byte to the reference path (dump_commitlog rows and the
CLI's JSON encoder) on generated, damaged, fixture and random stores (issue 44.13)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtool_store import dumpjson
from mqtool_store.commitlog import new_record
from mqtool_store.dump import Filters
from mqtool_store.kernel import kernel
from mqtool_store.layout import StorePaths
from mqtool_store.reader import CommitLogReader
from tests.store.test_dumpjson import assert_same, plain_records
from tests.store.varied import PLACEHOLDER, damage, varied_records, write_commitlog

pytestmark = pytest.mark.skipif(kernel is None, reason="the store kernel is not built here")


class Counting:
    """The kernel, counting the records its dump_lines wrote."""

    def __init__(self):
        self.records = self.calls = 0

    def dump_lines(self, *args):
        text, n, nxt = kernel.dump_lines(*args)
        self.records += n
        self.calls += 1
        return text, n, nxt


@pytest.fixture
def compiled(monkeypatch):
    counting = Counting()
    monkeypatch.setattr(dumpjson, "kernel", counting)
    return counting


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("dumplines")
    plain, varied, small = root / "plain" / "commitlog", root / "varied" / "commitlog", root / "small" / "commitlog"
    write_commitlog(plain, plain_records(3000), file_size=256 * 1024)
    write_commitlog(varied, varied_records(400), negative_phys_every=37)
    write_commitlog(small, varied_records(300, seed=3), file_size=8 * 1024)
    return {"plain": plain, "varied": varied, "small": small}


def test_the_kernel_writes_the_plain_records(stores, compiled):
    """Most of a store of plain records is written by the kernel, the rest as before."""
    text = assert_same(stores["plain"], Filters())
    assert text.count('"kind": "message"') == 3000
    assert compiled.records > 800, compiled.records          # (the store mixes in records it must leave)


@pytest.mark.parametrize("f", [Filters(), Filters(limit=0), Filters(limit=1), Filters(limit=333),
                               Filters(from_offset=300_000, to_offset=700_001), Filters(to_offset=256 * 1024),
                               Filters(from_offset=256 * 1024 + 1, limit=1000), Filters(to_offset=0),
                               Filters(from_offset=10**9)])
@pytest.mark.parametrize("store", ["plain", "varied", "small"])
def test_kernel_lines_are_the_reference_bytes(stores, compiled, store, f):
    assert_same(stores[store], f)


def test_kernel_lines_cut_anywhere(stores, compiled, monkeypatch):
    for chunk in (1, 7, 100):
        monkeypatch.setattr(dumpjson, "_COMPILED_CHUNK", chunk)
        assert_same(stores["plain"], Filters())
        assert_same(stores["plain"], Filters(limit=chunk * 3 + 1))
    assert compiled.records > 800


def test_kernel_lines_of_fixture_stores(basic_store, crashed_store, compiled):
    for store in (basic_store, crashed_store):
        assert_same(StorePaths.of(store).commitlog, Filters())
    assert compiled.records > 2000


def test_damaged_files_stop_alike_through_the_kernel(tmp_path, compiled):
    d = tmp_path / "commitlog"
    files = write_commitlog(d, plain_records(600, seed=5), file_size=16 * 1024)
    for path, how in zip(files[1:], ["garbage", "size", "magic", "zeros", "body_len"]):
        damage(path, how, at_record=3)
    assert '"clean": false' in assert_same(d, Filters())
    assert compiled.records > 20


pieces = st.one_of(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "k", "a b", " ", "  x  ", "é", "标签", "🎉",
                                    '"', "\\", "\x00", "\x1f", "\x7f", "\u2028", "\x01", "\x02", "", PLACEHOLDER.decode()]),
                   st.text(max_size=6))


@st.composite
def property_texts(draw) -> str:
    """Mostly well-formed properties (what the kernel takes), odd ones now and then (PLACEHOLDER
    is written as invalid UTF-8)."""
    pairs = draw(st.lists(st.tuples(st.lists(pieces, max_size=3), st.lists(pieces, max_size=3)), max_size=5))
    text = "\x02".join("".join(k) + "\x01" + "".join(v) for k, v in pairs)
    return text + "\x02" if draw(st.booleans()) else text


@given(st.lists(st.tuples(property_texts(), st.sampled_from(["T", "话题", 'q"t', "a\\b", "", "x\x01", "T" * 127,
                                                             "T" + PLACEHOLDER.decode()]),
                          st.sampled_from([0, 0, 0x2, 0x4, 0x8, 0xC, 0x1, -(2**31)]),
                          st.sampled_from([b"", b"body", b"\xff" * 9])), min_size=1, max_size=12))
def test_random_records_are_the_reference_bytes(tmp_path_factory, records):
    d = tmp_path_factory.mktemp("random") / "commitlog"
    recs = [new_record(topic, body, properties_text=props, queue_id=i % 3, sys_flag=sys_flag,
                       born_host=(b"\x0a\0\0\x01", -1 if i % 4 == 3 else 50000))
            for i, (props, topic, sys_flag, body) in enumerate(records)]
    write_commitlog(d, recs, file_size=64 * 1024)
    counting, before = Counting(), dumpjson.kernel
    dumpjson.kernel = counting           # (hypothesis runs the test many times: no monkeypatch fixture)
    try:
        assert_same(d, Filters())
    finally:
        dumpjson.kernel = before


def test_an_odd_byte_anywhere_in_a_long_value(tmp_path, compiled):
    """The kernel reads plain text eight bytes at a time: a byte it must not take as it is, at
    every place in a value, key or topic, is still found (and the record left to Python)."""
    odd = ['"', "\\", "\x1f", "\x00", "\x7f", "é", "🎉", PLACEHOLDER.decode(), "\x01", "\x03"]
    recs = []
    for j in range(20):
        for c in odd:
            text = "a" * j + c + "b" * (19 - j)
            recs.append(new_record("T", b"x", properties_text=f"KEYS\x01{text}\x02TAGS\x01t"))
            recs.append(new_record("T", b"x", properties_text=f"{text}\x01v\x02UNIQ_KEY\x01{text}"))
            recs.append(new_record(text.replace("\x00", "z"), b"x", properties_text="TAGS\x01t"))
    d = tmp_path / "commitlog"
    write_commitlog(d, recs, file_size=1 << 20)
    assert assert_same(d, Filters()).count('"kind": "message"') == len(recs)
    assert compiled.records > 10


def test_the_cli_writes_the_reference_bytes_through_the_kernel(stores, tmp_path):
    """`mqtool store dump --json --body none` (the kernel's lines) is the reference's bytes."""
    import shutil

    from mqtool_store.reader import CommitLogReader
    from tests.conftest import run_cli
    from tests.store.test_dumpjson import reference_text
    root = tmp_path / "store"
    shutil.copytree(stores["plain"], root / "commitlog")
    proc = run_cli("store", "dump", root, "--json", "--body", "none")
    assert proc.returncode == 0, proc.stderr
    with CommitLogReader(root / "commitlog") as reader:
        want = "".join(line + "\n" for line in reference_text(reader, Filters(), "none", None).split("\n")
                       if line and '"kind": "stop"' not in line)      # (a value holds U+2028: no splitlines)         # the CLI shows clean ends in no line
    assert proc.stdout == want


def _joined(directory, f: Filters, as_bytes: bool) -> tuple[bytes, set]:
    """commitlog_json's lines (stop rows as the CLI writes them) as UTF-8, and the types it yielded."""
    from mqtool.cli.output import json_line, render_body

    def encode_row(row):
        text, cut = render_body(row.pop("body_bytes"), "none", None)
        row["body"], row["body_truncated"], row["body_encoding"] = text, cut, "none"
        return json_line(row)
    out, kinds = [], set()
    with CommitLogReader(directory) as reader:
        for item in dumpjson.commitlog_json(reader, f, "none", None, encode_row, as_bytes=as_bytes):
            kinds.add(type(item))
            out.append(item if isinstance(item, bytes) else (item if isinstance(item, str) else json_line(item)).encode())
    return b"".join(out), kinds


@pytest.mark.parametrize("f", [Filters(), Filters(limit=333), Filters(from_offset=300_000, to_offset=700_001)])
@pytest.mark.parametrize("store", ["plain", "varied", "small"])
def test_kernel_bytes_are_its_text_encoded(stores, compiled, store, f):
    """dump_lines(..., as_bytes=True) (what the CLI writes to its binary stdout) is the UTF-8 of the
    text it writes otherwise, non-ASCII lines included; the Python path's lines stay str."""
    text, text_kinds = _joined(stores[store], f, False)
    raw, raw_kinds = _joined(stores[store], f, True)
    assert raw == text
    assert bytes not in text_kinds
    if store == "plain" and f.limit is None:
        assert bytes in raw_kinds and str in raw_kinds      # both paths ran


def test_kernel_bytes_of_non_ascii_records(tmp_path):
    """A str call ends at the first non-ASCII record after an ASCII one; a bytes call takes them all."""
    recs = [new_record("话题" if i % 3 == 0 else "T", b"b", properties_text=f"TAGS\x01标签{i}\x02KEYS\x01k{i}")
            for i in range(50)]
    d = tmp_path / "commitlog"
    write_commitlog(d, recs, file_size=1 << 20)
    with CommitLogReader(d) as reader:
        mf = reader.files[0]
        buf = reader.buffer(mf)
        args = (buf, 0, len(buf), len(buf), 100, 0, '{"kind": "message", "file": "x", "commitlog_offset": ', {0: "F"})
        raw, n, nxt = kernel.dump_lines(*args, True)
        assert n == 50 and isinstance(raw, bytes)
        pos, parts = 0, []
        while pos < nxt:
            t, k, pos = kernel.dump_lines(buf, pos, *args[2:])
            assert k
            parts.append(t)
        assert raw.decode() == "".join(parts)
    assert_same(d, Filters())


def test_numbers_at_every_digit_count(tmp_path, compiled):
    """The kernel writes integers by digit pairs and halves: every power of ten and its neighbours,
    both signs, Java's int and long ends, and hosts that change from record to record."""
    edges = [0, 1, 2**31 - 1, -2**31, 2**63 - 1, -2**63]
    for k in range(1, 19):
        edges += [10**k - 1, 10**k, 10**k + 1, -(10**k - 1), -10**k]
    ints = [v for v in edges if -2**31 <= v < 2**31]
    recs = []
    for i, v in enumerate(edges):
        w = ints[i % len(ints)]
        recs.append(new_record("T", b"x" * (i % 11), properties_text=f"KEYS\x01k{i}", queue_id=w, flag=w,
                               queue_offset=v, physical_offset=abs(v) if v != -2**63 else 0, born_timestamp=v,
                               store_timestamp=-v if v != -2**63 else 0, reconsume_times=w,
                               prepared_transaction_offset=v,
                               born_host=(bytes([i % 256, 255, 9, 10]), w), store_host=(b"\xff\xff\xff\xff", ~w)))
    d = tmp_path / "commitlog"
    write_commitlog(d, recs, file_size=1 << 20)
    assert assert_same(d, Filters()).count('"kind": "message"') == len(recs)
    assert compiled.records == len(recs)
