"""POP's strings (remoting/extrainfo.py): parse of build is the identity, Java's examples, strict parsing."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mqtool_remoting import extrainfo as ei

longs = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
naturals = st.integers(min_value=0, max_value=(1 << 62))
ints = st.integers(min_value=0, max_value=(1 << 31) - 1)
names = st.text(alphabet=st.characters(blacklist_characters=" ;@", blacklist_categories=("Cs",)), min_size=1,
                max_size=20)
kinds = st.sampled_from([ei.NORMAL_TOPIC, ei.RETRY_TOPIC, ei.RETRY_TOPIC_V2])


@given(naturals, naturals, naturals, ints, kinds, names, ints, st.none() | naturals)
def test_parse_of_build_is_identity(ck, pop, invisible, revive, kind, broker, queue, offset):
    info = ei.ExtraInfo(ck, pop, invisible, revive, kind, broker, queue, offset)
    text = info.text()
    assert ei.parse_extra_info(text) == info
    assert ei.parse_extra_info(text).text() == text
    assert len(text.split(" ")) == (7 if offset is None else 8)


@given(naturals, naturals, naturals, ints, kinds, names, ints, naturals, longs)
def test_receipt_handle_parse_of_build_is_identity(ck, pop, invisible, revive, kind, broker, queue, offset, clo):
    handle = ei.ReceiptHandle(ei.ExtraInfo(ck, pop, invisible, revive, kind, broker, queue, offset), clo)
    assert ei.parse_receipt_handle(handle.text()) == handle
    assert handle.next_visible_time == pop + invisible


def test_java_examples():
    assert ei.build_extra_info(10, 1700000000000, 60000, 3, "TopicTest", "broker-a", 1, 11) == \
        "10 1700000000000 60000 3 0 broker-a 1 11"
    assert ei.build_extra_info(10, 1, 2, 3, "%RETRY%G_T", "b", 0) == "10 1 2 3 1 b 0"
    assert ei.build_extra_info(10, 1, 2, 3, "%RETRY%G+T", "b", 0).split()[4] == "2"
    handle = ei.parse_receipt_handle("10 1700000000000 60000 3 0 broker-a 1 11 4523")
    assert handle.commit_log_offset == 4523 and handle.extra.queue_offset == 11
    # the proxy's 10-field handle after a change: index 8 is read (0)
    assert ei.parse_receipt_handle("10 1 2 3 0 b 1 11 0 4523").commit_log_offset == 0
    assert ei.parse_receipt_handle("10 1 2 3 0 b 1 11").commit_log_offset == -1
    assert ei.parse_extra_info("0 1 2 999 0 b 1 5").order


def test_retry_topics():
    assert ei.pop_retry_topic("T", "G") == "%RETRY%G_T"
    assert ei.pop_retry_topic("T", "G", v2=True) == "%RETRY%G+T"
    assert ei.normal_topic("%RETRY%G_T_x", "G") == "T_x"
    assert ei.real_topic("1", "T", "G") == "%RETRY%G_T" and ei.real_topic("2", "T", "G") == "%RETRY%G+T"
    assert ei.real_topic("0", "T", "G") == "T"


@given(st.lists(st.tuples(kinds, ints, naturals, st.lists(naturals, min_size=1, max_size=5)), max_size=6,
                unique_by=lambda e: (e[0], e[1])))
def test_offset_infos_parse_of_build(entries):
    start = ei.join([ei.start_offset_entry(k, q, so) for k, q, so, _ in entries])
    msgs = ei.join([ei.msg_offset_entry(k, q, offs) for k, q, _, offs in entries])
    assert ei.parse_start_offset_info(start) == {f"{k}@{q}": so for k, q, so, _ in entries}
    assert ei.parse_msg_offset_info(msgs) == {f"{k}@{q}": offs for k, q, _, offs in entries}


def test_offset_info_examples_and_order_counts():
    assert ei.parse_start_offset_info("0 1 10;1 0 5") == {"0@1": 10, "1@0": 5}
    assert ei.parse_msg_offset_info("0 1 10,11,13;1 0 5") == {"0@1": [10, 11, 13], "1@0": [5]}
    counts = ei.join([ei.order_count_entry(False, 1, 2, 10), ei.order_count_entry(False, 1, 0)])
    assert counts == "0 qo1%10 2;0 1 0"
    assert ei.parse_order_count_info(counts) == {"0@qo1%10": 2, "0@1": 0}
    assert ei.queue_offset_map_key("T", 1, 10) == "0@qo1%10"
    assert ei.parse_start_offset_info(None) == {} and ei.parse_start_offset_info("") == {}


@pytest.mark.parametrize("text", ["0 1 10;0 1 11", "0 1", "0 1 x", "0 1 10 12"])
def test_bad_offset_infos_are_refused(text):
    with pytest.raises(ValueError):
        ei.parse_start_offset_info(text)


@pytest.mark.parametrize("text", ["1 2 3 4 0 b", "1 2 x 4 0 b 1", "1 2 3 4 0 b 1 1_0", "1 2 3 4 0 b  1"])
def test_bad_extra_infos_are_refused(text):
    with pytest.raises(ValueError):
        ei.parse_extra_info(text)
