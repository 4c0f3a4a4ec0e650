"""`store dump --json` of commitlog records: JSON lines written straight from the bytes.

The reference is `dump.dump_commitlog` + `dump.record_row` + the CLI's JSON encoder (one dict
per record, `json.dumps(row, ensure_ascii=False)`): ~30k records/s. Without filters, runs of
plain records (4.x magic code, IPv4 hosts, uncompressed body, non-negative offset, plain
properties of one key layout) are written many at once by store/dumpcols.py; a plain record
outside such a run becomes its line in one f-string, with everything that repeats (file,
topic, hosts, sysflag names) encoded once and cached (store/dumplines.py). The filters are row
masks over each run's header table (`_selector`): topic, queue and time compared in the table;
tag and key by a byte search over the run's properties, then an exact check of the records that
hold the bytes; the records they drop are skipped unread. Unfiltered `--body none` goes through
the store kernel first where it is built (csrc/dumplines.c: each plain record's line in C). Any other record, damage and stops go
through the reference code, so the output is the reference's byte for byte
(tests/store/test_dumpjson.py holds them equal).
"""
from __future__ import annotations

import struct
from typing import Callable, Iterator

import numpy as np

from .codes import MSG_FIXED_SIZE_V4, SysFlag
from .commitlog import BORN_V6, MESSAGE_MAGIC, STORE_V6, decode_record
from .crc import crc32
from .dump import Filters, _stop_row, record_row
from .errors import FormatError
from .dumpcols import ColumnWriter, encode_str, keys_json as _keys_json
from .dumplines import LineParts, _bound
from .kernel import kernel
from .logscan import _every_offset, decode_end, header_table, walk_array
from .properties import parse_properties
from .reader import CommitLogReader

BODY_MODES = ("text", "hex", "base64", "none")
_FIXED_V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
_SLOW_FLAGS = BORN_V6 | STORE_V6 | int(SysFlag.COMPRESSED_FLAG)
# Properties bytes are plain when they are key 0x01 value (0x02 key 0x01 value)*, keys and values
# not empty and without a character json.dumps(ensure_ascii=False) escapes (control characters,
# '"', '\\'): deleting every other byte must leave 0x01 (0x02 0x01)*. (UTF-8 decoding never
# takes an ASCII byte into a replacement character, so the text has the same structure.)
_PLAIN_BYTES = bytes(b for b in range(256) if b >= 0x20 and b not in b'"\\')
_SEPARATORS = frozenset(b"\x01" + b"\x02\x01" * k for k in range(256))
_CHUNK = 2000          # lines per write
_COLUMN_CHUNK = 2048   # records per ColumnWriter.lines call
_FIRST_SPAN = 64 << 10   # bytes walked for the first column run of a file (a small --limit stays cheap)
_MAX_SPAN = 4 << 20
_RETRY_SPAN = 16 << 10  # bytes walked for a column run after one that took nothing
_MOST_SINGLES_LOG2 = 6  # at most 64 records one by one between two column runs
# Records per call of the store kernel's writer: ~90 KB of lines, under glibc's first mmap threshold
# (128 KiB), so the str and its encoded bytes come from the heap and are reused; ~0.5 MB a call had a
# fresh process map and fault in new pages for each (0.46 against 0.06 s of system time on 256 MiB).
_COMPILED_CHUNK = 100


