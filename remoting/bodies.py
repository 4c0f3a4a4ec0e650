"""Body shapes of the requests and responses (common/.../protocol/{body,route,heartbeat}/*.java, 4.9.8).

Each class has `to_json()` -> a dict with fastjson's property order (alphabetical) and
`from_json(obj)` that reads what Java, fastjson-legacy or the C++ client send (missing fields take
Java's defaults; enums by name or ordinal). Bytes go through `remoting.jsonbody`.
"""
from __future__ import annotations

import contextlib
import struct
import time
import zlib
from dataclasses import dataclass, field

from mqtool_remoting import jsonbody
from mqtool_remoting.codes import PermName
from mqtool_remoting.errors import BodyError

TOPIC_FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM_WHERE = ("CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                      "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
                      "CONSUME_FROM_TIMESTAMP")


@contextlib.contextmanager
def body_errors(what: str):
    """The one place where a body's decoding failures become BodyError: JSON of the wrong shape
    (a list for an object, text for a number), a cut-off or non-zlib compressed body."""
    try:
        yield
    except BodyError:
        raise
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError, RecursionError,
            struct.error, zlib.error) as exc:
        raise BodyError(f"bad {what} body: {str(exc)[:200]}") from None


def decode_body(cls, data: bytes):
    """`cls.from_json` over the JSON bytes of a body; anything malformed raises BodyError."""
    with body_errors(cls.__name__):
        return cls.from_json(jsonbody.loads(data))


def enum_name(value, names: tuple[str, ...], default: str | None = None) -> str | None:
    """A Java enum sent by name (Java) or by ordinal (the C++ client)."""
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return names[value] if 0 <= value < len(names) else default
    text = str(value)
    if text.lstrip("-").isdigit():
        return enum_name(int(text), names, default)
    return text


def _int(v, default: int = 0) -> int:
    if v is None or v == "":
        return default
    if isinstance(v, dict):            # an AtomicLong some writers spell {"value": n}
        v = v.get("value", default)
    return int(v)


def _bool(v, default: bool = False) -> bool:
    if v is None:
        return default
    if isinstance(v, str):
        return v.lower() == "true"
    return bool(v)


# ------------------------------------------------------------------ topic configs, register broker

@dataclass(frozen=True)
class DataVersion:
    """`stateVersion` is 5.x's (controller mode: the master epoch); None when a 4.9.8 broker sent none."""
    timestamp: int = 0
    counter: int = 0
    stateVersion: int | None = None

    @classmethod
    def now(cls, counter: int = 0) -> "DataVersion":
        return cls(int(time.time() * 1000), counter)

    def to_json(self) -> dict:
        if self.stateVersion is None:
            return {"counter": self.counter, "timestamp": self.timestamp}
        return {"counter": self.counter, "stateVersion": self.stateVersion, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, obj) -> "DataVersion":
        obj = obj or {}
        state = obj.get("stateVersion")
        return cls(_int(obj.get("timestamp")), _int(obj.get("counter")), None if state is None else _int(state))


@dataclass(frozen=True)
class TopicConfig:
    topicName: str
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = PermName.PERM_READ | PermName.PERM_WRITE
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False

    def to_json(self) -> dict:
        return {"order": self.order, "perm": int(self.perm), "readQueueNums": self.readQueueNums,
                "topicFilterType": self.topicFilterType, "topicName": self.topicName,
                "topicSysFlag": self.topicSysFlag, "writeQueueNums": self.writeQueueNums}

    @classmethod
    def from_json(cls, obj: dict, name: str | None = None) -> "TopicConfig":
        return cls(str(obj.get("topicName") or name or ""), _int(obj.get("readQueueNums"), 16),
                   _int(obj.get("writeQueueNums"), 16), _int(obj.get("perm"), 6),
                   enum_name(obj.get("topicFilterType"), TOPIC_FILTER_TYPES, "SINGLE_TAG"),
                   _int(obj.get("topicSysFlag")), _bool(obj.get("order")))

    def encode_text(self) -> str:
        """`TopicConfig.encode()`: the compressed register body's per-topic line (no sysflag, no order)."""
        return f"{self.topicName} {self.readQueueNums} {self.writeQueueNums} {int(self.perm)} {self.topicFilterType}"

    @classmethod
    def decode_text(cls, text: str) -> "TopicConfig":
        parts = text.split(" ")
        if len(parts) != 5:        # Java leaves every default (even a null name) in place
            raise ValueError(f"topic config line needs 5 fields: {text!r}")
        return cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])


