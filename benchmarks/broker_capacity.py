"""Benchmark: the broker's own capacity under pipelined load (issue 11).

A small asyncio client (this process) writes pre-encoded SEND_MESSAGE_V2 frames (128 B bodies by
default) on C connections with W requests in flight each, to a `mqtool broker` process on
127.0.0.1 (embedded name server, ASYNC_FLUSH), and counts SUCCESS answers for T seconds after a
warm-up: msg/s, p50/p99 latency, errors, the broker's CPU time per message and its anonymous
memory (RssAnon) at the end of the warm-up, its highest and at the end (all from /proc). The CPU is
the broker process's (every thread: utime + stime of /proc/PID/stat) over the measured seconds only,
per acknowledged message, with the cores it used (CPU seconds per second).
Baseline in the same run: the same client against a loopback server that answers every frame
with a canned response without decoding it (the client's and the loopback's own ceiling).

    python benchmarks/broker_capacity.py [--connections 4] [--window 64] [--size 128] [--batch N]
                                         [--idle-pullers N] [--tail] [--seconds 10] [--warmup 2]
                                         [--java-broker PATH [--java-first]] [--before-tree DIR] [--quick] [--json]

With --java-broker PATH (an Apache RocketMQ 4.9.8 install: bin/mqnamesrv, bin/mqbroker) that broker
is measured too, after mqtool's (before it with --java-first), under the same load (its own name
server, ASYNC_FLUSH, a temporary store), and the ratios mqtool / Java of CPU per message and msg/s
come from the same run; without it the result says the Java side was skipped.

With --before-tree DIR the broker of another checkout (an earlier commit) is measured the same way
after this one's (before it with --before-first: whichever runs first pays a few per cent more CPU
a message, so report both orders), and the ratios this / before come from the same run.

With --batch N every request is a SEND_BATCH_MESSAGE of N messages, and msg/s counts messages
(N per SUCCESS answer); latencies are per request.

With --idle-pullers N the broker also holds N long-polling pulls (one connection, PULL_MESSAGE
with SUSPEND, 30 s) on the queues of a second topic that receives nothing, as consumers of a
quiet topic wait beside a busy one; they are asked before the warm-up and re-asked if answered.

With --tail the sent topic is consumed while it is sent, as a caught-up consumer group does: one
long-polling pull chain per queue (one connection, 32 messages a pull, each pull from the last
answer's nextBeginOffset, as Java's PullMessageService keeps one pull in flight per queue);
reported as consumed msg/s over the measured seconds beside the sent msg/s, with the pulls' round
trips (p50/p99).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import struct
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mqtool_remoting.batch import encode_batch  # noqa: E402
from mqtool_remoting.codes import RequestCode  # noqa: E402
from mqtool_remoting.command import RemotingCommand  # noqa: E402
from mqtool_remoting.headers import PULL_SUBSCRIPTION, PULL_SUSPEND  # noqa: E402

from brokerproc import broker_process, cpu_seconds as cpu_s, free_port_pair, rss_anon_kib, \
    thread_cpu_seconds  # noqa: E402,F401 - shared
from javabroker import java_broker_process  # noqa: E402

TOPIC = "CapacityBench"
IDLE_TOPIC = "CapacityIdle"
_LEN = struct.Struct(">i")


def frames(count: int, size: int, batch: int = 0) -> list[tuple[int, bytes]]:
    """(opaque, frame) pairs of SEND_MESSAGE_V2 requests, each with its own opaque; with `batch`,
    SEND_BATCH_MESSAGE requests of that many messages (each with its UNIQ_KEY, as clients send)."""
    out = []
    body = b"x" * size
    for k in range(count):
        if batch:
            payload = encode_batch([(0, body, f"UNIQ_KEY\x01{k:016X}{i:016X}") for i in range(batch)])
            code = RequestCode.SEND_BATCH_MESSAGE
        else:
            payload, code = body, RequestCode.SEND_MESSAGE_V2
        cmd = RemotingCommand.request(code, {
            "a": "PID_CAPACITY", "b": TOPIC, "c": "TBW102", "d": 4, "e": -1, "f": 0,
            "g": int(time.time() * 1000), "h": 0, "i": "WAIT\x01true\x02", "j": 0, "k": False, "m": bool(batch)},
            payload, language="JAVA")
        out.append((cmd.opaque, cmd.encode()))
    return out


def _response(buf: bytes) -> tuple[int, int]:
    """(code, opaque) of a response frame body (JSON header)."""
    hlen = _LEN.unpack_from(buf, 0)[0] & 0xFFFFFF
    header = json.loads(buf[4:4 + hlen])
    return header["code"], header["opaque"]


async def load(port: int, conns: int, window: int, size: int, warmup: float, seconds: float, batch: int = 0,
               on_measure=None) -> dict:
    """`on_measure(True)` is called as the measured seconds start, `on_measure(False)` as they end."""
    per_conn = [frames(window * 4, size, batch) for _ in range(conns)]
    per_answer = batch or 1
    stats = {"ok": 0, "errors": {}, "rts": []}
    phase = {"measure": False, "stop": False}

    async def one(pairs):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sent_at: dict[int, float] = {}
        it = iter(range(1 << 62))
        inflight = asyncio.Semaphore(window)

        async def send_loop():
            while not phase["stop"]:
                await inflight.acquire()
                opaque, frame = pairs[next(it) % len(pairs)]
                sent_at[opaque] = time.perf_counter()
                writer.write(frame)
                if writer.transport.get_write_buffer_size() > 1 << 20:
                    await writer.drain()

        sender = asyncio.create_task(send_loop())
        buf = bytearray()
        try:
            while not phase["stop"]:
                data = await reader.read(1 << 18)
                if not data:
                    break
                buf += data
                pos = 0
                while len(buf) - pos >= 4:
                    n = _LEN.unpack_from(buf, pos)[0]
                    if len(buf) - pos - 4 < n:
                        break
                    code, opaque = _response(bytes(buf[pos + 4:pos + 4 + n]))
                    pos += 4 + n
                    t0 = sent_at.pop(opaque, None)
                    inflight.release()
                    if phase["measure"]:
                        if code == 0:
                            stats["ok"] += per_answer
                            if t0 is not None and len(stats["rts"]) < 2_000_000:
                                stats["rts"].append(time.perf_counter() - t0)
                        else:
                            stats["errors"][code] = stats["errors"].get(code, 0) + 1
                del buf[:pos]
        finally:
            sender.cancel()
            writer.close()

    tasks = [asyncio.create_task(one(p)) for p in per_conn]
    await asyncio.sleep(warmup)
    if on_measure:
        on_measure(True)
    phase["measure"] = True
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    phase["measure"] = False
    elapsed = time.perf_counter() - t0
    if on_measure:
        on_measure(False)
    phase["stop"] = True
    await asyncio.wait(tasks, timeout=5)
    rts = sorted(stats["rts"])
    pct = (lambda q: round(rts[min(len(rts) - 1, int(q * len(rts)))] * 1000, 2) if rts else None)
    return {"msg_per_s": round(stats["ok"] / elapsed), "p50_ms": pct(0.5), "p99_ms": pct(0.99),
            "errors": stats["errors"], "seconds": round(elapsed, 2), "answered": stats["ok"]}


def pull_request(group: str, topic: str, queue: int, offset: int, suspend_ms: int) -> RemotingCommand:
    """A long-polling PULL_MESSAGE of up to 32 messages, its subscription "*" in the request."""
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": PULL_SUSPEND | PULL_SUBSCRIPTION, "commitOffset": 0, "suspendTimeoutMillis": suspend_ms,
        "subVersion": 0, "subscription": "*", "expressionType": "TAG"}, language="JAVA")


async def frames_of(reader, stop: asyncio.Event):
    """Each whole frame read (its bytes after the length field) until `stop` or the peer closes."""
    buf = bytearray()
    while not stop.is_set():
        data = await reader.read(1 << 18)
        if not data:
            return
        buf += data
        pos = 0
        while len(buf) - pos >= 4 and len(buf) - pos - 4 >= _LEN.unpack_from(buf, pos)[0]:
            n = _LEN.unpack_from(buf, pos)[0]
            yield bytes(buf[pos + 4:pos + 4 + n])
            pos += 4 + n
        del buf[:pos]


async def idle_pulls(port: int, count: int, stop: asyncio.Event) -> None:
    """`count` long-polling pulls held on IDLE_TOPIC's 4 queues, each re-asked when answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)

    def ask(k: int) -> None:
        writer.write(pull_request(f"CapacityIdleGroup{k}", IDLE_TOPIC, k % 4, 0, 30_000).encode())

    for k in range(count):
        ask(k)
    answered = 0
    try:
        async for _ in frames_of(reader, stop):
            ask(answered % count)
            answered += 1
    finally:
        writer.close()


