"""The pull hot path (mqtool/broker/fastpull.py) against the general path: the same answer bytes,
the same committed offsets, pull statistics and store bytes, request for request, with the store
kernel and without (the store_kernel fixture)."""
from __future__ import annotations

import asyncio
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mqtool.broker import fastpull
from mqtool.broker.clients import ClientChannelInfo
from mqtool.broker.subscriptions import SubscriptionGroupConfig
from mqtool.broker.topics import TopicConfig
from mqtool.common.subscription import Subscription
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import decode_frame_body
from mqtool_remoting.headers import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND

from .test_fastsend import FakeConn, controller, fixed_clock, frame_of, store_bytes, through_general, v2  # noqa: F401

TAGS = ["A", "B", "C", None]
GROUPS = ["PullG", "TagG", "SqlG", "BroadcastG", "OffG", "NewG"]
TOPICS = ["FastA", "FastMulti", "FastWriteOnly", "%RETRY%PullG", "NoSuchTopic"]


def stocked(root):
    """A broker with messages of varied tags in its queues, groups and registered consumers."""
    ctrl = controller(root)
    ctrl.topics.update(TopicConfig("FastWriteOnly", 2, 2, perm=2))
    ctrl.topics.update(TopicConfig("%RETRY%PullG", 1, 1))
    ctrl.groups.update(dataclasses.replace(SubscriptionGroupConfig("OffG"), consumeEnable=False))
    ctrl.groups.update(dataclasses.replace(SubscriptionGroupConfig("BroadcastG"), consumeBroadcastEnable=False))
    for group in ("PullG", "TagG", "SqlG"):
        ctrl.groups.update(SubscriptionGroupConfig(group))
    info = ClientChannelInfo(object(), "client@1", "JAVA", 0, 0)
    ctrl.consumers.register("TagG", info, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                            [Subscription.parse("FastA", "A || C", 3), Subscription.parse("FastMulti", "*", 3)])
    ctrl.consumers.register("SqlG", info, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                            [Subscription.parse("FastA", "a > 1", 3, "SQL92")])
    ctrl.consumers.register("BroadcastG", info, "CONSUME_PASSIVELY", "BROADCASTING", "CONSUME_FROM_LAST_OFFSET",
                            [Subscription.parse("FastA", "*", 3)])
    return ctrl


@pytest.fixture
def pair(tmp_path, store_kernel, fixed_clock):  # noqa: F811
    """(fast, general, loop): two brokers holding the same messages, run on one event loop."""
    loop = asyncio.new_event_loop()
    fast, general = stocked(tmp_path / "fast"), stocked(tmp_path / "general")
    sends = [frame_of(RequestCode.SEND_MESSAGE_V2,
                      v2(topic=topic, queue=str(i % 2), props=f"TAGS\x01{TAGS[i % 4]}" if TAGS[i % 4] else ""),
                      b"m%d" % i * (i % 9)) for i in range(120) for topic in ("FastA", "FastMulti", "%RETRY%PullG")]
    for ctrl in (fast, general):
        conn = FakeConn()
        for frame in sends:
            loop.run_until_complete(through_general(ctrl, conn, frame))
        ctrl.store.drain_dispatch()
    yield fast, general, loop
    for ctrl in (fast, general):
        ctrl.store.shutdown()
    loop.close()


def pull(group="PullG", topic="FastA", queue="0", offset="0", nums="32", sys_flag=None, commit="0", suspend="0",
         sub_version="0", subscription="*", expression="TAG", **extra) -> bytes:
    if sys_flag is None:
        sys_flag = str(PULL_SUBSCRIPTION | PULL_COMMIT_OFFSET)
    ext = {"consumerGroup": group, "topic": topic, "queueId": queue, "queueOffset": offset, "maxMsgNums": nums,
           "sysFlag": sys_flag, "commitOffset": commit, "suspendTimeoutMillis": suspend, "subVersion": sub_version}
    if subscription is not None:
        ext["subscription"] = subscription
    if expression is not None:
        ext["expressionType"] = expression
    ext.update(extra)
    return frame_of(RequestCode.PULL_MESSAGE, {k: v for k, v in ext.items() if v is not None}, b"")


async def through_fast(ctrl, conn, frame: bytes) -> tuple[bytes | None, bool]:
    answer = fastpull.fast_request(ctrl, conn, frame[4:])
    if answer is not None:
        return answer, True
    return await through_general(ctrl, conn, frame), False


def pulled(ctrl) -> tuple:
    """What a pull leaves behind: committed offsets and the pull statistics."""
    t = ctrl.stats.totals
    return (ctrl.offsets.snapshot(), (t.get_found, t.get_msgs, t.get_bytes, t.get_miss),
            dict(ctrl.stats.group_totals), sorted(ctrl.groups.table))


def run_both(fast, general, loop, frames) -> list[bool]:
    conn_f, conn_g = FakeConn(), FakeConn()
    took = []
    for frame in frames:
        answer_f, fast_took = loop.run_until_complete(through_fast(fast, conn_f, frame))
        answer_g = loop.run_until_complete(through_general(general, conn_g, frame))
        assert answer_f == answer_g, (frame, answer_f, answer_g)
        took.append(fast_took)
    assert pulled(fast) == pulled(general)
    assert store_bytes(fast) == store_bytes(general)
    return took


