"""Hostile and careless clients against real `mqtool namesrv` and `mqtool broker` processes.

One name server and one broker (flushDiskType=SYNC_FLUSH) serve the whole module: a corpus of
malformed frames, each on its own connection, must each get an error response or a closed
connection while a well-behaved client on another connection keeps getting answers and the
servers' memory stays flat; clients that send half a frame and stall, and 1,000 idle connections,
must not stop others being served; and after kill -9 every send the broker acknowledged is there
(tests/store/test_crash.py kills a bare MessageStore writer; here the acks travel over the wire, so
this holds the broker to answering only after the append; a killed process keeps its page cache, so
neither test can see a missing fsync).
"""
from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import struct
import threading
import time
import zlib

import pytest

from mqtool_remoting.batch import encode_batch
from mqtool_remoting.codes import FRAME_MAX_LENGTH, RPC_ONEWAY, RPC_TYPE, RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import FrameError, RemotingError
from mqtool_remoting.framing import FrameDecoder
from mqtool_remoting.headers import SendMessageRequestHeader, send_header_to_v2, to_ext_fields
from mqtool_remoting.transport import connect
from tests.servers import Process, drain, free_port, start_broker, wait_until

pytestmark = pytest.mark.slow
TOPIC = "HostileTopic"
# Small commitlog files: the restart after kill -9 recovers (scans) the whole last file.
BROKER_CONF = "flushDiskType=SYNC_FLUSH\nmappedFileSizeCommitLog=16777216\n"
KILL_TOPIC = "Kill9Topic"        # apart from TOPIC, which the corpus fills with undecodable messages
ANSWER_BOUND_S = 5.0            # a shared 2-core machine: generous, but a blocked server never answers


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    ns_port = free_port()
    ns = Process(["namesrv", "start", "--listen", f"127.0.0.1:{ns_port}", "--kv-config", str(tmp / "kv.json")],
                 "boot success")
    ns_addr = f"127.0.0.1:{ns_port}"
    broker, addr = start_broker(tmp, ns_addr, extra=BROKER_CONF)
    state = {"namesrv": ns_addr, "broker": addr, "broker_proc": broker, "ns_proc": ns, "tmp": tmp,
             "broker_log": drain(broker), "namesrv_log": drain(ns)}
    yield state
    state["broker_proc"].stop()
    assert ns.stop() == 0


def open_sockets(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:          # closed meanwhile
            pass
    return count


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:"))


# ------------------------------------------------------------------ the well-behaved client

class Steady:
    """A client on its own thread and event loop asking one cheap question every 20 ms."""

    def __init__(self, addr: str, cmd_factory):
        self.addr, self.cmd_factory = addr, cmd_factory
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self):
        conn = await connect(self.addr)
        try:
            while not self._stop.is_set():
                t0 = time.monotonic()
                try:
                    resp = await conn.request(self.cmd_factory(), timeout_s=ANSWER_BOUND_S)
                    if resp.code != ResponseCode.SUCCESS:
                        self.failures.append(f"code {resp.code}: {resp.remark}")
                except RemotingError as exc:
                    self.failures.append(str(exc))
                    if conn.closed.is_set():
                        return
                self.latencies.append(time.monotonic() - t0)
                await asyncio.sleep(0.02)
        finally:
            await conn.close()

    def __enter__(self):
        self._thread.start()
        wait_until("the steady client's first answer", lambda: self.latencies or self.failures)
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)

    def check(self, since: int = 0):
        assert not self.failures, self.failures[:5]
        assert len(self.latencies) > since, "the steady client got no answer meanwhile"
        assert max(self.latencies[since:]) < ANSWER_BOUND_S


def broker_question():
    return RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "TBW102", "queueId": 0})


def namesrv_question():
    return RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)


# ------------------------------------------------------------------ the corpus

