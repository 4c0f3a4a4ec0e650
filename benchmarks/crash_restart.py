"""Benchmark: a broker back after kill -9 under load, beside a clean restart of the same store (issue 27).

Per size: a `mqtool broker` process (embedded name server, a fresh store) takes pipelined batch
sends of 1 KiB messages (SEND_BATCH_MESSAGE, 4 queues) until about SIZE GB of commit log are
acknowledged; it is then killed with SIGKILL while the sends go on, and started again on the same
store. Measured from the restart's spawn: seconds until its port accepts a connection, and until a
PULL_MESSAGE of the last acknowledged message answers with it. Then the broker is stopped cleanly
(SIGTERM) and started again on the same store, measured the same way: that clean restart is the
baseline, and the ratio is crash / clean. The recovery's own figures (records checked, records
re-dispatched, its seconds) come from the restarted broker's log.

    python benchmarks/crash_restart.py [--sizes 1,2] [--flush ASYNC_FLUSH|SYNC_FLUSH] [--batch 32]
                                       [--dir PATH] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mqtool_remoting.batch import encode_batch  # noqa: E402
from mqtool_remoting.codes import RequestCode  # noqa: E402
from mqtool_remoting.command import RemotingCommand  # noqa: E402

from brokerproc import die_with_parent, free_port_pair  # noqa: E402
from broker_capacity import frames_of, pull_request  # noqa: E402

TOPIC = "CrashRestart"
QUEUES = 4
BODY = 1024
RECORD = BODY + 170        # about what one 1 KiB message takes in the commit log (its header, topic, properties)
_LEN = struct.Struct(">i")


class Broker:
    """One `mqtool broker start` process on fixed ports and store; its log lines kept."""

    def __init__(self, store: Path, port: int, ns_port: int, flush: str):
        self.store, self.port, self.ns_port, self.flush = store, port, ns_port, flush
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []
        self.booted = threading.Event()

    def start(self) -> float:
        """Spawn it; the monotonic time of the spawn."""
        conf = self.store.parent / "broker.conf"
        conf.write_text(f"brokerClusterName=Bench\nbrokerName=broker-a\nflushDiskType={self.flush}\n")
        self.lines, self.booted = [], threading.Event()
        t0 = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "mqtool", "broker", "start", "-c", str(conf),
                                      "--listen", f"127.0.0.1:{self.port}", "--store-dir", str(self.store),
                                      "--embedded-namesrv", f"127.0.0.1:{self.ns_port}"],
                                     cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=die_with_parent())
        threading.Thread(target=self._read, args=(self.proc, self.lines, self.booted), daemon=True).start()
        return t0

    @staticmethod
    def _read(proc, lines, booted) -> None:
        for line in proc.stderr:
            lines.append(line)
            if "boot success" in line:
                booted.set()

    def wait_booted(self, timeout: float = 900) -> None:
        if not self.booted.wait(timeout):
            raise SystemExit(f"the broker did not boot; its log:\n{''.join(self.lines[-20:])}")

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def batch_request(queue: int, payload: bytes) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, {
        "a": "PID_CRASH", "b": TOPIC, "c": "TBW102", "d": QUEUES, "e": queue, "f": 0,
        "g": int(time.time() * 1000), "h": 0, "i": "WAIT\x01true\x02", "j": 0, "k": False, "m": True},
        payload, language="JAVA")


def _header(frame: bytes) -> dict:
    hlen = _LEN.unpack_from(frame, 0)[0] & 0xFFFFFF
    return json.loads(frame[4:4 + hlen])


async def load_until(port: int, target_msgs: int, batch: int, window: int, killed: asyncio.Event,
                     reached: asyncio.Event, acked: dict) -> None:
    """Batch sends on one connection, `window` in flight, until the connection drops; `reached` is
    set once `target_msgs` are acknowledged. acked: count, and the last answer's (queue, offset)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = b"x" * BODY
    payloads = [encode_batch([(0, body, f"UNIQ_KEY\x01{os.getpid():08X}{k:08X}{i:08X}") for i in range(batch)])
                for k in range(8)]
    opaque_queue: dict[int, int] = {}
    inflight = asyncio.Semaphore(window)
    stop = asyncio.Event()

    async def sender():
        n = 0
        try:
            while not stop.is_set() and not writer.transport.is_closing():
                await inflight.acquire()
                q = n % QUEUES
                cmd = batch_request(q, payloads[n % 8])
                opaque_queue[cmd.opaque] = q
                writer.write(cmd.encode())
                n += 1
                if writer.transport.get_write_buffer_size() > 1 << 20:
                    await writer.drain()
        except (ConnectionError, OSError):
            pass

    task = asyncio.create_task(sender())
    try:
        async for frame in frames_of(reader, stop):
            hdr = _header(frame)
            inflight.release()
            q = opaque_queue.pop(hdr["opaque"], None)
            if hdr["code"] == 0 and q is not None:
                ext = hdr.get("extFields") or {}
                acked["count"] += batch
                acked["last"] = (int(ext.get("queueId", q)), int(ext["queueOffset"]) + batch - 1)
                if acked["count"] >= target_msgs:
                    reached.set()
    except (ConnectionError, OSError):
        pass
    finally:
        stop.set()
        task.cancel()
        writer.close()


