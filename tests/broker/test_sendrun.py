"""A read's sends answered in one C loop (mqtool/broker/csrc/sendrun.c, fastsend.FastRequests.runner)
against the general path: through the broker's real transport (Connection._fast_or_dispatch, fed
reads of many frames), the same answers, the same commit log and consume queue bytes and the same
statistics, with the loop, without it (the per-frame fast path) and without the store kernel."""
from __future__ import annotations

import asyncio
import time
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mqtool.broker import fastsend
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import decode_frame_body
from mqtool_remoting.transport import Connection
from tests.broker.test_fastsend import (FakeConn, _requests, controller, fixed_clock, frame_of, put_counts,  # noqa: F401
                                        store_bytes, through_general, v2)

pytestmark = pytest.mark.usefixtures("fixed_clock")      # store times fixed: two stores, the same bytes

TIMER_AT = (int(time.time()) + 600) * 1000 + 1      # a 5.x timer message due in 10 minutes (absolute)


class _Transport:
    def get_write_buffer_size(self) -> int:
        return 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return 0, 1 << 20

    def is_closing(self) -> bool:
        return False


class Writer:
    """The socket's writing side: what the connection writes, kept."""

    def __init__(self):
        self.data = bytearray()
        self.transport = _Transport()

    def get_extra_info(self, _key):
        return (FakeConn.peer_host, FakeConn.peer_port)

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass


def answers_by_opaque(stream: bytes) -> dict[int, bytes]:
    out, at = {}, 0
    while at < len(stream):
        length = struct.unpack_from(">i", stream, at)[0]
        frame = stream[at:at + 4 + length]
        out[decode_frame_body(frame[4:]).opaque] = frame
        at += 4 + length
    return out


@pytest.fixture(params=["loop", "per-frame"])
def run_loop(request, monkeypatch):
    """With send_run (where it was built) and without it: the per-frame fast path."""
    if request.param == "loop" and fastsend._send_run is None:
        pytest.skip("mqtool.broker._sendrun is not built here")
    if request.param == "per-frame":
        monkeypatch.setattr(fastsend, "_send_run", None)
        return None
    taken = []
    real = fastsend._send_run

    def counted(*args):
        got = real(*args)
        taken.append(got[0])
        return got
    monkeypatch.setattr(fastsend, "_send_run", counted)
    return taken           # how many frames each send_run call took


@pytest.fixture
def pair(tmp_path, store_kernel, run_loop):
    loop = asyncio.new_event_loop()
    fast, general = controller(tmp_path / "fast"), controller(tmp_path / "general")
    yield fast, general, loop
    for ctrl in (fast, general):
        ctrl.store.shutdown()
    loop.close()


def run_reads(fast, general, loop, frames: list[bytes], per_read: int, first_read: int = 0) -> dict[int, bytes]:
    """`frames` in reads of `per_read` (the first of `first_read` when given) through the fast broker's transport and one by one through the
    general path (one random seed each: the same queue picks in the same order); asserts the same
    answers, store bytes and counts; returns the answers."""
    async def through_transport() -> bytes:
        reader, writer = asyncio.StreamReader(), Writer()
        conn = Connection(reader, writer, fast.server.handler, None, fast.server.fast)
        starts = [0, *range(first_read, len(frames), per_read)] if first_read else range(0, len(frames), per_read)
        for k, end in zip(starts, [*starts[1:], len(frames)]):
            reader.feed_data(b"".join(frames[k:end]))
            while len(reader._buffer):
                await asyncio.sleep(0)
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        await conn.close()
        return bytes(writer.data)

    async def through_handler() -> dict[int, bytes]:
        conn, out = FakeConn(), {}
        for frame in frames:
            answer = await through_general(general, conn, frame)
            if answer is not None:
                out[decode_frame_body(answer[4:]).opaque] = answer
        await asyncio.sleep(0)
        return out

    random.seed(7)
    got = answers_by_opaque(loop.run_until_complete(through_transport()))
    random.seed(7)
    want = loop.run_until_complete(through_handler())
    assert got == want
    assert store_bytes(fast) == store_bytes(general)
    assert put_counts(fast) == put_counts(general)
    return got


def sends(n: int, topic: str = "FastA", queue: str = "-1", body: bytes = b"m") -> list[bytes]:
    return [frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic=topic, queue=queue, props=f"UNIQ_KEY\x01U{i}\x02TAGS\x01T"),
                     body + b"%d" % i) for i in range(n)]


def test_a_read_of_sends_is_answered_as_the_general_path_answers(pair, store_kernel, run_loop):
    fast, general, loop = pair
    frames = sends(100) + sends(20, topic="FastMulti", queue="1") + sends(45, queue="3")
    # The store's first put goes the general way (it learns the store host): a read of its own.
    got = run_reads(fast, general, loop, frames, per_read=64, first_read=1)
    assert len(got) == len(frames)
    assert fast.stats.totals.put_msgs == len(frames)
    if run_loop is not None and store_kernel is not None:      # the loop took them (but a topic's first)
        assert sum(run_loop) >= len(frames) - 2


