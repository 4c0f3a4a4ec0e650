"""The export's fast decoder: a split's selected records as Arrow columns, built vectorised.

Fixed fields come from `store.logscan.header_table` as they are; variable fields (body, topic,
hosts, msg id, properties) are gathered with numpy into Arrow buffers through offsets, and
repeated strings (topics, hosts) are decoded once per distinct value. Only the body CRC check
and inflating compressed bodies run per record. `reference.reference_batches` (one `decode_record`
per record) is the reference: tests hold the two to the same rows. A batch whose properties the
vectorised rules do not cover (a key twice in one record, text that is not UTF-8) is decoded
by the reference instead.
"""
from __future__ import annotations

import time

import numpy as np

from mqtool.spark.reference import reference_batches
from mqtool.spark.selection import Selection, topic_index
from mqtool.spark.source import HEADER_CHUNK, Split, open_range
from mqtool_store.commitlog import BORN_V6, STORE_V6, host_text
from mqtool_store.compression import decompress
from mqtool_store.crc import crc32
from mqtool_store.errors import FormatError, StoreError
from mqtool_store.logscan import header_table, walk_array

BATCH_ROWS = 65_536
BATCH_BYTES = 64 << 20       # commitlog bytes per batch: Arrow's int32 offsets stay far from 2 GiB
DAY_MS = 86_400_000
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_KV, _PIECE = 1, 2           # NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR


class Timer:
    """Seconds per phase, summed over calls (the benchmark's breakdown of a task's time)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._t
        self._t = now


def gather(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray, clamp: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """arr[s:s + l] of every range, concatenated, and the int64 offsets of each range in it.
    `clamp`: ranges may run one byte past the end of arr (the caller overwrites those bytes)."""
    lens = lens.astype(np.int64, copy=False)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if not total:
        return np.zeros(0, dtype=np.uint8), offsets
    idx = np.arange(total, dtype=np.int64)
    idx += np.repeat(starts.astype(np.int64, copy=False) - offsets[:-1], lens)
    if clamp:
        np.minimum(idx, len(arr) - 1, out=idx)
    return arr[idx], offsets


def distinct(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """The distinct byte strings arr[s:s + l] and each row's index into them."""
    n = len(starts)
    if not n:
        return [], np.zeros(0, dtype=np.int64)
    width = max(int(lens.max()), 1)
    cols = np.arange(width)
    idx = np.minimum(starts[:, None] + cols, len(arr) - 1)
    raw = np.zeros((n, width + 2), dtype=np.uint8)
    raw[:, 2:] = np.where(cols < lens[:, None], arr[idx], 0)
    raw[:, 0], raw[:, 1] = lens >> 8, lens & 0xFF          # the length is part of the key
    keys = np.ascontiguousarray(raw).view(f"V{width + 2}").ravel()
    uniq, inv = np.unique(keys, return_inverse=True)
    out = []
    for u in uniq:
        b = bytes(u)
        out.append(b[2:2 + (b[0] << 8 | b[1])])
    return out, inv.ravel()


def _strings(pa, values: list[str], inv: np.ndarray):
    """A plain string column from distinct values and row indices."""
    dictionary = pa.DictionaryArray.from_arrays(pa.array(inv.astype(np.int32)), pa.array(values, pa.string()))
    return dictionary.cast(pa.string())


def _var(pa, kind, data: np.ndarray, offsets: np.ndarray, validate: bool = False):
    if offsets[-1] >= 2**31:
        raise OverflowError("a batch's variable-width column passed 2 GiB")
    arr = pa.Array.from_buffers(kind, len(offsets) - 1, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                         pa.py_buffer(data)])
    if validate:
        arr.validate(full=True)     # UTF-8: raises ArrowInvalid, the caller falls back to the reference
    return arr


