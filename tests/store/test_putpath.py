"""The fast put path held to the plain codecs: records packed in place, batched dispatch, group commit."""
from __future__ import annotations

import random
import shutil
import threading

import pytest

from mqtool_store.commitlog import (MessageRecordSchema, decode_record, encode_record, new_record,
                                    properties_field, topic_field, write_record_v4)
from mqtool_store.groupcommit import GroupCommitService
from mqtool_store.indexwriter import IndexService, index_key_hashes
from mqtool_store.javahash import index_key_hash, java_string_hash
from mqtool_store.logscan import RecordIterator
from mqtool_store.mappedfiles import ReadOnlyMap, list_mapped_files
from mqtool_store.messagestore import Message, MessageStore, PutStatus
from mqtool_store.storeconfig import MessageStoreConfig
from mqtool_store.verify import verify_store

SMALL = dict(mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=400, maxHashSlotNum=50, maxIndexNum=200)


def config(root, **kw) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), **{**SMALL, **kw})


def test_record_written_in_place_equals_encoder_and_schema():
    rec = new_record("TopicTest", b"Hello \xff body", {"TAGS": "TagA", "KEYS": "a b", "UNIQ_KEY": "X"},
                     queue_id=3, queue_offset=77, physical_offset=1 << 33, flag=5, born_timestamp=1700000000123,
                     born_host=(b"\xc0\xa8\0\x02", 54321), store_timestamp=1700000000456, reconsume_times=2,
                     prepared_transaction_offset=99, sys_flag=0x4)
    buf = bytearray(b"\xee" * (rec.total_size + 10))
    tail = topic_field(rec.topic.encode()) + properties_field(rec.properties_text.encode())
    end = write_record_v4(buf, 5, rec.total_size, rec.body_crc, rec.queue_id, rec.flag, rec.queue_offset,
                          rec.physical_offset, rec.sys_flag, rec.born_timestamp, rec.born_ip, rec.born_port,
                          rec.store_timestamp, rec.store_ip, rec.store_port, rec.reconsume_times,
                          rec.prepared_transaction_offset, rec.body, tail)
    assert end == 5 + rec.total_size
    assert bytes(buf[5:end]) == encode_record(rec) == MessageRecordSchema.build(dict(
        total_size=rec.total_size, magic=rec.magic, body_crc=rec.body_crc, queue_id=3, flag=5, queue_offset=77,
        physical_offset=1 << 33, sys_flag=0x4, born_timestamp=rec.born_timestamp,
        born_host=dict(ip=rec.born_ip, port=rec.born_port), store_timestamp=rec.store_timestamp,
        store_host=dict(ip=rec.store_ip, port=rec.store_port), reconsume_times=2, prepared_transaction_offset=99,
        body=rec.body, topic=rec.topic, properties=rec.properties_text))
    assert buf[:5] == b"\xee" * 5 and buf[end:] == b"\xee" * 5


def test_put_writes_what_the_encoder_writes(tmp_path):
    """Every record the engine put decodes to its message and re-encodes to the same bytes
    (IPv4 and IPv6 hosts, properties given as a dict or as text)."""
    msgs = [Message("T", 0, b"a" * 10, {"KEYS": "k1", "TAGS": "x"}, born_timestamp=5),
            Message("T", 1, b"", {}, properties_text="UNIQ_KEY\x01AB\x02KEYS\x01k2\x02", flag=3),
            Message("T", 1, b"v6", {"TAGS": "y"}, born_host=(bytes(range(16)), 7), reconsume_times=4)]
    with MessageStore(config(tmp_path / "s"), store_host=(b"\x0a\0\0\x01", 10911)) as s:
        results = [s.put(m) for m in msgs]
        assert all(r.status is PutStatus.PUT_OK for r in results)
        for m, r in zip(msgs, results):
            data = s.read_bytes(r.offset)
            rec = decode_record(data, check_crc=True)
            assert encode_record(rec) == data and len(data) == r.size
            assert (rec.topic, rec.queue_id, rec.body, rec.physical_offset) == (m.topic, m.queue_id, m.body, r.offset)
            assert rec.msg_id == r.msg_ids[0]
        assert decode_record(s.read_bytes(results[1].offset)).properties_text == msgs[1].properties_text
        assert decode_record(s.read_bytes(results[2].offset)).born_ip == bytes(range(16))
    v6 = bytes(range(100, 116))
    with MessageStore(config(tmp_path / "s6"), store_host=(v6, 10911)) as s:
        for m in msgs + msgs:                   # the second time round, past the first put's set-up
            r = s.put(m)
            data = s.read_bytes(r.offset)
            rec = decode_record(data, check_crc=True)
            assert encode_record(rec) == data and rec.store_ip == v6 and rec.msg_id == r.msg_ids[0]


