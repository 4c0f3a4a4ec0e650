"""Offline consistency check of a store root: commitlog records, consume queues, index, checkpoint.

Every finding is a Problem with the file and offset; `verify_store` never writes anything.
"""
from __future__ import annotations

import time
from array import array
from dataclasses import asdict, dataclass, field

import numpy as np

from .checkpoint import decode_checkpoint, implausible_fields
from .codes import CQ_UNIT_SIZE, INT32_MAX, SCHEDULE_TOPIC, TRANSACTION_TYPE_MASK, Prop, TransactionType
from .commitlog import decode_record
from .configfiles import apply_journal, journal_entries, load_config
from .consumequeue import list_queues, queue_files, read_units, valid_prefix
from .crc import crc32
from .delaylevels import expected_tags_code, parse_delay_levels
from .errors import FormatError, StoreError
from .indexfile import IndexFile
from .indexwriter import index_key_hashes
from .javahash import tags_code
from .layout import StorePaths
from .logscan import FileEnd, HeaderScan, RecordIterator, decode_end
from .mappedfiles import ReadOnlyMap, check_sizes, list_mapped_files
from .properties import parse_properties
from .query import index_files
from .timerfiles import verify_timer
from .reader import CommitLogReader

DISPATCHED_TX = (TransactionType.TRANSACTION_NOT_TYPE, TransactionType.TRANSACTION_COMMIT_TYPE)
_DISPATCHED_CODES = np.array([int(t) for t in DISPATCHED_TX])
MAX_REPORTED_PER_KIND = 50
KEY_BATCH = 4096         # index keys hashed at once (the hash tables grow with the longest batch)
INDEX_CHUNK = 1 << 18    # index entries checked at once


@dataclass
class Problem:
    area: str          # commitlog | consumequeue | index | checkpoint | config | timer
    path: str
    offset: int | None
    message: str

    def __str__(self) -> str:
        at = f" at offset {self.offset}" if self.offset is not None else ""
        return f"{self.path}{at}: {self.message}"


@dataclass
class VerifyReport:
    root: str
    records: int = 0
    queue_units: int = 0
    index_entries: int = 0
    timer_units: int = 0       # timerlog units checked (5.x timer store)
    problems: list[Problem] = field(default_factory=list)
    suppressed: dict[str, int] = field(default_factory=dict)
    deleted_topics: list[str] = field(default_factory=list)   # records kept, queues gone: not problems

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, area: str, path, offset, message: str) -> None:
        # (once an area is suppressed it stays so: no count of its problems per finding)
        if area in self.suppressed or sum(p.area == area for p in self.problems) >= MAX_REPORTED_PER_KIND:
            self.suppressed[area] = self.suppressed.get(area, 0) + 1
            return
        self.problems.append(Problem(area, str(path), offset, message))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        return d


