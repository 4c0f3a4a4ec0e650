"""The message store through its API: fixture stores load, take appends, reopen, verify clean."""
from __future__ import annotations

import threading


from mqtool_store.consumequeue import read_units
from mqtool_store.logscan import RecordIterator
from mqtool_store.mappedfiles import ReadOnlyMap, list_mapped_files
from mqtool_store.messagestore import GetStatus, Message, MessageStore, PutStatus
from mqtool_store.storeconfig import MessageStoreConfig
from mqtool_store.verify import verify_store

FIXTURE_SIZES = dict(mappedFileSizeCommitLog=1048576, mappedFileSizeConsumeQueue=6000, maxHashSlotNum=1000,
                     maxIndexNum=4000)


def config(root, **kw) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), **{**FIXTURE_SIZES, **kw})


def msg(i, topic="T", queue=0, **props):
    return Message(topic, queue, b"body-%d" % i, {"KEYS": f"k-{i}", "TAGS": "TagA" if i % 2 else "TagB",
                                                   "UNIQ_KEY": f"{i:032X}", **props}, born_timestamp=1)


def test_fixture_loads_appends_and_reopens(basic_store, store_copy):
    root = store_copy(basic_store)
    with MessageStore(config(root)) as s:
        assert not s.recovery_report.abnormal and not s.recovery_report.changes
        assert [s.max_offset("TopicA", q) for q in range(4)] == [376, 375, 375, 374]
        got = s.get("TopicB", 5, 0, 32)
        assert got.status is GetStatus.FOUND and len(got.messages) == 32 and got.next_begin_offset == 32
        r = s.put(msg(1, "TopicA", 2))
        assert r.status is PutStatus.PUT_OK and r.queue_offset == 375
        assert s.read(r.offset).keys == ["k-1"]
        data, _, _ = s.query("TopicA", "k-1", 10, 0, 2**62)
        assert len(data) == 1
        data, _, _ = s.query("TopicA", "A-7", 10, 0, 2**62)   # written by Java, found through our index
        assert len(data) == 1
    assert not (root / "abort").exists()
    report = verify_store(root)
    assert report.ok, [str(p) for p in report.problems]
    with MessageStore(config(root)) as s:
        assert s.max_offset("TopicA", 2) == 376


def test_crashed_fixture_recovers_every_late_send(crashed_store, store_copy, crashed_sent):
    root = store_copy(crashed_store)
    with MessageStore(config(root)) as s:
        assert s.recovery_report.abnormal
        assert sum(s.max_offset("TopicA", q) for q in range(4)) == 1800
        for sent in crashed_sent[::37]:
            data, _, _ = s.query("TopicA", sent["keys"], 4, 0, 2**62)
            assert len(data) == 1
    assert verify_store(root).ok


def test_rebuilt_consume_queues_are_byte_identical(basic_store, store_copy):
    root = store_copy(basic_store)
    originals = {p.relative_to(root): p.read_bytes() for p in (root / "consumequeue").rglob("0000*")}
    import shutil
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    (root / "abort").touch()      # abnormal: re-dispatch from the checkpoint's file...
    (root / "checkpoint").write_bytes(bytes(4096))   # ...which, with a zeroed checkpoint, is the first
    with MessageStore(config(root)):
        pass
    rebuilt = {p.relative_to(root): p.read_bytes() for p in (root / "consumequeue").rglob("0000*")}
    assert rebuilt.keys() == originals.keys()
    for k in originals:
        assert rebuilt[k] == originals[k], k
    assert verify_store(root).ok


def test_new_store_rolls_files_with_blank_records(tmp_path):
    root = tmp_path / "s"
    cfg = config(root, mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=200)
    with MessageStore(cfg) as s:
        offsets = [s.put(msg(i, queue=i % 3)).queue_offset for i in range(3000)]
        assert s.put_batch([msg(10_000 + i, queue=1) for i in range(5)]).ok
    assert offsets[:6] == [0, 0, 0, 1, 1, 1]
    files = list_mapped_files(root / "commitlog")
    assert len(files) > 3 and all(f.size == 64 * 1024 for f in files)
    with ReadOnlyMap(files[0].path) as m:
        it = RecordIterator(m.buf)
        list(it)
        assert it.end.reason == "blank"
    report = verify_store(root)
    assert report.ok and report.records == 3005
    with ReadOnlyMap(root / "consumequeue" / "T" / "1" / "00000000000000000000") as m:
        units = read_units(m.buf)
        assert len(units) == 10 and units["size"].min() > 0
        del units


