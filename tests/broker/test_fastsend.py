"""The send hot path (mqtool/broker/fastsend.py) against the general path: the same answer bytes and
the same commit log and consume queue bytes, request for request, with the store kernel and without."""
from __future__ import annotations

import asyncio
import json
import random
import struct
import time
import types

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mqtool.broker import fastsend
from mqtool.broker.config import BrokerConfig
from mqtool.broker.controller import BrokerController
from mqtool.broker.topics import TopicConfig
from mqtool_remoting.batch import encode_batch
from mqtool_remoting.codes import RequestCode, ResponseCode, SerializeType
from mqtool_remoting.command import RemotingCommand, decode_frame_body
from mqtool_remoting.errors import FrameError
from mqtool_store import messagestore

FIXED_MS = 1_760_000_000_123
TOPICS = ["FastA", "FastMulti", "FastOrder", "FastReadOnly", "NoSuchTopic", "%RETRY%FastGroup",
          "SCHEDULE_TOPIC_XXXX", "bad topic!"]

TIMER_AT = (int(time.time()) + 600) * 1000 + 1      # a 5.x timer message due in 10 minutes (absolute)


class FakeConn:
    """What a send handler reads of its connection."""
    peer_host, peer_port, peer = "127.0.0.1", 40123, "127.0.0.1:40123"

    def __init__(self):
        self.attrs = {}


def _fixed_seconds() -> float:
    return FIXED_MS / 1000


def controller(root, **cfg) -> BrokerController:
    config = BrokerConfig(brokerName="fast", listenPort=10911, namesrvAddr="", storePathRootDir=str(root), **cfg)
    ctrl = BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 22), "mappedFileSizeConsumeQueue": "6000"})
    # The statistics' minute buckets on a fixed clock too: two brokers fed the same requests count
    # them in the same buckets even when the wall clock's minute turns between their two puts.
    ctrl.stats.clock = _fixed_seconds
    ctrl.store.start()
    for cfg_ in (TopicConfig("FastA", 4, 4), TopicConfig("FastMulti", 2, 2, topicFilterType="MULTI_TAG"),
                 TopicConfig("FastOrder", 2, 2, order=True), TopicConfig("FastReadOnly", 2, 2, perm=4)):
        ctrl.topics.update(cfg_)
    return ctrl


@pytest.fixture
def fixed_clock(monkeypatch):
    """Store timestamps fixed, so two stores fed the same requests hold the same bytes."""
    clock = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("_")})
    clock.time_ns = lambda: FIXED_MS * 1_000_000
    monkeypatch.setattr(messagestore, "time", clock)


@pytest.fixture
def pair(tmp_path, store_kernel, fixed_clock):
    """(fast, general): two brokers' controllers on their own stores, run on one event loop."""
    loop = asyncio.new_event_loop()
    fast, general = controller(tmp_path / "fast"), controller(tmp_path / "general")
    yield fast, general, loop
    for ctrl in (fast, general):
        ctrl.store.shutdown()
    loop.close()


async def through_fast(ctrl, conn, frame: bytes) -> tuple[bytes | None, bool]:
    """What the broker's transport does with one frame: the fast path, else decode and handle."""
    body = frame[4:]
    answer = fastsend.fast_send(ctrl, conn, body)
    if answer is not None:
        return answer, True
    return await through_general(ctrl, conn, frame), False


async def through_general(ctrl, conn, frame: bytes) -> bytes | None:
    cmd = decode_frame_body(frame[4:])
    resp = await ctrl.handle(conn, cmd)
    if resp is None or cmd.is_oneway:
        return None
    return resp.encode()


def store_bytes(ctrl) -> tuple[bytes, dict]:
    """The commit log's written bytes and every consume queue's, every put dispatched."""
    queues = {key: b"".join(bytes(f.mm[:f.write_pos]) for f in cq.files.files)
              for key, cq in sorted(ctrl.store.queues.items())}
    log = b"".join(bytes(f.mm[:f.write_pos]) for f in ctrl.store.commitlog.files)
    return log, queues


