"""Consumers: pulls on explicit queues, and group consumption (clustering or broadcasting)."""
from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass, field

from mqtool.common.allocate import allocate_averagely
from mqtool.common.sql92 import SQL92
from mqtool.common.subscription import Subscription
from mqtool.common.tracedata import ConsumeReturnType
from mqtool.client.base import ClientBase, MessageQueue, check
from mqtool.client.producer import tracer_for
from mqtool.client.records import decode_records
from mqtool.client.trace import TraceDispatcher
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import HeaderTemplate, RemotingCommand, next_opaque
from mqtool_remoting.errors import RemotingCommandError, RemotingConnectError, RemotingError
from mqtool_store.commitlog import MessageRecord

log = logging.getLogger("mqtool.client")

PULL_SUSPEND_MS = 15000
PULL_DELAY_ON_ERROR_MS = 3000       # DefaultMQPushConsumer.pullTimeDelayMillsWhenException
PULL_DELAY_ON_FLOW_CONTROL_MS = 20  # PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL
REBALANCE_S = 20.0
COMMIT_S = 5.0


def pull_request(group: str, mq: MessageQueue, offset: int, max_nums: int, expression: str, suspend_ms: int,
                 commit_offset: int | None, expression_type: str, sub_version: int) -> RemotingCommand:
    """PULL_MESSAGE with its subscription (sysFlag 0x4, plus suspend 0x2 and commit 0x1 as asked); its
    JSON header filled into a template made once per group, queue, expression and flags (a live
    read sends tens of thousands of these a second)."""
    sys_flag = 0x4 | (0x2 if suspend_ms else 0) | (0x1 if commit_offset is not None else 0)
    values = (str(offset), str(max_nums), str(commit_offset or 0), str(sub_version))
    ext = {"consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id), "queueOffset": values[0],
           "maxMsgNums": values[1], "sysFlag": str(sys_flag), "commitOffset": values[2],
           "suspendTimeoutMillis": str(suspend_ms), "subscription": expression, "subVersion": values[3],
           "expressionType": expression_type}
    cmd = RemotingCommand(int(RequestCode.PULL_MESSAGE), next_opaque(), 0, None, ext, b"", "PYTHON")
    template = _pull_template(group, mq.topic, mq.queue_id, sys_flag, suspend_ms, expression, expression_type)
    if template is not None:
        cmd.header_json = template.fill(cmd.opaque, *values)
    return cmd


_PULL_MARKS = {"queueOffset": "\x00offset\x00", "maxMsgNums": "\x00nums\x00", "commitOffset": "\x00commit\x00",
               "subVersion": "\x00version\x00"}         # never in a name or an expression


@functools.lru_cache(maxsize=1024)
def _pull_template(group, topic, queue_id, sys_flag, suspend_ms, expression, expression_type) -> HeaderTemplate | None:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), **_PULL_MARKS, "sysFlag": str(sys_flag),
           "suspendTimeoutMillis": str(suspend_ms), "subscription": expression, "expressionType": expression_type}
    return HeaderTemplate.make(RemotingCommand(int(RequestCode.PULL_MESSAGE), 0, 0, None, ext, b"", "PYTHON"),
                               _PULL_MARKS)

@dataclass
class PullResult:
    code: int
    messages: list[MessageRecord]
    next_offset: int
    min_offset: int
    max_offset: int


def allocate_average(queues: list[MessageQueue], clients: list[str], me: str) -> list[MessageQueue]:
    """AllocateMessageQueueAveragely; nothing for a client not in the list or a topic without queues."""
    if me not in clients or not queues:
        return []
    return allocate_averagely(me, queues, clients)


