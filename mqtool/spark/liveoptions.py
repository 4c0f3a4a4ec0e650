"""The `rocketmq` data source's options, checked once, named as Spark's Kafka source names them
where the idea is the same. Pure: no I/O, so every bad option is one clear error before a job runs.

Offsets JSON, as Kafka's `startingOffsets` but per broker group and queue:

    {"Orders": {"broker-a:0": 120, "broker-b:3": -2}}      -2 earliest, -1 latest
"""
from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field

EARLIEST, LATEST = -2, -1
DEFAULT_PULL_BATCH = 32             # DefaultMQPullConsumer's pullBatchSize
DEFAULT_GROUP = "CID_MQTOOL_SPARK"  # the group named in pulls when no consumerGroup is given
KNOWN = ("namesrv", "topics", "includeSystemTopics", "startingOffsets", "endingOffsets", "startingTimestamp",
         "maxMessagesPerTrigger", "minPartitions", "failOnDataLoss", "accessKey", "secretKey", "consumerGroup",
         "tags", "pullBatchSize", "topic", "timeoutMs", "sendBatchSize")

Queue = tuple[str, str, int]        # (topic, broker name, queue id)
Offsets = dict[Queue, int]


class OptionError(ValueError):
    """An option of the rocketmq data source is missing or malformed (one line, says which)."""


@dataclass(frozen=True)
class LiveOptions:
    namesrv: str
    topics: tuple[str, ...] = ()
    include_system: bool = False
    starting: object = "earliest"        # "earliest" | "latest" | {Queue: offset} (EARLIEST/LATEST allowed)
    ending: object = "latest"
    starting_timestamp: int | None = None
    max_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    access_key: str | None = None
    secret_key: str | None = None
    group: str | None = None
    tags: str = "*"
    pull_batch: int = DEFAULT_PULL_BATCH
    timeout_s: float = 30.0
    send_topic: str | None = None
    send_batch: int = 256
    extra: dict = field(default_factory=dict)

    @property
    def pull_group(self) -> str:
        return self.group or DEFAULT_GROUP

    def credentials(self):
        if not self.access_key:
            return None
        from mqtool_remoting.acl import Credentials
        return Credentials(self.access_key, self.secret_key or "")

    def wants(self, topic: str) -> bool:
        """Whether a topic is one of the named topics or matches one of the globs."""
        from mqtool.spark.selection import is_system_topic
        if topic in self.topics:
            return True
        if is_system_topic(topic) and not self.include_system:
            return False
        return any(_is_glob(p) and fnmatch.fnmatchcase(topic, p) for p in self.topics)

    def named_topics(self) -> list[str]:
        return [t for t in self.topics if not _is_glob(t)]

    def globs(self) -> list[str]:
        return [t for t in self.topics if _is_glob(t)]


def _is_glob(p: str) -> bool:
    return any(c in p for c in "*?[")


def _bool(opts: dict, name: str, default: bool) -> bool:
    v = opts.get(name)
    if v is None:
        return default
    text = str(v).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, not {v!r}")
    return text == "true"


def _int(opts: dict, name: str, minimum: int | None = None) -> int | None:
    v = opts.get(name)
    if v is None or str(v).strip() == "":
        return None
    try:
        n = int(str(v).strip())
    except ValueError:
        raise OptionError(f"option {name} must be a whole number, not {v!r}") from None
    if minimum is not None and n < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, not {n}")
    return n


def parse_offsets(name: str, text: str):
    """'earliest', 'latest' or the offsets JSON -> the same, JSON as {Queue: offset}."""
    t = str(text).strip()
    if t in ("earliest", "latest"):
        return t
    try:
        doc = json.loads(t)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} must be earliest, latest or JSON like "
                          f'{{"TOPIC": {{"BROKER:QUEUE": OFFSET}}}}: {exc.msg} at character {exc.pos}') from None
    if not isinstance(doc, dict):
        raise OptionError(f'option {name}: the JSON must be an object {{"TOPIC": {{"BROKER:QUEUE": OFFSET}}}}')
    out: Offsets = {}
    for topic, queues in doc.items():
        if not isinstance(queues, dict):
            raise OptionError(f'option {name}: topic {topic!r} must map "BROKER:QUEUE" to an offset')
        for key, off in queues.items():
            broker, sep, qid = str(key).rpartition(":")
            if not sep or not broker or not qid.isdigit():
                raise OptionError(f"option {name}: {key!r} of topic {topic!r} is not BROKER:QUEUE (e.g. broker-a:0)")
            if not isinstance(off, int) or isinstance(off, bool) or off < EARLIEST:
                raise OptionError(f"option {name}: offset {off!r} of {topic} {key} must be a queue offset, "
                                  f"-2 (earliest) or -1 (latest)")
            out[(topic, broker, int(qid))] = off
    return out