@dataclass
class TopicConfigSerializeWrapper:
    topicConfigTable: dict[str, TopicConfig] = field(default_factory=dict)
    dataVersion: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict:
        return {"dataVersion": self.dataVersion.to_json(),
                "topicConfigTable": {k: v.to_json() for k, v in self.topicConfigTable.items()}}

    @classmethod
    def from_json(cls, obj) -> "TopicConfigSerializeWrapper":
        obj = obj or {}
        table = {str(k): TopicConfig.from_json(v or {}, str(k)) for k, v in (obj.get("topicConfigTable") or {}).items()}
        return cls(table, DataVersion.from_json(obj.get("dataVersion")))


_LEN = struct.Struct(">i")
MAX_INFLATED_REGISTER_BODY = 128 << 20     # ~2 million topic lines


@dataclass
class RegisterBrokerBody:
    topicConfigSerializeWrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filterServerList: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"filterServerList": list(self.filterServerList),
                "topicConfigSerializeWrapper": self.topicConfigSerializeWrapper.to_json()}

    @classmethod
    def from_json(cls, obj) -> "RegisterBrokerBody":
        obj = obj or {}
        if "topicConfigSerializeWrapper" not in obj and "topicConfigTable" in obj:
            # brokers older than V3_0_11 send a bare TopicConfigSerializeWrapper
            return cls(TopicConfigSerializeWrapper.from_json(obj), [])
        return cls(TopicConfigSerializeWrapper.from_json(obj.get("topicConfigSerializeWrapper")),
                   [str(s) for s in obj.get("filterServerList") or []])

    def encode(self, compress: bool = False) -> bytes:
        if not compress:
            return jsonbody.dumps(self.to_json())
        # zlib stream (Deflater BEST_COMPRESSION) of length-prefixed parts
        wrapper = self.topicConfigSerializeWrapper
        parts = [_chunk(jsonbody.dumps(wrapper.dataVersion.to_json())), _LEN.pack(len(wrapper.topicConfigTable))]
        parts += [_chunk(tc.encode_text().encode()) for tc in wrapper.topicConfigTable.values()]
        parts.append(_chunk(jsonbody.dumps(list(self.filterServerList))))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, data: bytes, compressed: bool = False) -> "RegisterBrokerBody":
        """Raises BodyError on a body Java could not decode either."""
        if not compressed:
            return decode_body(cls, data)
        with body_errors("compressed RegisterBrokerBody"):
            return cls._decode_compressed(data)

    @classmethod
    def _decode_compressed(cls, data: bytes) -> "RegisterBrokerBody":
        inflater = zlib.decompressobj()
        raw = inflater.decompress(data, MAX_INFLATED_REGISTER_BODY)
        if inflater.unconsumed_tail:      # a 16 MiB frame must not inflate into gigabytes
            raise ValueError(f"compressed register body inflates past {MAX_INFLATED_REGISTER_BODY} bytes")
        p = 0

        def take() -> bytes:
            nonlocal p
            (n,) = _LEN.unpack_from(raw, p)
            if n < 0 or p + 4 + n > len(raw):
                raise ValueError("compressed register body ends early")
            p += 4 + n
            return raw[p - n:p]
        version = DataVersion.from_json(jsonbody.loads(take()))
        (count,) = _LEN.unpack_from(raw, p)
        p += 4
        table = {}
        for _ in range(count):
            tc = TopicConfig.decode_text(take().decode())
            table[tc.topicName] = tc
        servers = jsonbody.loads(take()) or []
        return cls(TopicConfigSerializeWrapper(table, version), [str(s) for s in servers])