def test_frames_it_does_not_take_in_the_middle_of_a_read(pair):
    """Refused, general-path and odd frames between sends: each is answered where it stands, and
    the sends around it are still the same."""
    fast, general, loop = pair
    odd = [frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic="NoSuchTopic"), b"auto-created"),
           frame_of(RequestCode.SEND_MESSAGE_V2, v2(props="DELAY\x013"), b"delayed"),
           frame_of(RequestCode.SEND_MESSAGE_V2, v2(props=f"TIMER_DELIVER_MS\x01{TIMER_AT}"), b"timer"),     # 5.x: the put hook
           frame_of(RequestCode.SEND_MESSAGE_V2, v2(queue="9"), b"queue too big"),
           frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic="FastReadOnly"), b"read only"),
           frame_of(RequestCode.SEND_MESSAGE_V2, v2(topic="FastOrder"), b"ordered"),
           frame_of(RequestCode.SEND_MESSAGE_V2, v2(), b"oneway", oneway=True),
           frame_of(RequestCode.SEND_MESSAGE_V2, v2(props="XDELAY\x01y\x02TRAN_MSG\x01false"), b"tran text"),
           frame_of(RequestCode.HEART_BEAT, None, b'{"clientID":"c","consumerDataSet":[],"producerDataSet":[]}'),
           frame_of(RequestCode.SEND_MESSAGE_V2, v2(), b"binary header", binary=True)]
    frames = []
    for k, frame in enumerate(odd):
        frames += sends(5, body=b"before-%d-" % k) + [frame]
    frames += sends(40)
    run_reads(fast, general, loop, frames, per_read=len(frames))


def test_a_store_file_filled_in_the_middle_of_a_read(pair):
    """A put the kernel leaves to Python (the commit log file is full: it rolls) inside a run."""
    fast, general, loop = pair
    frames = sends(300, body=b"x" * 20_000)        # 6 MB: past the 4 MiB commit log file of these stores
    run_reads(fast, general, loop, frames, per_read=64)
    assert len(fast.store.commitlog.files) == 2


def test_a_change_made_by_a_frame_holds_for_the_frames_after_it(pair):
    """UPDATE_BROKER_CONFIG in the middle of a read (brokerPermission to read-only): the sends to an
    ordered topic after it in the same read are refused, as the general path refuses them (4.9.8's
    msgCheck refuses only those)."""
    fast, general, loop = pair
    update = frame_of(RequestCode.UPDATE_BROKER_CONFIG, None, b"brokerPermission=4\n")
    frames = sends(10, topic="FastOrder", queue="1") + [update] + sends(10, topic="FastOrder", queue="1")
    got = run_reads(fast, general, loop, frames, per_read=len(frames))
    codes = [decode_frame_body(got[decode_frame_body(f[4:]).opaque][4:]).code for f in frames]
    assert codes[:10] == [0] * 10 and all(c != 0 for c in codes[11:])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], max_examples=40,
          deadline=None)
@given(st.lists(_requests, min_size=2, max_size=24), st.integers(2, 24))
def test_generated_reads_write_and_answer_the_same_bytes(pair, requests, per_read):
    fast, general, loop = pair
    frames = [frame_of(RequestCode.SEND_MESSAGE_V2,
                       v2(r["topic"], r["queue"], r["sys_flag"], r["flag"], r["born"], r["props"], r["reconsume"],
                          r["batch"], **r["extra"]), r["body"], oneway=r["oneway"], language=r["language"])
              for r in requests]
    run_reads(fast, general, loop, frames, per_read)


def test_a_frame_that_raises_is_answered_system_error_and_the_read_goes_on(pair, monkeypatch):
    """A bug on one frame (here broker_properties raising on it): that frame is answered
    SYSTEM_ERROR as the per-frame path answers it, the frames before and after it are stored and
    answered, and the puts are counted."""
    fast, _general, loop = pair
    real = fastsend.broker_properties

    def props(text, cluster):
        if "BOOM" in text:
            raise RuntimeError("boom")
        return real(text, cluster)
    monkeypatch.setattr(fastsend, "broker_properties", props)
    frames = sends(1) + sends(20) + [frame_of(RequestCode.SEND_MESSAGE_V2, v2(props="BOOM\x01x"), b"bad")] + sends(20)

    async def through_transport() -> bytes:
        reader, writer = asyncio.StreamReader(), Writer()
        conn = Connection(reader, writer, fast.server.handler, None, fast.server.fast)
        for chunk in (frames[:1], frames[1:]):
            reader.feed_data(b"".join(chunk))
            while len(reader._buffer):
                await asyncio.sleep(0)
            await asyncio.sleep(0)
        await conn.close()
        return bytes(writer.data)
    got = answers_by_opaque(loop.run_until_complete(through_transport()))
    codes = [decode_frame_body(got[decode_frame_body(f[4:]).opaque][4:]).code for f in frames]
    assert codes == [0] * 21 + [ResponseCode.SYSTEM_ERROR] + [0] * 20
    assert fast.stats.totals.put_msgs == 41