def parse_options(opts: dict, writing: bool = False) -> LiveOptions:
    """Spark's options (case-insensitive keys: Spark lower-cases them) -> LiveOptions."""
    low = {str(k).lower(): v for k, v in dict(opts).items()}
    o = {k: low.get(k.lower()) for k in KNOWN}
    namesrv = (o["namesrv"] or os.environ.get("NAMESRV_ADDR") or "").strip()
    if not namesrv:
        raise OptionError("option namesrv is missing (HOST:PORT[;HOST:PORT], or set NAMESRV_ADDR)")
    topics = tuple(t.strip() for t in str(o["topics"] or "").split(",") if t.strip())
    if not writing and not topics:
        raise OptionError("option topics is missing (names and globs, comma-separated: Orders,Pay*)")
    starting = parse_offsets("startingOffsets", o["startingOffsets"]) if o["startingOffsets"] else "earliest"
    ending = parse_offsets("endingOffsets", o["endingOffsets"]) if o["endingOffsets"] else "latest"
    if ending == "earliest":
        raise OptionError("option endingOffsets cannot be earliest (use latest or JSON offsets)")
    if isinstance(ending, dict) and any(v == EARLIEST for v in ending.values()):
        raise OptionError("option endingOffsets: -2 (earliest) is not an ending offset")
    ts = _int(o, "startingTimestamp", 0)
    if ts is not None and o["startingOffsets"]:
        raise OptionError("give startingOffsets or startingTimestamp, not both")
    if isinstance(starting, dict) and isinstance(ending, dict):
        for q, end in ending.items():
            start = starting.get(q)
            if start is not None and start >= 0 and end >= 0 and end < start:
                raise OptionError(f"endingOffsets {end} of {q[0]} {q[1]}:{q[2]} is before its startingOffsets {start}")
    tags = (o["tags"] or "*").strip() or "*"
    return LiveOptions(
        namesrv=namesrv, topics=topics, include_system=_bool(o, "includeSystemTopics", False),
        starting=starting, ending=ending, starting_timestamp=ts,
        max_per_trigger=_int(o, "maxMessagesPerTrigger", 1), min_partitions=_int(o, "minPartitions", 1),
        fail_on_data_loss=_bool(o, "failOnDataLoss", True), access_key=o["accessKey"] or None,
        secret_key=o["secretKey"] or None, group=(o["consumerGroup"] or "").strip() or None, tags=tags,
        pull_batch=_int(o, "pullBatchSize", 1) or DEFAULT_PULL_BATCH,
        timeout_s=(_int(o, "timeoutMs", 100) or 30_000) / 1000.0, send_topic=(o["topic"] or "").strip() or None,
        send_batch=_int(o, "sendBatchSize", 1) or 256)


def offsets_to_json(offsets: Offsets) -> dict:
    """{Queue: offset} -> Spark's offset dict {"TOPIC": {"BROKER:QUEUE": offset}}, keys sorted."""
    out: dict[str, dict[str, int]] = {}
    for (topic, broker, qid), off in sorted(offsets.items()):
        out.setdefault(topic, {})[f"{broker}:{qid}"] = int(off)
    return out


def offsets_from_json(doc: dict) -> Offsets:
    out: Offsets = {}
    for topic, queues in (doc or {}).items():
        for key, off in queues.items():
            broker, _, qid = key.rpartition(":")
            out[(topic, broker, int(qid))] = int(off)
    return out