def frame_of(code: int, ext: dict, body: bytes, *, oneway=False, language="JAVA", binary=False,
             raw_values: dict | None = None) -> bytes:
    cmd = RemotingCommand(code, random.randrange(1, 1 << 31), 2 if oneway else 0, None, ext, body, language)
    if binary:
        cmd.serialize_type = SerializeType.ROCKETMQ
        return cmd.encode()
    if raw_values:            # values sent as JSON numbers or booleans (the C++ client's way)
        header = json.loads(cmd.encode_header())
        header.setdefault("extFields", {}).update(raw_values)
        text = json.dumps(header, separators=(",", ":")).encode()
        return struct.pack(">ii", 4 + len(text) + len(body), len(text)) + text + body
    return cmd.encode()


def v2(topic="FastA", queue="1", sys_flag="0", flag="0", born="1700000000000", props="TAGS\x01T\x02KEYS\x01k",
       reconsume=None, batch=None, **extra) -> dict:
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": queue, "f": sys_flag, "g": born, "h": flag}
    if props is not None:
        ext["i"] = props
    if reconsume is not None:
        ext["j"] = reconsume
    if batch is not None:
        ext["m"] = batch
    ext.update(extra)
    return ext


def run_both(fast, general, loop, frames) -> list[bool]:
    """Feed both brokers the same frames (the same random queue picks); assert the same answers and
    the same store bytes; returns which frames the fast path took."""
    conn_f, conn_g = FakeConn(), FakeConn()
    took = []
    for i, frame in enumerate(frames):
        random.seed(i)
        answer_f, fast_took = loop.run_until_complete(through_fast(fast, conn_f, frame))
        random.seed(i)
        answer_g = loop.run_until_complete(through_general(general, conn_g, frame))
        assert answer_f == answer_g, (frame, answer_f, answer_g)
        took.append(fast_took)
    loop.run_until_complete(asyncio.sleep(0))           # the dispatch drains scheduled by the puts
    assert store_bytes(fast) == store_bytes(general)
    assert put_counts(fast) == put_counts(general)
    return took


def put_counts(ctrl) -> tuple:
    """What the broker's statistics hold of the puts (the minute buckets' sums and calls of every
    key, the totals): the same whichever path stored them."""
    st_ = ctrl.stats
    keys = {key: [(b[1], b[2]) for b in counter.buckets] for key, counter in st_.keys.items() if counter.buckets}
    return keys, dict(st_.topic_totals), st_.totals.put_msgs, st_.totals.put_bytes, sum(st_.distribute)


def test_common_sends_take_the_fast_path_and_match(pair):
    fast, general, loop = pair
    frames = [frame_of(RequestCode.SEND_MESSAGE_V2, v2(queue=q, props=p), b"body-%d" % i)
              for i, (q, p) in enumerate([("0", "TAGS\x01A"), ("-1", "WAIT\x01true\x02UNIQ_KEY\x01ABC"),
                                          ("3", ""), ("2", "WAIT\x01false\x02KEYS\x01a b")])]
    frames.append(frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic="FastMulti", queue="1"), b"multi"))
    took = run_both(fast, general, loop, frames)
    assert all(took)
    assert fast.stats.totals.put_msgs == general.stats.totals.put_msgs == 5
    held = fast.store.topic_queue_table[("FastA", 0)]      # 1, or 2 when the random pick was queue 0
    resp = decode_frame_body(loop.run_until_complete(through_fast(fast, FakeConn(), frames[0]))[0][4:])
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["queueOffset"] == str(held) and held >= 1


