"""SEND_BATCH_MESSAGE's body read by the store kernel's batch_entries (store/csrc/batch.c) against
the Python path (decode_batch, the properties merge and parse): the same entries, or the kernel
leaves the body to the Python path, which refuses it; and a broker storing batches answers and
writes the same bytes with the kernel and without."""
from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from mqtool.broker import send
from mqtool_remoting.batch import BatchFormatError, encode_batch
from mqtool_remoting.codes import RequestCode
from mqtool_store import kernel as kernel_module

from .test_fastsend import FakeConn, controller, fixed_clock, frame_of, store_bytes, through_general, v2  # noqa: F401

needs_kernel = pytest.mark.skipif(kernel_module.kernel is None, reason="the store kernel is not built here")


def python_entries(body: bytes, outer: str, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(kernel_module, "kernel", None)
        return send.batch_entries(body, outer)


_props = st.one_of(st.sampled_from(["", "TAGS\x01A", "KEYS\x01a b\x02", "\x02", "UNIQ_KEY\x01X\x02TAGS\x01B"]),
                   st.text(st.characters(blacklist_categories=("Cs",)), max_size=10))
_entries = st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), st.binary(max_size=40), _props), max_size=6)


def _raw(flag: int, body: bytes, props: bytes, total_delta: int = 0, plen: int | None = None) -> bytes:
    plen = len(props) if plen is None else plen
    return struct.pack(">iiiii", 20 + len(body) + 2 + len(props) + total_delta, 0, 0, flag, len(body)) + body + \
        struct.pack(">h", plen) + props


@needs_kernel
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=300)
@example(entries=[(0, b"x", "TAGS\x01A")], outer="", cut=0, tail=b"\xff\xfe")
@given(entries=_entries, outer=st.sampled_from(["", "CLUSTER\x01c", "DELAY\x010\x02CLUSTER\x01c", "\x02K\x01v"]),
       cut=st.integers(0, 30), tail=st.one_of(st.just(b""), st.binary(max_size=30)))
def test_the_kernel_reads_a_batch_as_the_python_path_does(monkeypatch, entries, outer, cut, tail):
    """Well-formed bodies, bodies cut short or with trailing bytes: the same entries, or the kernel
    returns None where the Python path raises BatchFormatError."""
    body = encode_batch(entries) + tail
    body = body[:len(body) - cut] if cut else body
    got = kernel_module.kernel.batch_entries(body, outer)
    try:
        want = python_entries(body, outer, monkeypatch)
    except BatchFormatError:
        assert got is None
        return
    assert got == want


@needs_kernel
@pytest.mark.parametrize("raw", [
    _raw(0, b"ab", "TAGS\x01\xe4\xb8\xadA".encode()),             # UTF-8 properties
    _raw(0, b"ab", b"TAGS\x01\xff\xfeA\xe4"),                       # bad UTF-8: replaced, as the Python path does
    _raw(0, b"ab", b"K\x01v", total_delta=-3) + b"zzz",             # a total shorter than the entry: the next starts inside it
    _raw(0, b"ab", b"K\x01v", plen=-1),                             # a negative properties length: refused
    _raw(0, b"ab", b"K\x01v", total_delta=-5),                      # a total under 22: refused
    _raw(7, b"", b"") * 3,
    b"",
])
def test_odd_batch_entries(monkeypatch, raw):
    for outer in ("", "CLUSTER\x01c"):
        got = kernel_module.kernel.batch_entries(raw, outer)
        try:
            want = python_entries(raw, outer, monkeypatch)
        except BatchFormatError:
            assert got is None
            continue
        assert got == want


def test_batches_store_the_same_bytes_with_the_kernel_and_without(tmp_path, fixed_clock, monkeypatch):  # noqa: F811
    loop = asyncio.new_event_loop()
    with_kernel, without = controller(tmp_path / "kernel"), controller(tmp_path / "python")
    try:
        frames = [frame_of(RequestCode.SEND_BATCH_MESSAGE, v2(queue=str(i % 4), batch="true", props=outer),
                           encode_batch([(k, b"m%d-%d" % (i, k) * k, props) for k, props in enumerate(inner)]))
                  for i, (outer, inner) in enumerate([
                      ("", ["TAGS\x01A", "", "KEYS\x01a b\x02"]), ("WAIT\x01false", ["UNIQ_KEY\x01U1"] * 9),
                      ("TAGS\x01Z", ["TAGS\x01Y\x02"]), ("", []), ("DELAY\x012", ["x\x01y"])])]
        frames.append(frame_of(RequestCode.SEND_BATCH_MESSAGE, v2(batch="true"), b"\x00\x00\x00\x30cut"))
        for frame in frames:
            answers = []
            for ctrl, kernel in ((with_kernel, kernel_module.kernel), (without, None)):
                monkeypatch.setattr(kernel_module, "kernel", kernel)
                answers.append(loop.run_until_complete(through_general(ctrl, FakeConn(), frame)))
            assert answers[0] == answers[1]
        loop.run_until_complete(asyncio.sleep(0))
        assert with_kernel.stats.totals.put_msgs == without.stats.totals.put_msgs == 13
        assert store_bytes(with_kernel) == store_bytes(without)
    finally:
        for ctrl in (with_kernel, without):
            ctrl.store.shutdown()
        loop.close()