def _hosts(pa, arr, pos, width):
    """host_text of (ip, port) at pos for widths 8 (IPv4) or 20 (IPv6), as a string column."""
    raws, inv = distinct(arr, pos, width)
    texts = [host_text(r[:-4], int.from_bytes(r[-4:], "big", signed=True)) for r in raws]
    return _strings(pa, texts, inv)


def _msg_ids(pa, arr, store_pos, store_w, offsets):
    """create_offset_msg_id for every row: hex of store ip + port + commitlog offset."""
    n = len(store_pos)
    mat = np.zeros((n, 28), dtype=np.uint8)
    cols = np.arange(20)
    idx = np.minimum(store_pos[:, None] + cols, len(arr) - 1)
    mat[:, :20] = np.where(cols < store_w[:, None], arr[idx], 0)
    off_bytes = offsets.astype(">i8").view(np.uint8).reshape(n, 8)
    v6 = store_w == 20
    mat[~v6, 8:16] = off_bytes[~v6]
    mat[v6, 20:28] = off_bytes[v6]
    text = np.empty((n, 56), dtype=np.uint8)
    text[:, 0::2] = _HEX[mat >> 4]
    text[:, 1::2] = _HEX[mat & 15]
    if not v6.any():
        data = np.ascontiguousarray(text[:, :32]).ravel()
        out_off = np.arange(n + 1, dtype=np.int64) * 32
    else:
        lens = np.where(v6, 56, 32)
        data = text[np.arange(56) < lens[:, None]]
        out_off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=out_off[1:])
    return _var(pa, pa.string(), data, out_off)


def _repeats(row: np.ndarray, codes: np.ndarray, n: int) -> bool:
    """Whether some row has a code twice (rows ascending)."""
    if not len(codes):
        return False
    if int(codes.max()) < 63:      # one bit per distinct name: a row repeats one when bits < names
        bits = np.left_shift(np.uint64(1), codes.astype(np.uint64))
        starts = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
        ored = np.bitwise_or.reduceat(bits, starts)
        return bool((np.bitwise_count(ored) != np.diff(np.r_[starts, len(row)])).any())
    pair = np.sort(row * (int(codes.max()) + 1) + codes)
    return bool((pair[1:] == pair[:-1]).any())


def _properties(pa, pc, arr, props_pos, props_len):
    """(properties map, tags, keys list, uniq_key) columns, or None when a record's properties
    need the reference's rules (a key twice) or are not UTF-8."""
    n = len(props_pos)
    # Each record's text followed by one PROPERTY_SEPARATOR, so pieces never cross records (the
    # byte read for it is the next record's, or past the buffer when the record ends it).
    data, roff = gather(arr, props_pos, props_len + 1, clamp=True)
    data[roff[1:] - 1] = _PIECE
    piece_end = np.flatnonzero(data == _PIECE)
    piece_start = np.empty_like(piece_end)
    piece_start[:1] = 0
    piece_start[1:] = piece_end[:-1] + 1
    seps = np.flatnonzero(data == _KV)
    j = np.searchsorted(seps, piece_start)
    kv = np.append(seps, len(data))[j]              # the first NAME_VALUE_SEPARATOR of each piece
    # string2messageProperties: a piece counts only with a non-empty name and value.
    keep = (kv < piece_end) & (kv > piece_start) & (piece_end > kv + 1)
    piece_start, piece_end, kv = piece_start[keep], piece_end[keep], kv[keep]
    row = np.searchsorted(roff, piece_start, side="right") - 1
    # One string per name, separator, value and gap between pieces, over the gathered text itself:
    # names and values are then taken from it by index, with no second gather.
    bounds = np.empty(4 * len(piece_start) + 2, dtype=np.int64)
    bounds[0], bounds[-1] = 0, len(data)
    bounds[1:-1:4], bounds[2:-1:4], bounds[3:-1:4], bounds[4:-1:4] = piece_start, kv, kv + 1, piece_end
    try:
        _var(pa, pa.string(), data, roff, validate=True)     # UTF-8 as a whole, so every piece of it too
    except pa.ArrowInvalid:
        return None
    tokens = _var(pa, pa.string(), data, bounds)
    keys = tokens.take(pa.array(np.arange(1, len(bounds) - 1, 4)))
    values = tokens.take(pa.array(np.arange(3, len(bounds) - 1, 4)))
    codes = pc.dictionary_encode(keys).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    if _repeats(row, codes, n):
        return None                                 # a key twice: the last one wins, per record
    counts = np.bincount(row, minlength=n)
    map_off = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=map_off[1:])
    props = pa.MapArray.from_arrays(pa.array(map_off), keys, values)

    def lookup(name):
        hit = pc.equal(keys, name).to_numpy(zero_copy_only=False)
        at = np.full(n, -1, dtype=np.int64)
        at[row[hit]] = np.flatnonzero(hit)
        return values.take(pa.array(at, mask=at < 0))
    tags, uniq = lookup("TAGS"), lookup("UNIQ_KEY")
    key_text = pc.fill_null(lookup("KEYS"), "")
    split = pc.split_pattern(key_text, pattern=" ")
    words = split.flatten()
    nonempty = pc.greater(pc.binary_length(words), 0).to_numpy(zero_copy_only=False)
    parent = np.repeat(np.arange(n), np.diff(split.offsets.to_numpy()))
    key_off = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(parent[nonempty], minlength=n), out=key_off[1:])
    key_lists = pa.ListArray.from_arrays(pa.array(key_off), words.filter(pa.array(nonempty)))
    return props, tags, key_lists, uniq


