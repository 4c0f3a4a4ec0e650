"""The HA wire format of spec/ha.md, pinned against real mqtool brokers by scripted peers.

A FakeSlave (tests/ha/fakepeers.py) talks to a real master's HA port; a real slave follows a
FakeMaster. The peers know only the spec, so these tests hold mqtool's replication to the 4.x
bytes whatever its own HA code does. Every wait polls with a deadline.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import json_lines, run_cli
from tests.ha.fakepeers import HEADER, FakeMaster, FakeSlave
from tests.servers import Process, free_port, free_port_pair, wait_until

pytestmark = pytest.mark.slow

SMALL_FILE = 64 * 1024           # master commit log files: several of them are cheap
FIXTURE_FILE = 1024 * 1024       # mappedFileSizeCommitLog of the 4.9.8 fixture store
BATCH = 4096
MESSAGE_MAGIC, BLANK_MAGIC = -626843481, -875286124     # commit log record magic codes (4.x)
CQ_UNIT = struct.Struct(">qiq")  # consume queue unit: commit log offset, size, tags code


class Broker:
    """A `mqtool broker start` process with its own embedded name server; its log is kept in `log`."""

    top = 0                          # a master's commit log max offset once filled
    fake: FakeMaster | None = None   # the fake master a slave follows

    def __init__(self, tmp: Path, name: str, props: dict[str, object], ha_port: bool = True):
        self.store = tmp / f"store-{name}"
        conf = tmp / f"{name}.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in {"brokerClusterName": "WireCluster",
                                                           "brokerName": name, **props}.items()))
        for attempt in range(3):      # a free port can be taken by another process before the broker binds it
            self.port = free_port_pair() if ha_port else free_port()
            self.addr, self.ha = f"127.0.0.1:{self.port}", f"127.0.0.1:{self.port + 1}"
            self.ns = f"127.0.0.1:{free_port()}"
            try:
                with pytest.MonkeyPatch.context() as mp:
                    mp.delenv("NAMESRV_ADDR", raising=False)       # the embedded name server must start
                    self.process = Process(["broker", "start", "-c", str(conf), "--listen", self.addr, "--store-dir",
                                            str(self.store), "--embedded-namesrv", self.ns], "boot success")
                break
            except AssertionError as exc:
                if "already in use" not in str(exc) or attempt == 2:
                    raise
        self.log = list(self.process.startup)
        # Drain stderr so a chatty broker never blocks on a full pipe.
        self._drain = threading.Thread(target=lambda: self.log.extend(self.process.proc.stderr), daemon=True)
        self._drain.start()
        self.role = wait_until("the broker's role line",
                               lambda: next((ln for ln in self.log if ": role " in ln), None), 5)

    def alive(self) -> bool:
        return self.process.proc.poll() is None

    def runtime(self) -> dict:
        from mqtool.client.admin import Admin

        async def go():
            admin = Admin(self.ns)
            try:
                return await admin.broker_runtime(self.addr)
            finally:
                await admin.close()
        return asyncio.run(go())

    def max_offset(self) -> int:
        return int(self.runtime()["commitLogMaxOffset"])

    def commitlog(self) -> dict[int, Path]:
        """Commit log files by start offset (a file still being pre-allocated has another name)."""
        return {int(p.name): p for p in sorted((self.store / "commitlog").iterdir())
                if len(p.name) == 20 and p.name.isdigit()}

    def stop(self) -> int:
        if self.alive():
            os.kill(self.process.proc.pid, signal.SIGTERM)
            self.process.proc.wait(20)
        self._drain.join(5)
        return self.process.stop()


def send(ns: str, topic: str, body: str) -> str:
    """One message with mqtool's own producer (no retries); returns the send status."""
    from mqtool.client.producer import OutMessage, Producer

    async def go():
        producer = Producer(ns, retries=0)
        try:
            return (await producer.send(OutMessage(topic, body.encode()))).status
        finally:
            await producer.close()
    return asyncio.run(go())


