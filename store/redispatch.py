"""Re-dispatch after a crash: commit log records back into consume queues and the index, in batches.

Records are read with header tables (logscan.header_table: every fixed field of 64k records in
numpy), turned into the put path's pending tuples and handed to the store's own batch dispatch
(dispatch.py: the kernel's pending_units where it is built), so a re-dispatch runs at dispatch
speed, not record by record. Consume queues take records from `cq_from`; the index alone takes
the records in [index_from, cq_from) when it stops earlier than the queues.
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import numpy as np

from .codes import TRANSACTION_TYPE_MASK, TransactionType
from .commitlog import MESSAGE_MAGIC, MESSAGE_MAGIC_V2
from .logscan import header_table, walk_array
from .kernel import kernel
from .properties import parse_properties

PREPARED = int(TransactionType.TRANSACTION_PREPARED_TYPE)
ROLLBACK = int(TransactionType.TRANSACTION_ROLLBACK_TYPE)
BATCH = 1 << 14          # records per dispatch call: the pending list stays small
PROGRESS_EVERY_S = 5.0
_SIZE_MAGIC = struct.Struct(">ii")


@dataclass
class Redispatched:
    records: int = 0          # into consume queues and index
    index_only: int = 0       # into the index alone (it stopped before the queues)
    bytes: int = 0


def redispatch(store, cq_from: int, index_from: int | None = None, progress=None,
               end: int | None = None) -> Redispatched:
    """Dispatch the store's records from min(cq_from, index_from) to the commit log's end, or to
    `end` (controller mode's confirmOffset: only records ending at or before it).
    `progress(done_bytes, total_bytes)` is called every PROGRESS_EVERY_S seconds on a long one."""
    start = cq_from if index_from is None else min(cq_from, index_from)
    start = max(start, store.commitlog.min_offset)
    stop = store.commitlog.max_offset if end is None else min(end, store.commitlog.max_offset)
    out = Redispatched()
    total = max(0, stop - start)
    if total == 0:
        return out
    shown = time.monotonic()
    topics: dict[bytes, str] = {}
    for f in store.commitlog.files:
        if f.start + f.write_pos <= start:
            continue
        lo = max(0, start - f.start)
        if lo and not _record_at(f.mm, lo, f.write_pos):
            lo = 0                      # not a record start: walk the file from its first record
        positions, _ = walk_array(f.mm, lo, f.write_pos)
        positions = positions[(positions >= start - f.start) & (positions < stop - f.start)]
        for lo in range(0, len(positions), BATCH):
            table, n_valid = header_table(f.mm, positions[lo:lo + BATCH], f.write_pos)
            ends = table["position"][:n_valid] + table["total_size"][:n_valid]
            cut = int(np.searchsorted(ends, stop - f.start, side="right"))
            if cut < n_valid:                  # a record that ends past `stop` waits for its confirmation
                n_valid = cut
            batch = _pending(f.mm, f.start, table, n_valid, cq_from, topics, out)
            if batch:
                with store.put_lock:
                    store._pending[:0] = batch     # older than anything pending; the list is kept (messagestore)
                    store._dispatch_pending()
            if n_valid:
                out.bytes = f.start + int(table["position"][n_valid - 1] + table["total_size"][n_valid - 1]) - start
            del table
            if progress is not None and time.monotonic() - shown >= PROGRESS_EVERY_S:
                shown = time.monotonic()
                progress(out.bytes, total)
            if n_valid < len(positions[lo:lo + BATCH]):
                break
        if f.start + f.write_pos >= stop:
            break
    return out


def _record_at(buf, pos: int, end: int) -> bool:
    if pos + 8 > end:
        return False
    size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    return magic in (MESSAGE_MAGIC, MESSAGE_MAGIC_V2) and 0 < size <= end - pos


def _pending(buf, file_start: int, t: dict, n: int, cq_from: int, topics: dict, out: Redispatched) -> list:
    """The put path's pending tuples (topic, queue, properties, offset, size, queue offset, store
    time, transaction type) of a header table's first n records. A record below cq_from is for the
    index alone: it goes as a prepared transaction (indexed, kept out of its consume queue)."""
    batch = []
    index_only = 0
    append = batch.append
    parse = kernel.parse_properties if kernel is not None else parse_properties
    tx = (np.asarray(t["sys_flag"][:n]) & TRANSACTION_TYPE_MASK).tolist()
    phys = (t["position"][:n] + file_start).tolist()
    cols = zip(t["topic_pos"][:n].tolist(), t["topic_len"][:n].tolist(), t["props_pos"][:n].tolist(),
               t["props_len"][:n].tolist(), t["queue_id"][:n].tolist(), t["total_size"][:n].tolist(),
               t["queue_offset"][:n].tolist(), t["store_timestamp"][:n].tolist(), phys, tx)
    for tp, tl, pp, pl, qid, size, qoff, ts, p, kind in cols:
        raw = buf[tp:tp + tl]
        topic = topics.get(raw)
        if topic is None:
            topic = topics[raw] = raw.decode("utf-8", "replace")
        if p < cq_from:
            if kind == ROLLBACK:
                continue
            kind = PREPARED
            index_only += 1
        text = buf[pp:pp + pl].decode("utf-8", "replace")
        append((topic, qid, parse(text) if text else {}, p, size, qoff, ts, kind))
    out.index_only += index_only
    out.records += len(batch) - index_only
    return batch
