"""The vectorised header walk and the vectorised stats, each against its plain reference
(walk_loop, topic_ids_loop, a per-record decode) and the construct schema."""
from __future__ import annotations

import mmap
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from mqtool_store.commitlog import MessageRecordSchema, encode_blank, encode_record, new_record
from mqtool_store import logscan
from mqtool_store.logscan import HeaderScan, RecordIterator, header_table, scan_file, walk, walk_array, walk_loop
from mqtool_store.reader import CommitLogReader
from mqtool_store.stats import commitlog_stats
from mqtool_store.topicids import TopicIds, topic_ids, topic_ids_loop
from tests.store.varied import damage, encode, varied_records, write_commitlog


def varied_buffer(n: int = 120, seed: int = 3, size: int = 64 * 1024, bad_utf8: bool = True) -> bytes:
    out = bytearray()
    for rec in varied_records(n, seed):
        rec.physical_offset = len(out)
        raw = encode(rec) if bad_utf8 else encode_record(rec)   # the schema refuses invalid UTF-8
        if len(out) + len(raw) + 8 > size:
            break
        out += raw
    out += encode_blank(min(size - len(out), 4096)) if len(out) + 8 <= size else b""
    return bytes(out.ljust(size, b"\0"))


def damaged_copies(buf: bytes, seed: int):
    rnd = random.Random(seed)
    positions, _ = walk_loop(buf)
    yield buf
    for _ in range(12):
        b = bytearray(buf)
        victim = rnd.choice(positions)
        how = rnd.randrange(6)
        if how == 0:
            b[victim + rnd.randrange(8)] ^= 1 << rnd.randrange(8)
        elif how == 1:
            b[victim:victim + 4] = rnd.randrange(-10, 10**6).to_bytes(4, "big", signed=True)
        elif how == 2:
            b[victim:victim + 200] = bytes(200)
        elif how == 3:
            b[victim:] = b"\x5a" * (len(b) - victim)
        elif how == 4:
            b[victim + 4:victim + 8] = b"\xda\xa3\x20\xab"        # a V2 magic code (4.x never writes it)
        else:
            b[victim + rnd.randrange(100):victim + 300] = encode_record(new_record("Z", b"q" * 50))[:200]
        yield bytes(b)


@pytest.mark.parametrize("seed", range(6))
def test_walk_array_is_walk_loop(seed):
    buf = varied_buffer(seed=seed)
    for b in damaged_copies(buf, seed):
        rnd = random.Random(seed)
        for start, end in [(0, None), (0, len(b) - 1000), (rnd.randrange(2000), None), (0, 5000), (len(b), None),
                           (len(b) - 50, None)]:
            ref_pos, ref_end = walk_loop(b, start, end)
            pos, fend = walk_array(b, start, end)
            assert pos.tolist() == ref_pos and fend == ref_end
            assert walk(b, start, end) == (ref_pos, ref_end)


@pytest.mark.parametrize("seed", range(3))
def test_walk_and_scan_on_threads_are_the_loops(seed, monkeypatch):
    """The magic search in 997-byte pieces (records straddle them) and the chunks' tables on a
    thread pool: the same positions, tables and end as the loop, in order."""
    monkeypatch.setattr(logscan, "_SEARCH_CHUNK", 997)
    with ThreadPoolExecutor(3) as pool:
        for b in damaged_copies(varied_buffer(seed=seed), seed):
            ref_pos, ref_end = walk_loop(b)
            pos, fend = walk_array(b, pool=pool)
            assert pos.tolist() == ref_pos and fend == ref_end
            arr, limit = np.frombuffer(b, np.uint8), len(b) - 92
            # (a wrong candidate list would still give the loop's answer, by the loop: compared directly)
            assert logscan._magic_candidates(arr, 0, limit, pool).tolist() == \
                logscan._magic_candidates(arr, 0, limit).tolist()
            scan, threaded = HeaderScan(b, chunk=7), HeaderScan(b, chunk=7)
            positions = [t["position"].tolist() for t in scan]
            assert threaded.end is None
            assert list(threaded.map(lambda t: t["position"].tolist(), pool)) == positions
            assert threaded.end == scan.end


@pytest.mark.parametrize("seed", range(3))
def test_header_scan_chunks_are_the_whole_file_scan(seed):
    for b in damaged_copies(varied_buffer(seed=seed), seed):
        # the reference: the whole walk_loop list in one header_table call, cut at the first bad record
        positions, _ = walk_loop(b)
        whole, n_valid = header_table(b, positions)
        table, end = scan_file(b)
        assert table["position"].tolist() == positions[:n_valid]
        for chunk in (1, 7, 50):
            scan = HeaderScan(b, chunk=chunk)
            parts = list(scan)
            assert scan.end == end
            for name in ("position", "queue_offset", "topic_pos", "props_len", "store_timestamp"):
                got = np.concatenate([p[name] for p in parts]).tolist() if parts else []
                assert got == whole[name][:n_valid].tolist() == table[name].tolist()