def port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


async def read_message(port: int, queue: int, offset: int) -> bool:
    """One PULL_MESSAGE at (queue, offset), no suspend: True when it answers FOUND with a message."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    try:
        writer.write(pull_request("CrashRestartReader", TOPIC, queue, offset, 0).encode())
        async for frame in frames_of(reader, asyncio.Event()):
            hdr = _header(frame)
            return hdr["code"] == 0 and len(frame) > 4 + (_LEN.unpack_from(frame, 0)[0] & 0xFFFFFF)
        return False
    finally:
        writer.close()


def timed_restart(broker: Broker, last: tuple[int, int]) -> dict:
    t0 = broker.start()
    while not port_accepts(broker.port):
        if broker.proc.poll() is not None:
            raise SystemExit(f"the broker exited; its log:\n{''.join(broker.lines[-20:])}")
        time.sleep(0.01)
    t_port = time.monotonic() - t0
    while not asyncio.run(read_message(broker.port, *last)):
        time.sleep(0.01)
    t_read = time.monotonic() - t0
    broker.wait_booted()
    log = "".join(broker.lines)
    out = {"port_s": round(t_port, 2), "read_last_s": round(t_read, 2)}
    m = re.search(r"checked (\d+) records from commit log file (\S+) in ([\d.]+) s", log)
    if m:
        out.update(records_checked=int(m.group(1)), start_file=m.group(2), check_s=float(m.group(3)))
    m = re.search(r"re-dispatched (\d+) records \((\d+) bytes\).*?done in ([\d.]+) s", log)
    if m:
        out.update(redispatched=int(m.group(1)), redispatched_bytes=int(m.group(2)), recovery_s=float(m.group(3)))
    out["mode"] = "abnormal" if "abnormal mode" in log else "normal"
    return out


def one_size(gb: float, flush: str, batch: int, base: Path) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="crash-restart-", dir=base))
    store = tmp / "store"
    port, ns_port = free_port_pair(), free_port_pair()
    broker = Broker(store, port, ns_port, flush)
    try:
        broker.start()
        broker.wait_booted(120)
        subprocess.run([sys.executable, "-m", "mqtool", "topic", "create", "-n", f"127.0.0.1:{ns_port}", "-t", TOPIC,
                        "-r", str(QUEUES), "-w", str(QUEUES)], cwd=REPO, check=True, capture_output=True, timeout=60)
        target = int(gb * (1 << 30) / RECORD)
        acked = {"count": 0, "last": None}

        async def run_load():
            killed, reached = asyncio.Event(), asyncio.Event()
            t0 = time.monotonic()
            tasks = [asyncio.create_task(load_until(port, target, batch, 8, killed, reached, acked)) for _ in range(2)]
            await reached.wait()
            elapsed = time.monotonic() - t0
            broker.kill()                               # kill -9 while the sends go on
            await asyncio.wait(tasks, timeout=30)
            return elapsed
        load_s = asyncio.run(run_load())
        commitlog = sum(f.stat().st_size for f in (store / "commitlog").iterdir())
        last = acked["last"]
        crash = timed_restart(broker, last)
        broker.stop()
        clean = timed_restart(broker, last)
        broker.stop()
        backups = [p.name for p in store.glob("recovery-backup-*")]
        return {"size_gb": gb, "acked_messages": acked["count"], "load_s": round(load_s, 1),
                "send_mb_s": round(acked["count"] * RECORD / load_s / 1e6, 1), "commitlog_files_bytes": commitlog,
                "last_acked": list(last), "crash": crash, "clean": clean,
                "ratio_port": round(crash["port_s"] / clean["port_s"], 2),
                "ratio_read": round(crash["read_last_s"] / clean["read_last_s"], 2), "backups": backups}
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,2", help="GB of commit log before the kill, comma-separated")
    ap.add_argument("--flush", default="ASYNC_FLUSH", choices=["ASYNC_FLUSH", "SYNC_FLUSH"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dir", default=None, help="where the stores go (default: the temp dir)")
    ap.add_argument("--quick", action="store_true", help="one 0.05 GB run (a smoke test)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sizes = [0.05] if args.quick else [float(s) for s in args.sizes.split(",")]
    runs = []
    for gb in sizes:
        r = one_size(gb, args.flush, args.batch, Path(args.dir) if args.dir else None)
        runs.append(r)
        if not args.json:
            c, k = r["crash"], r["clean"]
            print(f"{gb:g} GB ({r['acked_messages']} msgs acked, {r['send_mb_s']} MB/s): crash restart port "
                  f"{c['port_s']} s, last message read {c['read_last_s']} s (checked {c.get('records_checked')} records in {c.get('check_s')} s, re-dispatched {c.get('redispatched')} "
                  f"records, recovery {c.get('recovery_s')} s); clean restart port {k['port_s']} s, read "
                  f"{k['read_last_s']} s; ratio {r['ratio_port']}x / {r['ratio_read']}x", flush=True)
    result = {"machine": f"{platform.machine()} {os.cpu_count()} cpus {platform.python_version()}",
              "flush": args.flush, "batch": args.batch, "body": BODY, "runs": runs,
              "baseline": "a clean restart of the same store, measured in the same run"}
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