class Consumer(ClientBase):
    """Pull-side primitives shared by the explicit-queue and group consumers. With `trace=True`
    the consumer writes SubBefore and SubAfter trace records to `trace_topic` (RMQ_SYS_TRACE_TOPIC)
    as a 4.9.8 consumer made with enableMsgTrace does: GroupConsumer.messages() around each message
    it yields (consumed once the caller asks for the next), PushConsumer around each listener call
    (with its outcome), and a caller of pull() through `tracer.sub_before/sub_after`."""

    def __init__(self, namesrv: str, group: str = "CID_MQTOOL", timeout_s: float = 3.0, instance: str | None = None,
                 credentials=None, trace: bool = False, trace_topic: str | None = None,
                 tracer: TraceDispatcher | None = None):
        super().__init__(namesrv, timeout_s, instance, credentials)
        self.group = group
        self.tracer = tracer or (tracer_for(self, "CONSUME", trace_topic) if trace else None)
        self.pull_from: dict[MessageQueue, int] = {}    # pullFromWhichNodeTable: suggestWhichBrokerId

    async def broker_addr(self, mq: MessageQueue) -> str:
        route = await self.route(mq.topic)
        addr = route.reader(mq.broker_name, self.pull_from.get(mq, 0))
        if addr is None:
            raise RemotingError(f"broker {mq.broker_name} of topic {mq.topic} has no address")
        return addr

    async def invoke_queue(self, mq: MessageQueue, cmd: RemotingCommand, timeout_s: float | None = None):
        """A request to the broker that serves `mq`; when that broker is unreachable the route is
        fetched again and the request goes once to whichever broker of the group is left."""
        addr = await self.broker_addr(mq)
        try:
            return await self.invoke(addr, cmd, timeout_s)
        except RemotingConnectError:
            await self.route(mq.topic, refresh=True)
            self.pull_from.pop(mq, None)
            retry = await self.broker_addr(mq)
            if retry == addr:
                raise
            return await self.invoke(retry, cmd, timeout_s)   # opaques are per connection

    async def queues(self, topic: str) -> list[MessageQueue]:
        return (await self.route(topic)).read_queues()

    async def _offset_call(self, mq: MessageQueue, code: int, extra: dict | None = None) -> int:
        resp = await self.invoke_queue(mq, RemotingCommand.request(
            code, {"topic": mq.topic, "queueId": mq.queue_id, **(extra or {})}))
        check(resp, f"offset of {mq.topic}/{mq.queue_id}")
        return int(resp.ext_fields.get("offset", resp.ext_fields.get("timestamp", 0)))

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self._offset_call(mq, RequestCode.GET_MAX_OFFSET)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self._offset_call(mq, RequestCode.GET_MIN_OFFSET)

    async def offset_by_time(self, mq: MessageQueue, ts: int) -> int:
        return await self._offset_call(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"timestamp": ts})

    async def committed_offset(self, mq: MessageQueue) -> int:
        resp = await self.invoke_queue(mq, RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": self.group, "topic": mq.topic,
                                                "queueId": mq.queue_id}))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        check(resp, "query consumer offset")
        return int(resp.ext_fields.get("offset", -1))

    async def commit(self, mq: MessageQueue, offset: int) -> None:
        await self.remoting.invoke_oneway(await self.broker_addr(mq), RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": self.group, "topic": mq.topic,
                                                 "queueId": mq.queue_id, "commitOffset": offset}, oneway=True))

    async def check_client_config(self, topic: str, expression: str, expression_type: str = SQL92) -> None:
        """CHECK_CLIENT_CONFIG (46), as the Java consumers' start() sends it for a non-TAG
        subscription: a broker without enablePropertyFilter, or one that cannot compile the
        expression, answers an error code (RemotingCommandError with Java's code and remark)."""
        sub = Subscription.parse(topic, expression, int(time.time() * 1000), expression_type).to_json()
        body = jsonbody.dumps({"clientId": self.client_id, "group": self.group, "subscriptionData": sub})
        queues = await self.queues(topic)
        if not queues:
            return
        check(await self.invoke_queue(queues[0], RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=body)),
              f"check of the {expression_type} subscription to {topic}")

    async def pull_raw(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str = "*",
                       suspend_ms: int = 0, commit_offset: int | None = None, expression_type: str = "TAG",
                       sub_version: int | None = None) -> RemotingCommand:
        """One PULL_MESSAGE carrying its subscription (sysFlag 0x4): a TAG expression, or with
        expression_type="SQL92" an SQL92 one the broker evaluates (it needs enablePropertyFilter).
        The answer as it came (its body is the records as stored); its suggestWhichBrokerId is noted
        for the queue's next request."""
        cmd = pull_request(self.group, mq, offset, max_nums, expression, suspend_ms, commit_offset, expression_type,
                           sub_version if sub_version is not None else int(time.time() * 1000))
        resp = await self.invoke_queue(mq, cmd, self.timeout_s + suspend_ms / 1000)
        ok = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
              ResponseCode.PULL_OFFSET_MOVED)
        check(resp, f"pull {mq.topic}/{mq.queue_id}", ok)
        self.pull_from[mq] = int(resp.ext_fields.get("suggestWhichBrokerId", 0) or 0)
        return resp

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: str = "*",
                   suspend_ms: int = 0, commit_offset: int | None = None, expression_type: str = "TAG",
                   sub_version: int | None = None) -> PullResult:
        resp = await self.pull_raw(mq, offset, max_nums, expression, suspend_ms, commit_offset, expression_type,
                                   sub_version)
        msgs = decode_records(resp.body) if resp.code == ResponseCode.SUCCESS else []
        sub = Subscription.parse(mq.topic, expression, expression_type=expression_type)
        if sub.tags:
            msgs = [m for m in msgs if (m.tags or "") in sub.tags]    # hash collisions: re-check the tag
        e = resp.ext_fields
        return PullResult(resp.code, msgs, int(e.get("nextBeginOffset", offset)), int(e.get("minOffset", 0)),
                          int(e.get("maxOffset", 0)))


