"""The store's compiled kernel (store/csrc/): built where a compiler is, turned off by
MQTOOL_NO_KERNEL=1, and the same numbers as the pure-Python paths. Whole stores written with and
without it are compared in test_recordrun.py and test_putpath.py (the `store_kernel` fixture)."""
from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mqtool_store import kernel as kernel_module, properties
from mqtool_store.commitlog import decode_record, topic_field
from mqtool_store.consumequeue import CQ_DTYPE
from mqtool_store.javahash import index_key_hash, tags_code
from mqtool_store.messagestore import Message
from mqtool_store.recordrun import RUN_MIN, KernelRun, prepare_run

from .test_putpath import _java_min_value_string

kernel = kernel_module.kernel
needs_kernel = pytest.mark.skipif(kernel is None, reason="the store kernel is not built here")
HOST = (b"\x0a\0\0\x01", 10911)


def test_the_kernel_is_built_where_a_compiler_is():
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not (shutil.which(os.environ.get("CC", "cc")) and headers.exists()):
        pytest.skip("no C compiler or Python headers: the pure-Python paths are used")
    assert kernel is not None, "a compiler is here, yet `pip install` did not build mqtool_store._kernel"


def test_no_kernel_in_the_environment_turns_it_off():
    code = "from mqtool_store import kernel, recordrun; print(kernel.kernel, recordrun.kernel)"
    env = {**os.environ, "MQTOOL_NO_KERNEL": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["None", "None"]


@needs_kernel
def test_index_put_hashes_as_java_does():
    """Keys beyond ASCII (Latin-1, the BMP, surrogate pairs) and the key whose hashCode is
    Integer.MIN_VALUE get IndexFile.indexKeyHashMethod's hash, in one slot chain."""
    rnd = random.Random(5)
    alphabet = "abcXYZ019#-_ éü中文\U0001F600"
    keys = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 30))) for _ in range(300)]
    keys += [_java_min_value_string(), "T#k", "x" * 300]
    slots, entries = 1, len(keys) + 1
    buf = bytearray(40 + 4 * slots + 20 * entries)
    phys = np.arange(len(keys), dtype=np.int64) * 100
    stamps = np.full(len(keys), 1_700_000_005_000, np.int64)
    new = kernel.index_put(buf, slots, entries, 1, 1_700_000_000_000, keys, phys, stamps)
    assert new == 1                                     # one slot: only the first entry starts a chain
    got = [struct.unpack_from(">iqii", buf, 44 + 20 * n) for n in range(1, len(keys) + 1)]
    assert [g[0] for g in got] == [index_key_hash(k) for k in keys]
    assert [g[1] for g in got] == phys.tolist() and {g[2] for g in got} == {5}
    assert [g[3] for g in got] == list(range(len(keys)))    # each entry points at the one before
    assert struct.unpack_from(">i", buf, 40)[0] == len(keys)


@needs_kernel
def test_index_put_refuses_what_does_not_fit():
    buf = bytearray(40 + 4 * 4 + 20 * 8)
    one = np.zeros(1, np.int64)
    with pytest.raises(ValueError):
        kernel.index_put(buf, 4, 8, 8, 0, ["k"], one, one)              # the file is full
    with pytest.raises(ValueError):
        kernel.index_put(bytearray(40), 4, 8, 1, 0, ["k"], one, one)    # a buffer shorter than the file
    with pytest.raises(TypeError):
        kernel.index_put(buf, 4, 8, 1, 0, [b"k"], one, one)
    assert buf == bytearray(len(buf))