def frame(header: bytes, body: bytes = b"", stype: int = 0, length: int | None = None) -> bytes:
    mark = struct.pack(">I", (stype << 24) | len(header))
    inner = mark + header + body
    return struct.pack(">i", len(inner) if length is None else length) + inner


def json_frame(obj: dict, body: bytes = b"") -> bytes:
    return frame(json.dumps(obj).encode(), body)


def request(code: int, ext: dict | None = None, body: bytes = b"", **kw) -> bytes:
    return RemotingCommand.request(code, ext, body, **kw).encode()


def send_ext(**over) -> dict:
    h = SendMessageRequestHeader("PG", TOPIC, "TBW102", 4, 0, 0, int(time.time() * 1000), 0, "WAIT\x01true")
    return {**to_ext_fields(h), **over}


def batch_ext() -> dict:
    """SEND_BATCH_MESSAGE carries the V2 (one-letter) header."""
    return send_header_to_v2(SendMessageRequestHeader("PG", TOPIC, "TBW102", 4, 0, 0, int(time.time() * 1000), 0,
                                                      "WAIT\x01true", batch=True))


# (name, bytes, half-close after sending, what must happen: "error" | "closed" | "answer_or_closed")
FRAME_CORPUS = [
    ("2 GiB length prefix", b"\x7f\xff\xff\xff" + b"x" * 64, False, "closed"),
    ("negative length", b"\xff\xff\xff\xf0" + b"x" * 16, False, "closed"),
    ("length below the header-length field", b"\x00\x00\x00\x02ab", False, "closed"),
    ("length one past 16 MiB", struct.pack(">i", FRAME_MAX_LENGTH + 1) + b"\x00" * 16, False, "closed"),
    ("header length past the frame", frame(b"", length=8)[:4] + b"\x00\x00\x10\x00" + b"{}{}", False, "closed"),
    ("truncated header, then EOF", json_frame({"code": 10, "opaque": 1})[:20], True, "closed"),
    ("truncated length prefix, then EOF", b"\x00\x00", True, "closed"),
    ("bad JSON header", frame(b'{"code":10,'), False, "closed"),
    ("JSON header not an object", frame(b"[1,2,3]"), False, "closed"),
    ("JSON header without code", json_frame({"opaque": 7}), False, "closed"),
    ("JSON header of bad UTF-8", frame(b'{"code":10,"remark":"\xff\xfe"}'), False, "closed"),
    ("deeply nested JSON header", frame(b"[" * 200_000), False, "closed"),
    ("code longer than int() takes", frame(b'{"code":' + b"1" * 5000 + b"}"), False, "closed"),
    ("extFields not an object", json_frame({"code": 10, "extFields": [1]}), False, "closed"),
    ("serialize type byte 7", frame(b"{}", stype=7), False, "closed"),
    ("serialize type byte 0xff", frame(b"{}", stype=0xFF), False, "closed"),
    ("ROCKETMQ header truncated", frame(b"\x00\x0a\x00", stype=1), False, "closed"),
    ("ROCKETMQ remark length past the header", frame(struct.pack(">hbhii", 10, 0, 0, 1, 0) + b"\x7f\xff\xff\xff",
                                                   stype=1), False, "closed"),
    ("ROCKETMQ remark of bad UTF-8", frame(struct.pack(">hbhii", 10, 0, 0, 1, 0) + b"\x00\x00\x00\x02\xff\xfe"
                                           + b"\x00\x00\x00\x00", stype=1), False, "closed"),
    ("good request then garbage", request(RequestCode.GET_BROKER_CLUSTER_INFO) + b"\xff" * 12, False,
     "answer_or_closed"),
    ("unknown request code", request(9999), False, "error"),
    ("negative request code", json_frame({"code": -5, "opaque": 3}), False, "error"),
    ("lone surrogates in remark and extFields (the answer echoes the topic)",
     frame(b'{"code":105,"opaque":4,"remark":"\\ud800","extFields":{"topic":"T\\udfff"}}'), False, "error"),
    ("huge extFields value (8 MiB)", request(9997, {"junk": "x" * (8 << 20)}), False, "error"),
    ("20,000 extFields", request(9996, {f"k{i}": "v" for i in range(20_000)}), False, "error"),
    ("a response nobody asked for, then EOF", json_frame({"code": 0, "opaque": 99, "flag": RPC_TYPE}), True,
     "closed"),
    ("oneway request with a bad header, then EOF",
     json_frame({"code": 10, "opaque": 5, "flag": RPC_ONEWAY}), True, "closed"),
]

