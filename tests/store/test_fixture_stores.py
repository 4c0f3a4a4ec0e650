"""Real Apache RocketMQ 4.9.8 stores decode exactly: counts, keys, tags, bodies, queue offsets."""
from __future__ import annotations

import base64

import numpy as np
import pytest

from mqtool_store.checkpoint import CheckpointSchema, decode_checkpoint
from mqtool_store.commitlog import MessageRecordSchema, record_from_schema
from mqtool_store.compression import decompress
from mqtool_store.consumequeue import CqUnitSchema, list_queues, queue_files, read_units, valid_prefix
from mqtool_store.indexfile import IndexEntrySchema, IndexFile, IndexHeaderSchema
from mqtool_store.javahash import index_key_hash
from mqtool_store.layout import StorePaths
from mqtool_store.logscan import RecordIterator, scan_file
from mqtool_store.mappedfiles import ReadOnlyMap
from mqtool_store.query import index_files, query_by_key
from mqtool_store.reader import CommitLogReader


@pytest.fixture(scope="module")
def basic_records(basic_store):
    with CommitLogReader(StorePaths.of(basic_store).commitlog) as reader:
        return {off: rec for off, rec in reader.records(check_crc=True)}


def test_every_truth_record_decodes(basic_records, basic_truth):
    assert len(basic_records) == len(basic_truth) == 2371
    for t in basic_truth:
        rec = basic_records[t["commit_log_offset"]]
        assert (rec.topic, rec.queue_id, rec.queue_offset) == (t["topic"], t["queue_id"], t["queue_offset"])
        assert rec.total_size == t["store_size"]
        assert rec.born_timestamp == t["born_timestamp"] and rec.store_timestamp == t["store_timestamp"]
        assert rec.reconsume_times == t["reconsume_times"]
        assert rec.prepared_transaction_offset == t["prepared_transaction_offset"]
        assert rec.properties == t["properties"]
        assert list(rec.properties) == t["raw"]["property_order"]
        assert rec.sys_flag == t["raw"]["sys_flag"] and rec.flag == t["raw"]["flag"]
        assert rec.body_crc == t["raw"]["body_crc"] and rec.crc_ok
        assert rec.born_host == t["raw"]["born_host"] and rec.store_host == t["raw"]["store_host"]
        assert len(rec.body) == t["raw"]["stored_body_len"]
        body = decompress(rec.body, rec.sys_flag)
        assert len(body) == t["raw"]["body_len"]
        if t["raw"].get("body_truncated_by_client"):
            assert body == base64.b64decode(t["raw"]["body_b64"])
        else:
            assert body.decode() == t["body"]
        assert (rec.tags or "") == t["tags"] and " ".join(rec.keys) == t["keys"]


def test_schema_and_fast_path_agree_on_fixture(basic_store, basic_records):
    files = CommitLogReader(StorePaths.of(basic_store).commitlog).files
    for f in files:
        with ReadOnlyMap(f.path) as m:
            for pos, rec in RecordIterator(m.buf):
                oracle = record_from_schema(MessageRecordSchema.parse(m.buf[pos:pos + rec.total_size]))
                assert oracle == rec == basic_records[f.start + pos]


def test_header_scan_matches_full_decode(basic_store, basic_records):
    with CommitLogReader(StorePaths.of(basic_store).commitlog) as reader:
        seen = 0
        for f, table, end in reader.scan():
            assert end.clean
            for i, pos in enumerate(table["position"].tolist()):
                rec = basic_records[f.start + pos]
                for name in ("total_size", "queue_id", "queue_offset", "physical_offset", "sys_flag",
                             "born_timestamp", "store_timestamp", "body_crc", "reconsume_times"):
                    assert table[name][i] == getattr(rec, name), name
                assert table["body_len"][i] == len(rec.body)
                buf = reader.buffer(f)
                a, n = int(table["topic_pos"][i]), int(table["topic_len"][i])
                assert bytes(buf[a:a + n]).decode() == rec.topic
                seen += 1
    assert seen == 2371


def test_compressed_and_batch_records(basic_records):
    compressed = [r for r in basic_records.values() if r.sys_flag & 1]
    assert len(compressed) == 21
    batch = [r for r in basic_records.values() if r.topic == "TopicC" and r.queue_offset == 5 and r.queue_id == 0]
    assert len(batch) == 1 and batch[0].physical_offset == 2316404 and batch[0].total_size == 1903
    assert len(batch[0].body) == 1784 and len(decompress(batch[0].body, batch[0].sys_flag)) == 8577


