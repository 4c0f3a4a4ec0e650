"""Small generated stores for the Spark tests: commitlog files written with store.commitlog's encoder.

Covers what the broker fixtures do not: several days, IPv6 hosts, a record with a wrong body
CRC, zlib bodies with 4.9.4+ type bits, transactional prepared/rollback records (not
dispatched), DLQ/RMQ_SYS topics. Returns one truth dict per record in commitlog order.
"""
from __future__ import annotations

import zlib
from pathlib import Path

from mqtool_store.commitlog import encode_blank, encode_record, new_record
from mqtool_store.mappedfiles import offset_to_file_name

DAY_MS = 86_400_000
T0 = 1_790_000_000_000          # 2026-09-21T...Z
V6 = (bytes.fromhex("20010db8000000000000000000000001"), 40000)


def plan_records(n: int = 400, bad_crc: bool = True) -> list[dict]:
    out = []
    for i in range(n):
        topic = ["Orders", "Orders", "Logs", "%DLQ%g1", "RMQ_SYS_TRACE_TOPIC"][i % 5]
        qid = i % 4 if topic == "Orders" else 0
        props = {"TAGS": f"T{i % 3}", "KEYS": f"k-{i} common", "UNIQ_KEY": f"U{i:030d}", "n": str(i)}
        body = f"message {i} ".encode() * (1 + i % 7)
        sys_flag = 0
        if i % 50 == 7:                       # zlib with the 4.9.4+ type bits
            sys_flag = 0x301
        if i % 97 == 5:                       # transactional: prepared / rollback, never in a consume queue
            sys_flag |= 0x4 if i % 2 else 0xC
        out.append(dict(topic=topic, queue_id=qid, properties=props, body=body, sys_flag=sys_flag,
                        store_timestamp=T0 + i * (DAY_MS // 150), born_host=V6 if i % 31 == 3 else None,
                        bad_crc=bad_crc and i == 11))
    return out


def write_store(root: Path, file_size: int = 32 * 1024, n: int = 400, bad_crc: bool = True) -> list[dict]:
    cl = Path(root) / "commitlog"
    cl.mkdir(parents=True)
    queue_next: dict[tuple[str, int], int] = {}
    truth = []
    files: list[bytearray] = [bytearray()]
    for spec in plan_records(n, bad_crc):
        stored = zlib.compress(spec["body"], 5) if spec["sys_flag"] & 1 else spec["body"]
        tx = spec["sys_flag"] & 0xC
        key = (spec["topic"], spec["queue_id"])
        qoff = 0 if tx in (0x4, 0xC) else queue_next.get(key, 0)
        kw = {"born_host": spec["born_host"]} if spec["born_host"] else {}
        rec = new_record(spec["topic"], stored, spec["properties"], queue_id=spec["queue_id"], queue_offset=qoff,
                         sys_flag=spec["sys_flag"], store_timestamp=spec["store_timestamp"],
                         born_timestamp=spec["store_timestamp"] - 5, **kw)
        if spec["bad_crc"]:
            rec.body_crc ^= 1
        if len(files[-1]) + rec.total_size + 8 > file_size:
            files[-1] += encode_blank(file_size - len(files[-1]))
            files.append(bytearray())
        start = (len(files) - 1) * file_size
        rec.physical_offset = start + len(files[-1])
        files[-1] += encode_record(rec)
        if tx not in (0x4, 0xC):
            queue_next[key] = qoff + 1
        truth.append(dict(spec, queue_offset=qoff, commitlog_offset=rec.physical_offset, store_size=rec.total_size,
                          body_crc=rec.body_crc, dispatched=tx not in (0x4, 0xC)))
    for i, data in enumerate(files):
        (cl / offset_to_file_name(i * file_size)).write_bytes(bytes(data) + bytes(file_size - len(data)))
    return truth