BROKER_CORPUS = [
    ("SEND_MESSAGE to a topic with a lone surrogate (the answer names it)", json_frame(
        {"code": 10, "opaque": 8, "extFields": send_ext(topic="Bad\udfff", defaultTopic="Nope")}, b"b"), False,
     "error"),
    ("SEND_MESSAGE without header", request(RequestCode.SEND_MESSAGE, {}, b"body"), False, "error"),
    ("SEND_MESSAGE queueId not a number", request(RequestCode.SEND_MESSAGE, send_ext(queueId="zero"), b"b"), False,
     "error"),
    ("SEND_MESSAGE bornTimestamp past a long",
     request(RequestCode.SEND_MESSAGE, send_ext(bornTimestamp="9" * 30), b"b"), False, "error"),
    ("SEND_MESSAGE to a missing topic, no default", request(RequestCode.SEND_MESSAGE,
                                                            send_ext(topic="Nope", defaultTopic="Nope2"), b"b"),
     False, "error"),
    ("SEND_MESSAGE compressed flag on bytes that are not zlib",
     request(RequestCode.SEND_MESSAGE, send_ext(sysFlag="1"), b"not zlib at all"), False, "answer_or_closed"),
    ("SEND_MESSAGE_V2 garbage letters", request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "e": "x", "q": "y"}, b"b"),
     False, "error"),
    ("SEND_MESSAGE_V2 properties without separators",
     request(RequestCode.SEND_MESSAGE_V2, send_header_to_v2(SendMessageRequestHeader(
         "PG", TOPIC, "TBW102", 4, 0, 0, 0, 0, "\x01\x01\x02\x02" * 100)), b"b"), False, "answer_or_closed"),
    ("SEND_BATCH_MESSAGE random body", request(RequestCode.SEND_BATCH_MESSAGE, batch_ext(),
                                                bytes(range(256)) * 4), False, "error"),
    ("SEND_BATCH_MESSAGE entry size past the body",
     request(RequestCode.SEND_BATCH_MESSAGE, batch_ext(), struct.pack(">iiiii", 1 << 30, 0, 0, 0, 5)
             + b"hello"), False, "error"),
    ("SEND_BATCH_MESSAGE negative properties length",
     request(RequestCode.SEND_BATCH_MESSAGE, batch_ext(),
             struct.pack(">iiiii", 27, 0, 0, 0, 5) + b"hello" + b"\xff\xff"), False, "error"),
    ("SEND_BATCH_MESSAGE 2 GiB body length",
     request(RequestCode.SEND_BATCH_MESSAGE, batch_ext(),
             struct.pack(">iiiii", 40, 0, 0, 0, 0x7FFFFFFF) + b"x" * 20), False, "error"),
    ("SEND_BATCH_MESSAGE cut off", request(RequestCode.SEND_BATCH_MESSAGE, batch_ext(),
                                           encode_batch([(0, b"hello", "KEYS\x01k")])[:-3]), False, "error"),
    ("HEART_BEAT body not JSON", request(RequestCode.HEART_BEAT, None, b"{not json"), False, "error"),
    ("HEART_BEAT body a JSON list", request(RequestCode.HEART_BEAT, None, b"[1,2,3]"), False, "error"),
    ("HEART_BEAT body deeply nested", request(RequestCode.HEART_BEAT, None, b"[" * 100_000), False, "error"),
    ("HEART_BEAT consumer data of the wrong shape",
     request(RequestCode.HEART_BEAT, None, b'{"clientID":"c","consumerDataSet":[7,"x",{"subscriptionDataSet":3}]}'),
     False, "error"),
    ("LOCK_BATCH_MQ body of bad UTF-8", request(RequestCode.LOCK_BATCH_MQ, None, b"\xff\xfe\xfd"), False, "error"),
    ("PULL_MESSAGE with nonsense numbers", request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "G", "topic": TOPIC, "queueId": "-7", "queueOffset": "-1", "maxMsgNums": "-1",
        "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}), False,
     "answer_or_closed"),
]

