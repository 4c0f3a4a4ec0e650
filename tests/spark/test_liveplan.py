"""The live source's pure parts: options, offset planning (data loss, read limits, minPartitions)
and the decoding of pull answers, which must give the export's rows for the same records."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.spark.liveoptions import EARLIEST, LATEST, OptionError, offsets_from_json, offsets_to_json, parse_options
from mqtool.spark.liveplan import DataLossError, QueueRange, check_named, limit, pack, ranges, resolve, split

NS = {"namesrv": "127.0.0.1:9876", "topics": "Orders"}


@pytest.mark.parametrize("opts, says", [
    ({"topics": "Orders"}, "option namesrv is missing"),
    ({"namesrv": "h:1"}, "option topics is missing"),
    ({**NS, "startingOffsets": "{nope"}, "startingOffsets must be earliest, latest or JSON"),
    ({**NS, "startingOffsets": '{"Orders": {"broker-a": 1}}'}, "is not BROKER:QUEUE"),
    ({**NS, "startingOffsets": '{"Orders": {"broker-a:0": -3}}'}, "must be a queue offset"),
    ({**NS, "startingOffsets": '{"Orders": {"broker-a:0": 9}}', "endingOffsets": '{"Orders": {"broker-a:0": 3}}'},
     "is before its startingOffsets 9"),
    ({**NS, "endingOffsets": "earliest"}, "cannot be earliest"),
    ({**NS, "failOnDataLoss": "maybe"}, "must be true or false"),
    ({**NS, "maxMessagesPerTrigger": "0"}, "at least 1"),
    ({**NS, "minPartitions": "x"}, "whole number"),
    ({**NS, "startingTimestamp": "5", "startingOffsets": "latest"}, "not both"),
])
def test_bad_options_are_one_clear_error(monkeypatch, opts, says):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(OptionError, match=says.replace("(", r"\(").replace("[", r"\[")):
        parse_options(opts)


def test_options_case_insensitive_env_namesrv_and_offsets_json(monkeypatch):
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876")
    o = parse_options({"topics": "A, B*", "startingoffsets": '{"A": {"broker-a:3": 7, "b:1": -2}}',
                       "FAILONDATALOSS": "false", "pullBatchSize": "64"})
    assert o.namesrv == "10.0.0.1:9876" and o.topics == ("A", "B*") and not o.fail_on_data_loss
    assert o.starting == {("A", "broker-a", 3): 7, ("A", "b", 1): EARLIEST} and o.pull_batch == 64
    assert o.wants("B1") and o.wants("A") and not o.wants("C") and o.globs() == ["B*"]
    assert not parse_options({"namesrv": "x", "topics": "*"}).wants("%RETRY%g")
    assert parse_options({"namesrv": "x", "topics": "*", "includeSystemTopics": "true"}).wants("%RETRY%g")
    assert offsets_from_json(offsets_to_json(o.starting)) == o.starting


STATES = {("T", "a", 0): (0, 10), ("T", "a", 1): (5, 8), ("T", "b", 0): (0, 0)}


def test_resolve_earliest_latest_and_json_defaults():
    assert resolve("earliest", STATES, "earliest") == {("T", "a", 0): 0, ("T", "a", 1): 5, ("T", "b", 0): 0}
    assert resolve("latest", STATES, "earliest") == {("T", "a", 0): 10, ("T", "a", 1): 8, ("T", "b", 0): 0}
    spec = {("T", "a", 0): 3, ("T", "a", 1): LATEST}
    assert resolve(spec, STATES, "earliest") == {("T", "a", 0): 3, ("T", "a", 1): 8, ("T", "b", 0): 0}
    assert resolve(spec, STATES, "latest")[("T", "b", 0)] == 0
    with pytest.raises(ValueError, match="T zz:0"):
        check_named({("T", "zz", 0): 1}, STATES, "startingOffsets")


def test_data_loss_fails_naming_the_queue_and_range_or_is_skipped_with_a_warning():
    start, end = {("T", "a", 1): 2}, {("T", "a", 1): 8}
    with pytest.raises(DataLossError, match=r"T a:1: offsets \[2, 5\) are no longer on the broker"):
        ranges(start, end, STATES, fail_on_data_loss=True)
    told = []
    got = ranges(start, end, STATES, fail_on_data_loss=False, warn=told.append)
    assert got == [QueueRange("T", "a", 1, 5, 8)] and "[2, 5)" in told[0]
    # A queue new since the start offsets were taken starts at 0; empty ranges are left out.
    assert ranges({}, {("T", "a", 0): 4, ("T", "b", 0): 0}, STATES, True) == [QueueRange("T", "a", 0, 0, 4)]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.tuples(st.just("T"), st.sampled_from("ab"), st.integers(0, 5)),
                       st.tuples(st.integers(0, 50), st.integers(0, 500)), min_size=1),
       st.integers(1, 400))
def test_read_limit_takes_at_most_the_limit_and_never_leaves_a_queue_behind(queues, max_rows):
    start = {q: s for q, (s, _) in queues.items()}
    latest = {q: s + n for q, (s, n) in queues.items()}
    got = limit(start, latest, max_rows)
    taken = {q: got[q] - start[q] for q in queues}
    waiting = {q: latest[q] - start[q] for q in queues}
    assert all(0 <= taken[q] <= waiting[q] for q in queues)
    assert sum(taken.values()) == min(max_rows, sum(waiting.values()))
    total = sum(waiting.values())
    for q in queues:                      # each queue gets at least its proportional share, rounded down
        assert taken[q] >= waiting[q] * min(max_rows, total) // max(total, 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 5000)), min_size=1, max_size=8),
       st.integers(1, 64))
def test_min_partitions_cuts_ranges_into_pieces_that_cover_them_exactly(spans, min_parts):
    rs = [QueueRange("T", "a", i, s, s + n) for i, (s, n) in enumerate(spans)]
    pieces = split(rs, min_parts)
    assert len(pieces) >= min(min_parts, sum(r.size for r in rs)) or len(pieces) >= len(rs)
    for r in rs:
        mine = sorted((p.start, p.end) for p in pieces if p.queue_id == r.queue_id)
        assert mine[0][0] == r.start and mine[-1][1] == r.end
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:])) and all(s < e for s, e in mine)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=0, max_size=12), st.one_of(st.none(), st.integers(1, 20)),
       st.integers(1, 5000))
def test_pack_puts_every_piece_in_one_task_and_honours_min_partitions(sizes, min_parts, per_task):
    pieces = [QueueRange("T", "a", i, 0, n) for i, n in enumerate(sizes)]
    tasks = pack(pieces, min_parts, per_task)
    assert sorted(p.queue_id for t in tasks for p in t) == list(range(len(sizes)))     # each piece once
    assert all(tasks) and len(tasks) <= len(pieces)
    assert len(tasks) == min(len(pieces), max(min_parts or 1, -(-sum(sizes) // per_task))) if pieces else tasks == []


def test_pull_answers_decode_to_the_exports_rows(basic_store):
    """Answers cut from a real 4.9.8 commit log, each with a [lo, hi) queue-offset window: the
    rows are the export reference's rows of the records inside their window, plus broker_name."""
    pa = pytest.importorskip("pyarrow")
    from mqtool.spark.export import split_batches
    from mqtool.spark.livereader import decode_answers
    from mqtool.spark.selection import Selection
    from mqtool.spark.source import local_plan
    from mqtool_store.logscan import header_table, walk_array
    scan = local_plan(str(basic_store), 1 << 30, Selection(include_system=True))[0]
    sp = scan.splits[0]
    data = open(sp.path, "rb").read()[sp.start:sp.end]
    pos, _ = walk_array(data, 0, len(data))
    t, ok = header_table(data, pos, len(data))
    assert ok == len(pos) > 100
    ends = list(pos[1:]) + [len(data)]
    answers, kept = [], set()
    for i in range(0, len(pos), 7):
        j = min(i + 7, len(pos))
        body = data[pos[i]:ends[j - 1]]
        qoffs = [int(x) for x in t["queue_offset"][i:j]]
        lo, hi = min(qoffs) + 1, max(qoffs) + 1          # the window leaves out each answer's lowest offset
        answers.append((body, f"broker-{i % 3}", lo, hi))
        kept |= {(int(t["physical_offset"][k]), f"broker-{i % 3}") for k in range(i, j) if lo <= qoffs[k - i] < hi}
    got = pa.Table.from_batches(list(decode_answers(answers)))
    assert set(zip(got.column("commitlog_offset").to_pylist(), got.column("broker_name").to_pylist())) == kept
    want = pa.Table.from_batches(list(split_batches(sp, Selection(include_system=True))))
    want = want.filter(pa.compute.is_in(want.column("commitlog_offset"), value_set=pa.array([k for k, _ in kept])))
    got = got.drop_columns(["broker_name"]).sort_by("commitlog_offset")
    assert got.to_pylist() == want.sort_by("commitlog_offset").to_pylist()