def test_second_process_is_refused(tmp_path):
    import subprocess
    import sys
    code = ("import sys; from mqtool_store.messagestore import MessageStore; from mqtool_store.storeconfig import "
            "MessageStoreConfig as C; from mqtool_store.errors import StoreLockedError\n"
            "try:\n    MessageStore(C(storePathRootDir=sys.argv[1])).start()\n"
            "except StoreLockedError as e:\n    print(e); sys.exit(3)\n")
    with MessageStore(config(tmp_path / "s")):
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 3 and "Lock failed" in proc.stdout
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_sync_flush_group_commit(tmp_path):
    cfg = config(tmp_path / "s", flushDiskType="SYNC_FLUSH")
    results = []
    with MessageStore(cfg) as s:
        def writer(n):
            for i in range(50):
                results.append(s.put(msg(n * 1000 + i, queue=n % 4)))
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(r.status is PutStatus.PUT_OK for r in results) and len(results) == 400
        assert s.commitlog.flushed_offset == s.commitlog_max_offset


def test_sync_flush_timeout_is_reported(tmp_path):
    cfg = config(tmp_path / "s", flushDiskType="SYNC_FLUSH", syncFlushTimeout=1)
    with MessageStore(cfg) as s:
        s._stop.set()     # the flusher stops serving: no put can be confirmed in time
        s._threads[0].join(5)
        assert s.put(msg(1)).status is PutStatus.FLUSH_DISK_TIMEOUT


def test_get_statuses_and_lookups(tmp_path):
    with MessageStore(config(tmp_path / "s")) as s:
        assert s.get("T", 0, 0, 1).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
        times = []
        for i in range(10):
            times.append(s.put(msg(i)).store_timestamp)
        assert s.get("T", 0, 10, 1).status is GetStatus.OFFSET_OVERFLOW_ONE
        assert s.get("T", 0, 11, 1).status is GetStatus.OFFSET_OVERFLOW_BADLY
        from mqtool_store.javahash import tags_code
        only_a = s.get("T", 0, 0, 32, lambda code: code == tags_code("TagA"))
        assert len(only_a.messages) == 5
        assert s.offset_by_time("T", 0, times[5]) <= 5 and s.offset_by_time("T", 0, times[-1] + 10_000) == 10
        assert s.earliest_time("T", 0) == times[0]
        assert s.put(Message("T", 0, b"x" * (4 * 1024 * 1024 + 1))).status is PutStatus.MESSAGE_ILLEGAL


def test_retention_deletes_expired_files_and_followers(tmp_path):
    import os
    import time
    from mqtool_store.retention import delete_expired
    root = tmp_path / "s"
    cfg = config(root, mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=400, fileReservedTime=1,
                 deleteWhen="04", diskMaxUsedSpaceRatio=99)
    with MessageStore(cfg) as s:
        for i in range(2500):
            s.put(msg(i, queue=0))
        files = list(s.commitlog.files)
        assert len(files) > 4
        at_four = time.mktime(time.strptime("2030-01-02 04:30", "%Y-%m-%d %H:%M"))
        for f in files:
            os.utime(f.path, (at_four - 600, at_four - 600))             # recent: kept
        for f in files[:3]:
            os.utime(f.path, (at_four - 2 * 3600, at_four - 2 * 3600))   # older than fileReservedTime=1h
        assert not delete_expired(s, at_four + 6 * 3600).commitlog_deleted   # 10:30 is not deleteWhen 04
        report = delete_expired(s, at_four)
        assert [p.rsplit("/", 1)[1] for p in report.commitlog_deleted] == [f.path.name for f in files[:3]]
        assert report.consumequeue_deleted and s.commitlog_min_offset == files[3].start
        low = s.min_offset("T", 0)
        assert low > 0 and s.get("T", 0, 0, 1).status is GetStatus.OFFSET_TOO_SMALL
        assert s.get("T", 0, low, 1).status is GetStatus.FOUND
    assert verify_store(root).ok