def _java_min_value_string() -> str:
    """A string whose Java hashCode is Integer.MIN_VALUE (its index hash is 0)."""
    n, target, chars = 8, 1 << 31, []
    for i in range(n):
        w = 31 ** (n - 1 - i)
        c = min(0xD7FF, target // w)
        chars.append(c)
        target -= c * w
    assert target == 0
    return "".join(map(chr, chars))


def test_index_key_hashes_match_java_hash_code():
    rnd = random.Random(3)
    alphabet = "abcXYZ019#-_ éü中文\U0001F600"
    keys = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 40))) for _ in range(500)]
    keys += ["TopicTest#A-7", "T#k", _java_min_value_string(), "x" * 300]
    assert java_string_hash(_java_min_value_string()) == -(1 << 31)
    got = index_key_hashes(keys)
    assert got.tolist() == [index_key_hash(k) for k in keys]
    assert index_key_hashes(["plain#ascii", "only#keys"]).tolist() == [index_key_hash("plain#ascii"),
                                                                       index_key_hash("only#keys")]


def _index_bytes(directory) -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.iterdir())]


def test_batched_index_equals_key_by_key(tmp_path, store_kernel):
    """IndexService.put_many writes the same files as put_key one entry at a time, across full
    files, slot collisions (10 slots) and garbage slot values."""
    rnd = random.Random(11)
    items = []
    phy = 0
    for i in range(700):
        for _ in range(rnd.randint(1, 3)):
            items.append((f"T#{rnd.choice(['a', 'b', 'k'])}{rnd.randint(0, 60)}", phy, 1_700_000_000_000 + 7 * i))
        phy += rnd.randint(100, 300)
    one, many = IndexService(tmp_path / "one", 10, 80), IndexService(tmp_path / "many", 10, 80)
    for svc in (one, many):
        svc.load()
    first = 3
    while items[first][1] == items[first - 1][1]:       # whole records
        first += 1
    for key, p, ts in items[:first]:                    # a started file, then garbage in two slots
        for svc in (one, many):
            svc.files or svc._writable(0)
            svc.files[-1].put_key(key, p, ts)
            svc.files[-1].mf.mm[40 + 4 * 3:40 + 4 * 5] = b"\x00\x00\x00\x07\x7f\x00\x00\x00"
    rest = items[first:]
    for key, p, ts in rest:
        one._put_one(key, p, ts)
    lo = 0
    while lo < len(rest):                               # batches of whole records, as the dispatch gives
        hi = min(lo + 97, len(rest))
        while hi < len(rest) and rest[hi][1] == rest[hi - 1][1]:
            hi += 1
        chunk = rest[lo:hi]
        many.put_many([c[0] for c in chunk], [c[1] for c in chunk], [c[2] for c in chunk])
        lo = hi
    assert len(one.files) == len(many.files) > 5
    for a, b in zip(one.files, many.files):
        assert bytes(a.mf.mm) == bytes(b.mf.mm)
        assert a.header == b.header
    for svc in (one, many):
        svc.close()