def test_what_the_fast_path_leaves_to_the_general_one(pair):
    """Each of these takes the general path, and the answers and the store are still the same."""
    fast, general, loop = pair
    cases = [
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic="NoSuchTopic"), b"auto-created"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic="%RETRY%FastGroup", reconsume="1"), b"retry"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(props="DELAY\x013"), b"delayed"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(props=f"TIMER_DELIVER_MS\x01{TIMER_AT}"), b"timer"),        # 5.x: the put hook
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(props="TAGS\x01a\x02TIMER_DELAY_MS\x01x"), b"timer, refused"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(props="TRAN_MSG\x01true\x02PGROUP\x01PG", sys_flag="4"), b"half"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(queue="9"), b"queue too big"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(queue="+1"), b"signed"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic="FastReadOnly"), b"read only"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic="SCHEDULE_TOPIC_XXXX"), b"forbidden"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic="bad topic!"), b"bad name"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(batch="true"), b"\x00\x00\x00\x05junk"),
        frame_of(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "FastA"}, b"missing fields"),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(), b"oneway", oneway=True),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(), b"binary header", binary=True),
        frame_of(RequestCode.SEND_MESSAGE_V2, v2(), b"numbers", raw_values={"e": 1, "h": 0}),
        frame_of(RequestCode.SEND_MESSAGE, {"producerGroup": "PG", "topic": "FastA", "defaultTopic": "TBW102",
                                            "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
                                            "bornTimestamp": "1", "flag": "0"}, b"v1"),
    ]
    took = run_both(fast, general, loop, cases)
    assert not any(took)


def test_a_header_length_past_the_frame_is_left_to_the_decoder(pair):
    """A frame whose header length runs past it closes the connection (FrameError) on the general
    path; the fast path must not store it, even when the JSON it can see parses."""
    fast, _general, loop = pair
    frame = frame_of(RequestCode.SEND_MESSAGE_V2, v2(), b"")
    body = frame[4:]
    hlen = int.from_bytes(body[:4], "big")
    lying = (hlen + 10).to_bytes(4, "big") + body[4:]

    async def fast_answer():
        return fastsend.fast_send(fast, FakeConn(), lying)
    assert loop.run_until_complete(fast_answer()) is None
    with pytest.raises(FrameError):
        decode_frame_body(lying)
    assert fast.store.commitlog_max_offset == 0


def test_broker_states_that_send_everything_the_general_way(pair):
    """Where a put may wait (SYNC_FLUSH, SYNC_MASTER, controller mode's in-sync minimum) or a hook
    applies (ACL), or the broker refuses writes, the fast path takes nothing."""
    fast, _general, loop = pair
    frame = frame_of(RequestCode.SEND_MESSAGE_V2, v2(), b"x")

    async def fast_answer():
        return fastsend.fast_send(fast, FakeConn(), frame[4:])
    assert loop.run_until_complete(fast_answer()) is not None
    for change in (lambda c: setattr(c, "writeable", False), lambda c: setattr(c.store_config, "brokerRole", "SLAVE"),
                   lambda c: setattr(c.store_config, "brokerRole", "SYNC_MASTER"),
                   lambda c: setattr(c.store_config, "flushDiskType", "SYNC_FLUSH"),
                   lambda c: setattr(c, "acl", object())):
        saved = (fast.writeable, fast.store_config.brokerRole, fast.store_config.flushDiskType, fast.acl)
        change(fast)
        assert not fastsend.can_take_sends(fast)
        assert loop.run_until_complete(fast_answer()) is None
        fast.writeable, fast.store_config.brokerRole, fast.store_config.flushDiskType, fast.acl = saved
    assert fastsend.can_take_sends(fast)
    fast.autoswitch = types.SimpleNamespace()
    fast.store_config.minInSyncReplicas = 2             # controller mode's in-sync minimum: put() checks it
    assert not fastsend.can_take_sends(fast)
    fast.store_config.minInSyncReplicas = 1
    assert fastsend.can_take_sends(fast)
    fast.autoswitch = None


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_prop_keys = st.sampled_from(["TAGS", "KEYS", "WAIT", "UNIQ_KEY", "DELAY", "TRAN_MSG", "CLUSTER", "PGROUP", "x", ""])
_props = st.one_of(
    st.none(), st.sampled_from(["TAGS\x01A\x02KEYS\x01k1 k2", "WAIT\x01true\x02UNIQ_KEY\x01ABC", ""]),
    st.lists(st.tuples(_prop_keys, st.one_of(st.sampled_from(["true", "false", "0", "3", ""]), _text)), max_size=5)
    .map(lambda kvs: "\x02".join(f"{k}\x01{v}" for k, v in kvs)),
    st.sampled_from(["TAGS\x01A\x02", "\x02\x02", "KEYS\x01a\x01b", "WAIT\x01true"]))