def _chunk(b: bytes) -> bytes:
    return _LEN.pack(len(b)) + b


# ------------------------------------------------------------------ routes and clusters

@dataclass
class QueueData:
    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicSysFlag: int = 0

    def to_json(self) -> dict:
        return {"brokerName": self.brokerName, "perm": self.perm, "readQueueNums": self.readQueueNums,
                "topicSysFlag": self.topicSysFlag, "writeQueueNums": self.writeQueueNums}

    @classmethod
    def from_json(cls, obj: dict) -> "QueueData":
        return cls(str(obj.get("brokerName")), _int(obj.get("readQueueNums")), _int(obj.get("writeQueueNums")),
                   _int(obj.get("perm")), _int(obj.get("topicSysFlag", obj.get("topicSynFlag"))))


@dataclass
class BrokerData:
    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str] = field(default_factory=dict)   # brokerId (0 = master) -> ip:port

    def to_json(self) -> dict:
        # brokerAddrs is a HashMap<Long, String>: small ids iterate in numeric order
        return {"brokerAddrs": jsonbody.java_map(self.brokerAddrs), "brokerName": self.brokerName,
                "cluster": self.cluster}

    @classmethod
    def from_json(cls, obj: dict) -> "BrokerData":
        return cls(str(obj.get("cluster")), str(obj.get("brokerName")),
                   {int(k): str(v) for k, v in (obj.get("brokerAddrs") or {}).items()})

    def master_addr(self) -> str | None:
        return self.brokerAddrs.get(0)


@dataclass
class TopicRouteData:
    queueDatas: list[QueueData] = field(default_factory=list)
    brokerDatas: list[BrokerData] = field(default_factory=list)
    filterServerTable: dict[str, list[str]] = field(default_factory=dict)
    orderTopicConf: str | None = None

    def to_json(self) -> dict:
        out = {"brokerDatas": [b.to_json() for b in self.brokerDatas], "filterServerTable": self.filterServerTable}
        if self.orderTopicConf is not None:
            out["orderTopicConf"] = self.orderTopicConf
        out["queueDatas"] = [q.to_json() for q in self.queueDatas]
        return out

    def encode(self, standard: bool = True) -> bytes:
        """standard: what 4.9.4+ name servers send (quoted keys, sorted maps, non-ASCII escaped);
        else the legacy `RemotingSerializable.encode` form with bare broker-id keys."""
        if standard:
            obj = self.to_json()
            for b in obj["brokerDatas"]:
                b["brokerAddrs"] = dict(sorted(b["brokerAddrs"].items()))
            obj["filterServerTable"] = dict(sorted(obj["filterServerTable"].items()))
            return jsonbody.dumps(obj, ascii_only=True)
        return jsonbody.dumps(self.to_json(), bare_int_keys=True)

    @classmethod
    def from_json(cls, obj: dict) -> "TopicRouteData":
        return cls([QueueData.from_json(q) for q in obj.get("queueDatas") or []],
                   [BrokerData.from_json(b) for b in obj.get("brokerDatas") or []],
                   {str(k): list(v or []) for k, v in (obj.get("filterServerTable") or {}).items()},
                   obj.get("orderTopicConf"))

    @classmethod
    def decode(cls, data: bytes) -> "TopicRouteData":
        return decode_body(cls, data)


@dataclass
class ClusterInfo:
    brokerAddrTable: dict[str, BrokerData] = field(default_factory=dict)
    clusterAddrTable: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"brokerAddrTable": {k: v.to_json() for k, v in self.brokerAddrTable.items()},
                "clusterAddrTable": {k: list(v) for k, v in self.clusterAddrTable.items()}}

    def encode(self) -> bytes:
        """Always the legacy encoder, like Java: bare broker-id keys."""
        return jsonbody.dumps(self.to_json(), bare_int_keys=True)

    @classmethod
    def from_json(cls, obj: dict) -> "ClusterInfo":
        return cls({str(k): BrokerData.from_json(v) for k, v in (obj.get("brokerAddrTable") or {}).items()},
                   {str(k): [str(n) for n in v or []] for k, v in (obj.get("clusterAddrTable") or {}).items()})


