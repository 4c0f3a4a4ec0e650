"""Producer: queue selection, retries, unique ids, compression, orderly, batch, delay, oneway."""
from __future__ import annotations

import functools
import itertools
import os
import struct
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from mqtool_remoting.batch import encode_batch
from mqtool.client.base import ROUTE_TTL_S, ClientBase, MessageQueue, TopicRoute, client_ip
from mqtool.client.trace import TRACE_TIMEOUT_S, TraceDispatcher, msg_type_of
from mqtool.common.vipchannel import vip_channel
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RPC_ONEWAY, RequestCode, ResponseCode, code_name
from mqtool_remoting.command import HeaderTemplate, RemotingCommand, next_opaque
from mqtool_remoting.errors import BrokerUnreachable, RemotingCommandError, RemotingError
from mqtool_store.properties import format_properties
from mqtool.client.records import decode_records     # inflated, as Java's MessageDecoder.decode

COMPRESS_OVER = 4096
DEFAULT_TOPIC = "TBW102"
SYSFLAG_COMPRESSED_ZLIB = 0x1 | (3 << 8)
SEND_OK_CODES = {ResponseCode.SUCCESS: "SEND_OK", ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
                 ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
                 ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE"}


@dataclass
class OutMessage:
    topic: str
    body: bytes
    keys: list[str] = field(default_factory=list)
    tags: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0
    flag: int = 0
    deliver_time_ms: int = 0      # 5.x timer message: deliver at this epoch ms (TIMER_DELIVER_MS)
    delay_time_ms: int = 0        # 5.x timer message: deliver this long after the broker stores it (TIMER_DELAY_MS)


@dataclass
class SendResult:
    status: str
    msg_id: str            # the UNIQ_KEY (what users see as the message id)
    offset_msg_id: str
    broker: str
    queue_id: int
    queue_offset: int
    broker_addr: str = ""              # where it was sent (a trace's storeHost)
    region_id: str = "DefaultRegion"   # the answer's MSG_REGION (absent or empty: DefaultRegion)
    trace_on: bool = True              # the answer's TRACE_ON: only `false` turns the send's trace off
    recall_handle: str = ""            # a 5.x timer message's handle for Producer.recall


def month_bounds(now_ms: int, tz: tzinfo | None = None) -> tuple[int, int]:
    """The month that holds `now_ms` as [start, next start) in epoch ms, midnight of day 1 in `tz`
    (None: the local time zone, as Java's Calendar.getInstance() takes the default one)."""
    day1 = datetime.fromtimestamp(now_ms // 1000, tz).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = day1.replace(year=day1.year + 1, month=1) if day1.month == 12 else day1.replace(month=day1.month + 1)
    return int(day1.timestamp()) * 1000, int(following.timestamp()) * 1000


class UniqIdMaker:
    """MessageClientIDSetter's UNIQ_KEY, byte for byte: IP(4) + (short) pid(2) + class loader hash(4)
    + (int)(now - start of the month)(4) + (short) counter(2), as uppercase hex.

    As Java: the month start moves when the clock passes the next month's start (a producer that
    runs for months), and the ms difference is cast to a signed int, so from about day 24.9 of a
    month it wraps and its four bytes are the two's complement. `clock` gives epoch ms; `tz` is the
    zone the month starts in (None: local)."""

    def __init__(self, ip: str, clock=None, tz: tzinfo | None = None):
        parts = [int(x) for x in ip.split(".")] if ip.count(".") == 3 else [127, 0, 0, 1]
        self.fixed = bytes(parts) + struct.pack(">Hi", os.getpid() & 0xFFFF, id(self) & 0x7FFFFFFF)
        self.fixed_hex = self.fixed.hex().upper()
        self.counter = itertools.count()
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.tz = tz
        self.month_start, self.next_month_start = month_bounds(self.clock(), tz)

    def next(self) -> str:
        now = self.clock()
        if now >= self.next_month_start:
            self.month_start, self.next_month_start = month_bounds(now, self.tz)
        diff = (now - self.month_start) & 0xFFFFFFFF
        return f"{self.fixed_hex}{diff:08X}{next(self.counter) & 0xFFFF:04X}"

    def take(self, n: int) -> list[str]:
        """n ids made at once (one clock reading: what n calls of `next` in the same ms give)."""
        now = self.clock()
        if now >= self.next_month_start:
            self.month_start, self.next_month_start = month_bounds(now, self.tz)
        head = f"{self.fixed_hex}{(now - self.month_start) & 0xFFFFFFFF:08X}"
        return [f"{head}{c & 0xFFFF:04X}" for c in itertools.islice(self.counter, n)]


class Producer(ClientBase):
    """`trace=True` writes a Pub trace record per send that returns a result (and an EndTransaction
    per transaction end) to `trace_topic` (RMQ_SYS_TRACE_TOPIC), as a 4.9.8 producer made with
    enableMsgTrace does; the records leave in batches, off the send's path (mqtool/client/trace.py)."""

    def __init__(self, namesrv: str, group: str = "PID_MQTOOL", retries: int = 2, timeout_s: float = 3.0,
                 compress_over: int = COMPRESS_OVER, instance: str | None = None, credentials=None,
                 vip_channel: bool = False, trace: bool = False, trace_topic: str | None = None,
                 tracer: TraceDispatcher | None = None):
        super().__init__(namesrv, timeout_s, instance, credentials)
        self.group = group
        # sendMessageWithVIPChannel (Java's com.rocketmq.sendMessageWithVIPChannel, default false in 4.9.8):
        # sends go to the broker's fast port, listenPort - 2; heartbeats stay on the main port
        self.vip_channel = vip_channel
        self.tracer = tracer or (tracer_for(self, "PRODUCE", trace_topic) if trace else None)
        self.retries = retries
        self.compress_over = compress_over
        self.acked = 0           # messages brokers acknowledged (an error names how many came before it)
        self.ids = UniqIdMaker(self.client_id.split("@")[0])
        self._rr = itertools.count()
        self._heartbeat_sent: set[str] = set()

    def _properties(self, m: OutMessage, uniq: str | None) -> dict[str, str]:
        props = dict(m.properties)
        if m.keys:
            props["KEYS"] = " ".join(m.keys)
        if m.tags:
            props["TAGS"] = m.tags
        if m.delay_level:
            props["DELAY"] = str(m.delay_level)
        if m.deliver_time_ms:
            props["TIMER_DELIVER_MS"] = str(m.deliver_time_ms)
        if m.delay_time_ms:
            props["TIMER_DELAY_MS"] = str(m.delay_time_ms)
        if uniq:
            props["UNIQ_KEY"] = uniq
        props.setdefault("WAIT", "true")
        return props

    async def heartbeat(self, topic: str) -> None:
        """Heartbeat every broker that takes `topic`'s sends now, as a Java producer does at start
        and every heartbeatBrokerInterval (30 s): the group is online before its first send and stays
        so while it sends nothing (`producer connections` lists it)."""
        route = await self.publish_route(topic)
        for name in route.brokers:
            addr = route.master(name)
            if addr:
                await self._heartbeat(addr, again=True)

    async def _heartbeat(self, addr: str, again: bool = False) -> None:
        if addr in self._heartbeat_sent and not again:
            return
        body = jsonbody.dumps({"clientID": self.client_id, "consumerDataSet": [],
                               "producerDataSet": [{"groupName": self.group}]})
        await self.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body))
        self._heartbeat_sent.add(addr)

    def _pick(self, queues: list[MessageQueue], avoid: str | None) -> MessageQueue:
        for _ in range(len(queues)):
            q = queues[next(self._rr) % len(queues)]
            if q.broker_name != avoid:
                return q
        return queues[next(self._rr) % len(queues)]

    async def send(self, m: OutMessage, queue: MessageQueue | int | None = None, sharding_key: str | None = None,
                   oneway: bool = False) -> SendResult | None:
        uniq = self.ids.next()
        props = self._properties(m, uniq)
        body, sys_flag = m.body, 0
        if len(body) >= self.compress_over:
            body, sys_flag = zlib.compress(body, 5), SYSFLAG_COMPRESSED_ZLIB
        started = int(time.time() * 1000) if self.tracer is not None else 0
        result = await self._send(m.topic, body, format_properties(props), sys_flag, m.flag, queue, sharding_key,
                                  oneway, uniq, batch=False)
        if self.tracer is not None and result is not None:
            self._trace_pub(m.topic, result, props, len(body), started)
        self.acked += result is not None
        return result

    def _trace_pub(self, topic: str, result: SendResult, props: dict[str, str], body_length: int,
                   started: int) -> None:
        self.tracer.pub(self.group, topic, result.msg_id, props.get("TAGS"), props.get("KEYS"), result.broker_addr,
                        body_length, started, msg_type_of(props), result.offset_msg_id, result.status == "SEND_OK",
                        result.region_id, result.trace_on)

    async def recall(self, topic: str, handle: str) -> str:
        """RECALL_MESSAGE (5.x): cancel a timer message not yet due, by the handle its send returned;
        the recalled message's id. The broker is the one the handle names."""
        import base64
        try:
            broker = base64.urlsafe_b64decode(handle.encode()).decode().split(" ")[2]
        except (ValueError, UnicodeError, IndexError):
            raise ValueError(f"not a recall handle: {handle!r}") from None
        route = await self.publish_route(topic)
        addr = route.master(broker)
        if not addr:
            raise RemotingCommandError(ResponseCode.TOPIC_NOT_EXIST, f"no master of {broker} routes topic {topic}",
                                       "recall")
        cmd = RemotingCommand.request(RequestCode.RECALL_MESSAGE, {"producerGroup": self.group, "topic": topic,
                                                                  "recallHandle": handle, "brokerName": broker})
        resp = await self.remoting.invoke(addr, cmd, self.timeout_s)
        if resp.code != ResponseCode.SUCCESS:
            raise RemotingCommandError(resp.code, resp.remark, f"recall on {broker}")
        return resp.ext_fields.get("msgId", "")

    async def send_batch(self, msgs: list[OutMessage], queue: MessageQueue | int | None = None) -> SendResult:
        topics = {m.topic for m in msgs}
        if len(topics) != 1:
            raise ValueError("a batch must have one topic")
        entries, ids = [], []
        for m in msgs:
            uniq = self.ids.next()
            ids.append(uniq)
            props = self._properties(m, uniq)
            props.pop("WAIT", None)
            entries.append((m.flag, m.body, format_properties(props)))
        return await self.send_entries(msgs[0].topic, entries, ids, queue)

    async def send_entries(self, topic: str, entries: list[tuple[int, bytes, str]], ids: list[str],
                           queue: MessageQueue | int | None = None) -> SendResult:
        """One SEND_BATCH_MESSAGE of (flag, body, properties text) entries whose properties already
        hold their UNIQ_KEY (`ids`, from `self.ids`): for callers that build many messages at once."""
        return await self.send_encoded(topic, encode_batch(entries), ids, queue)

    async def send_encoded(self, topic: str, body: bytes, ids: list[str],
                           queue: MessageQueue | int | None = None) -> SendResult:
        """One SEND_BATCH_MESSAGE whose body is `encode_batch`'s bytes of len(ids) messages, each
        holding its UNIQ_KEY from `ids` (for callers that encode many rows at once)."""
        started = int(time.time() * 1000) if self.tracer is not None else 0
        res = await self._send(topic, body, "WAIT\x01true", 0, 0, queue, None, False, ",".join(ids), batch=True)
        if self.tracer is not None:         # as 4.9.8: one Pub, its msgId the batch's ids comma-joined
            self._trace_pub(topic, res, {}, len(body), started)
        self.acked += len(ids)
        return res

    async def publish_route(self, topic: str, refresh: bool = False) -> TopicRoute:
        """The topic's route, or, for a topic no broker has yet, the default topic's (TBW102) brokers
        with 4 queues: the broker then creates the topic on first send (autoCreateTopicEnable)."""
        try:
            return await self.route(topic, refresh)
        except RemotingCommandError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
        try:
            default = await self.route(DEFAULT_TOPIC, refresh=True)
        except RemotingCommandError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            raise RemotingCommandError(exc.code, f"no broker serves topic {topic}, and none takes new topics "
                                       f"(no route for {DEFAULT_TOPIC}): is a broker registered with the name "
                                       "server?", f"route of topic {topic}") from None
        queues = [dict(q, readQueueNums=min(4, q["readQueueNums"]), writeQueueNums=min(4, q["writeQueueNums"]))
                  for q in default.queues]
        return TopicRoute(topic, default.brokers, queues, default.fetched)

    async def _send(self, topic, body, props_text, sys_flag, flag, queue, sharding_key, oneway, uniq, batch):
        route = self.routes.get(topic)
        if route is None or time.monotonic() - route.fetched >= ROUTE_TTL_S:
            route = await self.publish_route(topic)
        queues = route.write_queues()
        if not queues and route.masterless():       # a failover in progress: the new master may be routed now
            route = await self.publish_route(topic, refresh=True)
            queues = route.write_queues()
            if not queues and route.masterless():
                raise RemotingCommandError(ResponseCode.SERVICE_NOT_AVAILABLE,
                                           f"no master of {', '.join(route.masterless())} is routed now (it died, "
                                           "or a failover is electing another)", "send")
        if not queues:
            raise RemotingCommandError(ResponseCode.NO_PERMISSION,
                                       f"no broker lets producers write to topic {topic} (its perm has no write bit)",
                                       "send")
        avoid, last_exc = None, None
        for attempt in range(1 + (0 if queue is not None or sharding_key else self.retries)):
            if queue is not None and not isinstance(queue, (int, MessageQueue)):
                raise TypeError(f"queue must be an int or a MessageQueue, not {type(queue).__name__}")
            if queue is not None:
                mq = _named_queue(topic, queues, queue)
            elif sharding_key is not None:
                mq = queues[(zlib.crc32(sharding_key.encode()) & 0x7FFFFFFF) % len(queues)]
            else:
                mq = self._pick(queues, avoid)
            addr = route.master(mq.broker_name)
            cmd = send_request(self.group, topic, mq.queue_id, sys_flag, flag, props_text, body, batch, oneway)
            to = addr                   # the address an unreachable error names: the one being contacted
            try:
                if addr not in self._heartbeat_sent:
                    await self._heartbeat(addr)
                to = vip_channel(addr) if self.vip_channel else addr
                if oneway:
                    await self.remoting.invoke_oneway(to, cmd)
                    return None
                resp = await self.remoting.invoke(to, cmd, self.timeout_s)
                if resp.code not in SEND_OK_CODES:
                    raise RemotingCommandError(resp.code, resp.remark, f"send to {mq.broker_name}")
                ext = resp.ext_fields
                return SendResult(SEND_OK_CODES[resp.code], uniq, ext.get("msgId", ""), mq.broker_name,
                                  int(ext.get("queueId", mq.queue_id)), int(ext.get("queueOffset", -1)), addr,
                                  ext.get("MSG_REGION") or "DefaultRegion", ext.get("TRACE_ON") != "false",
                                  ext.get("recallHandle", ""))
            except RemotingCommandError as exc:
                if exc.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.MESSAGE_ILLEGAL, ResponseCode.NO_PERMISSION):
                    raise
                last_exc, avoid = exc, mq.broker_name
                if exc.code == ResponseCode.SERVICE_NOT_AVAILABLE:      # a slave now (a failover): route again
                    route = await self.publish_route(topic, refresh=True)
                    queues = route.write_queues() or queues
            except RemotingError as exc:
                last_exc, avoid = BrokerUnreachable(mq.broker_name, to, exc, self.acked), mq.broker_name
                try:
                    route = await self.publish_route(topic, refresh=True)
                except RemotingCommandError as route_exc:     # the name server dropped the dead broker
                    raise BrokerUnreachable(mq.broker_name, to, exc, self.acked,
                                            f"; the name server no longer routes topic {topic} "
                                            f"({code_name(ResponseCode, route_exc.code)})") from None
                queues = route.write_queues() or queues
        raise last_exc