def test_a_record_dispatched_again_is_not_indexed_twice(tmp_path):
    """After a restart or a role change the last indexed record can be dispatched again: its keys
    are not added a second time (Java's buildIndex skips only what is below endPhyOffset and indexes
    that record again), one record or a batch."""
    svc = IndexService(tmp_path / "idx", 10, 80)
    svc.load()
    svc.put_many(["T#a", "T#b", "T#c"], [0, 0, 150], [1_700_000_000_000] * 3)
    before = svc.files[-1].header.index_count
    svc.put_many(["T#c", "T#d"], [150, 300], [1_700_000_000_001] * 2)     # 150 again, then a new one
    svc.put("T", ["c"], 150, 1_700_000_000_001)
    assert svc.files[-1].header.index_count == before + 1
    assert svc.files[-1].header.end_phy_offset == 300
    svc.close()


@pytest.mark.parametrize("index_batch", [True, False])
def test_dispatched_files_equal_a_rebuild(tmp_path, index_batch, store_kernel):
    """Consume queues and index written by the put path's batched dispatch are byte-identical to
    the ones abnormal recovery rebuilds record by record (the path the Java fixtures pin)."""
    root = tmp_path / "s"
    rnd = random.Random(5)
    with MessageStore(config(root)) as s:
        for i in range(1500):
            props = {"TAGS": rnd.choice(["A", "B", "", "C||D"]), "UNIQ_KEY": f"{i:032X}"}
            if i % 3:
                props["KEYS"] = " ".join(f"key{rnd.randint(0, 99)}" for _ in range(rnd.randint(1, 3)))
            if not index_batch:
                s.drain_dispatch()
            sys_flag = 0x4 if i % 97 == 0 else (0xC if i % 89 == 0 else 0)   # prepared, rollback
            m = Message(rnd.choice(["T1", "T2"]), rnd.randint(0, 3), b"m%d" % i, props, sys_flag=sys_flag)
            if i == 700:
                with s.put_lock:      # one dispatch batch of 300 records: runs of more than 64 units per queue
                    for j in range(300):
                        assert s.put(Message("T2", j % 2, b"held%d" % j, {"KEYS": f"h{j}", "TAGS": "H"})).ok
            if i % 50 == 0:
                assert s.put_batch([m, Message("T1", 0, b"batch", {"KEYS": "bk"})]).ok
            else:
                assert s.put(m).ok
    put_cq = {p.relative_to(root): p.read_bytes() for p in (root / "consumequeue").rglob("0000*")}
    put_index = _index_bytes(root / "index")
    assert len(put_index) > 3
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    (root / "abort").touch()
    (root / "checkpoint").write_bytes(bytes(4096))
    with MessageStore(config(root)) as s:
        assert s.recovery_report.abnormal
    assert {p.relative_to(root): p.read_bytes() for p in (root / "consumequeue").rglob("0000*")} == put_cq
    assert _index_bytes(root / "index") == put_index
    assert verify_store(root).ok


def test_reads_see_every_put_before_dispatch_runs(tmp_path):
    with MessageStore(config(tmp_path / "s")) as s:
        with s.put_lock:          # the dispatch thread cannot take anything meanwhile
            r = [s.put(Message("T", 0, b"x%d" % i, {"KEYS": f"k{i}"})) for i in range(5)]
            assert s.dispatch_behind_bytes == r[-1].end - r[0].offset
            assert s.max_offset("T", 0) == 5
            assert s.dispatch_behind_bytes == 0
            s.put(Message("T", 0, b"y", {"KEYS": "late"}))
            assert len(s.get("T", 0, 0, 32).messages) == 6
            s.put(Message("T", 0, b"z", {"KEYS": "later"}))
            assert len(s.query("T", "later", 4, 0, 2 ** 62)[0]) == 1