@needs_kernel
def test_a_kernel_run_writes_records_that_decode():
    msgs = [Message("Run", 3, bytes([i]) * i, {"KEYS": f"k{i}"}, f"KEYS\x01k{i}\x02é\x01ü\x02", flag=i,
                    born_timestamp=1_700_000_000_000, born_host=(b"\xc0\xa8\0\x07", 4000)) for i in range(RUN_MIN)]
    run = prepare_run(msgs, topic_field(b"Run"), 1 << 20, HOST)
    assert isinstance(run, KernelRun)
    buf = bytearray(run.total + 10)
    run.place(5_000, 70, 1_700_000_000_999)
    run.write(buf, 10)
    pos, got = 10, []
    while pos < len(buf):
        rec = decode_record(buf, pos, check_crc=True)
        got.append(rec)
        pos += rec.total_size
    assert [r.body for r in got] == [m.body for m in msgs] and all(r.crc_ok for r in got)
    assert [r.properties_text for r in got] == [m.properties_text for m in msgs]
    assert [(r.queue_offset, r.flag, r.store_timestamp) for r in got] == [(70 + i, i, 1_700_000_000_999) for i in range(RUN_MIN)]
    assert got[0].physical_offset == 5_000 and run.msg_ids("0A00000100002A9F") == [r.msg_id for r in got]
    assert [r.born_host for r in got] == ["192.168.0.7:4000"] * RUN_MIN