def _named_queue(topic: str, queues: list[MessageQueue], queue: MessageQueue | int) -> MessageQueue:
    """The write queue the caller named: a MessageQueue, or a queue id one broker alone has. Never
    another queue in its place."""
    if isinstance(queue, MessageQueue):
        found = [q for q in queues if (q.broker_name, q.queue_id) == (queue.broker_name, queue.queue_id)]
        what = f"{queue.broker_name}:{queue.queue_id}"
    else:
        found = [q for q in queues if q.queue_id == queue]
        what = str(queue)
    if not found:
        ids = sorted({q.queue_id for q in queues})
        raise RemotingCommandError(ResponseCode.SYSTEM_ERROR, f"topic {topic} has no write queue {what} "
                                   f"(its write queues are {ids[0]}..{ids[-1]})", "send")
    if len(found) > 1:
        raise RemotingCommandError(ResponseCode.SYSTEM_ERROR, f"topic {topic} has write queue {queue} on brokers "
                                   f"{', '.join(q.broker_name for q in found)}: name one as BROKER:{queue}", "send")
    return found[0]


def send_request(group: str, topic: str, queue_id: int, sys_flag: int, flag: int, props_text: str, body: bytes,
                 batch: bool, oneway: bool) -> RemotingCommand:
    """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) with SendMessageRequestHeaderV2's one-letter fields,
    written straight as the strings they travel as (what send_header_to_v2 gives, field by field),
    and its JSON header filled into a template made once per group, topic, flags and kind."""
    queue, born = str(queue_id), str(int(time.time() * 1000))
    ext = {"a": group, "b": topic, "c": DEFAULT_TOPIC, "d": "4", "e": queue, "f": str(sys_flag), "g": born,
           "h": str(flag), "i": props_text, "j": "0", "k": "false", "m": "true" if batch else "false"}
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    cmd = RemotingCommand(int(code), next_opaque(), RPC_ONEWAY if oneway else 0, None, ext, body, "PYTHON")
    template = _header_template(group, topic, sys_flag, flag, batch, oneway)
    if template is not None:
        cmd.header_json = template.fill(cmd.opaque, queue, born, props_text)
    return cmd