def records(buf: bytes) -> list[tuple[int, int]]:
    """(offset, size) of the whole records at the head of a commit log file's bytes."""
    out, pos = [], 0
    while pos + 8 <= len(buf):
        size, magic = struct.unpack_from(">ii", buf, pos)
        if size <= 0 or magic == BLANK_MAGIC or pos + size > len(buf):
            break
        assert magic == MESSAGE_MAGIC, f"no record at offset {pos}"
        out.append((pos, size))
        pos += size
    return out


def catch_up(slave: FakeSlave, start: int, end: int, timeout: float = 10) -> list[tuple[int, bytes]]:
    """Frames from `start` until `end`, acking each like a real slave (which also keeps the master's
    housekeeping timer quiet). Heartbeats may come in between; they must name the next offset."""
    frames, next_offset, deadline = [], start, time.monotonic() + timeout
    while next_offset < end:
        offset, data = slave.read_frame(deadline - time.monotonic())
        assert offset == next_offset, f"frame at {offset}, expected {next_offset}"
        if data:
            frames.append((offset, data))
            next_offset += len(data)
            slave.report(next_offset)
    assert next_offset == end, f"frames ran past the master's max offset {end} to {next_offset}"
    return frames


def next_data_frame(slave: FakeSlave, at: int, timeout: float = 3) -> bytes:
    """The next frame with data, which must start at `at`; heartbeats before it must name `at` too."""
    deadline = time.monotonic() + timeout
    while True:
        offset, data = slave.read_frame(deadline - time.monotonic())
        assert offset == at, f"frame at {offset}, expected {at}"
        if data:
            return data


def disk_bytes(files: dict[int, Path], start: int, end: int, file_size: int) -> bytes:
    out = bytearray()
    for base in range(start - start % file_size, end, file_size):
        data = files[base].read_bytes()
        out += data[max(start - base, 0):min(end - base, file_size)]
    return bytes(out)


# ---------------------------------------------------------------- a real master, a fake slave


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    """ASYNC_MASTER with several small commit log files; nothing writes to it after the fill."""
    broker = Broker(tmp_path_factory.mktemp("wire-master"), "wire-async", {
        "brokerId": 0, "brokerRole": "ASYNC_MASTER", "mappedFileSizeCommitLog": SMALL_FILE,
        "haTransferBatchSize": BATCH, "haSendHeartbeatInterval": 1000, "haHousekeepingInterval": 2000,
        "flushDiskType": "ASYNC_FLUSH"})
    try:
        assert f"role ASYNC_MASTER, brokerId 0: HA port {broker.ha}" in broker.role
        body = "".join(f"fill {i} " + "y" * (300 + i * 37 % 500) + "\n" for i in range(300))
        sent = json_lines(run_cli("send", "-t", "WireFill", "-n", broker.ns, "--json", input=body, check=True).stdout)
        assert {r["status"] for r in sent} == {"SEND_OK"} and len(sent) == 300
        broker.top = broker.max_offset()
        assert len(broker.commitlog()) >= 3 and broker.top % SMALL_FILE, broker.top
        yield broker
    finally:
        assert broker.stop() == 0


def test_an_empty_slave_gets_the_masters_last_file_only(master):
    top = master.top
    last = top - top % SMALL_FILE
    with FakeSlave(master.ha) as slave:
        slave.report(0)
        offset, head = slave.read_frame()
        assert offset == last != 0                  # not 0: the start of the last file
        slave.report(last + len(head))
        got = head + b"".join(data for _, data in catch_up(slave, last + len(head), top))
    on_disk = master.commitlog()[last].read_bytes()
    assert len(on_disk) == SMALL_FILE
    assert got == on_disk[:top - last] and not on_disk[top - last:].strip(b"\0")