@dataclass
class GroupState:
    assigned: dict[MessageQueue, int] = field(default_factory=dict)     # queue -> next offset
    committed: dict[MessageQueue, int] = field(default_factory=dict)


class GroupConsumer(Consumer):
    """Clustering (queues shared by average allocation, offsets on the broker) or broadcasting
    (every queue, offsets kept locally). Reacts to NOTIFY_CONSUMER_IDS_CHANGED. In clustering mode
    the group also consumes its retry topic `%RETRY%group`, as the Java client does."""

    def __init__(self, namesrv: str, group: str, topic: str, expression: str = "*", broadcast: bool = False,
                 start: str = "last", instance: str | None = None, retry_topic: bool = True, credentials=None,
                 sql: str | None = None, trace: bool = False, trace_topic: str | None = None):
        super().__init__(namesrv, group, instance=instance, credentials=credentials, trace=trace,
                         trace_topic=trace_topic)
        if start not in ("first", "last"):     # CONSUME_FROM_FIRST_OFFSET / CONSUME_FROM_LAST_OFFSET
            raise ValueError(f"start must be 'first' or 'last', not {start!r} (start_at picks any other offset)")
        if sql is not None and expression != "*":
            raise ValueError("give either a tag expression or sql=, not both")
        if sql is not None and not sql.strip():
            raise ValueError("Expression can't be null! SQL92")         # FilterAPI.build refuses it too
        # sql=: MessageSelector.bySql, filtered on the broker (enablePropertyFilter=true there); the
        # retry topic stays TAG *, as the Java push consumer subscribes it
        self.sql = sql
        self.topic, self.expression, self.broadcast, self.start_from = topic, sql or expression, broadcast, start
        self.subs = {topic: sql or expression}
        self.types = {topic: SQL92 if sql is not None else "TAG"}
        self.sub_version = int(time.time() * 1000)     # SubscriptionData.subVersion: when it was made
        if retry_topic and not broadcast:
            self.subs[RETRY_PREFIX + group] = "*"
        self.state = GroupState()
        self.start_at = None        # async (queue) -> offset: where to start instead of the committed offset
        self.started_ms = int(time.time() * 1000)
        self.last_consume_ms: dict[MessageQueue, int] = {}
        self.failed = 0
        self.reset_count = 0        # RESET_CONSUMER_CLIENT_OFFSET pushes applied
        self.interrupted: set[MessageQueue] = set()
        self.missing_topics: dict[str, RemotingCommandError] = {}    # topic -> its TOPIC_NOT_EXIST answer
        self._rebalance = asyncio.Event()
        self.trace_yields = True     # trace each message messages() yields (PushConsumer traces its listener)
        self.pull_delay_on_error_ms = PULL_DELAY_ON_ERROR_MS
        self.pull_later: dict[MessageQueue, float] = {}     # queue -> monotonic time of its next pull
        self._pull_said: dict[MessageQueue, str] = {}

    async def on_request(self, conn, cmd):
        from mqtool.client import clientcalls
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            self._rebalance.set()
            return None
        if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            clientcalls.reset_offsets(self, cmd)
            await self.commit_all()
            return None
        handler = clientcalls.HANDLERS.get(cmd.code)
        if handler is not None:
            resp = handler(self, cmd)
            return await resp if asyncio.iscoroutine(resp) else resp
        return await super().on_request(conn, cmd)

    async def _routes(self) -> dict[str, object]:
        routes = {}
        for t in self.subs:
            try:
                routes[t] = await self.route(t, refresh=True)
            except RemotingCommandError as exc:
                if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise      # a topic nobody has created yet: wait for it, as the Java client does
        return routes

    async def heartbeat(self) -> None:
        now = int(time.time() * 1000)
        subs = [{"classFilterMode": False, "codeSet": [], "expressionType": self.types.get(t, "TAG"), "subString": e,
                 "subVersion": self.sub_version if self.types.get(t, "TAG") != "TAG" else now, "tagsSet": [],
                 "topic": t} for t, e in self.subs.items()]
        body = jsonbody.dumps({"clientID": self.client_id, "producerDataSet": [], "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET" if self.start_from == "first" else "CONSUME_FROM_LAST_OFFSET",
            "consumeType": "CONSUME_PASSIVELY", "groupName": self.group,
            "messageModel": "BROADCASTING" if self.broadcast else "CLUSTERING",
            "subscriptionDataSet": subs, "unitMode": False}]})
        # To every broker of the route, slaves too: a slave serves the group when its master is down.
        addrs = {a for r in (await self._routes()).values() for a in r.all_addrs()}
        for addr in addrs:
            try:
                check(await self.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=body)), "heartbeat")
            except RemotingConnectError:
                if len(addrs) == 1:
                    raise

    async def rebalance(self) -> None:
        mine: list[MessageQueue] = []
        self.missing_topics = {}
        for topic in self.subs:
            try:
                queues = await self.queues(topic)
            except RemotingCommandError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    self.missing_topics[topic] = exc
                    continue
                raise
            if self.broadcast:
                mine += queues
                continue
            ids = [self.client_id]
            if queues:
                resp = await self.invoke_queue(queues[0], RemotingCommand.request(
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group}))
                if resp.code == 0:
                    ids = sorted(jsonbody.loads(resp.body).get("consumerIdList", ids))
            mine += allocate_average(sorted(queues, key=lambda q: (q.broker_name, q.queue_id)), ids, self.client_id)
        for mq in list(self.state.assigned):
            if mq not in mine:
                await self.commit_queue(mq)
                del self.state.assigned[mq]
        for mq in mine:
            if mq not in self.state.assigned:
                self.state.assigned[mq] = await self._start_offset(mq)

    async def _start_offset(self, mq: MessageQueue) -> int:
        if self.start_at is not None and not mq.topic.startswith(RETRY_PREFIX):
            return await self.start_at(mq)
        if not self.broadcast:
            off = await self.committed_offset(mq)
            if off >= 0:
                return off
        if self.start_from == "first" or mq.topic.startswith(RETRY_PREFIX):
            return await self.min_offset(mq)
        return await self.max_offset(mq)

    async def commit_queue(self, mq: MessageQueue) -> None:
        off = self.state.assigned.get(mq)
        if off is not None and not self.broadcast and self.state.committed.get(mq) != off:
            await self.commit(mq, off)
            self.state.committed[mq] = off

    async def commit_all(self) -> None:
        for mq in list(self.state.assigned):
            await self.commit_queue(mq)

    async def messages(self, poll_ms: int = 1000, stop: asyncio.Event | None = None, until_end: bool = False):
        """Yield (queue, record) until `stop` is set (or, with `until_end`, until every assigned
        queue has been read to its end); the caller advances `state.assigned[mq]`.

        A timeout or a lost connection, even before the first rebalance, is tried again (Java's push
        consumer starts whatever its first heartbeat meets); before any rebalance has worked, a name
        server or broker that refuses the connection, or answers with an error, ends it at once (a
        wrong address or credentials, better said than retried forever)."""
        if self.sql is not None:       # DefaultMQPushConsumer.start: checkClientInBroker, then heartbeats
            await self.check_client_config(self.topic, self.sql)
        started = said_missing = False
        self._rebalance.set()
        last_rebalance = last_commit = time.monotonic()
        said = ""
        while stop is None or not stop.is_set():
            due = REBALANCE_S if not self.missing_topics else 1.0
            try:
                if self._rebalance.is_set() or time.monotonic() - last_rebalance > due:
                    self._rebalance.clear()
                    await self.heartbeat()
                    await self.rebalance()
                    last_rebalance = time.monotonic()
                    started = True
                if time.monotonic() - last_commit > COMMIT_S:
                    await self.commit_all()
                    last_commit = time.monotonic()
                said = ""
            except (RemotingError, RemotingCommandError) as exc:
                if not started and isinstance(exc, (RemotingConnectError, RemotingCommandError)):
                    raise
                # A name server or broker briefly away (a timeout, a restart): as the Java client's
                # services do, keep pulling the queues held and try again in a second.
                if str(exc) != said:
                    log.warning("consumer group %s: %s; trying again in 1 s", self.group, exc)
                    said = str(exc)
                last_rebalance = time.monotonic() - due + 1.0
                last_commit = time.monotonic() - COMMIT_S + 1.0
                if not started:
                    await asyncio.sleep(1.0)
                    self._rebalance.set()
                    continue
            held = list(self.state.assigned.items())
            if self.topic in self.missing_topics:
                if until_end:       # no queue to read to its end: said as the explicit-queue read says it
                    raise self.missing_topics[self.topic]
                if not said_missing:    # Java's RebalanceImpl logs "... but the topic[...] not exist." and waits
                    log.warning("consumer group %s: topic %s does not exist (no route at the name server); "
                                "waiting for it", self.group, self.topic)
                said_missing = True
            if not held:
                await asyncio.sleep(poll_ms / 1000)
                self._rebalance.set()      # nothing assigned yet (topic not created?): look again
                continue
            now = time.monotonic()
            queues = [(mq, off) for mq, off in held if self.pull_later.get(mq, 0.0) <= now]
            if not queues:             # every queue held waits after a failed pull
                await asyncio.sleep(min(poll_ms, 200) / 1000)
                continue
            results = await asyncio.gather(*(self.pull(mq, off, 32, self.subs.get(mq.topic, "*"),
                                                       expression_type=self.types.get(mq.topic, "TAG"),
                                                       sub_version=self.sub_version)
                                              for mq, off in queues), return_exceptions=True)
            got_any, at_end = False, len(queues) == len(held)
            for (mq, off), res in zip(queues, results):
                if isinstance(res, Exception):
                    self._pull_failed(mq, res)
                if isinstance(res, Exception) or mq not in self.state.assigned:
                    at_end = False
                    continue
                self._pull_said.pop(mq, None)
                at_end = at_end and res.next_offset >= res.max_offset
                for rec in res.messages:
                    if mq in self.interrupted:
                        break      # reset while this batch was on its way: it is from the old position
                    got_any = True
                    self.last_consume_ms[mq] = int(time.time() * 1000)
                    rec = restore_retry_topic(rec)
                    traced = self.tracer.sub_before(self.group, [rec]) if self.tracer and self.trace_yields else None
                    try:
                        yield mq, rec
                    finally:         # the caller asked for the next one, or closed us: it has this one
                        if traced is not None:
                            self.tracer.sub_after(traced, True)
                    if mq in self.interrupted or mq not in self.state.assigned:
                        break      # the caller holds this queue (a message to retry) or lost it
                else:
                    if mq in self.state.assigned:
                        self.state.assigned[mq] = res.next_offset
                self.interrupted.discard(mq)
            if not got_any:
                if until_end and at_end:
                    return
                await asyncio.sleep(min(poll_ms, 200) / 1000)

    def _pull_failed(self, mq: MessageQueue, exc: BaseException) -> None:
        """DefaultMQPushConsumerImpl's PullCallback.onException: an error answer (any code but
        SUCCESS, PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED; FILTER_DATA_NOT_LATEST
        while a new subscription's heartbeat is on its way, say) or a lost request ends nothing:
        the queue keeps its offset and is pulled again after pullTimeDelayMillsWhenException (20 ms
        after FLOW_CONTROL), with a warning unless it is a retry topic (said once while it lasts)."""
        flow = isinstance(exc, RemotingCommandError) and exc.code == ResponseCode.FLOW_CONTROL
        delay_ms = PULL_DELAY_ON_FLOW_CONTROL_MS if flow else self.pull_delay_on_error_ms
        self.pull_later[mq] = time.monotonic() + delay_ms / 1000
        if not mq.topic.startswith(RETRY_PREFIX) and self._pull_said.get(mq) != str(exc):
            self._pull_said[mq] = str(exc)
            log.warning("consumer group %s: pull of %s queue %d (%s) failed: %s; pulled again in %d ms", self.group,
                        mq.topic, mq.queue_id, mq.broker_name, exc, delay_ms)

    async def send_back(self, rec: MessageRecord, delay_level: int = 0, max_reconsume_times: int = 16) -> bool:
        """CONSUMER_SEND_MSG_BACK to the broker that stored the message."""
        addr = host_of(rec)
        try:
            resp = await self.invoke(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {
                "offset": rec.physical_offset, "group": self.group, "delayLevel": delay_level,
                "originMsgId": rec.uniq_key or rec.msg_id, "originTopic": rec.topic,
                "maxReconsumeTimes": max_reconsume_times}))
        except RemotingError as exc:      # the caller consumes it again here, as Java's consumeMessageService does
            log.warning("consumer group %s: sending message %s back failed: %s", self.group, rec.msg_id, exc)
            return False
        return resp.code == ResponseCode.SUCCESS

    async def close(self) -> None:
        try:
            await self.commit_all()
            addrs = {r.master(n) for r in self.routes.values() for n in r.brokers}
            for addr in filter(None, addrs):
                await self.invoke(addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, {
                    "clientID": self.client_id, "consumerGroup": self.group}))
        except (RemotingError, RemotingCommandError):
            pass
        await super().close()