def _bodies(arr, t, timer):
    """(body data, offsets, crc_ok): stored bodies CRC-checked, compressed ones inflated."""
    data, off = gather(arr, t["body_pos"], t["body_len"])
    timer.lap("gather")
    mv = memoryview(data)
    crc = crc32
    bounds = off.tolist()
    crc_ok = np.fromiter(((crc(mv[a:b]) & 0x7FFFFFFF) == c
                          for a, b, c in zip(bounds, bounds[1:], t["body_crc"].tolist())), dtype=bool, count=len(off) - 1)
    timer.lap("crc")
    sys_flag = t["sys_flag"]
    packed = np.flatnonzero(sys_flag & 1)            # COMPRESSED_FLAG
    if packed.size:
        lens = np.diff(off)
        pieces, prev = [], 0
        for i in packed.tolist():
            stored = bytes(mv[bounds[i]:bounds[i + 1]])
            try:
                body = decompress(stored, int(sys_flag[i]))
            except StoreError:
                body = stored            # codec not installed or bad stream: keep the bytes as stored
            pieces += [mv[bounds[prev]:bounds[i]], body]
            lens[i] = len(body)
            prev = i + 1
        pieces.append(mv[bounds[prev]:bounds[-1]])
        data = np.frombuffer(b"".join(pieces), dtype=np.uint8)
        off = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        timer.lap("inflate")
    return data, off, crc_ok