_MARKS = {"e": "\x00queue\x00", "g": "\x00born\x00", "i": "\x00props\x00"}   # never in a name


@functools.lru_cache(maxsize=256)
def _header_template(group, topic, sys_flag, flag, batch, oneway) -> HeaderTemplate | None:
    """send_request's header with the queue id, born time, properties and opaque left open."""
    ext = {"a": group, "b": topic, "c": DEFAULT_TOPIC, "d": "4", "e": _MARKS["e"], "f": str(sys_flag),
           "g": _MARKS["g"], "h": str(flag), "i": _MARKS["i"], "j": "0", "k": "false", "m": "true" if batch else "false"}
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    return HeaderTemplate.make(RemotingCommand(int(code), 0, RPC_ONEWAY if oneway else 0, None, ext, b"", "PYTHON"),
                               _MARKS)


class TraceProducer:
    """A trace dispatcher's own producer (AsyncTraceDispatcher's traceProducer), made at its first send."""

    def __init__(self, namesrv: str, group: str, credentials=None):
        self.namesrv, self.group, self.credentials = namesrv, group, credentials
        self.producer: Producer | None = None

    async def send(self, topic: str, body: bytes, keys: list[str]) -> None:
        if self.producer is None:
            self.producer = Producer(self.namesrv, self.group, timeout_s=TRACE_TIMEOUT_S,
                                     instance=f"PID_CLIENT_INNER_TRACE_PRODUCER_{self.namesrv}",
                                     credentials=self.credentials)
        await self.producer.send(OutMessage(topic, body, keys))

    async def close(self) -> None:
        if self.producer is not None:
            await self.producer.close()


