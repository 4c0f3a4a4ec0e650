"""The records of a broker's answer (a pull, a view by id, a check-back), as a client reads them:
bodies inflated, as Java's MessageDecoder.decode does. Producers, consumers, the admin API and the
answers to a broker's requests all read records, so this module imports no other client module."""
from __future__ import annotations

import logging

from mqtool_store.commitlog import MessageRecord
from mqtool_store.commitlog import decode_records as decode_all
from mqtool_store.compression import decompress
from mqtool_store.errors import StoreError

log = logging.getLogger("mqtool.client")


def decode_records(body: bytes) -> list[MessageRecord]:
    """A pull answer's records, bodies inflated. A body flagged compressed that does not inflate
    (not that codec, or its library missing) is handed over as stored, with a warning: Java's
    MessageDecoder drops it and every record after it in the batch, which loses them for good."""
    out = decode_all(body)
    for rec in out:
        if rec.sys_flag & 0x1:
            try:
                rec.body = decompress(rec.body, rec.sys_flag)
            except StoreError as exc:
                log.warning("message %s (%s queue %d offset %d, commit log offset %d): %s; its body is given "
                            "as stored", rec.uniq_key or rec.msg_id, rec.topic, rec.queue_id, rec.queue_offset,
                            rec.physical_offset, exc)
    return out