@needs_kernel
def test_a_kernel_run_refuses_a_buffer_too_small_or_parts_that_do_not_match():
    msgs = [Message("Run", 0, b"abc", {"KEYS": "k"}, "KEYS\x01k\x02") for _ in range(RUN_MIN)]
    run = prepare_run(msgs, topic_field(b"Run"), 1 << 20, HOST)
    with pytest.raises(ValueError):
        run.write(bytearray(run.total - 1), 0)
    msgs[4].body = b"changed after the run was prepared"      # the run keeps what it was given
    buf = bytearray(run.total)
    run.write(buf, 0)
    assert decode_record(buf, 4 * (run.total // RUN_MIN)).body == b"abc"
    run.parts[8] = b"longer than it was"
    with pytest.raises(ValueError, match="do not match"):
        run.write(bytearray(run.total), 0)


@needs_kernel
def test_kernel_prepare_says_not_a_run_where_the_columns_path_does():
    msgs = [Message("T", 0, b"x", {"KEYS": "k"}, "KEYS\x01k\x02") for _ in range(RUN_MIN)]
    tf = topic_field(b"T")
    assert kernel.run_prepare(msgs, 1 << 20, 91 + len(tf) - 1, len) is not None
    for change in ("reconsume_times", "prepared_transaction_offset", "born_host", "sys_flag"):
        copy = [Message(m.topic, m.queue_id, m.body, m.properties, m.properties_text) for m in msgs]
        setattr(copy[7], change, (b"\1\2\3\4", 5) if change == "born_host" else 1)
        assert kernel.run_prepare(copy, 1 << 20, 91, len) is None, change
    assert kernel.run_prepare(msgs, 0, 91, len) is None                # a body over maxMessageSize
    for flag in (1 << 31, "7"):                                          # not a Java int: the general path
        odd = [Message(m.topic, m.queue_id, m.body, m.properties, m.properties_text) for m in msgs]
        odd[2].flag = flag
        assert kernel.run_prepare(odd, 1 << 20, 91, len) is None
    total, _, _, props, parts, _ = kernel.run_prepare(msgs, 1 << 20, 91, len)
    assert total == RUN_MIN * (91 + 1 + 7) and props == [m.properties for m in msgs]
    assert parts == [x for m in msgs for x in (m.body, m.properties_text)]
    unparsed = [Message("T", 0, b"x", {}, "KEYS\x01k\x02") for _ in range(RUN_MIN)]
    assert kernel.run_prepare(unparsed, 1 << 20, 91, len) is None      # properties not parsed yet
    assert prepare_run(unparsed, tf, 1 << 20, HOST).props[0] == {"KEYS": "k"}
    msgs[3].properties_text = None
    assert kernel.run_prepare(msgs, 1 << 20, 91, len) is None
    assert prepare_run(msgs, tf, 1 << 20, HOST) is not None            # the columns path formats it


@needs_kernel
def test_run_units_are_the_dispatch_rule():
    """Tags codes (String.hashCode, beyond ASCII too) and index keys (UNIQ_KEY, then each
    non-empty word of KEYS) as Dispatch's record-by-record rule makes them."""
    tags = ["A", "", None, "é", "中文", "\U0001F600x", _java_min_value_string()]
    keys = [None, "", "k1", " lead", "x  y", "a b c", "ü\U0001F600"]
    uniqs = [None, "", "0A0000010000", "U2"]
    rnd = random.Random(9)
    props = []
    for _ in range(200):
        p = {"WAIT": "true"}
        for name, pool in (("TAGS", tags), ("KEYS", keys), ("UNIQ_KEY", uniqs)):
            v = rnd.choice(pool)
            if v is not None:
                p[name] = v
        props.append(p)
    sizes = np.array([rnd.randrange(100, 3000) for _ in props], np.int64)
    units, got_keys, got_phys = kernel.run_units(props, "Topic#", 1000, sizes, True)
    table = np.frombuffer(units, CQ_DTYPE)
    offsets = (np.cumsum(sizes) - sizes + 1000).tolist()
    assert table["offset"].tolist() == offsets and table["size"].tolist() == sizes.tolist()
    assert table["tags_code"].tolist() == [tags_code(p.get("TAGS")) for p in props]
    want_keys, want_phys = [], []
    for p, at in zip(props, offsets):
        words = ([p["UNIQ_KEY"]] if p.get("UNIQ_KEY") else []) + [w for w in p.get("KEYS", "").split(" ") if w]
        want_keys += ["Topic#" + w for w in words]
        want_phys += [at] * len(words)
    assert (got_keys, got_phys) == (want_keys, want_phys)
    assert kernel.run_units(props, "Topic#", 1000, sizes, False)[1:] == ([], [])


@needs_kernel
def test_msg_ids_refuse_a_prefix_that_is_not_ascii():
    with pytest.raises(ValueError):
        kernel.msg_ids("é", 0, np.zeros(1, np.int64))
    assert kernel.msg_ids("AB", 255, np.array([1, 2], np.int64)) == ["AB00000000000000FF", "AB0000000000000100"]


@needs_kernel
def test_queue_totals_refuse_columns_outside_the_buffer():
    one = np.zeros(1, np.int64)
    with pytest.raises(ValueError, match="outside"):
        kernel.queue_totals(bytes(60), one, one, one, one)           # a header needs 64 bytes
    with pytest.raises(ValueError, match="outside"):
        kernel.queue_totals(bytes(100), one, one, np.array([90]), np.array([20]))     # the topic runs past the end
    with pytest.raises(ValueError, match="length"):
        kernel.queue_totals(bytes(100), one, np.zeros(2, np.int64), one, one)
    assert kernel.queue_totals(bytes(100), np.zeros(0, np.int64), *[np.zeros(0, np.int64)] * 3) == []


@needs_kernel
@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["\x01", "\x02", "KEYS", "TAGS", "", " ", "é", "中", "\U0001F600"]),
                          st.text(max_size=6)), max_size=20).map("".join))
def test_parse_properties_is_string2messageProperties(text):
    """Pieces kept only with a key and a value around their first 0x01, the last duplicate
    winning, in the first one's place: the C parse, the Python parse and the exact rule agree."""
    got = kernel.parse_properties(text)
    assert list(got.items()) == list(properties._parse_strict(text).items())
    assert list(got.items()) == list(properties._parse_python(text).items())


@needs_kernel
@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["\x01", "\x02", "WAIT", "true", "false", "CLUSTER", "KEYS", "", "é", "中"]),
                          st.text(max_size=6)), max_size=20).map("".join),
       st.sampled_from(["DefaultCluster", "c", "é中"]))
def test_broker_properties_is_the_send_paths_rule(text, cluster):
    """WAIT=true dropped, CLUSTER set in its place or last, written back in the dict's order: the C
    call and the Python rule agree on the dict (and its order) and the text."""
    got_props, got_text = kernel.broker_properties(text, cluster)
    want_props, want_text = properties._broker_properties(text, cluster)
    assert list(got_props.items()) == list(want_props.items()) and got_text == want_text
    assert got_props["CLUSTER"] == cluster and got_props.get("WAIT") != "true"
