"""POP's records on disk (5.x; shared/spec/rocketmq5.md 2.6, 2.10): the revive topic's checkpoint and
ack bodies (fastjson: fields in alphabetical order, nulls left out, short names) and the orderly POP
state of `config/consumerOrderInfo.json`. Pure: the broker writes and reads them, `store dump`
decodes them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"      # PopAckConstants.REVIVE_TOPIC + cluster
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"         # PopAckConstants.REVIVE_GROUP
CK_TAG, ACK_TAG, BATCH_ACK_TAG = "ck", "ack", "bAck"
SPLIT = "@"                                       # PopAckConstants.SPLIT
ORDER_INFO_FILE = "consumerOrderInfo.json"


def revive_topic(cluster: str) -> str:
    """buildClusterReviveTopic."""
    return REVIVE_TOPIC_PREFIX + cluster


def _dumps(d: dict) -> str:
    return json.dumps({k: v for k, v in sorted(d.items()) if v is not None}, ensure_ascii=False,
                      separators=(",", ":"))


@dataclass
class CheckPoint:
    """PopCheckPoint: `n` messages popped from queue `q` of topic `t` (the retry topic for a retry pop)
    by group `c`, at offsets `so + d[i]`; bit i of `bm` set once message i is acked."""
    so: int
    pt: int
    it: int
    n: int
    q: int
    t: str
    c: str
    bn: str
    d: list[int] | None = None
    bm: int = 0
    ro: int = 0                  # its own offset in the revive queue (filled on read)
    rp: str | None = None        # re-put count (after failed re-puts), absent = 0

    @property
    def revive_time(self) -> int:
        return self.pt + self.it

    def offset(self, i: int) -> int:
        return self.so + (self.d[i] if self.d is not None else i)

    def index_of(self, queue_offset: int) -> int:
        """The index of a message offset in this checkpoint, -1 when it is not one of them."""
        delta = queue_offset - self.so
        if self.d is None:
            return delta if 0 <= delta < self.n else -1
        try:
            return self.d.index(delta)
        except ValueError:
            return -1

    def key(self) -> str:
        """PopReviveService's map key: topic, group, queue, start offset, pop time, broker."""
        return f"{self.t}{self.c}{self.q}{self.so}{self.pt}{self.bn}"

    def unique_id(self) -> str:
        """genCkUniqueId (the record's UNIQ_KEY)."""
        return SPLIT.join((self.t, str(self.q), str(self.so), self.c, str(self.pt), self.bn, CK_TAG))

    def to_json(self) -> str:
        return _dumps({"so": self.so, "pt": self.pt, "it": self.it, "bm": self.bm, "n": self.n, "q": self.q,
                       "t": self.t, "c": self.c, "ro": self.ro, "d": self.d, "bn": self.bn, "rp": self.rp,
                       "reviveTime": self.revive_time})

    @classmethod
    def from_json(cls, text: str | bytes) -> CheckPoint:
        j = json.loads(text)
        return cls(int(j["so"]), int(j["pt"]), int(j["it"]), int(j["n"]), int(j["q"]), j["t"], j["c"],
                   j.get("bn", ""), j.get("d"), int(j.get("bm", 0)), int(j.get("ro", 0)), j.get("rp"))


_ACK_LONG_NAMES = {"ackOffset": "ao", "startOffset": "so", "consumerGroup": "c", "topic": "t", "queueId": "q",
                   "popTime": "pt", "brokerName": "bn", "ackOffsetList": "aol"}


@dataclass
class AckMsg:
    """AckMsg (`ao` the acked offset) or, with `aol`, BatchAckMsg (`ao` -1, the offsets in `aol`)."""
    ao: int
    so: int
    c: str
    t: str
    q: int
    pt: int
    bn: str
    aol: list[int] | None = None

    @property
    def offsets(self) -> list[int]:
        return self.aol if self.aol is not None else [self.ao]

    def unique_id(self) -> str:
        """genAckUniqueId (the batch form's final UNIQ_KEY too, with `ao` -1)."""
        return SPLIT.join((self.t, str(self.q), str(self.ao), self.c, str(self.pt), self.bn, ACK_TAG))

    def to_json(self) -> str:
        return _dumps({"ao": self.ao, "so": self.so, "c": self.c, "t": self.t, "q": self.q, "pt": self.pt,
                       "bn": self.bn, "aol": self.aol})

    @classmethod
    def from_json(cls, text: str | bytes) -> AckMsg:
        j = {_ACK_LONG_NAMES.get(k, k): v for k, v in json.loads(text).items()}
        aol = [int(o) for o in j["aol"]] if j.get("aol") is not None else None
        return cls(int(j.get("ao", -1)), int(j["so"]), j["c"], j["t"], int(j["q"]), int(j["pt"]), j.get("bn", ""),
                   aol)


def decode_revive_body(tags: str | None, body: bytes) -> CheckPoint | AckMsg | None:
    """A revive queue record's body by its tag; None for another tag or a body that does not parse."""
    try:
        if tags == CK_TAG:
            return CheckPoint.from_json(body)
        if tags in (ACK_TAG, BATCH_ACK_TAG):
            return AckMsg.from_json(body)
    except (ValueError, KeyError, TypeError):
        return None
    return None


# ---------------------------------------------------------------- consumerOrderInfo.json (2.10)

@dataclass
class OrderInfo:
    """ConsumerOrderInfoManager.OrderInfo: the last orderly batch of one queue for one group."""
    popTime: int
    i: int                              # invisible time
    o: list[int]                        # [first offset, delta1, ...]
    l: int                              # last consume time (ms)
    a: str | None = None                # attempt id
    cm: int = 0                         # commit bits: bit i = offset i acked
    oc: dict[int, int] = field(default_factory=dict)       # offset -> consumed count
    ot: dict[int, int] = field(default_factory=dict)       # offset -> next visible time override

    @property
    def offsets(self) -> list[int]:
        return [self.o[0]] + [self.o[0] + d for d in self.o[1:]] if self.o else []

    def to_json(self) -> dict:
        d = {"a": self.a, "cm": self.cm, "i": self.i, "l": self.l, "o": list(self.o), "popTime": self.popTime}
        if self.oc:
            d["oc"] = dict(self.oc)
        if self.ot:
            d["ot"] = dict(self.ot)
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_json(cls, j: dict) -> OrderInfo:
        return cls(int(j.get("popTime", 0)), int(j.get("i", 0)), [int(x) for x in j.get("o") or []],
                   int(j.get("l", 0)), j.get("a"), int(j.get("cm", 0)),
                   {int(k): int(v) for k, v in (j.get("oc") or {}).items()},
                   {int(k): int(v) for k, v in (j.get("ot") or {}).items()})


def order_table_json(table: dict[str, dict[int, OrderInfo]]) -> dict:
    return {"table": {key: {q: info.to_json() for q, info in queues.items()} for key, queues in table.items()}}


def order_table_from_json(data: dict) -> dict[str, dict[int, OrderInfo]]:
    return {key: {int(q): OrderInfo.from_json(info) for q, info in queues.items()}
            for key, queues in (data.get("table") or {}).items()}