def test_file_ends(basic_store):
    ends = []
    for f in CommitLogReader(StorePaths.of(basic_store).commitlog).files:
        with ReadOnlyMap(f.path) as m:
            ends.append(scan_file(m.buf)[1])
    assert [e.reason for e in ends] == ["blank", "blank", "unwritten"]
    assert ends[-1].position == 238632


def test_consume_queues_match_truth(basic_store, basic_truth):
    by_queue: dict = {}
    for t in basic_truth:
        by_queue.setdefault((t["topic"], t["queue_id"]), []).append(t)
    queues = list_queues(StorePaths.of(basic_store).consumequeue)
    assert {(q.topic, q.queue_id) for q in queues} == set(by_queue)
    for q in queues:
        units = []
        for f in queue_files(q):
            with ReadOnlyMap(f.path) as m:
                u = read_units(m.buf)
                n = valid_prefix(u)
                units += list(zip(u["offset"][:n].tolist(), u["size"][:n].tolist()))
                # the construct schema reads the same first unit as the numpy view
                if n:
                    first = CqUnitSchema.parse(m.buf[:20])
                    assert (first.offset, first.size, first.tags_code) == tuple(int(x) for x in u[0])
        want = sorted(by_queue[(q.topic, q.queue_id)], key=lambda t: t["queue_offset"])
        assert units == [(t["commit_log_offset"], t["store_size"]) for t in want]


def test_index_finds_every_key(basic_store, basic_truth):
    assert len(index_files(basic_store)) == 2
    for t in basic_truth[::7]:
        keys = t["keys"].split() + [t["properties"].get("UNIQ_KEY")]
        for key in filter(None, keys):
            res = query_by_key(basic_store, t["topic"], key, max_num=64)
            assert t["commit_log_offset"] in [off for off, _ in res.records], (t["topic"], key)


def test_index_schema_and_fast_reader_agree(basic_store):
    path = index_files(basic_store)[0]
    with ReadOnlyMap(path) as m:
        idx = IndexFile(m.buf, path)
        header = IndexHeaderSchema.parse(m.buf[:40])
        assert dict((k, v) for k, v in header.items() if k != "_io") == vars(idx.header)
        assert (idx.slot_num, idx.index_num) == (1000, 4000)
        entries = idx.entries()
        for n in (1, 2, len(entries) // 2, len(entries)):
            e = IndexEntrySchema.parse(m.buf[idx.entries_at + n * 20: idx.entries_at + n * 20 + 20])
            assert (e.key_hash, e.phy_offset, e.time_diff, e.prev_index) == tuple(int(x) for x in entries[n - 1])
            assert idx.entry(n) == tuple(int(x) for x in entries[n - 1])
        assert np.all(entries["key_hash"] >= 0)
        del entries


def test_shared_key_collects_several_messages(basic_store):
    res = query_by_key(basic_store, "TopicA", "shared-0")
    # every 7th TopicA message i has shared-<i%10>; i % 70 == 0 gives shared-0: i = 0, 70, ..., 1470
    assert len(res.records) == 22 and all("shared-0" in r.keys for _, r in res.records)


def test_checkpoint(basic_store):
    with ReadOnlyMap(StorePaths.of(basic_store).checkpoint) as m:
        cp = decode_checkpoint(m.buf)
        parsed = CheckpointSchema.parse(m.buf)
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (
        1795346630912, 1795346630912, 1795346619882)
    assert parsed.physic_msg_timestamp == cp.physic_msg_timestamp and not cp.is_5x
    assert cp.min_timestamp == 1795346630912 - 3000
    assert CheckpointSchema.build(parsed) == cp.encode()


def test_crashed_store_has_late_sends(crashed_store, crashed_sent):
    with CommitLogReader(StorePaths.of(crashed_store).commitlog) as reader:
        recs = list(reader.records(check_crc=True))
    assert len(recs) == 2671
    late = {r.properties.get("KEYS") for _, r in recs if r.properties.get("KEYS", "").startswith("A2-")}
    assert late == {s["keys"] for s in crashed_sent}


def test_index_key_hash_vectors():
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hash("TopicTest#KEY1") == 1656969516
    assert index_key_hash("TopicTest#KEY1") % 5000000 == 1969516
