"""The end checks of benchmarks/chaos.py: every queue of the topic read from one broker (min to max
offset), the acknowledged keys looked for, `mqtool store verify` of a stopped replica's store, commit
logs compared byte for byte, and process logs searched for tracebacks."""
from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from chaosgroup import REPO
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand

from mqtool.client.base import ClientBase, MessageQueue
from mqtool.client.consumer import pull_request
from mqtool.client.records import decode_records

PULL_BATCH = 32


async def read_queues(ns: str, addr: str, topic: str, queues: int) -> dict:
    """Every message of queues 0..queues-1 on the broker at `addr`: {"keys": Counter, "queues":
    {id: [min, max]}, "errors": [...]}."""
    client = ClientBase(ns, timeout_s=10)
    keys: Counter = Counter()
    spans, errors = {}, []
    try:
        for qid in range(queues):
            ext = {"topic": topic, "queueId": qid}
            lo = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_MIN_OFFSET, dict(ext)))
            hi = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, dict(ext)))
            first, last = int(lo.ext_fields.get("offset", 0)), int(hi.ext_fields.get("offset", 0))
            spans[qid] = [first, last]
            offset = first
            while offset < last:
                mq = MessageQueue(topic, "", qid)
                resp = await client.invoke(addr, pull_request("CID_CHAOS_CHECK", mq, offset, PULL_BATCH, "*", 0,
                                                              None, "TAG", 0))
                if resp.code != ResponseCode.SUCCESS:
                    nxt = int(resp.ext_fields.get("nextBeginOffset", offset))
                    errors.append(f"queue {qid} offset {offset}: code {resp.code} {resp.remark or ''} "
                                  f"(next {nxt}, max {last})")
                    if nxt <= offset:
                        break
                    offset = nxt
                    continue
                for rec in decode_records(resp.body):
                    keys.update(rec.keys)
                offset = int(resp.ext_fields.get("nextBeginOffset", offset + 1))
    finally:
        await client.close()
    return {"keys": keys, "queues": spans, "errors": errors}


def compare(acked: dict[str, dict], found: Counter) -> dict:
    missing = sorted((k for k in acked if k not in found), key=lambda k: int(k[1:]))
    dupes = sorted((k for k, n in found.items() if n > 1), key=lambda k: int(k[1:]) if k[1:].isdigit() else 0)
    return {"missing": len(missing), "missing_keys": missing[:20],
            "missing_acks": [{"key": k, **acked[k]} for k in missing[:5]],      # when and where each was acknowledged
            "duplicates": len(dupes),
            "duplicate_keys": dupes[:20], "read": sum(found.values())}


def store_verify(store: Path, log: Path | None = None) -> dict:
    """`mqtool store verify --json` of a stopped store: clean or not, its counts, and its problems
    counted by area (those it printed and those it suppressed) with the first few."""
    proc = subprocess.run([sys.executable, "-m", "mqtool", "store", "verify", "--json", str(store)],
                          check=False, capture_output=True, text=True, cwd=REPO, timeout=300)
    out = {"clean": proc.returncode == 0, "exit": proc.returncode, "problems": {}, "first_problems": []}
    for line in proc.stdout.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        out |= {k: row[k] for k in ("records", "queue_units", "index_entries") if k in row}
        for p in row.get("problems") or ():
            out["problems"][p["area"]] = out["problems"].get(p["area"], 0) + 1
            if len(out["first_problems"]) < 5:
                out["first_problems"].append(f"{p['area']} {Path(p.get('path') or '').name}: {p['message']}")
        for area, n in (row.get("suppressed") or {}).items():
            out["problems"][area] = out["problems"].get(area, 0) + n
    holes = [int(m.group(1)) for line in proc.stdout.splitlines()
             for m in HOLE.finditer(line)]
    if holes:
        out["cq_holes"] = classify_holes(store, holes, log)
    if proc.returncode not in (0, 1):
        out["stderr"] = proc.stderr.strip()[-500:]
    return out


HOLE = re.compile(r"record at commitlog offset (\d+) \(queue offset \d+\) has no consume queue unit")


RESTART_CONFIRM = re.compile(r"consume queues and index only up to confirmOffset (\d+)")


def classify_holes(store: Path, holes: list[int], log: Path | None) -> dict:
    """Commit-log records without a consume-queue unit, and where they sit: the last record before
    an epoch start (written above confirmOffset when the master changed), or the first above the
    confirmOffset a restart rebuilt its queues to (the broker's log says which), or elsewhere."""
    edges = epoch_starts(store)
    sizes = record_sizes(store, holes)
    restarts = {int(m.group(1)) for m in RESTART_CONFIRM.finditer(log.read_text(errors="replace"))} \
        if log is not None and log.exists() else set()
    before_epoch = [h for h in holes if h + sizes.get(h, -1) in edges]
    at_restart = [h for h in holes if h in restarts and h not in before_epoch]
    return {"records": len(holes), "last_before_an_epoch_start": len(before_epoch),
            "at_a_restarts_confirm_offset": len(at_restart),
            "elsewhere": sorted(set(holes) - set(before_epoch) - set(at_restart))[:10]}


def epoch_starts(store: Path) -> set[int]:
    """Start offsets of the epochs in the store's epochFileCheckpoint (lines "epoch-startOffset")."""
    f = store / "epochFileCheckpoint"
    if not f.exists():
        return set()
    return {int(line.split("-")[1]) for line in f.read_text().splitlines() if "-" in line}


def record_sizes(store: Path, offsets: list[int]) -> dict[int, int]:
    """The total size (the record's first 4 bytes) of the commit-log record at each offset."""
    data = commit_log(store)
    return {o: int.from_bytes(data[o:o + 4], "big") for o in offsets if o + 4 <= len(data)}


def commit_log(store: Path) -> bytes:
    d = store / "commitlog"
    if not d.is_dir():
        return b""
    return b"".join(f.read_bytes() for f in sorted(d.iterdir()) if f.is_file()).rstrip(b"\0")


def compare_commit_logs(stores: dict[str, Path]) -> dict:
    """Each replica's commit log against the first's, up to the shorter length: the first byte
    that differs, and the lengths."""
    logs = {name: commit_log(s) for name, s in stores.items()}
    names = list(logs)
    base = names[0]
    out = {"lengths": {n: len(b) for n, b in logs.items()}, "differ": []}
    for other in names[1:]:
        a, b = logs[base], logs[other]
        n = min(len(a), len(b))
        if a[:n] != b[:n]:
            first = next(i for i in range(n) if a[i] != b[i])
            out["differ"].append({"replicas": [base, other], "first_byte": first, "common_length": n})
    return out


def tracebacks(logs: dict[str, Path]) -> dict[str, list[str]]:
    """Per log with a traceback: the line after "Traceback" ... its last line (the exception)."""
    out = {}
    for name, path in logs.items():
        if not path.exists():
            continue
        lines = path.read_text(errors="replace").splitlines()
        found = []
        for i, line in enumerate(lines):
            if "Traceback" in line:
                end = next((j for j in range(i + 1, min(len(lines), i + 200)) if lines[j] and not
                            lines[j].startswith((" ", "\t", "Traceback"))), i)
                found.append(f"{lines[i - 1][:160] if i else ''} | {lines[end][:240]}")
        if found:
            out[name] = found[:10]
    return out


def read_from(ns: str, addr: str, topic: str, queues: int) -> dict:
    return asyncio.run(read_queues(ns, addr, topic, queues))
