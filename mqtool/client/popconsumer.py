"""The POP consumer (RocketMQ 5.x over remoting; shared/spec/rocketmq5.md 2): the broker hands out
messages and hides them for an invisible time; the consumer acks them, or changes that time, and
what it does not ack comes back later through the group's POP retry topic. No rebalancing: every
consumer of the group pops from every broker of the topic (queueId -1).
"""
from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from mqtool_remoting import extrainfo as ei
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingError
from mqtool_store.commitlog import MessageRecord

from mqtool.client.base import ClientBase, check
from mqtool.client.records import decode_records

POP_CK, FIRST_POP_TIME = "POP_CK", "1ST_POP_TIME"
INIT_MIN, INIT_MAX = 0, 1             # ConsumeInitMode
MAX_NUMS = 32
HEARTBEAT_S = 30.0                    # heartbeatBrokerInterval: the group lists this consumer
EMPTY = (ResponseCode.POLLING_TIMEOUT, ResponseCode.POLLING_FULL, ResponseCode.PULL_NOT_FOUND)


@dataclass
class Popped:
    """One message as popped: its record (topic the normal one), where it came from, its handle."""
    record: MessageRecord
    broker_name: str
    addr: str
    extra: ei.ExtraInfo              # the POP_CK / ExtraInfo acks echo

    @property
    def extra_info(self) -> str:
        return self.extra.text()

    def real_topic(self, group: str) -> str:
        return ei.real_topic(self.extra.kind, self.record.topic, group)


def _with_property(rec: MessageRecord, key: str, value: str) -> None:
    """A property added to the record's text (and to its parsed dict if it has one): most callers
    never parse the properties of what they consume."""
    text = rec.properties_text
    rec.properties_text = f"{text}\x02{key}\x01{value}" if text and not text.endswith("\x02") else \
        f"{text}{key}\x01{value}"
    if rec.parsed_properties is not None:
        rec.parsed_properties[key] = value


def _has(text: str, key: str) -> bool:
    return text.startswith(key + "\x01") or f"\x02{key}\x01" in text


def popped_messages(resp: RemotingCommand, broker_name: str, addr: str) -> list[Popped]:
    """MQClientAPIImpl.processPopResponse: each message's POP_CK from the answer's header strings
    (a retried message carries its own), 1ST_POP_TIME, and for an orderly POP reconsumeTimes."""
    e = resp.ext_fields
    pop_time, invisible, revive = int(e["popTime"]), int(e["invisibleTime"]), int(e["reviveQid"])
    starts = ei.parse_start_offset_info(e.get("startOffsetInfo"))
    counts = ei.parse_order_count_info(e.get("orderCountInfo"))
    out = []
    for rec in decode_records(resp.body):
        text = rec.properties_text
        if _has(text, POP_CK):
            extra = ei.parse_extra_info(rec.properties[POP_CK])
            if extra.queue_offset is None:      # a broker before 5.0 gives the 7-field form
                extra = dataclasses.replace(extra, queue_offset=rec.queue_offset)
        else:
            key = ei.start_offset_key(rec.topic, rec.queue_id)
            if key in starts:
                extra = ei.ExtraInfo(starts[key], pop_time, invisible, revive, ei.topic_type(rec.topic), broker_name,
                                     rec.queue_id, rec.queue_offset)
            else:                               # a broker before 5.0: the checkpoint starts at the message
                extra = ei.ExtraInfo(rec.queue_offset, pop_time, invisible, revive, ei.topic_type(rec.topic),
                                     broker_name, rec.queue_id, rec.queue_offset)
            _with_property(rec, POP_CK, extra.text())
        if not _has(text, FIRST_POP_TIME):
            _with_property(rec, FIRST_POP_TIME, str(pop_time))
        if counts:
            count = counts.get(ei.queue_offset_map_key(rec.topic, rec.queue_id, rec.queue_offset),
                               counts.get(ei.start_offset_key(rec.topic, rec.queue_id)))
            if count is not None:
                rec.reconsume_times = count
        out.append(Popped(rec, broker_name, addr, extra))
    return out