async def tail_pulls(port: int, stop: asyncio.Event, consumed: list, rtts: list) -> None:
    """One long-polling pull chain per queue of TOPIC, from offset 0; consumed[0] counts messages,
    rtts gets (answered at, round trip) of each pull."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    queue_of: dict[int, tuple[int, float]] = {}

    def ask(queue: int, offset: int) -> None:
        cmd = pull_request("CapacityTailGroup", TOPIC, queue, offset, 15_000)
        queue_of[cmd.opaque] = (queue, time.perf_counter())
        writer.write(cmd.encode())

    for q in range(4):
        ask(q, 0)
    try:
        async for frame in frames_of(reader, stop):
            hlen = _LEN.unpack_from(frame, 0)[0] & 0xFFFFFF
            header = json.loads(frame[4:4 + hlen])
            pos = 4 + hlen
            while pos + 4 <= len(frame):          # the records, by their TOTALSIZE fields
                pos += _LEN.unpack_from(frame, pos)[0]
                consumed[0] += 1
            queue, asked_at = queue_of.pop(header["opaque"])
            now = time.perf_counter()
            rtts.append((now, now - asked_at))
            ask(queue, int((header.get("extFields") or {}).get("nextBeginOffset", 0)))
    finally:
        writer.close()


async def canned_server(port: int) -> asyncio.AbstractServer:
    """Answers every frame with a SUCCESS response carrying the request's opaque, decoding only the
    length prefix and the opaque: the client's and loopback's own ceiling."""
    async def handle(reader, writer):
        try:          # cancelled at the end of the run: ends quietly (3.11 logs a cancelled handler)
            buf = bytearray()
            while True:
                data = await reader.read(1 << 18)
                if not data:
                    break
                buf += data
                pos, out = 0, []
                while len(buf) - pos >= 4:
                    n = _LEN.unpack_from(buf, pos)[0]
                    if len(buf) - pos - 4 < n:
                        break
                    hlen = _LEN.unpack_from(buf, pos + 4)[0] & 0xFFFFFF
                    opaque = json.loads(bytes(buf[pos + 8:pos + 8 + hlen]))["opaque"]
                    header = json.dumps({"code": 0, "flag": 1, "language": "JAVA", "opaque": opaque,
                                         "serializeTypeCurrentRPC": "JSON", "version": 0}).encode()
                    out.append(_LEN.pack(4 + len(header)) + _LEN.pack(len(header)) + header)
                    pos += 4 + n
                del buf[:pos]
                writer.write(b"".join(out))
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", port)


def by_thread(marks: list[dict[str, float]], answered: int, top: int = 6) -> dict[str, float]:
    """CPU µs a message over the measured seconds per thread name (the `top` largest, the rest as
    "others"): which thread the CPU per message goes to (the broker's event loop is "main")."""
    if len(marks) != 2:
        return {}
    before, after = marks
    spent = sorted(((after[k] - before.get(k, 0.0), k) for k in after), reverse=True)
    per = {k: round(s * 1e6 / max(answered, 1), 2) for s, k in spent[:top]}
    rest = sum(s for s, _ in spent[top:])
    if rest > 0:
        per["others"] = round(rest * 1e6 / max(answered, 1), 2)
    return per


def measure(broker, args, baseline_rate: int) -> dict:
    """The load against one running broker (an object with pid, port and create_topic): msg/s,
    latencies, and the broker's CPU (all threads, from /proc) over the measured seconds only."""
    broker.create_topic(TOPIC)
    if args.idle_pullers:
        broker.create_topic(IDLE_TOPIC)
    rss: list[int] = []
    cpu_marks: list[tuple[float, float]] = []      # (wall, broker CPU s) as the measured seconds start and end
    thread_marks: list[dict[str, float]] = []      # the same per thread name

    def on_measure(_starting: bool) -> None:
        thread_marks.append(thread_cpu_seconds(broker.pid))
        cpu_marks.append((time.perf_counter(), cpu_s(broker.pid)))

    async def sample_memory():
        await asyncio.sleep(args.warmup)
        while True:
            rss.append(rss_anon_kib(broker.pid))
            await asyncio.sleep(0.5)

    consumed, pull_rtts = [0], []
    tail_counts: list[tuple[float, int]] = []

    async def count_consumed():
        await asyncio.sleep(args.warmup)
        tail_counts.append((time.perf_counter(), consumed[0]))
        await asyncio.sleep(args.seconds)
        tail_counts.append((time.perf_counter(), consumed[0]))

    async def loaded():
        stop = asyncio.Event()
        side = [asyncio.create_task(sample_memory())]
        if args.idle_pullers:
            side.append(asyncio.create_task(idle_pulls(broker.port, args.idle_pullers, stop)))
        if args.tail:
            side += [asyncio.create_task(tail_pulls(broker.port, stop, consumed, pull_rtts)),
                     asyncio.create_task(count_consumed())]
        try:
            return await load(broker.port, args.connections, args.window, args.size, args.warmup, args.seconds,
                              args.batch, on_measure)
        finally:
            stop.set()
            for task in side:
                task.cancel()
    res = asyncio.run(loaded())
    if args.tail and len(tail_counts) == 2:
        (t0, c0), (t1, c1) = tail_counts
        res["consumed_msg_per_s"] = round((c1 - c0) / (t1 - t0))
        rtts = sorted(rtt for at, rtt in pull_rtts if t0 <= at <= t1)
        res["pull_rtt_p50_ms"] = round(rtts[len(rtts) // 2] * 1000, 2) if rtts else None
        res["pull_rtt_p99_ms"] = round(rtts[int(len(rtts) * 0.99)] * 1000, 2) if rtts else None
    rss.append(rss_anon_kib(broker.pid))
    res["broker_rss_anon_mib"] = {"after_warmup": round(rss[0] / 1024, 1), "max": round(max(rss) / 1024, 1),
                                  "end": round(rss[-1] / 1024, 1)}
    (w0, cpu0), (w1, cpu1) = cpu_marks
    res["broker_cpu_us_per_msg"] = round((cpu1 - cpu0) * 1e6 / max(res["answered"], 1), 2)   # per acknowledged message
    res["broker_cores_used"] = round((cpu1 - cpu0) / (w1 - w0), 2)
    res["broker_cpu_us_per_msg_by_thread"] = by_thread(thread_marks, res["answered"])
    res["ratio_to_baseline"] = round(res["msg_per_s"] / max(baseline_rate, 1), 3)
    return res


def run(args) -> dict:
    result = {"machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
              "mode": {"flushDiskType": "ASYNC_FLUSH", "connections": args.connections, "window": args.window,
                       "body_bytes": args.size, "seconds": args.seconds, "warmup_s": args.warmup,
                       "batch": args.batch, "idle_pullers": args.idle_pullers, "tail": args.tail}}
    port = free_port_pair()

    async def baseline():
        server = await canned_server(port)
        try:
            return await load(port, args.connections, args.window, args.size, args.warmup, args.seconds, args.batch)
        finally:
            server.close()
    result["baseline"] = {"canned_loopback_server": asyncio.run(baseline())}
    base_rate = result["baseline"]["canned_loopback_server"]["msg_per_s"]

    order = ["mine", "before"] if args.before_tree else ["mine"]
    if args.before_first:
        order.reverse()
    if args.java_broker:
        order.insert(0 if args.java_first else len(order), "java")
    result["mode"]["order"] = order
    for which in order:        # the same broker measured twice in a row: the first costs ~4-9% more a message
        if which == "java":
            with java_broker_process(Path(args.java_broker)) as broker:
                result["java_broker"] = measure(broker, args, base_rate)
            continue
        tree = Path(args.before_tree) if which == "before" else None
        with broker_process(prefix="mqtool-bench-capacity-", tree=tree) as broker:
            result["before_tree_broker" if tree else "mqtool_broker"] = measure(broker, args, base_rate)
    mine = result["mqtool_broker"]
    if args.before_tree:
        before = result["before_tree_broker"]
        result["mqtool_to_before_tree"] = {
            "cpu_per_msg": round(mine["broker_cpu_us_per_msg"] / max(before["broker_cpu_us_per_msg"], 1e-9), 3),
            "msg_per_s": round(mine["msg_per_s"] / max(before["msg_per_s"], 1), 3)}
    if not args.java_broker:
        result["java_broker"] = {"skipped": "no --java-broker PATH given (an Apache RocketMQ 4.9.8 install)"}
        return result
    java = result["java_broker"]
    result["mqtool_to_java"] = {
        "cpu_per_msg": round(mine["broker_cpu_us_per_msg"] / max(java["broker_cpu_us_per_msg"], 1e-9), 3),
        "msg_per_s": round(mine["msg_per_s"] / max(java["msg_per_s"], 1), 3)}
    if args.tail:
        result["mqtool_to_java"]["consumed_msg_per_s"] = round(
            mine.get("consumed_msg_per_s", 0) / max(java.get("consumed_msg_per_s", 0), 1), 3)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--batch", type=int, default=0, help="messages per SEND_BATCH_MESSAGE (0: single sends)")
    ap.add_argument("--idle-pullers", type=int, default=0, help="long-polling pulls held on a quiet topic")
    ap.add_argument("--tail", action="store_true", help="consume the sent topic while it is sent")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--java-broker", metavar="PATH", help="an Apache RocketMQ 4.9.8 install (bin/mqbroker, "
                    "bin/mqnamesrv): measured under the same load after mqtool's broker, CPU per message compared")
    ap.add_argument("--before-tree", metavar="DIR", help="another checkout of mqtool (e.g. `git archive` of an "
                    "earlier commit, its store kernel built): its broker measured too, after this one's, same load")
    ap.add_argument("--java-first", action="store_true", help="measure the --java-broker broker first")
    ap.add_argument("--before-first", action="store_true", help="measure the --before-tree broker first")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.warmup = 1.5, 0.5
        args.idle_pullers = args.idle_pullers or 2      # the held pulls and the tailing consumer run too
        args.tail = True
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