@dataclass
class KVTable:
    table: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"table": dict(self.table)}

    @classmethod
    def from_json(cls, obj) -> "KVTable":
        return cls({str(k): str(v) for k, v in ((obj or {}).get("table") or {}).items() if v is not None})


@dataclass
class TopicList:
    topicList: list[str] = field(default_factory=list)
    brokerAddr: str | None = None

    def to_json(self) -> dict:
        out: dict = {}
        if self.brokerAddr is not None:
            out["brokerAddr"] = self.brokerAddr
        out["topicList"] = list(self.topicList)
        return out

    @classmethod
    def from_json(cls, obj) -> "TopicList":
        obj = obj or {}
        return cls([str(t) for t in obj.get("topicList") or []], obj.get("brokerAddr"))


# ------------------------------------------------------------------ clients (broker side)

@dataclass(frozen=True)
class MessageQueue:
    topic: str
    brokerName: str
    queueId: int

    def to_json(self) -> dict:
        return {"brokerName": self.brokerName, "queueId": self.queueId, "topic": self.topic}

    @classmethod
    def from_json(cls, obj) -> "MessageQueue":
        if isinstance(obj, jsonbody.ObjectKey):
            obj = obj.as_dict()
        return cls(str(obj.get("topic")), str(obj.get("brokerName")), _int(obj.get("queueId")))

    def key(self) -> jsonbody.ObjectKey:
        """As a map key: fastjson writes it as a JSON object (TopicStatsTable, ConsumeStats)."""
        return jsonbody.ObjectKey.of(self.to_json())


@dataclass
class SubscriptionData:
    topic: str
    subString: str = "*"
    tagsSet: list[str] = field(default_factory=list)
    codeSet: list[int] = field(default_factory=list)
    subVersion: int = 0
    expressionType: str = "TAG"
    classFilterMode: bool = False

    def to_json(self) -> dict:
        return {"classFilterMode": self.classFilterMode, "codeSet": list(self.codeSet),
                "expressionType": self.expressionType, "subString": self.subString,
                "subVersion": self.subVersion, "tagsSet": list(self.tagsSet), "topic": self.topic}

    @classmethod
    def from_json(cls, obj: dict) -> "SubscriptionData":
        # The C++ client sends subVersion as a string and a codeSet of atoi(tag): keep it, trust tagsSet.
        return cls(str(obj.get("topic")), str(obj.get("subString") or "*"),
                   [str(t) for t in obj.get("tagsSet") or []], [_int(c) for c in obj.get("codeSet") or []],
                   _int(obj.get("subVersion")), str(obj.get("expressionType") or "TAG"),
                   _bool(obj.get("classFilterMode")))


@dataclass
class ConsumerData:
    groupName: str
    consumeType: str = "CONSUME_PASSIVELY"
    messageModel: str = "CLUSTERING"
    consumeFromWhere: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptionDataSet: list[SubscriptionData] = field(default_factory=list)
    unitMode: bool = False

    def to_json(self) -> dict:
        return {"consumeFromWhere": self.consumeFromWhere, "consumeType": self.consumeType,
                "groupName": self.groupName, "messageModel": self.messageModel,
                "subscriptionDataSet": [s.to_json() for s in self.subscriptionDataSet], "unitMode": self.unitMode}

    @classmethod
    def from_json(cls, obj: dict) -> "ConsumerData":
        return cls(str(obj.get("groupName")),
                   enum_name(obj.get("consumeType"), CONSUME_TYPES, "CONSUME_PASSIVELY"),
                   enum_name(obj.get("messageModel"), MESSAGE_MODELS, "CLUSTERING"),
                   enum_name(obj.get("consumeFromWhere"), CONSUME_FROM_WHERE, "CONSUME_FROM_LAST_OFFSET"),
                   [SubscriptionData.from_json(s) for s in obj.get("subscriptionDataSet") or []],
                   _bool(obj.get("unitMode")))