def bitset_base64(offsets: list[int], start: int) -> str:
    """java.util.BitSet.toByteArray of the offsets' bits (bit i = offset start + i), base64."""
    bits = bytearray()
    for off in offsets:
        i = off - start
        if i < 0:
            raise ValueError(f"offset {off} is before the checkpoint's start {start}")
        while len(bits) <= i // 8:
            bits.append(0)
        bits[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(bits)).decode()


class PopConsumer(ClientBase):
    def __init__(self, namesrv: str, group: str, topic: str, expression: str = "*", expression_type: str = "TAG",
                 invisible_ms: int = 30_000, poll_ms: int = 5_000, batch: int = MAX_NUMS, order: bool = False,
                 init_mode: int = INIT_MAX, timeout_s: float = 3.0, instance: str | None = None, credentials=None):
        super().__init__(namesrv, timeout_s, instance, credentials)
        self.group, self.topic = group, topic
        self.expression, self.expression_type = expression, expression_type
        self.invisible_ms, self.poll_ms = invisible_ms, poll_ms
        self.batch, self.order, self.init_mode = min(batch, MAX_NUMS), order, init_mode
        self.attempt_id: str | None = None
        self._beat_at = float("-inf")

    async def heartbeat(self) -> None:
        """HEART_BEAT to every broker of the topic: a consumer of its group (consumeType CONSUME_POP, as
        5.x's pop-mode consumer sends), so `mqtool group connections` lists it."""
        sub = {"classFilterMode": False, "codeSet": [], "expressionType": self.expression_type,
               "subString": self.expression, "subVersion": int(time.time() * 1000), "tagsSet": [], "topic": self.topic}
        body = jsonbody.dumps({"clientID": self.client_id, "producerDataSet": [], "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_POP", "groupName": self.group,
            "messageModel": "CLUSTERING", "subscriptionDataSet": [sub], "unitMode": False}]})
        for _, addr in await self.brokers():
            check(await self.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body)), "heartbeat")
        self._beat_at = time.monotonic()

    async def brokers(self) -> list[tuple[str, str]]:
        """(broker name, master address) of every broker with readable queues of the topic."""
        route = await self.route(self.topic)
        out = []
        for q in sorted(route.queues, key=lambda q: q["brokerName"]):
            addr = route.master(q["brokerName"])
            if q.get("perm", 6) & 4 and addr:
                out.append((q["brokerName"], addr))
        return out

    def _pop_request(self, queue_id: int, nums: int, poll_ms: int) -> RemotingCommand:
        ext = {"consumerGroup": self.group, "topic": self.topic, "queueId": queue_id, "maxMsgNums": nums,
               "invisibleTime": self.invisible_ms, "pollTime": poll_ms, "bornTime": int(time.time() * 1000),
               "initMode": self.init_mode, "expType": self.expression_type, "exp": self.expression}
        if self.order:
            ext["order"] = "true"
            if self.attempt_id:
                ext["attemptId"] = self.attempt_id
        return RemotingCommand.request(RequestCode.POP_MESSAGE, ext)

    async def pop_from(self, broker_name: str, addr: str, nums: int | None = None, poll_ms: int | None = None,
                       queue_id: int = -1) -> list[Popped]:
        poll = self.poll_ms if poll_ms is None else poll_ms
        resp = await self.invoke(addr, self._pop_request(queue_id, nums or self.batch, poll),
                                 self.timeout_s + poll / 1000)
        if resp.code in EMPTY:
            return []
        check(resp, f"pop {self.topic} from {broker_name}")
        return popped_messages(resp, broker_name, addr)

    async def pop(self, nums: int | None = None, poll_ms: int | None = None) -> list[Popped]:
        """One POP from each broker in turn, until one hands out messages (the last one long-polls)."""
        if time.monotonic() - self._beat_at >= HEARTBEAT_S:
            try:
                await self.heartbeat()
            except RemotingError:
                pass                        # a heartbeat is not worth failing a pop over: next time
        brokers = await self.brokers()
        for i, (name, addr) in enumerate(brokers):
            got = await self.pop_from(name, addr, nums, poll_ms if i == len(brokers) - 1 else 0)
            if got:
                return got
        return []

    async def ack(self, msg: Popped) -> None:
        extra = msg.extra
        resp = await self.invoke(msg.addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, {
            "consumerGroup": self.group, "topic": msg.real_topic(self.group), "queueId": extra.queue_id,
            "extraInfo": msg.extra_info, "offset": extra.queue_offset}))
        check(resp, f"ack of {msg.record.topic} queue {extra.queue_id} offset {extra.queue_offset}")

    async def ack_all(self, msgs: list[Popped]) -> None:
        """BATCH_ACK_MESSAGE, one per broker: the messages of one checkpoint as one bit set."""
        by_broker: dict[str, dict[tuple, list[int]]] = {}
        for m in msgs:
            x = m.extra
            key = (m.broker_name, m.addr, m.record.topic, x.kind, x.queue_id, x.ck_offset, x.pop_time,
                   x.invisible_time, x.revive_qid)
            by_broker.setdefault(m.addr, {}).setdefault(key, []).append(x.queue_offset)
        for addr, groups in by_broker.items():
            acks = [{"b": bitset_base64(offs, so), "c": self.group, "it": it, "pt": pt, "q": q, "r": kind, "rq": rq,
                     "so": so, "t": topic} for (_, _, topic, kind, q, so, pt, it, rq), offs in groups.items()]
            name = next(iter(groups))[0]
            resp = await self.invoke(addr, RemotingCommand.request(
                RequestCode.BATCH_ACK_MESSAGE, body=jsonbody.dumps({"acks": acks, "brokerName": name})))
            check(resp, f"batch ack of {sum(len(o) for o in groups.values())} messages")

    async def change_invisible(self, msg: Popped, invisible_ms: int) -> Popped:
        """CHANGE_MESSAGE_INVISIBLETIME: the message stays hidden `invisible_ms` from now; the answer's
        handle (what later acks must use) replaces the message's."""
        extra = msg.extra
        resp = await self.invoke(msg.addr, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
            "consumerGroup": self.group, "topic": msg.real_topic(self.group), "queueId": extra.queue_id,
            "extraInfo": msg.extra_info, "offset": extra.queue_offset, "invisibleTime": invisible_ms}))
        check(resp, f"change of the invisible time of {msg.record.topic} offset {extra.queue_offset}")
        e = resp.ext_fields
        start = extra.ck_offset if extra.order else extra.queue_offset
        new = ei.ExtraInfo(start, int(e["popTime"]), int(e["invisibleTime"]), int(e["reviveQid"]), extra.kind,
                           extra.broker_name, extra.queue_id, extra.queue_offset)
        return Popped(msg.record, msg.broker_name, msg.addr, new)

    async def notification(self, poll_ms: int = 0) -> bool:
        """NOTIFICATION on every broker: whether any has something to pop."""
        for name, addr in await self.brokers():
            resp = await self.invoke(addr, RemotingCommand.request(RequestCode.NOTIFICATION, {
                "consumerGroup": self.group, "topic": self.topic, "queueId": -1, "pollTime": poll_ms,
                "bornTime": int(time.time() * 1000)}), self.timeout_s + poll_ms / 1000)
            check(resp, f"notification from {name}")
            if resp.ext_fields.get("hasMsg") == "true":
                return True
        return False

    async def messages(self, poll_ms: int | None = None) -> AsyncIterator[Popped]:
        """Popped messages as they come, from every broker in turn (for ever; the caller acks)."""
        while True:
            try:
                got = await self.pop(poll_ms=poll_ms)
            except RemotingError:
                await asyncio.sleep(1.0)        # a broker gone: its route comes back or changes
                await self.route(self.topic, refresh=True)
                continue
            for m in got:
                yield m