def test_sink_rows_take_columns_and_leave_out_what_the_producer_and_broker_own():
    pa = pytest.importorskip("pyarrow")
    from mqtool.spark.liveoptions import OptionError
    from mqtool.spark.livesink import BATCH_BYTES, by_topic, check_columns, cuts, rows
    batch = pa.RecordBatch.from_pydict({
        "topic": ["A", None, "B"], "body": ["text", "x", "é"], "tags": ["T", None, ""],
        "keys": ["k1  k2", None, ""],
        "properties": [[("UNIQ_KEY", "old"), ("KEYS", "stale"), ("user", "1"), ("DELAY", "3")], None, [("n", "2")]]},
        schema=pa.schema([("topic", pa.string()), ("body", pa.string()), ("tags", pa.string()), ("keys", pa.string()),
                          ("properties", pa.map_(pa.string(), pa.string()))]))
    got = list(rows(batch, "Default"))
    assert got == [("A", b"text", "user\x011\x02KEYS\x01k1 k2\x02TAGS\x01T"), ("Default", b"x", ""),
                   ("B", "é".encode(), "n\x012")]
    arrays = pa.RecordBatch.from_pydict({"body": [b"x"], "keys": [["a", "", "b"]]})
    assert list(rows(arrays, "T")) == [("T", b"x", "KEYS\x01a b")]
    with pytest.raises(OptionError, match="null body"):
        list(rows(pa.RecordBatch.from_pydict({"body": pa.array([None], pa.binary())}), "T"))
    for bad in ({"body": pa.array([b"x", None], pa.binary())}, {"body": [b"x", b"y"], "topic": ["A", None]}):
        with pytest.raises(OptionError, match="row 1 of a batch"):
            list(by_topic(pa.RecordBatch.from_pydict(bad), None))
    # Up to `size` rows and BATCH_BYTES of entries a send; a bigger row goes alone.
    assert list(cuts([0, 10, 20, 30, 40, 50], 2)) == [(0, 2), (2, 4), (4, 5)]
    big = BATCH_BYTES
    assert list(cuts([0, 10, big, big + 1, 3 * big], 256)) == [(0, 2), (2, 3), (3, 4)]
    with pytest.raises(OptionError, match="needs a body column"):
        check_columns({"payload": "binary"}, parse_options({"namesrv": "x", "topic": "T"}, writing=True))
    with pytest.raises(OptionError, match="column keys is int"):
        check_columns({"body": "binary", "keys": "int"}, parse_options({"namesrv": "x", "topic": "T"}, writing=True))
    with pytest.raises(OptionError, match="topic column or the topic option"):
        check_columns({"body": "binary"}, parse_options({"namesrv": "x"}, writing=True))