def test_group_commit_releases_a_waiter_only_by_a_flush_covering_it():
    written = [0]
    stop = threading.Event()
    gate, in_sync = threading.Semaphore(0), threading.Event()

    def snapshot():
        return ("work", written[0])

    def sync(work):
        in_sync.set()
        gate.acquire()

    svc = GroupCommitService(snapshot, sync, stop)
    t = threading.Thread(target=svc.run, daemon=True)
    t.start()
    results = {}

    def waiter(end):
        results[end] = svc.wait(end, 10)

    written[0] = 100
    a = threading.Thread(target=waiter, args=(100,))
    a.start()
    assert in_sync.wait(5)                  # round 1 covers up to 100
    in_sync.clear()
    written[0] = 200                        # written after round 1's snapshot
    b = threading.Thread(target=waiter, args=(200,))
    b.start()
    gate.release()                          # round 1 ends
    a.join(5)
    assert results == {100: True} and svc.flushed == 100
    assert in_sync.wait(5)                  # round 2, for the second waiter
    assert 200 not in results
    gate.release()
    b.join(5)
    assert results == {100: True, 200: True} and svc.rounds == 2 and svc.released == 2
    stop.set()
    svc.wake()
    gate.release()
    t.join(5)


def test_sync_flush_group_commit_releases_every_waiter(tmp_path):
    cfg = config(tmp_path / "s", flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20)
    bad = []
    with MessageStore(cfg) as s:
        def writer(n):
            for i in range(20):
                r = s.put(Message("T", n % 4, b"w%d-%d" % (n, i), {"KEYS": f"k{n}-{i}"}))
                if r.status is not PutStatus.PUT_OK or s.flusher.flushed < r.end:
                    bad.append(r)
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not bad
        assert s.flusher.released == 640
        assert s.flusher.rounds < 640          # fsyncs were shared
        assert s.commitlog.flushed_offset == s.commitlog_max_offset


def test_crash_between_commit_and_flush_loses_only_unacknowledged_puts(tmp_path):
    """SYNC_FLUSH: while the flusher is held, puts are in the mapped file but not acknowledged.
    A power cut then (bytes past the last fsync lost) must keep every acknowledged put."""
    root = tmp_path / "s"
    cfg = config(root, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20, syncFlushTimeout=20_000)
    acked, lock = [], threading.Lock()
    with MessageStore(cfg) as s:
        real_sync = s.flusher._sync
        hold = threading.Event()
        hold.set()

        def gated(work):
            hold.wait()
            real_sync(work)
        s.flusher._sync = gated

        def writer(n, count):
            for i in range(count):
                seq = n * 1000 + i
                if s.put(Message("T", n % 2, b"p%d" % seq, {"KEYS": f"s{seq}", "seq": str(seq)})).ok:
                    with lock:
                        acked.append(seq)
        first = [threading.Thread(target=writer, args=(n, 10)) for n in range(4)]
        for t in first:
            t.start()
        for t in first:
            t.join()
        hold.clear()                                # the next fsync will not finish
        late = [threading.Thread(target=writer, args=(n, 1)) for n in range(4, 8)]
        for t in late:
            t.start()
        for _ in range(500):
            if s.commitlog_max_offset > s.flusher.flushed and len(s.flusher._waiters) == 4:
                break
            threading.Event().wait(0.01)
        assert len(s.flusher._waiters) == 4 and len(acked) == 40
        durable = s.flusher.flushed
        crash = tmp_path / "crash"                  # the power cut: what was on disk at this moment
        shutil.copytree(root, crash, ignore=shutil.ignore_patterns("lock"))
        for f in list_mapped_files(crash / "commitlog"):
            data = bytearray(f.path.read_bytes())
            cut = max(0, min(len(data), durable - f.start))
            data[cut:] = bytes(len(data) - cut)
            f.path.write_bytes(bytes(data))
        hold.set()
        for t in late:
            t.join()
    with MessageStore(config(crash, mappedFileSizeCommitLog=1 << 20)) as s:
        assert s.recovery_report.abnormal
    with ReadOnlyMap(list_mapped_files(crash / "commitlog")[0].path) as m:
        seqs = [int(rec.properties["seq"]) for _, rec in RecordIterator(m.buf)]
    assert set(acked[:40]) <= set(seqs)
    assert not {4000, 5000, 6000, 7000} & set(seqs)     # unacknowledged when the power went: gone
    assert verify_store(crash).ok