def table_batch(buf, t: dict, file_offset: int, timer: Timer | None = None, offsets: np.ndarray | None = None):
    """One RecordBatch (export COLUMNS order) from a header table of selected records, or None
    when the batch needs the reference decoder. `file_offset`: commitlog offset of buf[0];
    `offsets`: each record's commitlog offset instead (records pulled from a broker, not a file)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mqtool.spark.schema import arrow_schema
    timer = timer or Timer()
    arr = np.frombuffer(buf, dtype=np.uint8)
    pos, sys_flag = t["position"], t["sys_flag"]
    born_w = np.where(sys_flag & BORN_V6, 20, 8)
    store_pos = pos + 56 + born_w
    store_w = np.where(sys_flag & STORE_V6, 20, 8)
    if offsets is None:
        offsets = pos + file_offset
    props = _properties(pa, pc, arr, t["props_pos"], t["props_len"])
    if props is None:
        return None
    properties, tags, keys, uniq = props
    timer.lap("properties")
    body, body_off, crc_ok = _bodies(arr, t, timer)
    names, inv = distinct(arr, t["topic_pos"], t["topic_len"])
    topic = _strings(pa, [n.decode("utf-8", "replace") for n in names], inv)
    born_h, store_h = _hosts(pa, arr, pos + 48, born_w), _hosts(pa, arr, store_pos, store_w)
    msg_id = _msg_ids(pa, arr, store_pos, store_w, offsets)
    timer.lap("strings")
    i32 = lambda name: pa.array(t[name].astype(np.int32))  # noqa: E731
    i64 = lambda name: pa.array(t[name].astype(np.int64))  # noqa: E731
    columns = [topic, i32("queue_id"), i64("queue_offset"), pa.array(offsets), i32("total_size"),
               _var(pa, pa.binary(), body, body_off), i32("body_crc"), pa.array(crc_ok), i32("flag"),
               i32("sys_flag"), i64("born_timestamp"), born_h, i64("store_timestamp"), store_h,
               i32("reconsume_times"), i64("prepared_transaction_offset"), tags, keys, msg_id, uniq, properties,
               pa.array((t["store_timestamp"] // DAY_MS).astype(np.int32), pa.date32())]
    batch = pa.RecordBatch.from_arrays(columns, schema=arrow_schema())
    timer.lap("arrow")
    return batch


def _cuts(sizes: np.ndarray, batch_rows: int, batch_bytes: int) -> list[int]:
    """Row indices cutting a table into batches of at most batch_rows rows and ~batch_bytes bytes."""
    cuts, lo, n = [0], 0, len(sizes)
    csum = np.cumsum(sizes)
    while lo < n:
        base = csum[lo - 1] if lo else 0
        hi = min(lo + batch_rows, int(np.searchsorted(csum, base + batch_bytes, side="right")), n)
        hi = max(hi, lo + 1)
        cuts.append(hi)
        lo = hi
    return cuts


def fast_batches(split: Split, selection: Selection | None = None, batch_rows: int = BATCH_ROWS,
                 batch_bytes: int = BATCH_BYTES, timer: Timer | None = None, check: bool = True):
    """The selected records of one split as RecordBatches (export COLUMNS order).

    With `check`, a split that no longer holds exactly the valid records the plan found (the
    file changed since) raises FormatError instead of exporting something else.
    """
    selection = selection or Selection()
    timer = timer or Timer()
    with open_range(split.path, split.start, split.end) as (buf, base):
        end = split.end - base
        if check and len(buf) < end:
            raise FormatError(f"the file is shorter than planned ({base + len(buf)} bytes, the split ends at "
                              f"{split.end}): the file changed since the plan", path=split.path)
        positions, file_end = walk_array(buf, split.start - base, end)
        if check and file_end.position != end:
            raise FormatError(f"records end at {base + file_end.position}, not at {split.end} as planned: "
                              "the file changed since the plan", path=split.path)
        timer.lap("walk")
        for lo in range(0, len(positions), HEADER_CHUNK):
            part = positions[lo:lo + HEADER_CHUNK]
            table, ok = header_table(buf, part, end)
            if ok < len(part):
                if check:
                    raise FormatError("a record the plan found valid is not: the file changed since the plan",
                                      path=split.path, offset=split.file_start + base + int(part[ok]))
                table = {k: v[:ok] for k, v in table.items()}
            names, inv = topic_index(buf, table)
            keep = selection.mask(names, inv, table)
            table = {k: v[keep] for k, v in table.items()}
            timer.lap("headers")
            cuts = _cuts(table["total_size"], batch_rows, batch_bytes)
            for a, b in zip(cuts, cuts[1:]):
                t = {k: v[a:b] for k, v in table.items()}
                batch = table_batch(buf, t, split.file_start + base, timer)
                if batch is None:
                    yield from reference_batches(buf, base, split, t["position"], b - a)
                    timer.lap("reference")
                else:
                    yield batch
            if ok < len(part):
                break