def test_interrupted_file_creation_is_cleaned_up(tmp_path):
    root = tmp_path / "s"
    with MessageStore(config(root)) as s:
        s.put(msg(1))
    cq_dir = root / "consumequeue" / "T" / "0"
    (cq_dir / "00000000000000006000").write_bytes(b"")                 # killed between create and size
    (cq_dir / "00000000000000012000.creating").write_bytes(b"\0" * 10)
    with MessageStore(config(root)) as s:
        assert s.max_offset("T", 0) == 1
        s.put(msg(2))
    assert sorted(p.name for p in cq_dir.iterdir()) == ["00000000000000000000"]
    assert verify_store(root).ok


def test_disk_usage_is_javas_used_over_used_plus_usable():
    from mqtool_store.retention import disk_used_ratio, used_ratio
    gb = 1 << 30
    # This machine's disk: 270 GB, 220 free, of which 59 usable: df says 46% (Java: 0.46), not 78%.
    assert used_ratio(270 * gb, 220 * gb, 59 * gb) == 0.46
    assert used_ratio(100, 25, 25) == 0.75 and used_ratio(100, 24, 24) == 0.76      # rounded up to a percent
    assert used_ratio(0, 0, 0) == -1.0
    assert 0 <= disk_used_ratio("/") <= 1 and disk_used_ratio("/no/such/path") == -1.0


def test_a_full_disk_deletes_expired_files_at_any_hour_and_past_85_percent_the_oldest(tmp_path):
    import os
    import time
    from mqtool_store.retention import delete_expired
    cfg = config(tmp_path / "s", mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=400, fileReservedTime=1,
                 deleteWhen="04")
    with MessageStore(cfg) as s:
        for i in range(2500):
            s.put(msg(i, queue=0))
        files = list(s.commitlog.files)
        noon = time.mktime(time.strptime("2030-01-02 12:00", "%Y-%m-%d %H:%M"))     # not deleteWhen
        for f in files:
            os.utime(f.path, (noon - 600, noon - 600))
        os.utime(files[0].path, (noon - 7200, noon - 7200))                       # the one expired file
        assert not delete_expired(s, noon, used=0.70).commitlog_deleted           # below 75%: nothing
        report = delete_expired(s, noon, used=0.80)                               # 75-85%: expired only
        assert [p.rsplit("/", 1)[1] for p in report.commitlog_deleted] == [files[0].path.name]
        report = delete_expired(s, noon, used=0.90)                               # past 85%: the oldest too
        assert len(report.commitlog_deleted) == len(files) - 2 and len(s.commitlog.files) == 1


def test_message_index_safe_starts_recovery_early_enough_for_the_index(tmp_path):
    """messageIndexSafe (with messageIndexEnable): an abnormal recovery starts from the last file
    whose first message is no later than the index's checkpoint time too, not only the queues'."""
    from mqtool_store.checkpoint import Checkpoint
    root = tmp_path / "s"
    with MessageStore(config(root, mappedFileSizeCommitLog=16 * 1024)) as s:
        for i in range(600):
            s.put(msg(i))
    files = list_mapped_files(root / "commitlog")
    assert len(files) >= 5
    base = 1_700_000_000_000
    for i, f in enumerate(files):                 # first store times 10 s apart, file by file
        with open(f.path, "r+b") as fh:
            fh.seek(56)                           # STORETIMESTAMP of a record with IPv4 born host
            fh.write((base + i * 10_000).to_bytes(8, "big"))
    cp = Checkpoint(physic_msg_timestamp=base + 33_001, logics_msg_timestamp=base + 33_001,
                    index_msg_timestamp=base + 10_000)
    (root / "checkpoint").write_bytes(cp.encode())
    (root / "abort").touch()
    with MessageStore(config(root, mappedFileSizeCommitLog=16 * 1024, messageIndexSafe=True)) as s:
        assert s.recovery_report.start_file == files[1].path.name          # the index's time: file 1
    (root / "checkpoint").write_bytes(cp.encode())
    (root / "abort").touch()
    with MessageStore(config(root, mappedFileSizeCommitLog=16 * 1024)) as s:
        assert s.recovery_report.start_file == files[3].path.name          # the queues' time - 3 s: file 3