@pytest.mark.parametrize("way", ["populate", "zeros"])
def test_prewritten_zeros_never_overwrite_records(tmp_path, monkeypatch, way):
    """The commit log pre-write thread makes pages present ahead of the write position (the
    kernel's populate, or zeros written without it) while puts (from several threads) append
    behind it: every record must survive, in every file."""
    import mqtool_store.mappedfile as mapped
    import mqtool_store.messagestore as engine
    if way == "zeros":
        monkeypatch.setattr(mapped, "kernel", None)
    elif mapped.kernel is None:
        pytest.skip("the store kernel is not built here")
    monkeypatch.setattr(engine, "PREWRITE_GAP", 8192)
    monkeypatch.setattr(engine, "PREWRITE_CHUNK", 16384)
    monkeypatch.setattr(engine, "PREWRITE_AHEAD", 65536)
    root = tmp_path / "s"
    chunks = []
    with MessageStore(config(root, mappedFileSizeCommitLog=256 << 10)) as s:
        real = MessageStore._prewrite_some

        def counted(self):
            did = real(self)
            chunks.append(did)
            return did
        monkeypatch.setattr(MessageStore, "_prewrite_some", counted)

        failed = []

        def writer(n):
            for i in range(1500):
                r = s.put(Message("T", n, b"%d-%d|" % (n, i) * (1 + i % 40), {"KEYS": f"k{n}-{i}"}))
                if not r.ok:
                    failed.append(r)
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not failed
    assert chunks.count(True) >= 3, chunks.count(True)      # the pre-write thread did run between the puts
    report = verify_store(root)
    assert report.ok and report.records == 4500, [str(p) for p in report.problems[:5]]
    assert len(list_mapped_files(root / "commitlog")) > 2