def commitlog_json(reader: CommitLogReader, f: Filters, body_mode: str, cap: int | None,
                   encode_row: Callable[[dict], str], as_bytes: bool = False) -> Iterator[str | bytes | dict]:
    """What `dump_commitlog` yields, with each message row already a JSON line.

    Yields text (whole lines, many at a time) and stop rows (dicts), in the reference's order.
    `encode_row(row)` turns a reference row into its line (the CLI's own rendering), for the
    records the fast path leaves to the reference. With `as_bytes` the store kernel's lines come
    as their UTF-8 bytes (for a binary output: no str built and encoded again); the rest stays str.
    """
    if body_mode not in BODY_MODES:
        raise ValueError(f"body mode {body_mode!r}")
    fmt = LineParts(body_mode, cap)
    lines: list[str] = []
    ends: list = []
    count = 0
    limit_n = f.limit if f.limit is not None else 1 << 62
    to_offset = f.to_offset
    start_from = f.from_offset or 0
    filtered = any(v is not None for v in (f.topic, f.queue, f.key, f.tag, f.since, f.until))
    select = _selector(f) if filtered else None
    unpack = _FIXED_V4.unpack_from
    topics, hosts, shapes = fmt.topic_parts, fmt.hosts, fmt.shapes
    body_none = body_mode == "none"
    colw = ColumnWriter(fmt)
    columns = not filtered or select is not None
    singles = misses = 0
    # Unfiltered --body none: the store kernel writes plain records' lines in one C pass each
    # (csrc/dumplines.c, the same bytes); the record it stops at goes on below.
    compiled = kernel.dump_lines if kernel is not None and body_none and not filtered else None
    sysflags: dict[int, str] = {}
    tail_none = ', "body_note": null, "body": null, "body_truncated": false, "body_encoding": "none"}\n'
    for mf in reader.files:
        if mf.end <= start_from:
            continue
        pos = reader._align(mf, start_from - mf.start) if start_from > mf.start else 0
        buf = reader.buffer(mf)
        end = len(buf)
        base = mf.start
        name = mf.path.name
        head = '{"kind": "message", "file": ' + encode_str(name) + ', "commitlog_offset": '
        span = _FIRST_SPAN
        detail = ""
        stop = end if to_offset is None else min(end, to_offset - base)
        while pos + 8 <= end:
            if compiled is not None and singles <= 0 and count < limit_n:
                text, n, nxt = compiled(buf, pos, end, stop, min(limit_n - count, _COMPILED_CHUNK), base, head,
                                        sysflags, as_bytes)
                if n:
                    if ends or lines:
                        yield from _flushed(lines, ends)
                        lines, ends = [], []
                    yield text
                    count += n
                    pos = nxt
                    misses = 0
                    if count >= limit_n:
                        return
                    continue
                if _learned_sysflag(buf, pos, end, sysflags, fmt):
                    continue                # a sysflag the kernel had no text for: again with it
            if columns and singles <= 0 and count < limit_n and (to_offset is None or base + pos < to_offset):
                # Many records at once (dumpcols); what it leaves goes record by record below.
                texts, n, nxt, span = _column_run(colw, buf, pos, end, span, base, head, to_offset, limit_n - count,
                                                  select)
                if nxt != pos:             # records written, or records the filters skip
                    pos = nxt
                    misses = 0
                    if ends or lines:
                        yield from _flushed(lines, ends)
                        lines, ends = [], []
                    yield from texts
                    count += n
                    if count >= limit_n:
                        return
                    continue
                # Records it leaves go one by one; after repeated misses, more of them each time.
                misses += 1
                singles = max(colw.odd, 1 << min(misses - 1, _MOST_SINGLES_LOG2))
            singles -= 1
            try:
                (size, magic, crc, qid, flag, qoff, phys, sf, bts, bip, bport, sts, sip, sport, rt, pto,
                 blen) = unpack(buf, pos)
            except struct.error:
                magic = 0
            rec_end = pos + size if magic == MESSAGE_MAGIC else 0
            if (magic == MESSAGE_MAGIC and not sf & _SLOW_FLAGS and MSG_FIXED_SIZE_V4 <= size
                    and rec_end <= end and blen >= 0 and phys >= 0):
                te = pos + 88 + blen               # the topic length byte
                tl = buf[te] if te < rec_end else 255
                pl = te + 1 + tl                   # the properties length
                if tl < 128 and pl + 2 <= rec_end and buf[pl] < 128 and pl + 2 + (buf[pl] << 8 | buf[pl + 1]) == rec_end:
                    topic_raw = buf[te + 1:pl]
                    raw = buf[pl + 2:rec_end]
                    text = raw.decode("utf-8", "replace")
                    # Well-formed properties with nothing to escape (the usual case) are their own
                    # JSON; anything else is parsed and encoded by the reference functions.
                    shape = None
                    if raw and raw.translate(None, _PLAIN_BYTES) in _SEPARATORS and raw[0] != 1 and raw[-1] != 1 \
                            and b"\x01\x02" not in raw and b"\x02\x01" not in raw:
                        flat = text.replace("\x02", "\x01").split("\x01")
                        names = tuple(flat[0::2])
                        shape = shapes.get(names) or fmt.shape(names)
                        if shape[0]:
                            values = flat[1::2]
                        else:
                            shape = None           # a key twice: the reference keeps the last
                    if shape is None:
                        props = parse_properties(text)
                    if ends:
                        yield from _flushed(lines, ends)
                        lines, ends = [], []
                    if to_offset is not None and base + pos >= to_offset:
                        if lines:
                            yield "".join(lines)
                        return
                    if filtered:
                        if shape is not None:
                            props = dict(zip(names, values))
                        if not _matches(f, fmt.topic(topic_raw)[0], qid, props, sts):
                            pos = rec_end
                            continue
                    body = buf[pos + 88:te]
                    t = topics.get((topic_raw, qid)) or fmt.topic_part(topic_raw, qid)
                    h = hosts.get((flag, sf, bip, bport, sip, sport, rt, pto)) or fmt.hosts_part(
                        flag, sf, bip, bport, sip, sport, rt, pto)
                    if shape is not None:
                        _, ti, ki, ui = shape
                        props_json = '{"' + text.replace("\x01", '": "').replace("\x02", '", "') + '"}'
                        if ki is None:
                            keys_json = "[]"
                        else:
                            keys_json = values[ki]
                            keys_json = _keys_json(keys_json) if " " in keys_json else f'["{keys_json}"]'
                        tail = (f'{"null" if ti is None else f"{chr(34)}{values[ti]}{chr(34)}"}, "keys": {keys_json}, '
                                f'"uniq_key": {"null" if ui is None else f"{chr(34)}{values[ui]}{chr(34)}"}')
                    else:
                        props_json, tail = fmt.props_parts(props)
                    line = (f'{head}{base + pos}, "store_size": {size}, {t}{qoff}, "physical_offset": {phys}, '
                            f'"flag": {h[0]}{bts}{h[1]}{sts}{h[2]}{crc}, '
                            f'"crc_ok": {"true" if crc32(body) & 0x7FFFFFFF == crc else "false"}, '
                            f'"stored_body_len": {blen}, "body_len": {blen}, "tags": {tail}, "msg_id": "{h[3]}'
                            f'{phys:016X}", "properties": {props_json}'
                            f'{tail_none if body_none else fmt.body_tail(body)}')
                    lines.append(line)
                    count += 1
                    if count >= limit_n:
                        yield "".join(lines)
                        return
                    if len(lines) >= _CHUNK:
                        yield "".join(lines)
                        lines = []
                    pos = rec_end
                    continue
            # The reference decode, for anything else.
            try:
                rec = decode_record(buf, pos, end)
            except FormatError as exc:
                detail = exc.message
                break
            size = rec.total_size
            if ends:
                yield from _flushed(lines, ends)
                lines, ends = [], []
            if to_offset is not None and base + pos >= to_offset:
                if lines:
                    yield "".join(lines)
                return
            if not f.record_matches(base + pos, rec):
                pos += size
                continue
            lines.append(encode_row(record_row(base + pos, rec, name)))
            count += 1
            if count >= limit_n:
                yield "".join(lines)
                return
            if len(lines) >= _CHUNK:
                yield "".join(lines)
                lines = []
            pos += size
        ends.append((mf, decode_end(buf, pos, end, detail)))
    if lines:
        yield "".join(lines)
    for e in ends:
        yield _stop_row(*e)


