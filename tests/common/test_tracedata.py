"""The trace record codec against the [ran] vectors of ../shared/spec/trace.md §4 (4.9.8's own
encoder and decoder), and round trips."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtool.common.tracedata import (ConsumeReturnType, MsgType, TraceDecodeError, TraceRecord, TraceType, decode,
                                     encode, keys_of)


def java(text: str) -> str:
    """The spec writes U+0001 as <01> and U+0002 as <02>."""
    return text.replace("<01>", "\x01").replace("<02>", "\x02")


MID0, MID1 = "0A00000512AB18B4AAC27E5A3C900000", "0A00000512AB18B4AAC27E5A3C900001"
OFFSET_ID = "C0A8000A00002A9F0000000000001F40"
REQ0 = "0A00000512AC18B4AAC27E5A40000000"

V1 = java(f"Pub<01>1700000000000<01>DefaultRegion<01>PG_ORDER<01>TopicOrder<01>{MID0}<01>TagA<01>order-1 order-2"
          f"<01>192.168.0.10:10911<01>11<01>12<01>0<01>{OFFSET_ID}<01>true<02>")
V2 = java(f"Pub<01>1700000000100<01>DefaultRegion<01>PG_TX<01>TopicTx<01>{MID1}<01>null<01>null<01>192.168.0.10:10911"
          f"<01>5<01>3<01>1<01>{OFFSET_ID}<01>false<02>")
V3 = java(f"SubBefore<01>1700000001000<01>DefaultRegion<01>CG_ORDER<01>{REQ0}<01>{MID0}<01>0<01>order-1 order-2<02>"
          f"SubBefore<01>1700000001000<01>DefaultRegion<01>CG_ORDER<01>{REQ0}<01>{MID1}<01>2<01>null<02>")
V4 = java(f"SubAfter<01>{REQ0}<01>{MID0}<01>7<01>true<01>order-1 order-2<01>0<01>1700000001000<01>CG_ORDER<02>")
V5 = java(f"SubAfter<01>0A00000512AC18B4AAC27E5A40000001<01>{MID1}<01>250<01>false<01>null<01>2<01>1700000002000"
          "<01>CG_ORDER<02>")
V6 = java(f"SubAfter<01>0A00000512AC18B4AAC27E5A40000002<01>{MID0}<01>4<01>true<01>order-1 order-2<01>1<01>")
V7 = java(f"EndTransaction<01>1700000000200<01>DefaultRegion<01>PG_TX<01>TopicTx<01>{MID1}<01>null<01>tx-key-9"
          f"<01>192.168.0.10:10911<01>2<01>{MID1}<01>COMMIT_MESSAGE<01>false<02>")
V8 = java(f"EndTransaction<01>1700000060000<01>DefaultRegion<01>PG_TX<01>TopicTx<01>{MID0}<01>TagT<01>null"
          f"<01>192.168.0.10:10911<01>2<01>{MID0}<01>ROLLBACK_MESSAGE<01>true<02>")
V10 = java(f"Pub<01>1600000000000<01>DefaultRegion<01>PG_OLD<01>TopicOld<01>{MID0}<01>TagA<01>k1<01>192.168.0.10:10911"
           "<01>11<01>5<01>0<01>true<02>")
V11 = java(f"Pub<01>1600000000000<01>DefaultRegion<01>PG_OLD<01>TopicOld<01>{MID0}<01>TagA<01>k1<01>192.168.0.10:10911"
           f"<01>11<01>5<01>3<01>{OFFSET_ID}<01>true<01>10.0.0.5<02>")
V12 = java(f"SubAfter<01>REQ<01>{MID0}<01>9<01>false<01>k1<02>")
V13 = java(f"SubBefore<01>1700000001000<01>DefaultRegion<01>CG_ORDER<01>REQ<01>{MID0}<01>0<01><02>")
NOW = 1800000000000


def v1_record() -> TraceRecord:
    return TraceRecord(TraceType.Pub, MID0, 1700000000000, "DefaultRegion", "PG_ORDER", topic="TopicOrder", tags="TagA",
                       keys="order-1 order-2", store_host="192.168.0.10:10911", body_length=11, cost_time=12,
                       msg_type=MsgType.Normal_Msg, offset_msg_id=OFFSET_ID, success=True)


def v4_record() -> TraceRecord:
    return TraceRecord(TraceType.SubAfter, MID0, 1700000001000, "", "CG_ORDER", REQ0, keys="order-1 order-2",
                       cost_time=7, success=True, context_code=ConsumeReturnType.SUCCESS)


def test_v1_pub_encodes_byte_for_byte_and_decodes_as_written():
    assert encode(v1_record()) == V1 and len(V1) == 171
    assert keys_of(v1_record()) == {MID0, "order-1", "order-2"}
    assert decode(V1).records == [v1_record()]


def test_v2_half_message_with_no_tags_or_keys_writes_null():
    r = TraceRecord(TraceType.Pub, MID1, 1700000000100, "DefaultRegion", "PG_TX", topic="TopicTx", tags=None, keys=None,
                    store_host="192.168.0.10:10911", body_length=5, cost_time=3, msg_type=MsgType.Trans_Msg_Half,
                    offset_msg_id=OFFSET_ID, success=False)
    assert encode(r) == V2 and keys_of(r) == {MID1}
    got = decode(V2).records[0]
    assert (got.tags, got.keys, got.msg_type, got.success) == ("null", "null", MsgType.Trans_Msg_Half, False)


def test_v3_sub_before_batch_of_two():
    a = TraceRecord(TraceType.SubBefore, MID0, 1700000001000, "DefaultRegion", "CG_ORDER", REQ0, retry_times=0,
                    keys="order-1 order-2")
    b = TraceRecord(TraceType.SubBefore, MID1, 1700000001000, "DefaultRegion", "CG_ORDER", REQ0, retry_times=2,
                    keys=None)
    assert encode(a) + encode(b) == V3
    assert keys_of(a) | keys_of(b) == {MID0, MID1, "order-1", "order-2"}
    got = decode(V3).records
    assert [r.retry_times for r in got] == [0, 2] and got[0] == a and got[1].keys == "null"


def test_v4_v5_sub_after_local():
    assert encode(v4_record()) == V4
    assert decode(V4).records == [v4_record()]
    failed = decode(V5).records[0]
    assert (failed.success, failed.context_code, failed.cost_time, failed.group) == (False, 2, 250, "CG_ORDER")
    assert failed.timestamp == 1700000002000 and failed.timestamp_known


def test_v6_cloud_sub_after_has_no_field_splitor_and_no_time():
    r = TraceRecord(TraceType.SubAfter, MID0, request_id="0A00000512AC18B4AAC27E5A40000002", cost_time=4, success=True,
                    keys="order-1 order-2", context_code=ConsumeReturnType.TIME_OUT, cloud=True)
    assert encode(r) == V6
    got = decode(V6, now_ms=NOW).records[0]
    assert (got.context_code, got.group, got.timestamp, got.timestamp_known) == (1, "", NOW, False)


def test_v7_v8_end_transaction():
    r = TraceRecord(TraceType.EndTransaction, MID1, 1700000000200, "DefaultRegion", "PG_TX", topic="TopicTx", tags=None,
                    keys="tx-key-9", store_host="192.168.0.10:10911", msg_type=MsgType.Trans_msg_Commit,
                    transaction_id=MID1, transaction_state="COMMIT_MESSAGE", from_transaction_check=False)
    assert encode(r) == V7 and keys_of(r) == {MID1, "tx-key-9"}
    assert decode(V7).records == [TraceRecord(**{**r.__dict__, "tags": "null"})]
    back = decode(V8).records[0]
    assert (back.transaction_state, back.from_transaction_check, back.msg_type) == ("ROLLBACK_MESSAGE", True, 2)


def test_v9_two_contexts_in_one_body():
    body = V1 + V4
    assert len(body.encode()) == 294
    assert decode(body).records == [v1_record(), v4_record()]
    assert sorted(keys_of(v1_record()) | keys_of(v4_record())) == [MID0, "order-1", "order-2"]


def test_v10_v11_v12_older_writers():
    old = decode(V10).records[0]
    assert (old.offset_msg_id, old.success, old.cost_time) == ("", True, 5)
    newer = decode(V11).records[0]
    assert (newer.msg_type, newer.offset_msg_id, newer.success, newer.client_host) == \
        (MsgType.Delay_Msg, OFFSET_ID, True, "10.0.0.5")
    oldest = decode(V12, now_ms=NOW).records[0]
    assert (oldest.success, oldest.context_code, oldest.group, oldest.timestamp, oldest.cost_time) == \
        (False, 0, "", NOW, 9)


def test_v13_empty_last_field_java_throws_mqtool_reads_it():
    r = TraceRecord(TraceType.SubBefore, MID0, 1700000001000, "DefaultRegion", "CG_ORDER", "REQ", retry_times=0, keys="")
    assert encode(r) == V13                          # 4.9.8's encoder writes it so
    with pytest.raises(TraceDecodeError):
        decode(V13, strict=True)                     # ArrayIndexOutOfBounds in Java
    assert decode(V13).records == [r]


def test_v14_cloud_sub_after_then_pub():
    with pytest.raises(TraceDecodeError):
        decode(V6 + V1, strict=True)                 # NumberFormatException: `Pub` read as a timestamp
    got = decode(V6 + V1, now_ms=NOW).records
    assert [r.type for r in got] == [TraceType.SubAfter, TraceType.Pub] and got[1] == v1_record()
    assert got[0].context_code == 1


def test_v15_unknown_types_are_skipped():
    assert [r.type for r in decode(java("Foo<01>x<02>") + V7).records] == [TraceType.EndTransaction]


def test_one_bad_record_loses_only_itself():
    bad = java("Pub<01>soon<01>DefaultRegion<01>G<01>T<01>M<01>null<01>null<01>h:1<01>1<01>1<01>0<01>X<01>true<02>")
    got = decode(V1 + bad + V4)
    assert got.records == [v1_record(), v4_record()] and len(got.errors) == 1 and "Pub" in got.errors[0]
    with pytest.raises(TraceDecodeError):
        decode(V1 + bad + V4, strict=True)
    assert decode(java("Pub<01>1<01>r<01>g<01>t<01>m<01>a<01>b<01>h<01>1<01>1<01>9<01>o<01>true<02>")).errors  # msgType 9


def test_booleans_are_read_as_java_reads_them():
    assert decode(V1.replace("\x01true\x02", "\x01TRUE\x02")).records[0].success is True
    assert decode(V1.replace("\x01true\x02", "\x01yes\x02")).records[0].success is False


def test_json_names_the_enums():
    assert v1_record().to_json()["msg_type"] == "Normal_Msg"
    assert decode(V5).records[0].to_json()["context_code"] == "EXCEPTION"


# What a writer puts in a field: never the separators; None is written as null.
_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=12)
_opt = st.one_of(st.none(), _text)
_ms = st.integers(0, 2**62)
_small = st.integers(0, 2**31 - 1)


@st.composite
def records(draw):
    t = draw(st.sampled_from(list(TraceType)))
    common = dict(msg_id=draw(_text), keys=draw(_opt))
    if t is TraceType.Pub:
        return TraceRecord(t, timestamp=draw(_ms), region_id=draw(_text), group=draw(_text), topic=draw(_text),
                           tags=draw(_opt), store_host=draw(_text), body_length=draw(_small), cost_time=draw(_small),
                           msg_type=draw(st.sampled_from(list(MsgType))), offset_msg_id=draw(_text),
                           success=draw(st.booleans()), **common)
    if t is TraceType.SubBefore:
        return TraceRecord(t, timestamp=draw(_ms), region_id=draw(_opt), group=draw(_text), request_id=draw(_text),
                           retry_times=draw(_small), **common)
    if t is TraceType.SubAfter:
        return TraceRecord(t, timestamp=draw(_ms), region_id="", group=draw(_text), request_id=draw(_text),
                           cost_time=draw(_small), success=draw(st.booleans()),
                           context_code=draw(st.sampled_from(list(ConsumeReturnType))), **common)
    return TraceRecord(t, timestamp=draw(_ms), region_id=draw(_text), group=draw(_text), topic=draw(_text),
                       tags=draw(_opt), store_host=draw(_text), msg_type=MsgType.Trans_msg_Commit,
                       transaction_id=draw(_opt), transaction_state=draw(st.sampled_from(["COMMIT_MESSAGE",
                                                                                           "ROLLBACK_MESSAGE", "UNKNOW"])),
                       from_transaction_check=draw(st.booleans()), **common)


def _as_read(r: TraceRecord) -> TraceRecord:
    """What a decoder gives back for what was written: null stays the text null."""
    values = {k: ("null" if v is None and k not in ("client_host", "transaction_id") else v)
              for k, v in r.__dict__.items()}
    if r.type is TraceType.EndTransaction and r.transaction_id is None:
        values["transaction_id"] = "null"
    return TraceRecord(**values)


@given(st.lists(records(), min_size=1, max_size=5))
def test_round_trip_strict_and_tolerant(rs):
    body = "".join(encode(r) for r in rs)
    assert body.count("\x02") == len(rs)             # one FIELD_SPLITOR per LOCAL record
    expected = [_as_read(r) for r in rs]
    assert decode(body, strict=True).records == expected
    assert decode(body).records == expected and not decode(body).errors


@given(st.lists(records(), min_size=1, max_size=4))
def test_every_record_s_msg_id_and_keys_are_keys(rs):
    for r in rs:
        ks = keys_of(r)
        assert r.msg_id in ks and all(k in ks for k in (r.keys or "").split(" ") if k)
        assert all(k and " " not in k for k in ks - {r.msg_id})


@given(st.text(max_size=60))
def test_any_text_decodes_or_raises_the_codec_s_error(text):
    decode(text)                                     # tolerant: never raises
    try:
        decode(text, strict=True)
    except TraceDecodeError:
        pass
