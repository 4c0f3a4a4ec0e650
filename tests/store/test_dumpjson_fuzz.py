"""`store dump --json` under generated stores and filters: the fast writer (column runs, row masks,
the tag and key byte searches) against the reference path, byte for byte.

Properties are built from a few names and values, separators included, so that runs of one
shape with other names, keys and tags in values, duplicates, empty pieces and invalid UTF-8
come up often; filters pick among the values actually written.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqtool_store.commitlog import new_record
from mqtool_store.dump import Filters
from tests.store.test_dumpjson import assert_same
from tests.store.varied import PLACEHOLDER, write_commitlog

NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "xTAGS", "a", ""]
VALUES = ["A", "B", "k1", "k1 k2", " k2 ", "TAGS\x01A", "A\x01B", "", "标签", PLACEHOLDER.decode(), "k"]
TOPICS = ["T", "Orders", "话题", "T" * 15, "T" * 16]

pieces = st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES)).map(lambda kv: f"{kv[0]}\x01{kv[1]}")
property_texts = st.lists(pieces, max_size=4).flatmap(
    lambda ps: st.sampled_from(["\x02".join(ps), "\x02".join(ps) + "\x02", "\x02\x02".join(ps)]))
# a layout repeats for a while: the column writer's runs
layouts = st.lists(st.tuples(property_texts, st.integers(1, 12)), min_size=1, max_size=10)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts=layouts, topics=st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3),
       body=st.sampled_from(["none", "text"]), data=st.data())
def test_generated_stores_dump_as_the_reference(layouts, topics, body, data):
    recs = []
    for text, times in layouts:
        for _ in range(times):
            i = len(recs)
            recs.append(new_record(topics[i % len(topics)], b"body %d" % i, properties_text=text,
                                   queue_id=i % 3, queue_offset=i, physical_offset=0,
                                   store_timestamp=1_700_000_000_000 + i))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "commitlog"
        write_commitlog(d, recs, file_size=4096)
        assert_same(d, Filters(), body)
        f = Filters(topic=data.draw(st.none() | st.sampled_from(TOPICS)),
                    queue=data.draw(st.none() | st.integers(0, 2)),
                    tag=data.draw(st.none() | st.sampled_from(VALUES)),
                    key=data.draw(st.none() | st.sampled_from(VALUES + ["k2", "B"])),
                    limit=data.draw(st.none() | st.integers(0, 40)))
        assert_same(d, f, body)