_ODD_INTS = ["4", "01", "-0", "+1", " 1", "x", "", "2147483648", "99999999999", "١"]
_ints = st.one_of(st.sampled_from(["0", "1", "3", "-1"]), st.sampled_from(["0", "1", "2", "-1"]),
                  st.integers(-(1 << 31), (1 << 31) - 1).map(str), st.sampled_from(_ODD_INTS))
_requests = st.fixed_dictionaries({
    "topic": st.sampled_from(TOPICS[:2] * 6 + TOPICS), "queue": _ints,
    "sys_flag": st.sampled_from(["0"] * 8 + ["2", "4", "8", "1", "x", "12"]),
    "flag": _ints, "born": st.sampled_from(["1700000000000"] * 4 + ["-5", "9223372036854775807", "x", "0"]),
    "props": _props, "reconsume": st.one_of(st.none(), _ints), "batch": st.sampled_from([None, "false", "TRUE"]),
    "body": st.binary(max_size=300), "oneway": st.sampled_from([False] * 5 + [True]),
    "language": st.sampled_from(["JAVA", "CPP", "PYTHON"]),
    "extra": st.dictionaries(st.sampled_from(["k", "l", "n", "zz"]), _text, max_size=2)})


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(_requests, min_size=1, max_size=8))
def test_fast_and_general_paths_write_and_answer_the_same_bytes(pair, requests):
    fast, general, loop = pair
    frames = [frame_of(RequestCode.SEND_MESSAGE_V2,
                       v2(r["topic"], r["queue"], r["sys_flag"], r["flag"], r["born"], r["props"], r["reconsume"],
                          r["batch"], **r["extra"]), r["body"], oneway=r["oneway"], language=r["language"])
              for r in requests]
    TOOK.extend(run_both(fast, general, loop, frames))


TOOK: list[bool] = []       # which generated requests the fast path took, over every example


def test_the_generated_requests_exercise_both_paths():
    """(Runs after the property test in this module.) Both paths had work in it."""
    if TOOK:
        assert any(TOOK) and not all(TOOK), TOOK


# ---------------------------------------------------------------- batches (SEND_BATCH_MESSAGE)

def batch_frame(entries, topic="FastA", queue="1", props="", sys_flag="0", **kw) -> bytes:
    """A producer's batch: the V2 header (with its batch flag) and the encoded entries."""
    return frame_of(RequestCode.SEND_BATCH_MESSAGE, v2(topic, queue, sys_flag, "0", props=props, batch="true"),
                    encode_batch(entries), **kw)


def entries_of(n, size=16, props="TAGS\x01T\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U%d") -> list:
    return [(i % 3, bytes([65 + i % 26]) * size, props % i if "%d" in props else props) for i in range(n)]


def test_batches_take_the_fast_path_and_match(pair, store_kernel):
    """A batch the store kernel makes into one run is stored and answered as the general path does
    it (every entry's record, the comma-joined message ids, the consume queue units, the index)."""
    fast, general, loop = pair
    frames = [batch_frame(entries_of(8)), batch_frame(entries_of(64, 200), queue="-1"),
              batch_frame(entries_of(9, props=""), topic="FastMulti", queue="0", props="KEYS\x01outer"),
              batch_frame(entries_of(12, props="TAGS\x01X\x02"), props="WAIT\x01true\x02CLUSTER\x01other")]
    run_both(fast, general, loop, [frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic=t), b"first")
                                   for t in ("FastA", "FastMulti")])   # (a topic's first put takes the general path)
    took = run_both(fast, general, loop, frames)
    assert all(took) == (store_kernel is not None) and (any(took) or store_kernel is None)
    assert fast.stats.totals.put_msgs == general.stats.totals.put_msgs == 2 + 8 + 64 + 9 + 12
    found = [ctrl.store.index.query("FastA", "k1", 200, 0, 1 << 62)[0] for ctrl in (fast, general)]
    assert found[0] == found[1] and len(found[0]) == 8 + 64
    resp = decode_frame_body(loop.run_until_complete(through_fast(fast, FakeConn(), frames[0]))[0][4:])
    assert resp.code == ResponseCode.SUCCESS and len(resp.ext_fields["msgId"].split(",")) == 8


