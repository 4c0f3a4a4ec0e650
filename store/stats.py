"""Offline statistics of a store root: what is on disk, per topic and queue, per file."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .checkpoint import decode_checkpoint
from .configfiles import load_config
from .consumequeue import list_queues, queue_files, read_units, valid_prefix
from .layout import StorePaths
from .mappedfiles import ReadOnlyMap
from .query import index_files
from .reader import CommitLogReader
from .errors import StoreError
from .indexfile import IndexFile


def commitlog_stats(reader: CommitLogReader, progress=None) -> dict:
    files = []
    groups: dict[tuple[str, int], dict] = {}
    topic_cache: dict[bytes, str] = {}
    for f, table, end in reader.scan():
        buf = reader.buffer(f)
        n = len(table["position"])
        files.append({"file": f.path.name, "start": f.start, "size": f.size, "records": n,
                      "write_position": end.position, "end": end.reason, "detail": end.detail,
                      "invalid_bytes": end.invalid_bytes})
        if progress:
            progress(f.size)
        if not n:
            continue
        topic_ids: dict[str, int] = {}
        tids = np.fromiter((topic_ids.setdefault(_topic(buf, a, ln, topic_cache), len(topic_ids))
                            for a, ln in zip(table["topic_pos"].tolist(), table["topic_len"].tolist())),
                           dtype=np.int64, count=n)
        names = {i: t for t, i in topic_ids.items()}
        keys = (tids << 32) | (table["queue_id"].astype(np.int64) & 0xFFFFFFFF)
        uniq, inv = np.unique(keys, return_inverse=True)
        agg = {
            "messages": np.bincount(inv, minlength=len(uniq)),
            "bytes": np.bincount(inv, weights=table["total_size"], minlength=len(uniq)),
            "min_queue_offset": _reduce(np.minimum, inv, table["queue_offset"], len(uniq)),
            "max_queue_offset": _reduce(np.maximum, inv, table["queue_offset"], len(uniq)),
            "first_store_time": _reduce(np.minimum, inv, table["store_timestamp"], len(uniq)),
            "last_store_time": _reduce(np.maximum, inv, table["store_timestamp"], len(uniq)),
        }
        for i, key in enumerate(uniq.tolist()):
            qid = key & 0xFFFFFFFF
            qid = qid - (1 << 32) if qid & 0x80000000 else qid
            g = groups.setdefault((names[key >> 32], qid), {"messages": 0, "bytes": 0})
            g["messages"] += int(agg["messages"][i])
            g["bytes"] += int(agg["bytes"][i])
            for name, pick in (("min_queue_offset", _min), ("max_queue_offset", _max),
                               ("first_store_time", _min), ("last_store_time", _max)):
                g[name] = pick(g.get(name), int(agg[name][i]))
    queues = [{"topic": t, "queue_id": q, **v} for (t, q), v in sorted(groups.items())]
    return {"files": files, "queues": queues}


def _topic(buf, at: int, length: int, cache: dict[bytes, str]) -> str:
    raw = bytes(buf[at:at + length])
    name = cache.get(raw)
    if name is None:
        name = cache[raw] = raw.decode("utf-8", "replace")
    return name


def _reduce(op, inv: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    start = np.iinfo(np.int64).max if op is np.minimum else np.iinfo(np.int64).min
    out = np.full(n, start, dtype=np.int64)
    op.at(out, inv, values)
    return out


def _min(a, b):
    return b if a is None else min(a, b)


def _max(a, b):
    return b if a is None else max(a, b)


def consumequeue_stats(root: Path) -> list[dict]:
    d = StorePaths.of(root).consumequeue
    if not d.is_dir():
        return []
    out = []
    for q in list_queues(d):
        files = queue_files(q)
        units_total, min_off, max_off = 0, None, 0
        for i, f in enumerate(files):
            with ReadOnlyMap(f.path) as m:
                units = read_units(m.buf)
                n = valid_prefix(units)
                if n and min_off is None:
                    first_real = np.flatnonzero(units["size"][:n] != 0x7FFFFFFF)
                    if first_real.size:
                        min_off = f.start // 20 + int(first_real[0])
                units_total += n
                if n:
                    max_off = f.start // 20 + n
        out.append({"topic": q.topic, "queue_id": q.queue_id, "files": len(files), "units": units_total,
                    "min_offset": min_off or 0, "max_offset": max_off})
    return out


def index_stats(root: Path) -> list[dict]:
    out = []
    for path in index_files(root):
        try:
            with ReadOnlyMap(path) as m:
                h = IndexFile(m.buf, path).header
        except (StoreError, OSError, ValueError) as exc:
            out.append({"file": path.name, "size": path.stat().st_size, "error": str(exc)})
            continue
        out.append({"file": path.name, "size": path.stat().st_size, **vars(h)})
    return out


def config_stats(root: Path) -> dict:
    cfg = StorePaths.of(root).config
    out = {}
    if not cfg.is_dir():
        return out
    topics = load_config(cfg / "topics.json")
    out["topics"] = {"count": len(topics.data.get("topicConfigTable", {})), "source": topics.path.name,
                     "warnings": topics.warnings}
    groups = load_config(cfg / "subscriptionGroup.json")
    out["subscription_groups"] = {"count": len(groups.data.get("subscriptionGroupTable", {})),
                                  "source": groups.path.name, "warnings": groups.warnings}
    offsets = load_config(cfg / "consumerOffset.json")
    table = offsets.data.get("offsetTable", {})
    out["consumer_offsets"] = {"entries": {k: {int(q): o for q, o in v.items()} for k, v in table.items()},
                               "source": offsets.path.name, "warnings": offsets.warnings}
    delay = load_config(cfg / "delayOffset.json")
    out["delay_offsets"] = {"levels": {int(k): v for k, v in delay.data.get("offsetTable", {}).items()},
                            "source": delay.path.name, "warnings": delay.warnings}
    return out


def store_stats(root, progress=None) -> dict:
    paths = StorePaths.of(root)
    result: dict = {"root": str(paths.root), "abort": paths.abort.exists(), "lock": paths.lock.exists()}
    if paths.commitlog.is_dir():
        with CommitLogReader(paths.commitlog, populate=True) as reader:
            result["commitlog"] = commitlog_stats(reader, progress)
    else:
        result["commitlog"] = {"files": [], "queues": []}
    result["consumequeues"] = consumequeue_stats(paths.root)
    result["index"] = index_stats(paths.root)
    result["checkpoint"] = None
    if paths.checkpoint.is_file():
        with ReadOnlyMap(paths.checkpoint) as m:
            result["checkpoint"] = vars(decode_checkpoint(m.buf, paths.checkpoint))
    result["config"] = config_stats(paths.root)
    return result