def tracer_for(client: ClientBase, kind: str, trace_topic: str | None = None) -> TraceDispatcher:
    """The trace layer a traced producer (kind PRODUCE) or consumer (CONSUME) is given: its trace
    messages go through a TraceProducer to the client's name servers, with the client's credentials."""
    namesrv = ";".join(client.namesrv_addrs)
    return TraceDispatcher(client.group, kind, trace_topic,
                           make_sender=lambda group: TraceProducer(namesrv, group, client.credentials),
                           new_id=UniqIdMaker(client_ip()).next)


COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0   # END_TRANSACTION commitOrRollback values


class TransactionProducer(Producer):
    """Half message, local transaction, then commit or rollback; answers the broker's check-back."""

    def __init__(self, namesrv: str, group: str, check_listener, **kw):
        super().__init__(namesrv, group, **kw)
        self.check_listener = check_listener    # callable(MessageRecord) -> COMMIT | ROLLBACK | UNKNOWN

    async def send_in_transaction(self, m: OutMessage, local_transaction) -> tuple[SendResult, int]:
        """local_transaction(message, send_result) -> COMMIT | ROLLBACK | UNKNOWN (UNKNOWN: wait for the check)."""
        m = OutMessage(m.topic, m.body, m.keys, m.tags, {**m.properties, "TRAN_MSG": "true", "PGROUP": self.group},
                       0, m.flag)
        uniq = self.ids.next()
        props = self._properties(m, uniq)
        started = int(time.time() * 1000) if self.tracer is not None else 0
        result = await self._send(m.topic, m.body, format_properties(props), 0x4, m.flag, None, None, False, uniq,
                                  batch=False)
        if self.tracer is not None:
            self._trace_pub(m.topic, result, props, len(m.body), started)
        try:
            state = local_transaction(m, result)
        except Exception:  # noqa: BLE001 - a failing local transaction is an unknown outcome
            state = UNKNOWN
        route = await self.publish_route(m.topic)
        addr = route.master(result.broker)
        await self._end(addr, result.offset_msg_id, result.queue_offset, uniq, state, False)
        if self.tracer is not None:
            self.tracer.end_transaction(self.group, m.topic, uniq, m.tags, props.get("KEYS"), addr, uniq, state,
                                        False, props.get("MSG_REGION"))
        return result, state

    async def _end(self, addr: str, offset_msg_id: str, queue_offset: int, uniq: str, state: int,
                   from_check: bool) -> None:
        from mqtool_store.msgid import decode_offset_msg_id
        _ip, _port, commitlog_offset = decode_offset_msg_id(offset_msg_id)
        await self.remoting.invoke_oneway(addr, RemotingCommand.request(RequestCode.END_TRANSACTION, {
            "producerGroup": self.group, "tranStateTableOffset": queue_offset, "commitLogOffset": commitlog_offset,
            "commitOrRollback": state, "fromTransactionCheck": from_check, "msgId": uniq, "transactionId": uniq},
            oneway=True))

    async def on_request(self, conn, cmd):
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            return await super().on_request(conn, cmd)
        try:
            [rec] = decode_records(cmd.body)
            state = self.check_listener(rec)
        except Exception:  # noqa: BLE001
            state = UNKNOWN
        ext = cmd.ext_fields
        await conn.oneway(RemotingCommand.request(RequestCode.END_TRANSACTION, {
            "producerGroup": self.group, "tranStateTableOffset": ext.get("tranStateTableOffset"),
            "commitLogOffset": ext.get("commitLogOffset"), "commitOrRollback": state, "fromTransactionCheck": True,
            "msgId": ext.get("msgId", ""), "transactionId": ext.get("transactionId", "")}, oneway=True))
        if self.tracer is not None:
            p = rec.properties
            self.tracer.end_transaction(self.group, p.get("REAL_TOPIC") or rec.topic, rec.uniq_key or rec.msg_id,
                                        rec.tags, p.get("KEYS"), conn.peer,
                                        ext.get("transactionId"), state, True, p.get("MSG_REGION"))
        return None