@dataclass
class HeartbeatData:
    clientID: str
    producerDataSet: list[str] = field(default_factory=list)          # producer group names
    consumerDataSet: list[ConsumerData] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"clientID": self.clientID, "consumerDataSet": [c.to_json() for c in self.consumerDataSet],
                "producerDataSet": [{"groupName": g} for g in self.producerDataSet]}

    @classmethod
    def from_json(cls, obj) -> "HeartbeatData":
        obj = obj or {}
        return cls(str(obj.get("clientID") or ""),
                   [str(p.get("groupName")) for p in obj.get("producerDataSet") or [] if isinstance(p, dict)],
                   [ConsumerData.from_json(c) for c in obj.get("consumerDataSet") or [] if isinstance(c, dict)])


@dataclass
class Connection:
    clientId: str
    clientAddr: str
    language: str = "JAVA"
    version: int = 0

    def to_json(self) -> dict:
        return {"clientAddr": self.clientAddr, "clientId": self.clientId, "language": self.language,
                "version": self.version}

    @classmethod
    def from_json(cls, obj: dict) -> "Connection":
        return cls(str(obj.get("clientId")), str(obj.get("clientAddr")), str(obj.get("language") or "JAVA"),
                   _int(obj.get("version")))


@dataclass
class ConsumerConnection:
    connectionSet: list[Connection] = field(default_factory=list)
    subscriptionTable: dict[str, SubscriptionData] = field(default_factory=dict)
    consumeType: str | None = None
    messageModel: str | None = None
    consumeFromWhere: str | None = None

    def to_json(self) -> dict:
        out: dict = {"connectionSet": [c.to_json() for c in self.connectionSet]}
        for name in ("consumeFromWhere", "consumeType", "messageModel"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out["subscriptionTable"] = {k: v.to_json() for k, v in self.subscriptionTable.items()}
        return dict(sorted(out.items()))

    @classmethod
    def from_json(cls, obj: dict) -> "ConsumerConnection":
        return cls([Connection.from_json(c) for c in obj.get("connectionSet") or []],
                   {str(k): SubscriptionData.from_json(v) for k, v in (obj.get("subscriptionTable") or {}).items()},
                   enum_name(obj.get("consumeType"), CONSUME_TYPES),
                   enum_name(obj.get("messageModel"), MESSAGE_MODELS),
                   enum_name(obj.get("consumeFromWhere"), CONSUME_FROM_WHERE))


@dataclass
class LockBatchRequestBody:
    """LOCK_BATCH_MQ request; UNLOCK_BATCH_MQ's body has the same shape."""
    consumerGroup: str
    clientId: str
    mqSet: list[MessageQueue] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"clientId": self.clientId, "consumerGroup": self.consumerGroup,
                "mqSet": [m.to_json() for m in self.mqSet]}

    @classmethod
    def from_json(cls, obj: dict) -> "LockBatchRequestBody":
        return cls(str(obj.get("consumerGroup")), str(obj.get("clientId")),
                   [MessageQueue.from_json(m) for m in obj.get("mqSet") or []])


UnlockBatchRequestBody = LockBatchRequestBody


@dataclass
class LockBatchResponseBody:
    lockOKMQSet: list[MessageQueue] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"lockOKMQSet": [m.to_json() for m in self.lockOKMQSet]}

    @classmethod
    def from_json(cls, obj: dict) -> "LockBatchResponseBody":
        return cls([MessageQueue.from_json(m) for m in obj.get("lockOKMQSet") or []])


# ------------------------------------------------------------------ admin bodies (broker, issue 10)
# MessageQueue-keyed maps are fastjson object keys (spec remoting.md §7.9); nulls are left out, as
# fastjson does without WriteMapNullValue.

def _java_date(ms: int) -> str:
    """UtilAll.formatDate(date, "yyyy-MM-dd#HH:mm:ss:SSS") in local time."""
    t = time.localtime(ms / 1000)
    return time.strftime("%Y-%m-%d#%H:%M:%S", t) + f":{ms % 1000:03d}"


