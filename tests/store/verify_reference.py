"""The record-by-record `store verify` (a dict of records) that store/verify.py replaced: the
oracle its tests compare reports with. Same findings, same order; ~760 bytes of memory per record.
Only its commit log pass and its consume queue and index checks are kept here.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mqtool_store.codes import CQ_UNIT_SIZE, INT32_MAX, TRANSACTION_TYPE_MASK
from mqtool_store.consumequeue import list_queues, queue_files, read_units, valid_prefix
from mqtool_store.delaylevels import expected_tags_code, parse_delay_levels
from mqtool_store.errors import StoreError
from mqtool_store.indexfile import IndexFile
from mqtool_store.javahash import index_key_hash
from mqtool_store.layout import StorePaths
from mqtool_store.mappedfiles import ReadOnlyMap, check_sizes
from mqtool_store.query import index_files
from mqtool_store.reader import CommitLogReader
# The report, its cap and the checkpoint check are the module's own (they did not change).
from mqtool_store.verify import DISPATCHED_TX, MAX_REPORTED_PER_KIND, VerifyReport, _commitlog_min, _verify_checkpoint


@dataclass(slots=True)
class _Rec:
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    tags_code: int
    keys: tuple
    dispatched: bool
    store_timestamp: int


def verify_store(root, delay_levels: str | None = None, progress=None) -> VerifyReport:
    paths = StorePaths.of(root)
    report = VerifyReport(str(paths.root))
    levels = parse_delay_levels(delay_levels) if delay_levels else parse_delay_levels()
    records: dict[int, _Rec] = {}
    max_store_ts = 0
    if paths.commitlog.is_dir():
        with CommitLogReader(paths.commitlog, populate=True) as reader:
            for msg in check_sizes(reader.files, reader.file_size):
                report.add("commitlog", paths.commitlog, None, msg)
            for f in reader.files:
                buf = reader.buffer(f)
                from mqtool_store.logscan import RecordIterator
                it = RecordIterator(buf, 0, check_crc=False)
                for pos, rec in it:
                    off = f.start + pos
                    if not rec.crc_ok:
                        report.add("commitlog", f.path, pos, f"body CRC mismatch (stored {rec.body_crc})")
                    if rec.physical_offset != off:
                        report.add("commitlog", f.path, pos,
                                   f"PHYSICALOFFSET field says {rec.physical_offset}, record is at {off}")
                    keys = tuple(([rec.uniq_key] if rec.uniq_key else []) + rec.keys)
                    records[off] = _Rec(rec.total_size, rec.topic, rec.queue_id, rec.queue_offset,
                                        expected_tags_code(rec.topic, rec.properties, rec.store_timestamp, levels),
                                        keys, (rec.sys_flag & TRANSACTION_TYPE_MASK) in DISPATCHED_TX,
                                        rec.store_timestamp)
                    max_store_ts = max(max_store_ts, rec.store_timestamp)
                end = it.end
                if end.reason == "corrupt":
                    report.add("commitlog", f.path, end.position,
                               f"{end.invalid_bytes} invalid bytes at the end of {f.path.name} from offset "
                               f"{end.position} ({end.detail})")
                if progress:
                    progress(f.size)
    report.records = len(records)
    _verify_consume_queues(paths, records, report)
    _verify_index(paths, records, report)
    _verify_checkpoint(paths, max_store_ts, report)
    return report


def _verify_consume_queues(paths: StorePaths, records: dict[int, _Rec], report: VerifyReport) -> None:
    if not paths.consumequeue.is_dir():
        return
    cl_min = _commitlog_min(paths)
    covered: set[int] = set()
    for q in list_queues(paths.consumequeue):
        files = queue_files(q)
        for msg in check_sizes(files, None):
            report.add("consumequeue", q.path, None, msg)
        expected_next = None
        for f in files:
            with ReadOnlyMap(f.path) as m:
                units = read_units(m.buf)
                n = valid_prefix(units)
                tail = units[n:]
                if np.count_nonzero(tail["size"]) or np.count_nonzero(tail["offset"]):
                    first_bad = n + int(np.flatnonzero((tail["size"] != 0) | (tail["offset"] != 0))[0])
                    report.add("consumequeue", f.path, first_bad * CQ_UNIT_SIZE,
                               "invalid unit followed by more data (torn or overwritten queue)")
                base = f.start // CQ_UNIT_SIZE
                offs, sizes, tags = (units["offset"][:n].tolist(), units["size"][:n].tolist(),
                                     units["tags_code"][:n].tolist())
            for i in range(n):
                qoff = base + i
                off, size = offs[i], sizes[i]
                if size == INT32_MAX and off == 0:
                    continue  # fillPreBlank
                if off < cl_min:
                    continue  # its commitlog file was deleted by retention: expired, not wrong
                report.queue_units += 1
                rec = records.get(off)
                where = (f.path, i * CQ_UNIT_SIZE)
                if rec is None:
                    report.add("consumequeue", *where,
                               f"unit {qoff} points at commitlog offset {off}, where no valid record starts")
                    continue
                covered.add(off)
                wrong = []
                if rec.size != size:
                    wrong.append(f"size {size} != record {rec.size}")
                if rec.topic != q.topic or rec.queue_id != q.queue_id:
                    wrong.append(f"record belongs to {rec.topic}/{rec.queue_id}")
                if rec.queue_offset != qoff:
                    wrong.append(f"record queue offset {rec.queue_offset} != {qoff}")
                if rec.tags_code != tags[i]:
                    wrong.append(f"tags code {tags[i]} != expected {rec.tags_code}")
                if wrong:
                    report.add("consumequeue", *where, f"unit {qoff}: " + "; ".join(wrong))
                if expected_next is not None and qoff != expected_next:
                    report.add("consumequeue", *where, f"queue offset jumps from {expected_next - 1} to {qoff}")
                expected_next = qoff + 1
    missing = [(off, r) for off, r in records.items() if r.dispatched and off not in covered]
    for off, r in missing[:MAX_REPORTED_PER_KIND]:
        report.add("consumequeue", paths.consumequeue / r.topic / str(r.queue_id), None,
                   f"record at commitlog offset {off} (queue offset {r.queue_offset}) has no consume queue unit")
    if len(missing) > MAX_REPORTED_PER_KIND:
        report.suppressed["consumequeue"] = report.suppressed.get("consumequeue", 0) + len(missing) - MAX_REPORTED_PER_KIND


def _verify_index(paths: StorePaths, records: dict[int, _Rec], report: VerifyReport) -> None:
    cl_min = _commitlog_min(paths)
    for path in index_files(paths.root):
        with ReadOnlyMap(path) as m:
            try:
                idx = IndexFile(m.buf, path)
            except StoreError as exc:
                report.add("index", path, None, exc.message)
                continue
            entries = idx.entries()
            hashes, phys = entries["key_hash"].tolist(), entries["phy_offset"].tolist()
            prevs = entries["prev_index"].tolist()
            del entries
        report.index_entries += len(hashes)
        for n, (h, off, prev) in enumerate(zip(hashes, phys, prevs), start=1):
            where = (path, idx.entries_at + n * 20)
            if off < cl_min:
                continue  # expired with its commitlog file
            rec = records.get(off)
            if rec is None:
                report.add("index", *where, f"entry {n} points at commitlog offset {off}, where no valid record starts")
                continue
            if not any(index_key_hash(f"{rec.topic}#{k}") == h for k in rec.keys):
                report.add("index", *where, f"entry {n}: record at {off} carries no key with hash {h}")
            if prev < 0 or prev >= n:
                report.add("index", *where, f"entry {n}: chain link {prev} does not point at an older entry")