def test_common_pulls_take_the_fast_path_and_match(pair):
    fast, general, loop = pair
    frames = [pull(), pull(queue="1", offset="7", nums="5", commit="3"),
              pull(topic="FastMulti", subscription="A || B"), pull(subscription="C", nums="100"),
              pull(group="TagG", sys_flag=str(PULL_COMMIT_OFFSET | PULL_SUSPEND), subscription=None, commit="4"),
              pull(group="TagG", topic="FastMulti", sys_flag="0", subscription=None, expression=None),
              pull(subscription="", expression="")]
    took = run_both(fast, general, loop, frames)
    assert all(took)
    resp = decode_frame_body(loop.run_until_complete(through_fast(fast, FakeConn(), frames[1]))[0][4:])
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["nextBeginOffset"] == "12" and len(resp.body) > 0
    assert fast.offsets.query("PullG", "FastA", 1) == 3


def test_what_the_fast_path_leaves_to_the_general_one(pair):
    """Each of these takes the general path, and the answers and what they leave are still the same."""
    fast, general, loop = pair
    end = str(fast.store.max_offset("FastA", 0))
    cases = [pull(offset=end), pull(offset=end, sys_flag=str(PULL_SUSPEND | PULL_SUBSCRIPTION), suspend="1"),
             pull(offset="99999"), pull(offset="-1"), pull(subscription="NoSuchTag"),
             pull(group="NewG"), pull(group="OffG"), pull(group="NoSuchGroup", sys_flag="0"),
             pull(group="TagG", sys_flag="0", sub_version="4"), pull(group="SqlG", sys_flag="0"),
             pull(group="BroadcastG", sys_flag="0"), pull(topic="FastWriteOnly"), pull(topic="NoSuchTopic"),
             pull(queue="7"), pull(queue="-1"), pull(expression="SQL92", subscription="a > 1"),
             pull(queue="+1"), pull(nums="x"), pull(suspend=None), pull(commit="١"),
             frame_of(RequestCode.PULL_MESSAGE, {"consumerGroup": "PullG", "topic": "FastA"}, b"")]
    took = run_both(fast, general, loop, cases)
    assert not any(took), took


def test_broker_states_that_pull_everything_the_general_way(pair):
    """ACL, a slave, a broker without read permission, retry topics filtered by the original
    topic's expression (filterSupportRetry): the fast path takes nothing."""
    fast, general, loop = pair
    frame = pull()
    assert fastpull.fast_pull(fast, FakeConn(), frame[4:]) is not None
    retry = pull(topic="%RETRY%PullG")
    assert fastpull.fast_pull(fast, FakeConn(), retry[4:]) is not None
    fast.config.filterSupportRetry = True
    assert fastpull.fast_pull(fast, FakeConn(), retry[4:]) is None
    fast.config.filterSupportRetry = False
    fast.config.brokerPermission = 2
    assert fastpull.fast_pull(fast, FakeConn(), frame[4:]) is None
    fast.config.brokerPermission = 6
    fast.acl = object()
    assert fastpull.fast_pull(fast, FakeConn(), frame[4:]) is None
    fast.acl = None
    fast.store_config.brokerRole = "SLAVE"
    assert fastpull.fast_pull(fast, FakeConn(), frame[4:]) is None


def test_slave_read_suggestions_match(pair):
    """With slaveReadEnable the answer names the broker to read from next, as pull_message does."""
    fast, general, loop = pair
    for ctrl in (fast, general):
        ctrl.config.slaveReadEnable = True
        ctrl.store.cfg.accessMessageInMemoryMaxRatio = 0        # every reader counts as far behind
    took = run_both(fast, general, loop, [pull(), pull(group="TagG", sys_flag="0", subscription=None)])
    assert all(took)


_ints = st.one_of(st.integers(-2, 70).map(str), st.sampled_from(["+1", "01", "x", "", "2147483648", "١"]))
_requests = st.fixed_dictionaries({
    "group": st.sampled_from(GROUPS[:2] * 4 + GROUPS + ["NoSuchGroup"]),
    "topic": st.sampled_from(TOPICS[:2] * 4 + TOPICS), "queue": st.sampled_from(["0", "1", "0", "1", "2", "-1", "x"]),
    "offset": _ints, "nums": st.sampled_from(["32", "1", "5", "0", "-1", "100", "x"]),
    "sys_flag": st.one_of(st.sampled_from([PULL_SUBSCRIPTION | PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, 0,
                                           PULL_COMMIT_OFFSET, PULL_SUSPEND | PULL_SUBSCRIPTION]).map(str),
                          st.integers(0, 15).map(str), st.just("x")),
    "commit": _ints, "suspend": st.sampled_from(["0", "0", "1", "x"]),
    "sub_version": st.sampled_from(["0", "3", "4", "-1", "x"]),
    "subscription": st.sampled_from(["*", "*", "A", "A || B", "C", "", None, "||", "Z", " B ", "a > 1"]),
    "expression": st.sampled_from(["TAG", "TAG", None, "", "SQL92", "tag"]),
    "extra": st.dictionaries(st.sampled_from(["bname", "zz"]), st.sampled_from(["x", "broker-a"]), max_size=1)})


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], max_examples=60)
@given(st.lists(_requests, min_size=1, max_size=6))
def test_fast_and_general_paths_answer_the_same_bytes(pair, requests):
    fast, general, loop = pair
    frames = [pull(r["group"], r["topic"], r["queue"], r["offset"], r["nums"], r["sys_flag"], r["commit"],
                   r["suspend"], r["sub_version"], r["subscription"], r["expression"], **r["extra"])
              for r in requests]
    TOOK.extend(run_both(fast, general, loop, frames))


TOOK: list[bool] = []


def test_the_generated_pulls_exercise_both_paths():
    """(Runs after the property test in this module.) Both paths had work in it."""
    if TOOK:
        assert any(TOOK) and not all(TOOK), TOOK