@dataclass
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO: `{"groupList":["G1","G2"]}`."""
    groupList: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"groupList": list(self.groupList)}

    @classmethod
    def from_json(cls, obj) -> "GroupList":
        return cls([str(g) for g in (obj or {}).get("groupList") or []])


@dataclass
class OffsetWrapper:
    brokerOffset: int = 0
    consumerOffset: int = 0
    lastTimestamp: int = 0

    def to_json(self) -> dict:
        return {"brokerOffset": self.brokerOffset, "consumerOffset": self.consumerOffset,
                "lastTimestamp": self.lastTimestamp}


@dataclass
class ConsumeStats:
    """GET_CONSUME_STATS: `{"consumeTps":1.5,"offsetTable":{{mq}:{OffsetWrapper}}}`."""
    offsetTable: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consumeTps: float = 0.0

    def total_diff(self) -> int:
        return sum(w.brokerOffset - w.consumerOffset for w in self.offsetTable.values())

    def to_json(self) -> dict:
        return {"consumeTps": float(self.consumeTps),
                "offsetTable": {mq.key(): w.to_json() for mq, w in self.offsetTable.items()}}


@dataclass
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS: `{"brokerAddr":…,"consumeStatsList":[{"G":[ConsumeStats…]}],"totalDiff":n}`."""
    consumeStatsList: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    brokerAddr: str | None = None
    totalDiff: int = 0

    def to_json(self) -> dict:
        out = {"brokerAddr": self.brokerAddr} if self.brokerAddr is not None else {}
        out["consumeStatsList"] = [{g: [s.to_json() for s in stats] for g, stats in entry.items()}
                                   for entry in self.consumeStatsList]
        out["totalDiff"] = self.totalDiff
        return out


@dataclass
class QueueTimeSpan:
    messageQueue: MessageQueue
    minTimeStamp: int = 0
    maxTimeStamp: int = 0
    consumeTimeStamp: int = 0
    delayTime: int = 0

    def to_json(self) -> dict:
        # the *Str properties are getters fastjson writes too
        return {"consumeTimeStamp": self.consumeTimeStamp, "consumeTimeStampStr": _java_date(self.consumeTimeStamp),
                "delayTime": self.delayTime, "maxTimeStamp": self.maxTimeStamp,
                "maxTimeStampStr": _java_date(self.maxTimeStamp), "messageQueue": self.messageQueue.to_json(),
                "minTimeStamp": self.minTimeStamp, "minTimeStampStr": _java_date(self.minTimeStamp)}


@dataclass
class QueryConsumeTimeSpanBody:
    """QUERY_CONSUME_TIME_SPAN: `{"consumeTimeSpanSet":[QueueTimeSpan…]}`."""
    consumeTimeSpanSet: list[QueueTimeSpan] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"consumeTimeSpanSet": [s.to_json() for s in self.consumeTimeSpanSet]}


@dataclass
class BrokerStatsItem:
    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict:
        return {"avgpt": float(self.avgpt), "sum": self.sum, "tps": float(self.tps)}