def _learned_sysflag(buf, pos: int, end: int, texts: dict[int, str], fmt: LineParts) -> bool:
    """Whether the record at pos has a sysflag `texts` did not have (now added)."""
    if pos + 40 > end:
        return False
    sf = struct.unpack_from(">i", buf, pos + 36)[0]
    if sf in texts:
        return False
    _bound(texts)
    texts[sf] = fmt.flags_text(sf)
    return True


def _column_run(colw: ColumnWriter, buf, pos: int, end: int, span: int, base: int, head: str,
                to_offset: int | None, most: int, select=None) -> tuple[list[str], int, int, int]:
    """(lines in chunks, how many, where the next record starts, the next window) for the records from
    `pos` that the column writer takes, walking a window of `span` bytes. With `select` (a row mask
    of the topic, queue and time filters, `_selector`) only the selected records are written and the
    others skipped; the next record is then the first selected one the writer did not take."""
    first = _FIXED_V4.unpack_from(buf, pos)[0] if pos + 88 <= end else 0
    positions, _ = walk_array(buf, pos, min(end, pos + max(span, first)))   # at least one record
    if to_offset is not None and len(positions) and int(positions[-1]) + base >= to_offset:
        positions = positions[:int(np.searchsorted(positions, to_offset - base))]
    if select is None:
        positions = positions[:most]
    table, n_valid = header_table(buf, positions, end)
    if select is not None:
        return _selected_run(colw, buf, base, head, table, n_valid, most, select, pos, span)
    texts, taken = _write_rows(colw, buf, base, head, table, n_valid)
    if taken == 0:
        return texts, 0, pos, _RETRY_SPAN
    last = taken - 1
    nxt = int(positions[last]) + int(table["total_size"][last])
    return texts, taken, nxt, min(span * 2, _MAX_SPAN) if taken == len(positions) else span