def test_walk_on_every_buffer_kind_and_edge(tmp_path):
    buf = varied_buffer(seed=9)
    path = tmp_path / "f"
    path.write_bytes(buf)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ) as m:
        for b in (buf, bytearray(buf), memoryview(buf), m):
            assert walk(b) == walk_loop(b)
    for b in (b"", b"\0" * 50, buf[:91], buf[:200]):
        assert walk(b) == walk_loop(b)


def test_lookalikes_in_bodies_are_not_records():
    body = encode_record(new_record("Inner", b"x" * 30, {"TAGS": "t"}, physical_offset=0)) * 4
    recs = [encode_record(new_record("Outer", body, {"KEYS": f"k{i}"})) for i in range(20)]
    buf = b"".join(recs) + bytes(1000)
    positions, end = walk(buf)
    assert len(positions) == 20 and (positions, end) == walk_loop(buf)


@pytest.mark.parametrize("seed", range(3))
def test_header_table_is_the_schema(seed):
    buf = varied_buffer(seed=seed, bad_utf8=False)
    table, end = scan_file(buf)
    assert end.clean and len(table["position"]) > 50
    for i, pos in enumerate(table["position"].tolist()):
        size = int(table["total_size"][i])
        rec = MessageRecordSchema.parse(buf[pos:pos + size])
        for name in ("total_size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset",
                     "sys_flag", "born_timestamp", "store_timestamp", "reconsume_times",
                     "prepared_transaction_offset"):
            assert int(table[name][i]) == rec[name], name
        body_pos, body_len = int(table["body_pos"][i]), int(table["body_len"][i])
        assert buf[body_pos:body_pos + body_len] == rec.body
        a, n = int(table["topic_pos"][i]), int(table["topic_len"][i])
        assert buf[a:a + n].decode("utf-8", "replace") == rec.topic
        a, n = int(table["props_pos"][i]), int(table["props_len"][i])
        assert buf[a:a + n].decode("utf-8", "replace") == rec.properties


def topic_buffer(topics: list[bytes], n: int, end_with_record: bool = True) -> bytes:
    """Records whose topic bytes are given raw (placeholders patched after encoding)."""
    out = bytearray()
    for i in range(n):
        raw_topic = topics[i % len(topics)]
        placeholder = "P" * len(raw_topic)
        raw = encode_record(new_record(placeholder, b"b" * (i % 5), {} if i % 3 else {"K": "v"},
                                       queue_id=i % 3, physical_offset=len(out)))
        head = 88 + i % 5
        raw = raw[:head + (2 if len(raw_topic) > 127 else 1)] + raw_topic + raw[head + 1 + (len(raw_topic) > 127) + len(raw_topic):]
        out += raw
    if not end_with_record:
        out += bytes(100)
    return bytes(out)


@pytest.mark.parametrize("topics", [
    [b"A", b"Orders", b"OrdersX", b"%RETRY%GID_long_group", b"exactly15bytes!", b"sixteen_bytes_16"],
    [b"T%d" % i for i in range(40)],                                  # more than 16: the sort path
    [b"x" * 31, b"x" * 32, b"x" * 33, b"y" * 127, b"z" * 200, b"x" * 30 + b"y"],
    ["话题".encode(), "тема".encode(), b"T\xff", b"T\xfe", b"\xff", b""],   # T\xff and T\xfe: the same name
    [b"A", b"A\0", b"A\0\0", b"", b"\0", b"B" * 15 + b"\0"],             # told apart by length only
])
@pytest.mark.parametrize("end_with_record", [True, False])
def test_topic_ids_are_the_loops(topics, end_with_record):
    buf = topic_buffer(topics, 150, end_with_record)
    table, end = scan_file(buf)
    assert len(table["position"]) == 150
    tids, names = topic_ids(buf, table["topic_pos"], table["topic_len"], {})
    ref_tids, ref_names = topic_ids_loop(buf, table["topic_pos"], table["topic_len"], {})
    assert [names[t] for t in tids.tolist()] == [ref_names[t] for t in ref_tids.tolist()]
    assert sorted(names.values()) == sorted(ref_names.values())