@dataclass
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA: `{"statsDay":{"avgpt":…,"sum":…,"tps":…},"statsHour":{…},"statsMinute":{…}}`."""
    statsMinute: BrokerStatsItem
    statsHour: BrokerStatsItem
    statsDay: BrokerStatsItem

    def to_json(self) -> dict:
        return {"statsDay": self.statsDay.to_json(), "statsHour": self.statsHour.to_json(),
                "statsMinute": self.statsMinute.to_json()}


@dataclass
class ConsumeQueueData:
    physicOffset: int
    physicSize: int
    tagsCode: int
    extendDataJson: str | None = None
    bitMap: str | None = None
    eval: bool = False
    msg: str | None = None

    def to_json(self) -> dict:
        out = {"bitMap": self.bitMap, "eval": self.eval, "extendDataJson": self.extendDataJson, "msg": self.msg,
               "physicOffset": self.physicOffset, "physicSize": self.physicSize, "tagsCode": self.tagsCode}
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class QueryConsumeQueueResponseBody:
    """QUERY_CONSUME_QUEUE: `{"filterData":…,"maxQueueIndex":n,"minQueueIndex":n,"queueData":[…],"subscriptionData":{…}}`."""
    maxQueueIndex: int = 0
    minQueueIndex: int = 0
    queueData: list[ConsumeQueueData] | None = None
    subscriptionData: dict | None = None
    filterData: str | None = None

    def to_json(self) -> dict:
        out = {"filterData": self.filterData, "maxQueueIndex": self.maxQueueIndex,
               "minQueueIndex": self.minQueueIndex,
               "queueData": None if self.queueData is None else [u.to_json() for u in self.queueData],
               "subscriptionData": self.subscriptionData}
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class ResetOffsetBody:
    """RESET_CONSUMER_CLIENT_OFFSET / INVOKE_BROKER_TO_RESET_OFFSET: `{"offsetTable":{{mq}:offset}}`."""
    offsetTable: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"offsetTable": {mq.key(): off for mq, off in self.offsetTable.items()}}

    @classmethod
    def from_json(cls, obj) -> "ResetOffsetBody":
        table = (obj or {}).get("offsetTable") or {}
        return cls({MessageQueue.from_json(k): _int(v) for k, v in table.items()})


@dataclass
class ResetOffsetBodyForC:
    """The same for a CPP client: `{"offsetTable":[{"brokerName":…,"offset":n,"queueId":n,"topic":…}]}`."""
    offsetTable: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"offsetTable": [{**mq.to_json(), "offset": off} for mq, off in self.offsetTable.items()]}


@dataclass
class GetConsumerStatusBody:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: `{"consumerTable":{clientId:{{mq}:offset}},"messageQueueTable":{}}`."""
    consumerTable: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)
    messageQueueTable: dict[MessageQueue, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"consumerTable": {c: {mq.key(): off for mq, off in t.items()} for c, t in self.consumerTable.items()},
                "messageQueueTable": {mq.key(): off for mq, off in self.messageQueueTable.items()}}

    @classmethod
    def from_json(cls, obj) -> "GetConsumerStatusBody":
        obj = obj or {}

        def table(t):
            return {MessageQueue.from_json(k): _int(v) for k, v in (t or {}).items()}
        return cls({str(c): table(t) for c, t in (obj.get("consumerTable") or {}).items()},
                   table(obj.get("messageQueueTable")))


@dataclass
class QueryCorrectionOffsetBody:
    """QUERY_CORRECTION_OFFSET: `{"correctionOffsets":{0:5,1:7}}` (Integer keys, bare in legacy fastjson)."""
    correctionOffsets: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"correctionOffsets": dict(self.correctionOffsets)}


@dataclass
class ProducerInfo:
    clientId: str
    remoteIP: str
    language: str
    version: int
    lastUpdateTimestamp: int

    def to_json(self) -> dict:
        return {"clientId": self.clientId, "language": self.language, "lastUpdateTimestamp": self.lastUpdateTimestamp,
                "remoteIP": self.remoteIP, "version": self.version}


@dataclass
class ProducerTableInfo:
    """GET_ALL_PRODUCER_INFO: `{"data":{group:[ProducerInfo…]}}`."""
    data: dict[str, list[ProducerInfo]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"data": {g: [p.to_json() for p in ps] for g, ps in self.data.items()}}


@dataclass
class CheckClientRequestBody:
    """CHECK_CLIENT_CONFIG request: `{"clientId":…,"group":…,"subscriptionData":{…}}`."""
    clientId: str | None = None
    group: str | None = None
    subscriptionData: SubscriptionData | None = None

    @classmethod
    def from_json(cls, obj) -> "CheckClientRequestBody":
        obj = obj or {}
        sub = obj.get("subscriptionData")
        return cls(obj.get("clientId"), obj.get("group"), SubscriptionData.from_json(sub) if sub else None)