@pytest.mark.parametrize("way", ["populate", "zeros"])
def test_a_prewrite_keeps_the_bytes_and_survives_a_closed_map(tmp_path, monkeypatch, way):
    """MappedFile.prewrite after the written bytes (populate: over them too, which it is never asked
    to do, but it must not change a byte) and over a map closed meanwhile (retention, shutdown):
    no change, no error."""
    import mqtool_store.mappedfile as mapped
    from mqtool_store.mappedfile import PAGE, MappedFile
    if way == "zeros":
        monkeypatch.setattr(mapped, "kernel", None)
    elif mapped.kernel is None:
        pytest.skip("the store kernel is not built here")
    f = MappedFile(tmp_path / "00000000000000000000", 0, 64 * PAGE, create=True)
    data = bytes(range(256)) * (8 * PAGE // 256)
    f.append(data)
    f.prewrite(0 if way == "populate" else len(data), 16 * PAGE)     # (zeros go only where zeros are)
    assert f.mm[:len(data)] == data and f.mm[len(data):16 * PAGE] == bytes(16 * PAGE - len(data))
    assert f.warm_to == 16 * PAGE
    f.close()
    f.prewrite(16 * PAGE, 32 * PAGE)
    assert f.warm_to == 16 * PAGE


def test_a_reader_waits_for_a_dispatch_already_under_way(tmp_path, monkeypatch):
    """A dispatch on another thread (the store's dispatch thread) takes the pending records and then
    writes their units: a reader that comes in between must wait for it (drain_dispatch), not read
    the consume queue without them. (`mqtool top` once saw a topic's max offset one short.)"""
    with MessageStore(config(tmp_path / "s")) as s:
        assert s.put(Message("T", 0, b"x", {})).ok
        real = MessageStore._write_units
        writing, go = threading.Event(), threading.Event()

        def slow(self, *args):
            writing.set()
            go.wait(10)
            return real(self, *args)
        monkeypatch.setattr(MessageStore, "_write_units", slow)
        other = threading.Thread(target=s.drain_dispatch)
        other.start()
        assert writing.wait(10) and not s._pending          # taken, not yet written
        threading.Timer(0.2, go.set).start()
        assert s.queues[("T", 0)].max_offset == 1
        other.join()


def test_quick_puts_racing_dispatches_all_reach_their_consume_queues(tmp_path):
    """put_quick's callers hand the kernel the pending list before it takes the put lock. A dispatch
    on another thread in between once swapped the list for a new one, and the put appended to the
    old list no one dispatched again: a pre-blank hole in the consume queue, a message no consumer
    would see (`mqtool top` saw a queue's max offset one short when the lost one was the last)."""
    import sys

    import numpy as np

    from mqtool_store.consumequeue import PRE_BLANK_SIZE
    from mqtool_store.kernel import kernel
    if kernel is None:
        pytest.skip("the store kernel is not built here")
    threads, each = 4, 1500
    with MessageStore(config(tmp_path / "s", mappedFileSizeCommitLog=4 * 1024 * 1024,
                             mappedFileSizeConsumeQueue=20 * 2000)) as s:
        assert s.put_batch([Message("T", threads, b"first", {})]).ok      # the kernel knows the topic now
        placed: dict[int, list[int]] = {q: [] for q in range(threads)}

        def puts(q: int) -> None:
            for i in range(each):
                got = s.put_quick(Message("T", q, b"m", {"KEYS": f"k{i}"}, properties_text=f"KEYS\x01k{i}\x02"))
                assert got is not None
                placed[q].append(got[2])
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)          # the GIL changes hands often: the put threads meet the dispatches
        try:
            workers = [threading.Thread(target=puts, args=(q,)) for q in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        finally:
            sys.setswitchinterval(interval)
        for q in range(threads):
            assert placed[q] == list(range(each))
            units = s.queues[("T", q)].units(0, each + 1)
            assert len(units) == each and not np.any(units["size"] == PRE_BLANK_SIZE), f"queue {q} has holes"
            assert np.all(np.diff(units["offset"]) > 0)


def test_the_pending_list_is_one_list_for_the_stores_life(tmp_path):
    """Dispatches empty the pending list in place (put_quick's callers hold it across the put lock)."""
    with MessageStore(config(tmp_path / "s")) as s:
        pending = s._pending
        s.put(Message("T", 0, b"x", {}))
        s.drain_dispatch()
        s.dispatch_limit = s.commitlog.max_offset          # controller mode: the next put waits for its confirm
        s.put(Message("T", 0, b"y", {}))
        s.drain_dispatch()
        assert s._pending is pending and len(pending) == 1 and s.max_offset("T", 0) == 1
        s.dispatch_limit = None
        s.drain_dispatch()
        assert s._pending is pending and not pending and s.max_offset("T", 0) == 2


def test_a_file_without_a_descriptor_flushes_by_fdatasync(tmp_path, monkeypatch):
    """Consume queue files keep no descriptor. Their flush went through mmap.flush, which holds the
    GIL for the whole write-back: the broker's event loop stood still once a second per queue. It now
    fdatasyncs a descriptor opened for it (CPython releases the GIL there); a file deleted meanwhile
    falls back to the map's own write-back."""
    import os

    from mqtool_store import mappedfile
    path = tmp_path / "00000000000000000000"
    f = mappedfile.MappedFile(path, 0, 4096, create=True, hold_fd=False)
    assert f.fd is None
    synced, real = [], os.fdatasync
    monkeypatch.setattr(mappedfile.os, "fdatasync", lambda fd: (synced.append(os.fstat(fd).st_ino), real(fd)))
    f.mm[0:4], f.write_pos = b"abcd", 4
    assert f.flush() == 4 and synced == [path.stat().st_ino]
    path.unlink()
    f.mm[4:8], f.write_pos = b"efgh", 8
    assert f.flush() == 8 and len(synced) == 1
    f.close()
