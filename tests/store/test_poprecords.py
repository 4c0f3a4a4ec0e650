"""POP's revive records and order state (store/poprecords.py): the bodies 5.3.3 writes [ran], both ways."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from mqtool_store import poprecords as pr

CK = ('{"bm":0,"bn":"broker-a","c":"GID_demo","d":[0,1,3],"it":60000,"n":3,"pt":1700000000000,"q":1,'
      '"reviveTime":1700000060000,"ro":0,"so":10,"t":"TopicTest"}')
ACK = '{"ao":11,"bn":"broker-a","c":"GID_demo","pt":1700000000000,"q":1,"so":10,"t":"TopicTest"}'
BACK = '{"ao":-1,"aol":[11,13],"bn":"broker-a","c":"GID_demo","pt":1700000000000,"q":1,"so":10,"t":"TopicTest"}'


def test_the_bodies_5_3_3_writes():
    ck = pr.CheckPoint(10, 1700000000000, 60000, 3, 1, "TopicTest", "GID_demo", "broker-a", [0, 1, 3])
    assert ck.to_json() == CK and pr.CheckPoint.from_json(CK) == ck
    assert [ck.offset(i) for i in range(3)] == [10, 11, 13] and ck.index_of(13) == 2 and ck.index_of(12) == -1
    assert ck.unique_id() == "TopicTest@1@10@GID_demo@1700000000000@broker-a@ck"
    ack = pr.AckMsg(11, 10, "GID_demo", "TopicTest", 1, 1700000000000, "broker-a")
    assert ack.to_json() == ACK and pr.AckMsg.from_json(ACK) == ack
    assert ack.unique_id() == "TopicTest@1@11@GID_demo@1700000000000@broker-a@ack"
    back = pr.AckMsg(-1, 10, "GID_demo", "TopicTest", 1, 1700000000000, "broker-a", [11, 13])
    assert back.to_json() == BACK and pr.AckMsg.from_json(BACK).offsets == [11, 13]
    assert pr.decode_revive_body("bAck", BACK.encode()) == back and pr.decode_revive_body("x", b"{}") is None
    assert pr.decode_revive_body("ck", b"not json") is None


def test_long_names_and_pre_5_checkpoints():
    long = '{"ackOffset":5,"startOffset":4,"consumerGroup":"g","topic":"t","queueId":0,"popTime":1}'
    assert pr.AckMsg.from_json(long) == pr.AckMsg(5, 4, "g", "t", 0, 1, "")
    old = pr.CheckPoint.from_json('{"so":4,"pt":1,"it":2,"n":2,"q":0,"t":"t","c":"g"}')
    assert old.d is None and [old.offset(i) for i in range(2)] == [4, 5] and old.index_of(5) == 1


@given(st.integers(0, 1 << 40), st.integers(0, 1 << 42), st.integers(0, 1 << 30),
       st.lists(st.integers(0, 1000), min_size=1, max_size=32, unique=True), st.integers(0, 7),
       st.text(min_size=1, max_size=10), st.integers(0, (1 << 32) - 1), st.none() | st.just("3"))
def test_checkpoint_round_trip(so, pt, it, d, q, name, bm, rp):
    ck = pr.CheckPoint(so, pt, it, len(d), q, name, name + "g", "b", sorted(d), bm, 7, rp)
    assert pr.CheckPoint.from_json(ck.to_json()) == ck


def test_order_info_round_trip():
    info = pr.OrderInfo(100, 3000, [5, 1, 2], 110, "a1", 0b10, {6: 1}, {7: 200})
    assert info.offsets == [5, 6, 7]
    table = {"T@G": {0: info}}
    assert pr.order_table_from_json(pr.order_table_json(table)) == table
