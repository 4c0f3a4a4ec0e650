"""Benchmark: the broker's CPU per message without sockets (issue 33).

A BrokerController (ASYNC_FLUSH, no name server) in this process gets pre-encoded requests (the
same frames as broker_capacity.py: SEND_MESSAGE_V2 of 128 B bodies by default, or --batch N
SEND_BATCH_MESSAGE) through a real `Connection` whose socket is a stand-in: 64 frames per read,
as a pipelined client's reads arrive, answers counted and dropped. Reported: the process's CPU
time (every thread, `time.process_time`) and the event loop thread's alone per message. Without
the loopback and the load client sharing the cores, the figure moves far less from run to run on
a busy machine than broker_capacity.py's.

    python benchmarks/broker_inprocess.py [--messages 100000] [--size 128] [--batch N] [--pull] [--runs 3]
                                          [--before-tree DIR] [--quick] [--json]

With --pull the messages are stored first (4 queues) and the requests are PULL_MESSAGE of 32 each
(subscription "*", no suspend), 64 a read, that take every message once: CPU per pulled message.

With --before-tree DIR (another checkout, e.g. `git archive` of an earlier commit with its store
kernel built) the same is measured with that checkout's code, the runs alternating, and the
ratios of the medians this / before come from the same invocation.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = os.environ.get("MQTOOL_BENCH_TREE")      # a child measuring another checkout: its code first
ROOT = Path(TREE) if TREE else HERE.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT), str(HERE)]

PER_READ = 64


class _Transport:
    def get_write_buffer_size(self) -> int:
        return 0

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return 0, 1 << 20

    def is_closing(self) -> bool:
        return False


class _Writer:
    """The socket's writing side: bytes counted, nothing sent."""

    def __init__(self):
        self.bytes = 0
        self.transport = _Transport()

    def get_extra_info(self, _key):
        return ("127.0.0.1", 40000)

    def write(self, data: bytes) -> None:
        self.bytes += len(data)

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass


def pull_reads(broker, topic: str, messages: int, size: int) -> tuple[list[bytes], int]:
    """--pull: `messages` stored in the topic's 4 queues, then reads of PULL_MESSAGE requests of 32
    (subscription "*") that take them from the start, queue by queue; (the reads, messages a read)."""
    from broker_capacity import pull_request
    from mqtool_store.messagestore import Message

    for i in range(messages):
        broker.store.put(Message(topic, i % 4, b"x" * size, {"UNIQ_KEY": f"{i:032X}", "CLUSTER": "DefaultCluster"}))
    broker.store.drain_dispatch()
    per_queue = messages // 4
    asks = [pull_request("BenchPullGroup", topic, q, off, 0).encode()
            for off in range(0, per_queue - 31, 32) for q in range(4)]
    reads = [b"".join(asks[k:k + PER_READ]) for k in range(0, len(asks) - PER_READ + 1, PER_READ)]
    return reads, PER_READ * 32


async def measure(messages: int, size: int, batch: int, pulls: bool = False) -> dict:
    import dataclasses

    from broker_capacity import TOPIC, frames
    from mqtool.broker.config import BrokerConfig
    from mqtool.broker.controller import BrokerController
    from mqtool_remoting.transport import Connection

    tmp = Path(tempfile.mkdtemp(prefix="mqtool-bench-inprocess-"))
    broker = await BrokerController(BrokerConfig(brokerName="bench", listenPort=0, namesrvAddr="",
                                                 storePathRootDir=str(tmp / "store")), {}).start("127.0.0.1")
    try:
        broker.topics.update(dataclasses.replace(broker.topics.get("TBW102"), topicName=TOPIC, readQueueNums=4,
                                                 writeQueueNums=4))
        if pulls:
            chunks, per_read = pull_reads(broker, TOPIC, messages, size)
        else:
            chunks, per_read = [b"".join(f for _, f in frames(PER_READ, size, batch))], PER_READ * (batch or 1)
        reader, writer = asyncio.StreamReader(), _Writer()
        fast = getattr(broker.server, "fast", None)       # (an earlier checkout may have none)
        conn = Connection(reader, writer, broker.server.handler, None, fast) if fast else \
            Connection(reader, writer, broker.server.handler)

        async def feed(reads: int) -> None:
            for k in range(reads):
                reader.feed_data(chunks[k % len(chunks)])
                while len(reader._buffer):         # the connection's reader task takes it
                    await asyncio.sleep(0)
                await asyncio.sleep(0)             # and the dispatch drain its puts scheduled
        await feed(max(1, 3200 // per_read))       # warm-up
        reads = len(chunks) if pulls else max(1, messages // per_read)
        cpu0, thread0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
        await feed(reads)
        cpu1, thread1, wall1 = time.process_time(), time.thread_time(), time.perf_counter()
        n = reads * per_read
        await conn.close()
        return {"messages": n, "cpu_us_per_msg": round((cpu1 - cpu0) * 1e6 / n, 2),
                "loop_thread_us_per_msg": round((thread1 - thread0) * 1e6 / n, 2),
                "wall_us_per_msg": round((wall1 - wall0) * 1e6 / n, 2), "answer_bytes": writer.bytes}
    finally:
        await broker.stop()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


def one_run(args, tree: str | None) -> dict:
    """One measurement in a fresh process (this checkout's code, or `tree`'s)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--messages", str(args.messages),
           "--size", str(args.size), "--batch", str(args.batch)] + (["--pull"] if args.pull else [])
    env, tmp = None, None
    if tree:
        from brokerproc import tree_env
        tmp = Path(tempfile.mkdtemp(prefix="mqtool-bench-tree-"))
        env = {**tree_env(Path(tree), tmp), "MQTOOL_BENCH_TREE": str(Path(tree).resolve())}
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=True,
                             cwd=tree or HERE.parent)
    finally:
        if tmp is not None:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--pull", action="store_true", help="PULL_MESSAGE of 32 from stored messages instead of sends")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before-tree", metavar="DIR")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        import mqtool
        import mqtool_remoting
        got = asyncio.run(measure(args.messages, args.size, args.batch, args.pull))
        got["code"] = [str(Path(m.__file__).parent) for m in (mqtool, mqtool_remoting)]
        print(json.dumps(got))
        return 0
    if args.quick:
        args.messages, args.runs = 6400, 1
    result = {"machine": {"cpu": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                          "load_average": os.getloadavg()},
              "mode": {"flushDiskType": "ASYNC_FLUSH", "body_bytes": args.size, "batch": args.batch, "pull": args.pull,
                       "messages": args.messages, "frames_per_read": PER_READ, "runs": args.runs}}
    runs: dict[str, list] = {"mine": [], "before": []}
    for _ in range(args.runs):
        runs["mine"].append(one_run(args, None))
        if args.before_tree:
            runs["before"].append(one_run(args, args.before_tree))
    for which, got in runs.items():
        if got:
            result[which] = {"runs": got, "median_cpu_us_per_msg": statistics.median(r["cpu_us_per_msg"] for r in got),
                             "median_loop_thread_us_per_msg":
                                 statistics.median(r["loop_thread_us_per_msg"] for r in got)}
    result["baseline"] = {"none": "the figure is CPU time per message; --before-tree gives a same-run comparison"}
    if args.before_tree:
        result["mine_to_before"] = {
            k: round(result["mine"][k] / result["before"][k], 3)
            for k in ("median_cpu_us_per_msg", "median_loop_thread_us_per_msg")}
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