def _write_rows(colw: ColumnWriter, buf, base: int, head: str, table: dict, count: int) -> tuple[list[str], int]:
    """(lines in chunks of _COLUMN_CHUNK records, how many) for the longest prefix of the first
    `count` rows of `table` that the column writer takes."""
    texts = []
    taken = 0
    while taken < count:
        n = min(_COLUMN_CHUNK, count - taken)
        part = {k: v[taken:taken + n] for k, v in table.items()} if taken or n < count else table
        text, k = colw.lines(buf, base, head, part, n)
        if k:
            texts.append(text)
            taken += k
        if k < n:
            break
    return texts, taken


def _selected_run(colw: ColumnWriter, buf, base: int, head: str, table: dict, n_valid: int, most: int, select,
                  pos: int, span: int) -> tuple[list[str], int, int, int]:
    """_column_run's result for the rows of `table` that `select` keeps (the first `most` of them)."""
    if n_valid == 0:
        return [], 0, pos, _RETRY_SPAN
    rows = np.flatnonzero(select(buf, table, n_valid))
    limited = len(rows) > most
    rows = rows[:most]
    after_walk = int(table["position"][n_valid - 1]) + int(table["total_size"][n_valid - 1])
    if not len(rows):
        return [], 0, after_walk, min(span * 2, _MAX_SPAN)
    part = {k: v[rows] for k, v in table.items()}
    texts, taken = _write_rows(colw, buf, base, head, part, len(rows))
    if taken < len(rows):          # the record-by-record path goes on from the first one not taken
        return texts, taken, int(part["position"][taken]), span
    if limited:
        return texts, taken, int(part["position"][taken - 1]) + int(part["total_size"][taken - 1]), span
    return texts, taken, after_walk, min(span * 2, _MAX_SPAN)


def _selector(f: Filters):
    """A row mask over a header table for the filters, or None (record by record).

    Topic, queue and time are compared in the table. Tags and keys are found by byte searches
    over the run's properties: a record whose properties hold one "TAGS\x01" piece is decided
    there (its value is the tag or not); the others that may match (more than one TAGS piece, or
    the key's bytes somewhere) are parsed and checked exactly. A topic, tag or key with U+FFFD
    goes record by record (it may match bytes that are not UTF-8)."""
    if any("\ufffd" in v for v in (f.topic, f.tag, f.key) if v is not None):
        return None
    topic = f.topic.encode() if f.topic is not None else None
    tag = f.tag.encode() if f.tag is not None else None
    key = f.key.encode() if f.key is not None else None

    def select(buf, t: dict, n: int) -> np.ndarray:
        keep = np.ones(n, bool)
        if f.queue is not None:
            keep &= t["queue_id"][:n] == f.queue
        if f.since is not None:
            keep &= t["store_timestamp"][:n] >= f.since
        if f.until is not None:
            keep &= t["store_timestamp"][:n] <= f.until
        if topic is not None:
            keep &= t["topic_len"][:n] == len(topic)
            rows = np.flatnonzero(keep)
            if len(topic) and len(rows):
                raw = _every_offset(buf, f"S{len(topic)}")[t["topic_pos"][rows]].view(np.uint8)
                keep[rows] = (raw.reshape(len(rows), len(topic)) == np.frombuffer(topic, np.uint8)).all(axis=1)
        unsure = np.zeros(n, bool)          # rows only a parse of their properties can decide
        if tag is not None:
            rows = np.flatnonzero(keep)
            decided, holds = _tag_pieces(buf, tag, t["props_pos"][rows], t["props_len"][rows])
            keep[rows] = holds | ~decided
            unsure[rows] = ~decided
        if key is not None:
            rows = np.flatnonzero(keep)
            keep[rows] = _holding(buf, key, t["props_pos"][rows], t["props_len"][rows])
            unsure[rows] = True
        for r in np.flatnonzero(keep & unsure).tolist():
            at, size = int(t["props_pos"][r]), int(t["props_len"][r])
            keep[r] = _tag_and_key_match(f, parse_properties(bytes(buf[at:at + size]).decode("utf-8", "replace")))
        return keep
    return select