def test_clean_expired_queues_removes_queues_of_deleted_messages_but_the_schedule_topics(tmp_path):
    """cleanExpiredConsumerQueue: a queue whose last unit ends below the commit log's min offset goes;
    the schedule topic's never does (delayOffset.json points into it)."""
    import os
    import time
    from mqtool_store.retention import delete_expired
    root = tmp_path / "s"
    cfg = config(root, mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=400, fileReservedTime=1,
                 deleteWhen="04", diskMaxUsedSpaceRatio=99)
    with MessageStore(cfg) as s:
        for i in range(600):
            s.put(msg(i, topic="Old"))
        s.put(msg(0, topic="SCHEDULE_TOPIC_XXXX", DELAY="1"))
        for i in range(2000):
            s.put(msg(i, topic="T"))
        s.drain_dispatch()
        files = list(s.commitlog.files)
        at_four = time.mktime(time.strptime("2030-01-02 04:30", "%Y-%m-%d %H:%M"))
        for f in files:
            os.utime(f.path, (at_four - 600, at_four - 600))
        for f in files[:3]:
            os.utime(f.path, (at_four - 2 * 3600, at_four - 2 * 3600))
        delete_expired(s, at_four)
        low = s.commitlog_min_offset
        assert low == files[3].start
        assert s.min_offset("Old", 0) == s.max_offset("Old", 0) == 600       # every message gone, the last file kept
        removed = s.clean_expired_queues()
        assert removed == 1 and s.max_offset("Old", 0) == 0 and not (root / "consumequeue" / "Old" / "0").exists()
        assert s.max_offset("SCHEDULE_TOPIC_XXXX", 0) == 1 and s.max_offset("T", 0) == 2000


def test_get_across_commit_log_files_answers_each_record_as_read_alone(tmp_path):
    """get keeps the file of the record before (no look-up per record): answers that cross a file
    end, and start at any offset, hold exactly the records read one by one, in order."""
    with MessageStore(config(tmp_path, mappedFileSizeCommitLog=4096)) as s:
        for i in range(300):
            s.put(msg(i, queue=i % 2))
        s.drain_dispatch()
        assert len(s.commitlog.files) > 5
        for q in (0, 1):
            cq = s.queues[("T", q)]
            expected = [s.read_bytes(int(u["offset"]), int(u["size"])) for u in cq.units(0, 1000)]
            for start in (0, 7, 31):
                off, got = start, []
                while True:
                    r = s.get("T", q, off, 32)
                    if r.status is not GetStatus.FOUND:
                        break
                    got += r.messages
                    off = r.next_begin_offset
                assert got == expected[start:] and off == len(expected)


def test_a_consume_queue_file_costs_one_descriptor(tmp_path):
    """A 4.9.8 MappedFile holds one descriptor; a mapped consume queue file here keeps only the
    map's own (thousands of queues must not cost twice the descriptors), and still flushes."""
    import os

    def open_under(d):
        out = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                out += os.readlink(f"/proc/self/fd/{fd}").startswith(str(d))
            except OSError:
                pass
        return out
    with MessageStore(config(tmp_path)) as s:
        for q in range(40):
            s.put(msg(q, queue=q))
        s.drain_dispatch()
        files = list((tmp_path / "consumequeue").rglob("0" * 20))
        assert len(files) == 40
        assert open_under(tmp_path / "consumequeue") == 40          # the maps' own, one per file
        for cq in s.queues.values():
            cq.files.last.flush()
    with MessageStore(config(tmp_path)) as s:                          # reopened: every unit was kept
        assert sorted(s.max_offset("T", q) for q in range(40)) == [1] * 40