NAMESRV_CORPUS = [
    ("REGISTER_BROKER compressed garbage", request(RequestCode.REGISTER_BROKER, {
        "brokerName": "b", "brokerAddr": "1.2.3.4:5", "clusterName": "c", "haServerAddr": "1.2.3.4:6",
        "brokerId": "0", "compressed": "true"}, b"not zlib"), False, "error"),
    ("REGISTER_BROKER compressed and cut off", request(RequestCode.REGISTER_BROKER, {
        "brokerName": "b", "brokerAddr": "1.2.3.4:5", "clusterName": "c", "haServerAddr": "1.2.3.4:6",
        "brokerId": "0", "compressed": "true"}, zlib.compress(b"\x00\x00\x00\x05{}")), False, "error"),
    ("REGISTER_BROKER body a JSON string", request(RequestCode.REGISTER_BROKER, {
        "brokerName": "b", "brokerAddr": "1.2.3.4:5", "clusterName": "c", "haServerAddr": "1.2.3.4:6",
        "brokerId": "0"}, b'"text"'), False, "error"),
    ("QUERY_DATA_VERSION body deeply nested", request(RequestCode.QUERY_DATA_VERSION, {
        "brokerName": "b", "brokerAddr": "1.2.3.4:5", "clusterName": "c", "brokerId": "0"}, b"{" * 50_000), False,
     "error"),
]