_TAGS_PIECE = b"TAGS\x01"


def _tag_pieces(buf, tag: bytes, starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(decided, holds) per properties range [start, start + size): where "TAGS\x01" appears at
    most once the answer is certain (none: no TAGS; once: the piece's value is the tag or not),
    and `holds` says whether the record's TAGS is `tag`. Elsewhere a parse decides."""
    k = len(starts)
    decided, holds = np.zeros(k, bool), np.zeros(k, bool)
    if not k:
        return decided, holds
    ends = starts + sizes
    at, row = _inside(buf, _TAGS_PIECE, starts, ends)
    count = np.bincount(row, minlength=k)
    # no record's TAGS is empty or holds 0x02: for such a tag the in-place check below does not
    # apply, and the parse answers (no) wherever a TAGS piece appears
    decided[:] = count == 0 if b"\x02" in tag or not tag else count <= 1
    once = count[row] == 1
    at, row = at[once], row[once]
    arr = np.frombuffer(buf, np.uint8)
    piece_start = (at == starts[row]) | (arr[np.maximum(at - 1, 0)] == 2)
    value_end = at + len(_TAGS_PIECE) + len(tag)
    fits = value_end <= ends[row]
    value = _every_offset(buf, f"S{len(tag)}")[np.where(fits, at + len(_TAGS_PIECE), 0)] if tag else None
    same = fits & (value == tag if tag else True)
    closed = (value_end == ends[row]) | (arr[np.minimum(value_end, len(arr) - 1)] == 2)
    holds[row] = piece_start & same & closed
    holds &= decided
    return decided, holds


def _inside(buf, needle: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(where, which range) for every occurrence of `needle` wholly inside one of the ranges
    [starts[i], ends[i]) (ascending, apart), found by one vectorised search over their span."""
    arr = np.frombuffer(buf, np.uint8)
    lo, hi = int(starts[0]), int(ends[-1])
    m = len(needle)
    seg = arr[lo:hi]
    at = np.flatnonzero(seg[:max(len(seg) - m + 1, 0)] == needle[0]) if m else np.zeros(0, np.int64)
    for j in range(1, m):
        at = at[seg[at + j] == needle[j]]
    at = at + lo
    row = np.searchsorted(starts, at, side="right") - 1
    ok = (row >= 0) & (at + m <= ends[np.maximum(row, 0)])
    return at[ok], row[ok]


def _holding(buf, needle: bytes, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Which of the byte ranges [start, start + size) (ascending, apart) hold `needle`."""
    held = np.zeros(len(starts), bool)
    if len(starts) and len(needle):
        held[_inside(buf, needle, starts, starts + sizes)[1]] = True
    elif len(starts):
        held[:] = True
    return held


def _tag_and_key_match(f: Filters, props: dict) -> bool:
    """Filters.record_matches' tag and key tests on a record's properties."""
    if f.tag is not None and props.get("TAGS") != f.tag:
        return False
    if f.key is not None:
        keys = [k for k in props.get("KEYS", "").split(" ") if k]
        if f.key not in keys and props.get("UNIQ_KEY") != f.key:
            return False
    return True


def _matches(f: Filters, topic: str, qid: int, props: dict, store_ts: int) -> bool:
    """Filters.record_matches on the fields the fast path has at hand."""
    if f.topic is not None and topic != f.topic:
        return False
    if f.queue is not None and qid != f.queue:
        return False
    if not _tag_and_key_match(f, props):
        return False
    if f.since is not None and store_ts < f.since:
        return False
    if f.until is not None and store_ts > f.until:
        return False
    return True


def _flushed(lines: list[str], ends: list):
    """The lines made so far as one text, then the stop rows noted after them (the caller empties both)."""
    if lines:
        yield "".join(lines)
    for e in ends:
        yield _stop_row(*e)