@pytest.mark.parametrize("chunks", [
    # topics arriving chunk by chunk: new ones appear later, lengths mix, known ones come back
    [[b"BenchTopic0", b"BenchTopic1"], [b"BenchTopic1", b"BenchTopic2", b"A"], [b"A", b"BenchTopic0"]],
    # no single word tells these apart (the same first word twice, the same second word twice):
    # the search runs on a hash of both words
    [[b"AAAAAAAAx", b"AAAAAAAAy"], [b"BBBBBBBBx", b"AAAAAAAAx"], [b"BBBBBBBBx", b"AAAAAAAAy", b"BBBBBBBBy"]],
    # told apart by length only; then a 16-byte topic (the general path) among known ones
    [[b"A", b"A\0", b"A\0\0"], [b"sixteen_bytes_16", b"A\0"], [b"A", b"A\0\0"]],
    ["话题 тема".encode().split(), [b"T\xff", b"T\xfe"], [b"T\xfe", "тема".encode()]],
])
def test_topic_ids_across_chunks_are_the_loops(chunks):
    cache: dict[bytes, str] = {}
    ids = TopicIds(cache)
    for topics in chunks:
        buf = topic_buffer(topics, 60, end_with_record=False)
        table, _ = scan_file(buf)
        tids = ids(buf, table["topic_pos"], table["topic_len"])
        ref_tids, ref_names = topic_ids_loop(buf, table["topic_pos"], table["topic_len"], {})
        assert [ids.names[t] for t in tids.tolist()] == [ref_names[t] for t in ref_tids.tolist()]
    assert len(ids.names) == len(set(ids.names))     # one id per name, across every chunk


def reference_stats(directory) -> dict:
    groups: dict = {}
    files = []
    with CommitLogReader(directory) as reader:
        for f in reader.files:
            it = RecordIterator(reader.buffer(f))
            n = 0
            for _pos, rec in it:
                n += 1
                g = groups.setdefault((rec.topic, rec.queue_id), [])
                g.append(rec)
            # (the header scan words some details differently, e.g. "bad record" for a size that does
            # not fit: compared with what scan_file says, not with the full decode)
            files.append((f.path.name, n, it.end.position, it.end.reason, scan_file(reader.buffer(f))[1].detail,
                          it.end.invalid_bytes))
    queues = [{"topic": t, "queue_id": q, "messages": len(rs), "bytes": sum(r.total_size for r in rs),
               "min_queue_offset": min(r.queue_offset for r in rs), "max_queue_offset": max(r.queue_offset for r in rs),
               "first_store_time": min(r.store_timestamp for r in rs),
               "last_store_time": max(r.store_timestamp for r in rs)}
              for (t, q), rs in sorted(groups.items())]
    return {"files": files, "queues": queues}


@pytest.mark.parametrize("table_chunk,workers,file_kib", [
    (1 << 16, 1, 8), (13, 1, 8),
    (13, 3, 8),         # 6 files on 3 threads: whole files per thread
    (13, 3, 32),        # 2 files on 3 threads: one file after the other, chunks on the threads
])
@pytest.mark.parametrize("how", [None, "garbage", "size", "magic", "zeros", "body_len"])
def test_commitlog_stats_are_a_per_record_count(tmp_path, monkeypatch, how, table_chunk, workers, file_kib, store_kernel):
    monkeypatch.setattr(logscan, "_TABLE_CHUNK", table_chunk)
    d = tmp_path / "commitlog"
    files = write_commitlog(d, varied_records(300), file_size=file_kib * 1024)
    assert (len(files) > workers) if file_kib == 8 else (1 < len(files) < workers)
    if how:
        damage(files[1], how, at_record=2)
    with CommitLogReader(d) as reader:
        stats = commitlog_stats(reader, workers=workers)
    ref = reference_stats(d)
    assert stats["queues"] == ref["queues"]
    assert [(f["file"], f["records"], f["write_position"], f["end"], f["detail"], f["invalid_bytes"])
            for f in stats["files"]] == ref["files"]


def test_an_interrupted_stats_starts_no_more_files(tmp_path):
    """A Ctrl-C (here raised by the progress callback after the first file) cancels the files
    no thread has started: `store stats` of a large store ends within a file's scan."""
    d = tmp_path / "commitlog"
    files = write_commitlog(d, varied_records(600), file_size=8 * 1024)
    assert len(files) >= 12
    gate, started = threading.Event(), []
    with CommitLogReader(d) as reader:
        plain = reader.buffer

        def buffer(f):
            started.append(f.path.name)
            if f.path != files[0]:
                gate.wait(10)       # every other file waits until the interrupt
            return plain(f)
        reader.buffer = buffer

        def progress(_size):
            gate.set()
            raise KeyboardInterrupt
        with pytest.raises(KeyboardInterrupt):
            commitlog_stats(reader, progress, workers=2)
    assert len(started) <= 5, started       # the first, those running, at most one more each


def test_many_queues_take_the_sort_path(tmp_path, store_kernel):
    recs = [new_record(f"T{i % 5}", b"x", queue_id=(i * 7919) % 2_000_000, queue_offset=i, store_timestamp=i)
            for i in range(400)]
    d = tmp_path / "commitlog"
    write_commitlog(d, recs, file_size=64 * 1024)
    with CommitLogReader(d) as reader:
        assert commitlog_stats(reader)["queues"] == reference_stats(d)["queues"]
    assert np.unique([r.queue_id for r in recs]).size > 300
