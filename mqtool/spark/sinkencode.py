"""The sink's rows as SEND_BATCH_MESSAGE bodies, column at a time (pyarrow compute and numpy).

`livesink.rows` is the reference, one row at a time; `encode` gives the same bytes as
`remoting.batch.encode_batch` over those rows (with each row's UNIQ_KEY last), pinned by
tests/spark/test_liveplan.py. It builds no Python object per row but the UNIQ_KEY strings.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mqtool_store.codes import NAME_VALUE_SEPARATOR as KV, PROPERTY_SEPARATOR as SEP

HEAD = np.dtype([("total", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("flag", ">i4"), ("body", ">i4")])
PAIR = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
NULL = pa.scalar(None, pa.string())


def _regroup(values, lengths: np.ndarray, keep) -> tuple[pa.Array, np.ndarray]:
    """Lists of `values` (flattened, `lengths` a row) holding only `keep`: (lists, kept per row)."""
    keep_np = keep.to_numpy(zero_copy_only=False)
    rows = np.repeat(np.arange(len(lengths)), lengths)[keep_np]
    counts = np.bincount(rows, minlength=len(lengths))
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values.filter(keep)), counts


def _joined(lists, counts: np.ndarray, sep: str):
    text = pc.binary_join(lists, sep)
    return pc.if_else(pa.array(counts > 0), text, NULL)


def _lengths(lists) -> np.ndarray:
    return pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)


def user_properties(col, reserved):
    """'k\\x01v\\x02...' of each row's map, without `reserved` keys or null values; null: none left."""
    lists = col.cast(PAIR)
    entries = lists.flatten()
    k, v = entries.field("key"), entries.field("value")
    keep = pc.and_(pc.invert(pc.is_in(k, value_set=pa.array(sorted(reserved), pa.string()))), pc.is_valid(v))
    pairs = pc.binary_join_element_wise(k, v, KV)
    return _joined(*_regroup(pairs, _lengths(lists), keep.fill_null(False)), SEP)


def key_words(col):
    """KEYS' value of each row: its words (string: space-separated; or a list) joined by a space."""
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        text = pc.utf8_trim(pc.replace_substring_regex(col, " +", " "), " ")
        return pc.if_else(pc.equal(text, ""), NULL, text)
    words = col.flatten()
    keep = pc.and_(pc.is_valid(words), pc.not_equal(words, "")).fill_null(False)
    return _joined(*_regroup(words, _lengths(col), keep), " ")


def _part(prefix: str, values):
    """prefix + value + SEP, or "" for a null value."""
    return pc.binary_join_element_wise(prefix, values, SEP, "").fill_null("")


def encode(batch, ids: list[str], reserved) -> tuple[np.ndarray, np.ndarray]:
    """(bytes as uint8, offsets of each row's entry): the batch's rows (body, tags, keys,
    properties; the caller checks topics and null bodies) each with UNIQ_KEY `ids[i]`."""
    n = batch.num_rows
    names = batch.schema.names

    def col(name):
        return batch.column(names.index(name)) if name in names else None
    pieces = []
    props = col("properties")
    if props is not None:
        pieces.append(_part("", user_properties(props, reserved)))
    keys = col("keys")
    if keys is not None:
        pieces.append(_part(f"KEYS{KV}", key_words(keys)))
    tags = col("tags")
    if tags is not None:
        pieces.append(_part(f"TAGS{KV}", pc.if_else(pc.equal(tags, ""), NULL, tags)))
    pieces.append(pc.binary_join_element_wise(f"UNIQ_KEY{KV}", pa.array(ids, pa.string()), ""))
    text = pc.binary_join_element_wise(*pieces, "").cast(pa.large_binary()) if len(pieces) > 1 else \
        pieces[0].cast(pa.large_binary())
    body = col("body").cast(pa.large_binary())
    blen = pc.binary_length(body).to_numpy().astype(np.int64)
    plen = pc.binary_length(text).to_numpy().astype(np.int64)
    head = np.zeros(n, HEAD)
    head["total"] = 20 + blen + 2 + plen
    head["body"] = blen
    short = plen.astype(">i2")
    entry = pc.binary_join_element_wise(_fixed(head.tobytes(), n, 20), body, _fixed(short.tobytes(), n, 2), text,
                                        pa.scalar(b"", pa.large_binary()))
    _validity, offsets, data = entry.buffers()
    off = np.frombuffer(offsets, np.int64)[entry.offset:entry.offset + n + 1]
    return np.frombuffer(data, np.uint8), off


def _fixed(raw: bytes, n: int, width: int):
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int64) * width).tobytes())
    return pa.Array.from_buffers(pa.large_binary(), n, [None, offsets, pa.py_buffer(raw)])