async def probe(addr: str, payload: bytes, half_close: bool, timeout: float = 10.0) -> tuple[str, list]:
    """Send `payload` on a new connection: ("answered" | "closed" | "silent", responses read)."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    dec, got = FrameDecoder(), []
    try:
        writer.write(payload)
        await writer.drain()
        if half_close:
            writer.write_eof()
        deadline = time.monotonic() + timeout
        while True:
            data = await asyncio.wait_for(reader.read(1 << 16), max(0.01, deadline - time.monotonic()))
            if not data:
                return "closed", got
            try:
                got += dec.feed(data)
            except FrameError:
                return "garbled", got
            if got and not half_close:
                return "answered", got
    except (ConnectionError, OSError):
        return "closed", got
    except asyncio.TimeoutError:
        return "silent", got
    finally:
        writer.close()


def judge(name: str, outcome: str, got: list, want: str) -> str | None:
    if outcome in ("silent", "garbled"):
        return f"{name}: {outcome}"
    if want == "closed" and (outcome != "closed" or got):
        return f"{name}: wanted a closed connection, got {outcome} {[(c.code, c.remark) for c in got]}"
    if want == "error":
        if outcome != "answered" or not got[0].is_response or got[0].code == ResponseCode.SUCCESS:
            return f"{name}: wanted an error response, got {outcome} {[(c.code, c.remark) for c in got]}"
    if want == "answer_or_closed" and got and not got[0].is_response:
        return f"{name}: not a response"
    return None


def run_corpus(addr: str, corpus) -> list[str]:
    async def all_of_them():
        outs = await asyncio.gather(*(probe(addr, payload, half) for _, payload, half, _ in corpus))
        return [judge(name, o, got, want) for (name, _, _, want), (o, got) in zip(corpus, outs)]
    return [p for p in asyncio.run(all_of_them()) if p]


@pytest.mark.parametrize("who", ["broker", "namesrv"])
def test_malformed_frames_get_an_error_or_a_closed_connection(servers, who):
    addr = servers[who]
    proc = servers["broker_proc" if who == "broker" else "ns_proc"].proc
    corpus = FRAME_CORPUS + (BROKER_CORPUS if who == "broker" else NAMESRV_CORPUS)
    log = servers[f"{who}_log"]
    with Steady(addr, broker_question if who == "broker" else namesrv_question) as steady:
        sockets = open_sockets(proc.pid)

        def settled_rss() -> int:
            """RssAnon once the server has closed every corpus connection (and freed its buffers)."""
            wait_until("the corpus connections closed", lambda: open_sockets(proc.pid) <= sockets, timeout=30)
            return rss_kib(proc.pid)
        # warm-up: imports, caches, allocator arenas. The plateau is the highest RssAnon the warm-up
        # rounds settle at: the allocator may hand memory back after one round and take it again
        # later (seen: 47 MiB after the second round, 80 MiB two rounds on, as high as before the
        # change that lowered it), which is no leak
        plateau = 0
        for _ in range(3):
            assert run_corpus(addr, corpus) == []
            plateau = max(plateau, settled_rss())
        grown = []
        for _ in range(6):
            assert run_corpus(addr, corpus) == []
            grown.append(settled_rss() - plateau)
        steady.check()
    assert proc.poll() is None
    assert not [line for line in log if "Traceback" in line or " ERROR " in line], "".join(log)[-3000:]
    # A leak is monotonic: of one 8 MiB frame a round it would show +40 and +48 MiB in the last two
    # samples. Noise is a one-sample spike: a frame whose objects wait for the cyclic GC (seen: up to
    # +19 MiB, back under +2 MiB the next round).
    assert min(grown[-2:]) < 24 * 1024, f"{who} RssAnon after warm-up {plateau} KiB, then +{grown} KiB a round"


# ------------------------------------------------------------------ slow and idle clients

def test_clients_that_send_half_a_frame_and_stall_do_not_block_others(servers):
    addr = servers["broker"]
    host, port = addr.rsplit(":", 1)

    async def stall_then_check():
        stalled = []
        half = json_frame({"code": RequestCode.GET_MAX_OFFSET, "opaque": 1, "extFields": {"topic": "TBW102",
                                                                                          "queueId": "0"}})
        for cut in (1, 3, 4, 6, 12, len(half) - 1):          # inside the prefix, the header, the last byte
            for _ in range(10):
                r, w = await asyncio.open_connection(host, int(port))
                w.write(half[:cut])
                stalled.append((r, w))
        big = await asyncio.open_connection(host, int(port))     # announces 16 MiB, sends 1 KiB of it
        big[1].write(struct.pack(">i", FRAME_MAX_LENGTH) + b"\x00" * 1024)
        stalled.append(big)
        await asyncio.gather(*(w.drain() for _, w in stalled))
        conn = await connect(addr)
        try:
            for _ in range(20):
                t0 = time.monotonic()
                resp = await conn.request(broker_question(), timeout_s=ANSWER_BOUND_S)
                assert resp.code == ResponseCode.SUCCESS and time.monotonic() - t0 < ANSWER_BOUND_S
            # a stalled client that finally finishes its frame is answered too
            r, w = stalled[-2]
            w.write(half[len(half) - 1:])
            await w.drain()
            answer = FrameDecoder().feed(await asyncio.wait_for(r.read(1 << 16), ANSWER_BOUND_S))
            assert answer and answer[0].code == ResponseCode.SUCCESS
        finally:
            await conn.close()
            for _, w in stalled:
                w.close()
    asyncio.run(stall_then_check())


def test_a_thousand_idle_connections_and_the_broker_still_serves(servers):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    addr = servers["broker"]
    host, port = addr.rsplit(":", 1)
    broker_pid = servers["broker_proc"].proc.pid

    async def idle_then_check():
        opened = []
        t0 = time.monotonic()
        opened += await asyncio.gather(*(asyncio.open_connection(host, int(port)) for _ in range(1000)))
        connect_s = time.monotonic() - t0
        try:
            wait_until("the broker to hold 1,000 more sockets",
                       lambda: len(os.listdir(f"/proc/{broker_pid}/fd")) >= 1000, timeout=20)
            conn = await connect(addr)
            try:
                for _ in range(10):
                    resp = await conn.request(broker_question(), timeout_s=ANSWER_BOUND_S)
                    assert resp.code == ResponseCode.SUCCESS
            finally:
                await conn.close()
            # every idle connection is still served: one request on each of them
            cmd = broker_question().encode()
            for _, w in opened:
                w.write(cmd)
            answers = await asyncio.gather(*(asyncio.wait_for(r.read(1 << 16), 30) for r, _ in opened))
            assert all(FrameDecoder().feed(a)[0].code == ResponseCode.SUCCESS for a in answers)
        finally:
            for _, w in opened:
                w.close()
        return connect_s
    connect_s = asyncio.run(idle_then_check())
    assert connect_s < 20, f"1,000 connects took {connect_s:.1f} s (listen backlog too small?)"


# ------------------------------------------------------------------ kill -9 under SYNC_FLUSH

def test_kill_9_under_sync_flush_loses_no_acknowledged_send(servers):
    from mqtool.client.consumer import Consumer
    from mqtool.client.producer import OutMessage, Producer
    ns = servers["namesrv"]
    acked: set[str] = set()
    errors: list[str] = []
    killed = threading.Event()

    async def produce():
        from mqtool.client.admin import Admin
        admin = Admin(ns)
        try:
            await admin.create_topic(KILL_TOPIC, 4, 4)
        finally:
            await admin.close()
        p = Producer(ns, "PID_KILL9", retries=0, timeout_s=2.0)

        async def sender(n: int):
            i = 0
            while not killed.is_set():
                mid = f"s{n}-{i}"
                i += 1
                try:
                    res = await p.send(OutMessage(KILL_TOPIC, mid.encode(), keys=[mid]))
                    if res.status == "SEND_OK":
                        acked.add(mid)
                except Exception as exc:  # noqa: BLE001 - after the kill every send fails
                    if not killed.is_set():
                        errors.append(repr(exc))
                    return
        try:
            await asyncio.gather(*(sender(n) for n in range(8)))
        finally:
            await p.close()

    thread = threading.Thread(target=lambda: asyncio.run(produce()), daemon=True)
    thread.start()
    wait_until("150 acknowledged sends", lambda: len(acked) >= 150, timeout=60)
    os.kill(servers["broker_proc"].proc.pid, signal.SIGKILL)    # sends are in flight right now
    killed.set()
    servers["broker_proc"].proc.wait(10)
    servers["broker_proc"].proc.stderr.close()
    thread.join(30)
    assert not errors, errors[:3]
    acked_at_kill = set(acked)

    broker, addr = start_broker(servers["tmp"], ns, extra=BROKER_CONF)
    servers["broker_proc"], servers["broker"], servers["broker_log"] = broker, addr, drain(broker)

    async def read_all() -> set[str]:
        c = Consumer(ns, "CID_KILL9")
        try:
            mqs = await wait_for_async(lambda: c.queues(KILL_TOPIC))
            seen = set()
            for mq in mqs:
                off, end = await c.min_offset(mq), await c.max_offset(mq)
                while off < end:
                    res = await c.pull(mq, off, 32)
                    seen |= {rec.body.decode() for rec in res.messages}
                    off = res.next_offset
            return seen
        finally:
            await c.close()
    stored = asyncio.run(read_all())
    missing = acked_at_kill - stored
    assert not missing, f"{len(missing)} acknowledged sends lost: {sorted(missing)[:5]}"


async def wait_for_async(make, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await make()
        except RemotingError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