def test_what_the_batch_fast_path_leaves_to_the_general_one(pair, store_kernel):
    fast, general, loop = pair
    run_both(fast, general, loop, [frame_of(RequestCode.SEND_MESSAGE_V2, v2(), b"first")])
    good = encode_batch(entries_of(8))
    cases = [
        batch_frame(entries_of(7)),                                       # too few for a run
        batch_frame(entries_of(8), topic="NoSuchTopic"),                  # auto-created (and its first put)
        batch_frame(entries_of(8), props="DELAY\x012"),                   # refused: delayed
        batch_frame(entries_of(8), sys_flag="4"),                         # refused: transactional
        batch_frame(entries_of(8), topic="FastReadOnly"),
        batch_frame(entries_of(8), queue="9"),
        batch_frame([(0, b"x" * 70_000, "")] * 8),                        # a body over maxMessageSize
        batch_frame(entries_of(8, props="K\x01" + "v" * 32_000), props="X\x01" + "w" * 1000),  # merged: over 32767
        frame_of(RequestCode.SEND_BATCH_MESSAGE, v2(batch="true"), good[:-3]),        # cut short
        frame_of(RequestCode.SEND_BATCH_MESSAGE, v2(batch="true"), good, oneway=True),
        frame_of(RequestCode.SEND_BATCH_MESSAGE, v2(batch="true"), good, binary=True),
        frame_of(RequestCode.SEND_BATCH_MESSAGE, v2(batch="true"), b""),                # empty
    ]
    fast.store.cfg.maxMessageSize = general.store.cfg.maxMessageSize = 65536
    took = run_both(fast, general, loop, cases)
    assert not any(took)


def test_batches_across_commit_log_file_ends_match(pair, store_kernel, monkeypatch):
    """The kernel's one-call put of a batch (MessageStore.put_run_quick) leaves a run that does not
    fit before the file's end to put_run, which rolls the file: across several 4 MiB files the fast
    path still stores and answers what the general path does, and took both ways."""
    fast, general, loop = pair
    run_both(fast, general, loop, [frame_of(RequestCode.SEND_MESSAGE_V2, v2(), b"first")])
    quick = {"put": 0, "left": 0}
    real = type(fast.store).put_run_quick

    def counted(store, run):
        got = real(store, run)
        quick["put" if got is not None else "left"] += 1
        return got
    monkeypatch.setattr(type(fast.store), "put_run_quick", counted)
    frames = [batch_frame(entries_of(64, 7000 + 97 * i), queue=str(i % 4)) for i in range(30)]   # ~0.45 MiB each
    took = run_both(fast, general, loop, frames)
    assert all(took) == (store_kernel is not None)
    assert len(fast.store.commitlog.files) >= 3
    if store_kernel is not None:
        assert quick["put"] > 20 and quick["left"] >= 2, quick


_entries = st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), st.binary(max_size=64), _props.map(
    lambda p: p or "")), min_size=6, max_size=12)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], max_examples=40)
@given(st.lists(st.fixed_dictionaries({"entries": _entries, "outer": _props.map(lambda p: p or ""),
                                       "topic": st.sampled_from(["FastA", "FastA", "FastMulti", "NoSuchTopic"]),
                                       "queue": st.sampled_from(["0", "1", "-1", "5", "x"]),
                                       "batch": st.sampled_from(["true", "false", "TRUE", "yes"])}),
                min_size=1, max_size=4))
def test_fast_and_general_batches_write_and_answer_the_same_bytes(pair, batches):
    fast, general, loop = pair
    frames = [frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic=t), b"first") for t in ("FastA", "FastMulti")]
    frames += [frame_of(RequestCode.SEND_BATCH_MESSAGE, v2(b["topic"], b["queue"], props=b["outer"], batch=b["batch"]),
                        encode_batch(b["entries"])) for b in batches]
    BATCH_TOOK.extend(run_both(fast, general, loop, frames)[2:])


BATCH_TOOK: list[bool] = []


def test_the_generated_batches_exercise_both_paths():
    """(Runs after the property test above.) Both paths had batches in it (with the kernel built)."""
    from mqtool_store import kernel
    if BATCH_TOOK and kernel.kernel is not None:
        assert any(BATCH_TOOK) and not all(BATCH_TOOK), BATCH_TOOK