RETRY_PREFIX = "%RETRY%"
LOCK_RENEW_S = 20.0


def restore_retry_topic(rec: MessageRecord) -> MessageRecord:
    """resetRetryAndNamespace: a message pulled from %RETRY%group shows its original topic."""
    if rec.topic.startswith(RETRY_PREFIX) and rec.properties.get("RETRY_TOPIC"):
        rec.topic = rec.properties["RETRY_TOPIC"]
    return rec


def host_of(rec: MessageRecord) -> str:
    return rec.store_host


class PushConsumer(GroupConsumer):
    """A listener-driven consumer: concurrent (failures sent back for retry) or orderly (queues
    locked on the broker, a failure retried in place)."""

    def __init__(self, namesrv: str, group: str, topic: str, expression: str = "*", orderly: bool = False,
                 broadcast: bool = False, start: str = "first", max_reconsume_times: int = 16,
                 instance: str | None = None, credentials=None, sql: str | None = None, trace: bool = False,
                 trace_topic: str | None = None):
        super().__init__(namesrv, group, topic, expression, broadcast, start, instance, credentials=credentials,
                         sql=sql, trace=trace, trace_topic=trace_topic)
        self.trace_yields = False
        self.orderly = orderly
        self.max_reconsume_times = max_reconsume_times
        self.locked: set[MessageQueue] = set()

    async def lock_queues(self) -> None:
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.state.assigned:
            by_broker.setdefault(await self.broker_addr(mq), []).append(mq)
        locked = set()
        for addr, mqs in by_broker.items():
            body = jsonbody.dumps({"clientId": self.client_id, "consumerGroup": self.group,
                                   "mqSet": [mq.to_json() for mq in mqs]})
            resp = await self.invoke(addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body))
            if resp.code == 0:
                for q in jsonbody.loads(resp.body).get("lockOKMQSet", []):
                    locked.add(MessageQueue(q["topic"], q["brokerName"], int(q["queueId"])))
        self.locked = locked

    async def _consume_one(self, listener, rec: MessageRecord):
        """The listener's answer for one message, traced as 4.9.8's consume hook traces it: an
        exception is EXCEPTION, None RETURNNULL, a false answer FAILED."""
        traced = self.tracer.sub_before(self.group, [rec]) if self.tracer is not None else None
        try:
            ok = listener(rec)
            if asyncio.iscoroutine(ok):
                ok = await ok
        except BaseException:
            if traced is not None:
                self.tracer.sub_after(traced, False, ConsumeReturnType.EXCEPTION)
            raise
        if traced is not None:
            code = ConsumeReturnType.SUCCESS if ok else \
                ConsumeReturnType.RETURNNULL if ok is None else ConsumeReturnType.FAILED
            self.tracer.sub_after(traced, bool(ok), code)
        return ok

    async def run(self, listener, stop: asyncio.Event, poll_ms: int = 500) -> None:
        """listener(record) -> bool (True: consumed). Runs until `stop` is set."""
        self.listener = listener
        gen = self.messages(poll_ms, stop)
        last_lock = 0.0
        try:
            async for mq, rec in gen:
                resets = self.reset_count
                if self.orderly and not self.broadcast:
                    if time.monotonic() - last_lock > LOCK_RENEW_S or mq not in self.locked:
                        try:
                            await self.lock_queues()
                        except RemotingError as exc:     # a broker briefly away: locked again next time
                            log.warning("consumer group %s: locking queues failed: %s", self.group, exc)
                        last_lock = time.monotonic()
                    if mq not in self.locked:
                        await asyncio.sleep(poll_ms / 1000)
                        continue
                ok = await self._consume_one(listener, rec)
                if not ok:
                    self.failed += 1
                if resets != self.reset_count:
                    continue       # the broker moved this consumer while the listener ran
                if ok:
                    self.state.assigned[mq] = rec.queue_offset + 1
                elif self.orderly:
                    self.state.assigned[mq] = rec.queue_offset        # retried in place, order kept
                    self.interrupted.add(mq)
                    await asyncio.sleep(poll_ms / 1000)
                elif self.broadcast or await self.send_back(rec, 0, self.max_reconsume_times):
                    self.state.assigned[mq] = rec.queue_offset + 1
                else:
                    self.state.assigned[mq] = rec.queue_offset
                    self.interrupted.add(mq)
                    await asyncio.sleep(poll_ms / 1000)
        finally:
            await gen.aclose()