def test_frames_are_contiguous_batches_within_one_file(master):
    top = master.top
    first = master.commitlog()[0].read_bytes()
    mid = next(off for off, _ in records(first) if off > SMALL_FILE // 2)     # a record start
    with FakeSlave(master.ha) as slave:
        slave.report(mid)
        frames = catch_up(slave, mid, top)
    assert all(0 < len(data) <= BATCH for _, data in frames)
    for offset, data in frames:
        assert offset // SMALL_FILE == (offset + len(data) - 1) // SMALL_FILE, f"frame at {offset} crosses a file"
    assert {offset for offset, _ in frames} >= set(range(SMALL_FILE, top, SMALL_FILE))   # each file starts a frame
    got = b"".join(data for _, data in frames)
    assert got == disk_bytes(master.commitlog(), mid, top, SMALL_FILE)


def test_a_caught_up_slave_gets_heartbeats(master):
    top = master.top
    with FakeSlave(master.ha) as slave:
        slave.report(top - top % SMALL_FILE)
        catch_up(slave, top - top % SMALL_FILE, top)
        beats = []
        for _ in range(2):
            slave.report(top)
            beats.append((*slave.read_frame(3.0), time.monotonic()))
    assert [(offset, data) for offset, data, _ in beats] == [(top, b""), (top, b"")]
    assert beats[1][2] - beats[0][2] > 0.8, "heartbeats come once per haSendHeartbeatInterval, not in a burst"


def test_a_report_beyond_the_masters_max_offset_closes_the_connection(master):
    top = master.top
    with FakeSlave(master.ha) as first, FakeSlave(master.ha) as later:
        first.report(top + 1000)
        later.report(top - top % SMALL_FILE)
        later.read_frame()                          # served: the next report is a later one
        later.report(top + 1)
        assert first.closed_within(3) and later.closed_within(3)
    assert master.alive()


def test_garbage_and_partial_reports_do_not_stop_the_master(master):
    top = master.top
    last = top - top % SMALL_FILE
    with (FakeSlave(master.ha) as garbage, FakeSlave(master.ha) as negative, FakeSlave(master.ha) as partial,
          FakeSlave(master.ha) as two):
        garbage.send_raw(b"GARBAGE-BYTES")          # its last whole 8 bytes: a huge offset
        two.send_raw(struct.pack(">qq", SMALL_FILE, last))   # the last whole value counts
        negative.report(-1)                         # no slave sends it; whatever the master does, it goes on
        report = struct.pack(">q", last)
        partial.send_raw(report[:5])
        assert garbage.closed_within(3)
        assert two.read_frame()[0] == last
        with FakeSlave(master.ha) as other:         # the master still serves a well-behaved slave
            other.report(last)
            assert other.read_frame()[0] == last
        with pytest.raises(TimeoutError):           # 5 bytes are not a report yet
            partial.read_frame(0.3)
        partial.send_raw(report[5:])
        assert b"".join(d for _, d in catch_up(partial, last, top)) == disk_bytes(master.commitlog(), last, top,
                                                                                 SMALL_FILE)
    assert master.alive() and master.max_offset() == top


def test_a_silent_slave_is_dropped_after_the_housekeeping_interval(master):
    top = master.top
    with FakeSlave(master.ha) as mute, FakeSlave(master.ha) as quiet, FakeSlave(master.ha) as chatty:
        t0 = time.monotonic()
        quiet.report(top)                           # one report, then silence
        chatty.report(top)
        closed = {}
        while len(closed) < 2 and time.monotonic() - t0 < 6:
            for name, peer in (("mute", mute), ("quiet", quiet)):
                if name not in closed and peer.closed_within(0.2):
                    closed[name] = time.monotonic() - t0
            chatty.report(top)                      # keeps reporting: stays connected
        assert set(closed) == {"mute", "quiet"}, closed
        assert all(1.8 <= t < 5 for t in closed.values()), closed       # haHousekeepingInterval=2000
        assert not chatty.closed_within(0.2)


def test_sync_master_waits_for_a_slave_ack(tmp_path):
    broker = Broker(tmp_path, "wire-sync", {
        "brokerId": 0, "brokerRole": "SYNC_MASTER", "slaveTimeout": 1000, "mappedFileSizeCommitLog": 1 << 20,
        "haSendHeartbeatInterval": 1000, "flushDiskType": "ASYNC_FLUSH"})
    pool = ThreadPoolExecutor(1)
    try:
        assert "role SYNC_MASTER, brokerId 0" in broker.role
        assert send(broker.ns, "WireSync", "alone") == "SLAVE_NOT_AVAILABLE"
        top = broker.max_offset()
        with FakeSlave(broker.ha) as mute, FakeSlave(broker.ha) as acker:
            mute.report(top)
            assert mute.read_frame(3) == (top, b"")       # a heartbeat: the master serves this slave
            t0 = time.monotonic()
            pending = pool.submit(send, broker.ns, "WireSync", "unacked")
            data = next_data_frame(mute, top)             # the new record arrives; it is never acked,
            mute.report(top)                              # the slave only repeats its old offset
            assert pending.result(10) == "FLUSH_SLAVE_TIMEOUT"
            assert time.monotonic() - t0 >= 0.9           # slaveTimeout=1000
            top += len(data)
            assert broker.max_offset() == top

            acker.report(top)
            assert acker.read_frame(3) == (top, b"")
            pending = pool.submit(send, broker.ns, "WireSync", "acked")
            data = next_data_frame(acker, top)
            acker.report(top + len(data) - 1)             # all but the record's last byte: not yet
            with pytest.raises(TimeoutError):
                pending.result(0.2)
            acker.report(top + len(data))                 # one slave's ack is enough
            assert pending.result(10) == "SEND_OK"
        got = json_lines(run_cli("consume", "-t", "WireSync", "-n", broker.ns, "-e", "--json", check=True).stdout)
        assert sorted(m["body"] for m in got) == ["acked", "alone", "unacked"]    # every answer's message is stored
    finally:
        pool.shutdown()
        assert broker.stop() == 0


# ---------------------------------------------------------------- a real slave, a fake master


@pytest.fixture(scope="module")
def fixture_log(basic_store) -> bytes:
    """The first commit log file of the 4.9.8 fixture store: real records for the fake master to send."""
    return (basic_store / "commitlog" / f"{0:020d}").read_bytes()


@pytest.fixture(scope="module")
def where(basic_truth) -> dict[int, dict]:
    return {r["commit_log_offset"]: r for r in basic_truth}


@pytest.fixture
def slave(tmp_path, basic_store):
    """An empty SLAVE following a FakeMaster. Its topics.json is the fixture's: the topic metadata
    a real master would have copied over remoting (spec §7), which a fake master cannot give."""
    fake = FakeMaster()
    (tmp_path / "store-wire-slave" / "config").mkdir(parents=True)
    shutil.copy(basic_store / "config" / "topics.json", tmp_path / "store-wire-slave" / "config")
    broker = Broker(tmp_path, "wire-slave", {
        "brokerId": 1, "brokerRole": "SLAVE", "haMasterAddress": fake.addr, "mappedFileSizeCommitLog": FIXTURE_FILE,
        "haSendHeartbeatInterval": 1000, "flushDiskType": "ASYNC_FLUSH"}, ha_port=False)
    broker.fake = fake
    try:
        assert "role SLAVE, brokerId 1" in broker.role
        fake.accept(10)
        yield broker
    finally:
        fake.close()
        assert broker.stop() == 0


def pull_all(broker: Broker, topic: str, queues: int) -> list:
    """Every message of `topic` pulled from `broker` by mqtool's consumer. Only a master registers a
    topic's queues with the name server (RouteInfoManager.registerBroker), so the route a client
    would hold from the master's registration is given to it directly: the slave, brokerId 1."""
    from mqtool.client.base import MessageQueue, TopicRoute
    from mqtool.client.consumer import Consumer

    async def go():
        consumer = Consumer(broker.ns)
        name = "wire-slave"
        consumer.routes[topic] = TopicRoute(topic, {name: {1: broker.addr}}, [
            {"brokerName": name, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}], time.monotonic())
        out = []
        try:
            for q in range(queues):
                offset = 0
                while True:
                    res = await consumer.pull(MessageQueue(topic, name, q), offset)
                    if not res.messages:
                        break
                    out += res.messages
                    offset = res.next_offset
        finally:
            await consumer.close()
        return out
    return asyncio.run(go())


def wait_report(fake: FakeMaster, want: int, timeout: float = 5) -> None:
    """Reports until one says `want` (a slave re-sends the same value as a heartbeat)."""
    deadline, seen = time.monotonic() + timeout, []
    while not seen or seen[-1] != want:
        seen.append(fake.read_report(max(deadline - time.monotonic(), 0.001)))
        assert seen[-1] <= want, f"slave reported {seen}, expected at most {want}"


def cq_hits(store: Path, rec: dict) -> int:
    """How many units of its consume queue point at this record (0 while the slave is still creating
    a file of it: a `.creating` name is renamed under the listing, and the caller asks again)."""
    qdir = store / "consumequeue" / rec["topic"] / str(rec["queue_id"])
    try:
        units = b"".join(p.read_bytes() for p in sorted(qdir.iterdir()) if not p.name.endswith(".creating")) \
            if qdir.is_dir() else b""
    except FileNotFoundError:
        return 0
    return sum(1 for off, size, _ in CQ_UNIT.iter_unpack(units[:len(units) - len(units) % 20])
               if off == rec["commit_log_offset"] and size == rec["store_size"])


def slave_file(slave: Broker, base: int = 0) -> bytes:
    return (slave.store / "commitlog" / f"{base:020d}").read_bytes()


def only_first_file_written(slave: Broker) -> bool:
    """Later files may exist (pre-allocated, like AllocateMappedFileService's), but hold nothing."""
    files = slave.commitlog()
    return 0 in files and not any(p.read_bytes().strip(b"\0") for base, p in files.items() if base)


def test_an_empty_slave_reports_zero_and_stores_what_the_master_sends(slave, fixture_log, where):
    assert slave.fake.read_report(7) == 0                 # Java's first report comes ~5 s after connect
    recs = records(fixture_log)[:40]
    size = sum(n for _, n in recs)
    data = fixture_log[:size]
    slave.fake.send_frame(0, data)
    wait_report(slave.fake, size)
    slave.fake.send_frame(size, b"")                      # a master heartbeat: nothing to store
    assert slave.fake.read_report(3) == size              # haSendHeartbeatInterval=1000: the same value again
    on_disk = slave_file(slave)
    assert len(on_disk) == FIXTURE_FILE and on_disk[:size] == data and not on_disk[size:].strip(b"\0")
    assert only_first_file_written(slave)
    wait_until("the records to be dispatched", lambda: all(cq_hits(slave.store, where[o]) for o, _ in recs))
    assert [cq_hits(slave.store, where[o]) for o, _ in recs] == [1] * len(recs)
    want = sorted((where[o]["queue_id"], where[o]["queue_offset"], o, where[o]["body"])
                  for o, _ in recs if where[o]["topic"] == "TopicA")
    got = sorted((m.queue_id, m.queue_offset, m.physical_offset, m.body.decode()) for m in pull_all(slave, "TopicA", 4))
    assert want and got == want                           # readable from the slave like from any broker


def test_an_empty_slave_starts_its_log_where_the_first_frame_starts(slave, basic_store, where):
    """The slave half of the empty-slave rule: a master answers a report of 0 from its last file."""
    base = FIXTURE_FILE
    second = (basic_store / "commitlog" / f"{base:020d}").read_bytes()
    recs = records(second)[:20]
    size = sum(n for _, n in recs)
    assert slave.fake.read_report(7) == 0
    slave.fake.send_frame(base, second[:size])
    wait_report(slave.fake, base + size)
    on_disk = slave_file(slave, base)
    assert on_disk[:size] == second[:size] and not on_disk[size:].strip(b"\0")
    assert not any(p.read_bytes().strip(b"\0") for b, p in slave.commitlog().items() if b != base)
    wait_until("the records to be dispatched", lambda: all(cq_hits(slave.store, where[base + o]) for o, _ in recs))
    assert [cq_hits(slave.store, where[base + o]) for o, _ in recs] == [1] * len(recs)
    info = slave.runtime()
    assert (int(info["commitLogMinOffset"]), int(info["commitLogMaxOffset"])) == (base, base + size)


def test_a_frame_for_the_wrong_offset_makes_the_slave_reconnect(slave, fixture_log):
    recs = records(fixture_log)
    size = sum(n for _, n in recs[:10])
    assert slave.fake.read_report(7) == 0
    slave.fake.send_frame(0, fixture_log[:size])
    wait_report(slave.fake, size)
    slave.fake.send_frame(size + 4096, b"\xee" * 512)    # a gap: not where the slave's log ends
    assert slave.fake.closed_within(5)
    slave.fake.accept(10)                                 # reconnects and reports its real offset
    wait_report(slave.fake, size, 7)
    on_disk = slave_file(slave)
    assert on_disk[:size] == fixture_log[:size] and not on_disk[size:].strip(b"\0")
    assert only_first_file_written(slave)
    a, b = size + recs[10][1], size + recs[10][1] + recs[11][1]     # carries on from there,
    slave.fake.send_raw(HEADER.pack(size, a - size) + fixture_log[size:a]       # two frames in one write
                        + HEADER.pack(a, b - a) + fixture_log[a:b])
    wait_report(slave.fake, b)
    assert slave_file(slave)[:b + 1] == fixture_log[:b] + b"\0"


def test_a_wrong_offset_is_refused_on_the_header_alone(slave, fixture_log):
    size = sum(n for _, n in records(fixture_log)[:5])
    assert slave.fake.read_report(7) == 0
    slave.fake.send_frame(0, fixture_log[:size])
    wait_report(slave.fake, size)
    slave.fake.send_raw(HEADER.pack(size + 4096, 1 << 20) + b"\xee" * 100)   # the body never comes
    assert slave.fake.closed_within(3)
    slave.fake.accept(10)
    wait_report(slave.fake, size, 7)


def test_a_negative_frame_size_makes_the_slave_reconnect(slave, fixture_log):
    size = sum(n for _, n in records(fixture_log)[:5])
    assert slave.fake.read_report(7) == 0
    slave.fake.send_frame(0, fixture_log[:size])
    wait_report(slave.fake, size)
    slave.fake.send_raw(HEADER.pack(size, -1) + b"\xee" * 64)
    assert slave.fake.closed_within(5)
    slave.fake.accept(10)
    wait_report(slave.fake, size, 7)
    assert slave.alive() and slave.max_offset() == size
    assert slave_file(slave)[:size + 64] == fixture_log[:size] + b"\0" * 64


def test_a_record_split_across_frames_is_stored_whole_and_dispatched_once(slave, fixture_log, where):
    (o0, _), (o1, n1), (o2, n2) = records(fixture_log)[:3]
    cuts = [0, o1 + n1 // 2, o2 + 3, o2 + n2]            # record 1 cut in its body, record 2 in its size field
    assert slave.fake.read_report(7) == 0
    for i, (start, end) in enumerate(zip(cuts, cuts[1:])):
        slave.fake.send_frame(start, fixture_log[start:end])
        wait_report(slave.fake, end)
        whole = [o0, o1, o2][i]                          # the record this frame completed
        wait_until(f"the record at {whole} to be dispatched", lambda w=whole: cq_hits(slave.store, where[w]))
        assert [cq_hits(slave.store, where[o]) for o in (o0, o1, o2)] == [1] * (i + 1) + [0] * (2 - i)
    assert slave_file(slave)[:cuts[-1] + 1] == fixture_log[:cuts[-1]] + b"\0"
