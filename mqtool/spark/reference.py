"""The export's reference decoder: records decoded one by one (`decode_record`) into Arrow batches
in COLUMNS order. The vectorised decoder (`columns.fast_batches`, `columns.table_batch`) is held
to it by tests, and falls back to it for a batch its rules do not cover; `export.split_batches`
and the live reader's pull answers use it too.
"""
from __future__ import annotations

from mqtool.spark.schema import COLUMNS, arrow_schema
from mqtool.spark.source import Split
from mqtool_store.codes import Prop
from mqtool_store.commitlog import decode_record, host_text
from mqtool_store.compression import decompress
from mqtool_store.crc import crc32
from mqtool_store.errors import StoreError
from mqtool_store.msgid import create_offset_msg_id

BATCH_ROWS = 8192
DAY_MS = 86_400_000


def reference_batches(buf, base: int, split: Split, positions, batch_rows: int = BATCH_ROWS, offsets=None):
    """Records at `positions` of buf (bytes of split's file from `base`) decoded one by one.
    `offsets`: each record's commitlog offset, where buf is not a file's bytes (a pull's answer)."""
    import pyarrow as pa
    schema = arrow_schema()
    hosts: dict = {}

    def host(ip, port):
        h = hosts.get((ip, port))
        if h is None:
            h = hosts[(ip, port)] = host_text(ip, port)
        return h

    cols = [[] for _ in COLUMNS]
    (topic, qid, qoff, cl_off, size, body_c, crc_c, crc_ok, flag, sysf, born_ts, born_h, store_ts, store_h,
     recon, prep, tags, keys, msg_id, uniq, props, date) = cols
    offs = offsets.tolist() if offsets is not None else None
    for i, pos in enumerate(positions.tolist()):
        rec = decode_record(buf, pos, split.end - base)
        off = offs[i] if offs is not None else split.file_start + base + pos
        stored = body = rec.body
        if rec.sys_flag & 1:            # COMPRESSED_FLAG (a plain int test: IntFlag ops are slow here)
            try:
                body = decompress(stored, rec.sys_flag)
            except StoreError:
                body = stored           # codec not installed or bad stream: keep the bytes as stored
        p = rec.properties
        topic.append(rec.topic)
        qid.append(rec.queue_id)
        qoff.append(rec.queue_offset)
        cl_off.append(off)
        size.append(rec.total_size)
        body_c.append(body)
        crc_c.append(rec.body_crc)
        crc_ok.append(crc32(stored) & 0x7FFFFFFF == rec.body_crc)
        flag.append(rec.flag)
        sysf.append(rec.sys_flag)
        born_ts.append(rec.born_timestamp)
        born_h.append(host(rec.born_ip, rec.born_port))
        store_ts.append(rec.store_timestamp)
        store_h.append(host(rec.store_ip, rec.store_port))
        recon.append(rec.reconsume_times)
        prep.append(rec.prepared_transaction_offset)
        tags.append(p.get(Prop.TAGS))
        keys.append([k for k in p.get(Prop.KEYS, "").split(" ") if k])
        msg_id.append(create_offset_msg_id(rec.store_ip, rec.store_port, off))
        uniq.append(p.get(Prop.UNIQ_KEY))
        props.append(list(p.items()))
        date.append(rec.store_timestamp // DAY_MS)
        if len(topic) >= batch_rows:
            yield _batch(pa, schema, cols)
            for c in cols:
                c.clear()
    if topic:
        yield _batch(pa, schema, cols)


def _batch(pa, schema, cols):
    arrays = [pa.array(c, type=f.type) for c, f in zip(cols, schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