# ---------------------------------------------------------------- batch_spans: the frame's own bytes

_ascii_props = st.one_of(
    st.sampled_from(["", "TAGS\x01A", "KEYS\x01a  b \x02", "\x02", "UNIQ_KEY\x01X\x02TAGS\x01B", "TAGS\x01\x02TAGS\x01",
                     "\x01v\x02TAGS\x01T\x01x", "WAIT\x01false", "UNIQ_KEY\x01u v\x02UNIQ_KEY\x01w", "KEYS\x01 "]),
    st.text(st.sampled_from("\x01\x02 TAGSKEYUNIQ_Wabc"), max_size=24))


def _span_run(body: bytes, outer: str, topic: str = "SpanT"):
    """batch_columns' answer (a FrameRun's, or a KernelRun's where batch_spans does not take it) made
    into its run, placed and written into a fresh buffer; with its units and keys."""
    from mqtool_store.recordrun import batch_columns, batch_run
    topic_part = bytes([len(topic)]) + topic.encode()
    frame = b"HEAD" + body
    cols = batch_columns(frame, 4, outer, topic, 0, b"\x7f\x00\x00\x01", topic_part, 4 << 20,
                         (b"\x7f\x00\x00\x01", 10911))
    if cols is None:
        return None
    run = batch_run(cols, topic, 2, 0, 1234, (b"\x7f\x00\x00\x01", 5555), 0, topic_part, (b"\x7f\x00\x00\x01", 10911))
    buf = bytearray(run.total + 16)
    run.place(1000, 7, 99)
    run.write(buf, 8)
    return type(run).__name__, bytes(buf), run.units(topic + "#", 1000, True), run.may_wait, run.msg_ids("AB")


@needs_kernel
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=400)
@example(entries=[(1, b"x", "TAGS\x01A")] * 8, outer="TAGS\x01Z\x02WAIT\x01false")
@example(entries=[(1, b"x", "K\x01v\x02")] * 8, outer="")
@example(entries=[(1, b"x", "")] * 8, outer="KEYS\x01o1 o2")
@example(entries=[(i, b"x" * (i % 7), "UNIQ_KEY\x01U%d\x02KEYS\x01k%d" % (i, i)) for i in range(150)],
         outer="CLUSTER\x01c")                     # past the first 64 records' arrays
@given(entries=st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), st.binary(max_size=40), _ascii_props),
                        min_size=8, max_size=12),
       outer=st.one_of(_ascii_props, st.just("CLUSTER\x01c\x02TAGS\x01\xe9")))
def test_a_batch_read_as_spans_writes_and_dispatches_as_batch_run(monkeypatch, entries, outer):
    """batch_spans (ASCII properties) against batch_run on the same batch: the same record bytes,
    consume queue units, index keys, WAIT and message ids."""
    body = encode_batch(entries)
    got = _span_run(body, outer)
    with monkeypatch.context() as m:
        m.setattr(kernel_module.kernel, "batch_spans", lambda *a: None, raising=False)
        want = _span_run(body, outer)
    assert want is not None and want[0] == "KernelRun"
    assert got[0] == ("FrameRun" if outer.isascii() else "KernelRun")
    assert got[1:] == want[1:]


@needs_kernel
def test_spans_leave_non_ascii_and_odd_bodies_to_batch_run():
    k = kernel_module.kernel
    good = encode_batch([(0, b"ab", "TAGS\x01A")] * 8)
    crc = __import__("mqtool_store.crc", fromlist=["crc32"]).crc32
    assert k.batch_spans(good, 0, b"CLUSTER\x01c", 1024, 100, crc, 8) is not None
    for body, outer in [(encode_batch([(0, b"ab", "TAGS\x01\u00e9")] * 8), b""),     # non-ASCII properties
                        (good, "TAGS\x01\u00e9".encode()),                              # ... in the batch's own
                        (good[:-1], b""),                                               # cut short
                        (encode_batch([(0, b"ab", "")] * 7), b""),                      # too few
                        (encode_batch([(0, b"a" * 2000, "")] * 8), b"")]:               # a body over max_body
        assert k.batch_spans(body, 0, outer, 1024, 100, crc, 8) is None
    with pytest.raises(ValueError):
        k.frame_units(good, struct.pack("=10q", 0, 1 << 20, 0, 0, 0, 0, -1, 0, -1, 0), b"", "T#", 0,
                      b"\x00" * 8, True)                                             # a body past the frame