class _Records:
    """The commit log's valid records as columns in offset order, and their index keys as
    (record, key hash) pairs: ~120 bytes a record at peak, where a Python object per record
    took ~760 (benchmarks/store_verify.py)."""

    def __init__(self) -> None:
        self.offset, self.size, self.queue_offset, self.tags_code = (array("q") for _ in range(4))
        self.topic, self.queue_id, self.dispatched = array("i"), array("i"), array("b")
        self.topics: dict[str, int] = {}
        self.key_pairs = array("q")        # record index << 32 | index hash of one of its keys
        self._keys: list[str] = []          # keys not hashed yet, and their records
        self._key_records: list[int] = []
        self._codes: dict = {}

    def add(self, off: int, rec, levels) -> None:
        """One decoded record (the record-by-record pass)."""
        self.offset.append(off)
        self.size.append(rec.total_size)
        self.queue_id.append(rec.queue_id)
        self.queue_offset.append(rec.queue_offset)
        self.dispatched.append((rec.sys_flag & TRANSACTION_TYPE_MASK) in DISPATCHED_TX)
        self._text_fields(rec.topic, rec.properties, rec.store_timestamp, levels)

    def add_table(self, start: int, table: dict, texts, levels) -> None:
        """A header table's records (the fast pass): fixed fields column by column, then each
        record's (topic, properties, store time) from `texts`."""
        self.offset.extend((table["position"] + start).tolist())
        self.size.extend(table["total_size"].tolist())
        self.queue_id.extend(table["queue_id"].tolist())
        self.queue_offset.extend(table["queue_offset"].tolist())
        tx = table["sys_flag"] & TRANSACTION_TYPE_MASK
        self.dispatched.extend(np.isin(tx, _DISPATCHED_CODES).astype(np.int8).tolist())
        fields = self._text_fields
        for topic, props, store_ts in texts:
            fields(topic, props, store_ts, levels)

    def _text_fields(self, topic: str, props: dict, store_ts: int, levels) -> None:
        """Topic id, expected tags code and index keys of the record just added."""
        tid = self.topics.get(topic)
        if tid is None:
            tid = self.topics[topic] = len(self.topics)
        self.topic.append(tid)
        n = len(self.topic) - 1
        if topic == SCHEDULE_TOPIC:
            code = expected_tags_code(topic, props, store_ts, levels)
        else:                        # the tags' hash, remembered per distinct tags
            tags = props.get(Prop.TAGS)
            code = self._codes.get(tags)
            if code is None:
                if len(self._codes) > 10_000:
                    self._codes.clear()
                code = self._codes[tags] = tags_code(tags)
        self.tags_code.append(code)
        uniq = props.get(Prop.UNIQ_KEY)
        if uniq:
            self._keys.append(f"{topic}#{uniq}")
            self._key_records.append(n)
        for k in props.get(Prop.KEYS, "").split(" "):
            if k:
                self._keys.append(f"{topic}#{k}")
                self._key_records.append(n)
        if len(self._keys) >= KEY_BATCH:
            self._hash_keys()

    def _hash_keys(self) -> None:
        if self._keys:
            records = np.array(self._key_records, np.int64)
            self.key_pairs.extend((records << 32 | index_key_hashes(self._keys)).tolist())
            self._keys, self._key_records = [], []

    def freeze(self) -> None:
        """Columns as numpy arrays (views of the arrays, no copies); the key pairs sorted."""
        self._hash_keys()
        for name in ("offset", "size", "queue_offset", "tags_code", "topic", "queue_id", "dispatched"):
            setattr(self, name, np.frombuffer(getattr(self, name), getattr(self, name).typecode)
                    if len(getattr(self, name)) else np.zeros(0, np.int64))
        self.key_pairs = np.sort(np.frombuffer(self.key_pairs, np.int64)) if len(self.key_pairs) else \
            np.zeros(0, np.int64)

    def find(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(record index, whether a record starts there) for each commit log offset."""
        return _lookup(self.offset, offsets)

    def has_key(self, index: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Whether record index[j] carries a key whose index hash is hashes[j]."""
        return _lookup(self.key_pairs, index.astype(np.int64) << 32 | hashes.astype(np.int64))[1]


def _lookup(table: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in the sorted `table`, whether it holds the value) for each value."""
    if not len(table):
        return np.zeros(len(values), np.int64), np.zeros(len(values), bool)
    i = np.minimum(np.searchsorted(table, values), len(table) - 1)
    return i, table[i] == values


def verify_store(root, delay_levels: str | None = None, progress=None) -> VerifyReport:
    paths = StorePaths.of(root)
    report = VerifyReport(str(paths.root))
    levels = parse_delay_levels(delay_levels) if delay_levels else parse_delay_levels()
    records = _Records()
    max_store_ts = 0
    if paths.commitlog.is_dir():
        with CommitLogReader(paths.commitlog, populate=True) as reader:
            for msg in check_sizes(reader.files, reader.file_size):
                report.add("commitlog", paths.commitlog, None, msg)
            for f in reader.files:
                buf, ranges = reader.buffer(f), reader.data_ranges(f)
                end = _fast_end(buf, ranges)
                shown = 0
                if end is None:        # the header scan and a full decode part ways: decode it all
                    file_ts, end = _decode_file(buf, f, records, levels, report, ranges)
                else:
                    file_ts, shown = _scan_file(buf, f, records, levels, report, progress, ranges)
                max_store_ts = max(max_store_ts, file_ts)
                if end.reason == "corrupt":
                    report.add("commitlog", f.path, end.position,
                               f"{end.invalid_bytes} invalid bytes at the end of {f.path.name} from offset "
                               f"{end.position} ({end.detail})")
                if progress:
                    progress(f.size - shown)
    records.freeze()
    report.records = len(records.offset)
    _verify_consume_queues(paths, records, report)
    _verify_index(paths, records, report)
    _verify_checkpoint(paths, max_store_ts, report)
    report.timer_units = verify_timer(paths.root, records, report, _commitlog_min(paths))
    return report


def _fast_end(buf, ranges=None) -> FileEnd | None:
    """Where a record-by-record decode of the file would stop, and why, when the header scan
    stops at the same record (it always has on every store tried; None otherwise). `ranges`:
    the file's data ranges (the holes are not read)."""
    scan = HeaderScan(buf, ranges=ranges)
    stop = 0
    for table in scan:
        stop = int(table["position"][-1] + table["total_size"][-1])
    detail = ""
    if stop + 8 <= len(buf):
        try:
            decode_record(buf, stop, len(buf))
            return None                # a record the header checks refused decodes
        except FormatError as exc:
            detail = exc.message
    return decode_end(buf, stop, len(buf), detail, ranges)


def _check_record(report: VerifyReport, f, pos: int, crc_ok: bool, stored_crc: int, phys: int) -> None:
    if not crc_ok:
        report.add("commitlog", f.path, pos, f"body CRC mismatch (stored {stored_crc})")
    if phys != f.start + pos:
        report.add("commitlog", f.path, pos, f"PHYSICALOFFSET field says {phys}, record is at {f.start + pos}")


def _decode_file(buf, f, records: _Records, levels, report: VerifyReport, ranges=None) -> tuple[int, FileEnd]:
    """Every record fully decoded, one by one: (newest store time, where the records end)."""
    newest = 0
    it = RecordIterator(buf, 0, check_crc=False, ranges=ranges)
    for pos, rec in it:
        _check_record(report, f, pos, rec.crc_ok, rec.body_crc, rec.physical_offset)
        records.add(f.start + pos, rec, levels)
        newest = max(newest, rec.store_timestamp)
    return newest, it.end


def _scan_file(buf, f, records: _Records, levels, report: VerifyReport, progress=None,
               ranges=None) -> tuple[int, int]:
    """The records of a file from header tables (64k records each): CRCs and offsets checked
    column-wise, topic and properties decoded per record as decode_record does. Returns the
    newest store time and the bytes told to `progress` (a table's worth at a time)."""
    newest = shown = 0
    topics: dict[bytes, str] = {}
    with memoryview(buf) as mv:
        for t in HeaderScan(buf, ranges=ranges):
            n = len(t["position"])
            bodies = (mv[p:p + k] for p, k in zip(t["body_pos"].tolist(), t["body_len"].tolist()))
            crc_ok = (np.fromiter(map(crc32, bodies), np.int64, n) & 0x7FFFFFFF) == t["body_crc"]
            phys_ok = t["physical_offset"] == t["position"] + f.start
            for i in np.flatnonzero(~(crc_ok & phys_ok)).tolist():
                _check_record(report, f, int(t["position"][i]), bool(crc_ok[i]), int(t["body_crc"][i]),
                              int(t["physical_offset"][i]))
            stamps = t["store_timestamp"]
            newest = max(newest, int(stamps.max()))
            records.add_table(f.start, t, _texts(mv, t, topics), levels)
            if progress:
                covered = int(t["position"][-1] + t["total_size"][-1])
                progress(covered - shown)
                shown = covered
    return newest, shown


def _texts(mv, t: dict, topics: dict):
    """(topic, properties, store time) of each record of a header table, as decode_record reads
    them (one at a time: a chunk's parsed properties are never all held)."""
    for tp, tl, pp, pl, ts in zip(t["topic_pos"].tolist(), t["topic_len"].tolist(), t["props_pos"].tolist(),
                                  t["props_len"].tolist(), t["store_timestamp"].tolist()):
        raw = bytes(mv[tp:tp + tl])
        topic = topics.get(raw)
        if topic is None:
            topic = topics[raw] = raw.decode("utf-8", "replace")
        yield topic, parse_properties(bytes(mv[pp:pp + pl]).decode("utf-8", "replace")), ts


def _commitlog_min(paths: StorePaths) -> int:
    files = list_mapped_files(paths.commitlog) if paths.commitlog.is_dir() else []
    return files[0].start if files else 0


def _verify_consume_queues(paths: StorePaths, records: _Records, report: VerifyReport) -> None:
    """Every unit against the record it points at, a queue file at a time: the comparisons are
    vectorised, and only units with a finding are visited in Python (in unit order)."""
    if not paths.consumequeue.is_dir():
        return
    cl_min = _commitlog_min(paths)
    covered = np.zeros(len(records.offset), bool)
    for q in list_queues(paths.consumequeue):
        files = queue_files(q)
        for msg in check_sizes(files, None):
            report.add("consumequeue", q.path, None, msg)
        tid = records.topics.get(q.topic, -1)
        last = None          # queue offset of the last unit whose record was found
        for f in files:
            with ReadOnlyMap(f.path) as m:
                units = read_units(m.buf)
                n = valid_prefix(units)
                tail = units[n:]
                if np.count_nonzero(tail["size"]) or np.count_nonzero(tail["offset"]):
                    first_bad = n + int(np.flatnonzero((tail["size"] != 0) | (tail["offset"] != 0))[0])
                    report.add("consumequeue", f.path, first_bad * CQ_UNIT_SIZE,
                               "invalid unit followed by more data (torn or overwritten queue)")
                offs = units["offset"][:n].astype(np.int64)
                sizes = units["size"][:n].astype(np.int64)
                tags = units["tags_code"][:n].astype(np.int64)
            base = f.start // CQ_UNIT_SIZE
            counted = ~((sizes == INT32_MAX) & (offs == 0)) & (offs >= cl_min)   # not fillPreBlank, not expired
            report.queue_units += int(np.count_nonzero(counted))
            idx, found = records.find(offs)
            found &= counted
            covered[idx[found]] = True
            qoffs = base + np.arange(n, dtype=np.int64)
            at = np.flatnonzero(found)
            r = idx[at]
            wrong = np.zeros(n, bool)
            wrong[at] = ((records.size[r] != sizes[at]) | (records.topic[r] != tid) | (records.queue_id[r] != q.queue_id)
                         | (records.queue_offset[r] != qoffs[at]) | (records.tags_code[r] != tags[at]))
            # a jump: a found unit whose queue offset is not the last found one's + 1
            prev = np.empty(len(at), np.int64)
            prev[1:] = qoffs[at[:-1]]
            prev[:1] = -1 if last is None else last
            jumps = np.zeros(n, bool)
            jumps[at] = qoffs[at] != prev + 1
            if last is None and len(at):
                jumps[at[0]] = False
            if len(at):
                last = int(qoffs[at[-1]])

            def emit(i, f=f, base=base, offs=offs, found=found, wrong=wrong, jumps=jumps, idx=idx, sizes=sizes,
                     tags=tags, at=at, prev=prev):
                qoff = base + i
                where = (f.path, i * CQ_UNIT_SIZE)
                if not found[i]:
                    report.add("consumequeue", *where,
                               f"unit {qoff} points at commitlog offset {int(offs[i])}, where no valid record starts")
                    return
                if wrong[i]:
                    report.add("consumequeue", *where, f"unit {qoff}: " + "; ".join(_unit_differences(
                        records, int(idx[i]), int(sizes[i]), q, qoff, int(tags[i]))))
                if jumps[i]:
                    report.add("consumequeue", *where,
                               f"queue offset jumps from {int(prev[np.searchsorted(at, i)])} to {qoff}")
            rows = np.flatnonzero((counted & ~found) | wrong | jumps)
            _report_rows(report, "consumequeue", rows, np.where(found[rows], wrong[rows] + jumps[rows].astype(int), 1),
                         emit)
    names = list(records.topics)
    deleted = _deleted_topics(paths, names)
    report.deleted_topics = sorted(deleted)
    expected = records.dispatched.astype(bool)
    if deleted:
        expected &= ~np.isin(records.topic, [records.topics[t] for t in deleted])
    missing = np.flatnonzero(expected & ~covered)
    for r in missing[:MAX_REPORTED_PER_KIND].tolist():
        topic, queue_id = names[records.topic[r]], int(records.queue_id[r])
        report.add("consumequeue", paths.consumequeue / topic / str(queue_id), None,
                   f"record at commitlog offset {int(records.offset[r])} (queue offset "
                   f"{int(records.queue_offset[r])}) has no consume queue unit")
    if len(missing) > MAX_REPORTED_PER_KIND:
        report.suppressed["consumequeue"] = report.suppressed.get("consumequeue", 0) + len(missing) - MAX_REPORTED_PER_KIND


def _deleted_topics(paths: StorePaths, names: list[str]) -> set[str]:
    """Topics of the commit log that the broker deleted: not in config/topics.json (with its
    journal) and without a consume queue directory. A topic delete removes the queues and the
    config entry, never the records (as 4.9.8), so their records having no unit is expected.
    Without a topics.json nothing is known deleted."""
    topics_json = paths.config / "topics.json"
    loaded = load_config(topics_json)
    if loaded.warnings and not loaded.data:
        return set()                           # no config to go by (a bare commit log copy)
    table = apply_journal(loaded.data, "topicConfigTable", journal_entries(topics_json)).get("topicConfigTable") or {}
    return {t for t in names if t not in table and not (paths.consumequeue / t).is_dir()}


def _unit_differences(records: _Records, r: int, size: int, q, qoff: int, tags: int) -> list[str]:
    wrong = []
    if records.size[r] != size:
        wrong.append(f"size {size} != record {int(records.size[r])}")
    topic = list(records.topics)[records.topic[r]]
    if topic != q.topic or records.queue_id[r] != q.queue_id:
        wrong.append(f"record belongs to {topic}/{int(records.queue_id[r])}")
    if records.queue_offset[r] != qoff:
        wrong.append(f"record queue offset {int(records.queue_offset[r])} != {qoff}")
    if records.tags_code[r] != tags:
        wrong.append(f"tags code {tags} != expected {int(records.tags_code[r])}")
    return wrong


def _verify_index(paths: StorePaths, records: _Records, report: VerifyReport) -> None:
    cl_min = _commitlog_min(paths)
    for path in index_files(paths.root):
        with ReadOnlyMap(path) as m:
            try:
                idx = IndexFile(m.buf, path)
            except StoreError as exc:
                report.add("index", path, None, exc.message)
                continue
            entries = idx.entries()
            report.index_entries += len(entries)
            for lo in range(0, len(entries), INDEX_CHUNK):      # the arrays below stay small
                _check_entries(entries[lo:lo + INDEX_CHUNK], lo, path, idx.entries_at, cl_min, records, report)
            del entries


def _check_entries(entries, lo: int, path, entries_at: int, cl_min: int, records: _Records,
                   report: VerifyReport) -> None:
    """Index entries lo+1.. (numbered from 1, as putKey counts) against the records."""
    hashes = entries["key_hash"].astype(np.int64)
    phys = entries["phy_offset"].astype(np.int64)
    prevs = entries["prev_index"].astype(np.int64)
    numbers = np.arange(lo + 1, lo + len(hashes) + 1, dtype=np.int64)
    at, found = records.find(phys)
    live = phys >= cl_min                       # older ones expired with their commitlog file
    no_record = live & ~found
    known = np.flatnonzero(live & found)
    no_key = np.zeros(len(hashes), bool)
    no_key[known] = ~records.has_key(at[known], hashes[known])
    bad_link = live & found & ((prevs < 0) | (prevs >= numbers))

    def emit(j):
        n = int(numbers[j])
        where = (path, entries_at + n * 20)
        off = int(phys[j])
        if no_record[j]:
            report.add("index", *where, f"entry {n} points at commitlog offset {off}, where no valid record starts")
            return
        if no_key[j]:
            report.add("index", *where, f"entry {n}: record at {off} carries no key with hash {int(hashes[j])}")
        if bad_link[j]:
            report.add("index", *where, f"entry {n}: chain link {int(prevs[j])} does not point at an older entry")
    rows = np.flatnonzero(no_record | no_key | bad_link)
    _report_rows(report, "index", rows, np.where(no_record[rows], 1, no_key[rows] + bad_link[rows].astype(int)), emit)


def _report_rows(report: VerifyReport, area: str, rows: np.ndarray, counts: np.ndarray, emit) -> None:
    """emit(row) for each row with findings, in order, until the area is suppressed; then only
    count the findings left (`counts`: how many each row has), as report.add would."""
    for k, row in enumerate(rows.tolist()):
        if area in report.suppressed:
            report.suppressed[area] += int(counts[k:].sum())
            return
        emit(row)


def _verify_checkpoint(paths: StorePaths, max_store_ts: int, report: VerifyReport) -> None:
    if not paths.checkpoint.is_file():
        return
    with ReadOnlyMap(paths.checkpoint) as m:
        try:
            cp = decode_checkpoint(m.buf, paths.checkpoint)
        except FormatError as exc:
            report.add("checkpoint", paths.checkpoint, None, exc.message)
            return
    bad = implausible_fields(cp, int(time.time() * 1000))
    for _, why in bad:
        report.add("checkpoint", paths.checkpoint, None, why)
    flagged = {why.split(" ", 1)[0] for _, why in bad}
    for name in ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp"):
        value = getattr(cp, name)
        if name not in flagged and max_store_ts and value > max_store_ts:
            report.add("checkpoint", paths.checkpoint, None,
                       f"{name} {value} is later than the newest record ({max_store_ts}): "
                       "abnormal recovery would start too late")