@pytest.mark.parametrize("keys", [["k1  k2", None, "", " a ", "b"], [["k1", "", "k2"], None, [], [None, "a"], ["b"]]])
def test_the_sinks_column_encoder_gives_the_reference_rows_bytes(keys):
    """`sinkencode.encode` (what runs) against `rows` + `encode_batch` (the reference), per topic."""
    pa = pytest.importorskip("pyarrow")
    from mqtool.spark.livesink import RESERVED, by_topic, rows
    from mqtool.spark.sinkencode import encode
    from mqtool_remoting.batch import encode_batch
    props = [[("UNIQ_KEY", "old"), ("KEYS", "stale"), ("user", "1"), ("DELAY", "3")], None, [("n", "2")],
             [("v", None), ("é", "ü")], []]
    batch = pa.RecordBatch.from_pydict({
        "topic": ["A", None, "B", "A", ""], "body": ["text", "x", "é", "", "y" * 300],
        "tags": ["T", None, "", "T2", None], "keys": keys, "properties": pa.array(props, pa.map_(pa.string(),
                                                                                          pa.string()))})
    groups = list(by_topic(batch, "Default"))
    assert [t for t, _ in groups] == ["A", "Default", "B"]
    for topic, sub in groups:
        ids = [f"ID{i}" for i in range(sub.num_rows)]
        data, offsets = encode(sub, ids, RESERVED)
        want = [(0, body, f"{text}\x02UNIQ_KEY\x01{u}" if text else f"UNIQ_KEY\x01{u}")
                for (_t, body, text), u in zip(rows(sub, topic), ids)]
        assert data[offsets[0]:offsets[-1]].tobytes() == encode_batch(want)
        assert all(r[0] == topic for r in rows(sub, topic))
