"""Message trace writing (4.9.8's AsyncTraceDispatcher and its hooks): the records a traced producer or
consumer writes to the trace topic, as Java's clients write them, so either side's tools read them.

A hook builds its records and appends them, which never waits: a full queue (1024 records) drops the
record, as Java's does. A task on the client's event loop wakes every 100 ms, encodes what was
appended and adds it to its topic's batch; a batch goes out as one trace message (KEYS: every
record's msgId and keys) when its UTF-8 text reaches 118,000 bytes, when its oldest record is 500 ms
old, or when the client closes. The sends are made by the dispatcher's own producer, on that task,
never on the traced send's path; a failed one is logged and its records are lost, as in Java.

Tracing is a layer the producer and consumer are given (`mqtool.client.producer.tracer_for` makes
one): the dispatcher imports no client module. It is handed a `make_sender(group)` that returns its
trace producer (`send(topic, body, keys)`, `close()`), made at the first trace message, and a
`new_id()` for the consume request ids (Java's MessageClientIDSetter.createUniqID).
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
import uuid
from typing import Awaitable, Callable, Protocol

from mqtool.common.tracedata import (DEFAULT_REGION, DEFAULT_TRACE_TOPIC, FLUSH_AT, ConsumeReturnType, MsgType,
                                     TraceRecord, TraceType, encode, keys_of)

log = logging.getLogger("mqtool.client.trace")

QUEUE_SIZE = 1024          # AsyncTraceDispatcher's queueSize
POLL_S = 0.1               # the worker's round
MAX_AGE_S = 0.5            # a batch older than this is sent
TRACE_TIMEOUT_S = 5.0      # the trace producer's sendMsgTimeout
_COUNTER = itertools.count(1)       # the per-process counter in the trace producer's group name
TX_STATES = {8: "COMMIT_MESSAGE", 12: "ROLLBACK_MESSAGE", 0: "UNKNOW"}   # commitOrRollback -> LocalTransactionState


def msg_type_of(properties: dict[str, str]) -> MsgType:
    """sendKernelImpl's MessageType: a delay (level or start time) wins over a half message."""
    if properties.get("DELAY") or properties.get("__STARTDELIVERTIME"):
        return MsgType.Delay_Msg
    if properties.get("TRAN_MSG") == "true":
        return MsgType.Trans_Msg_Half
    return MsgType.Normal_Msg


def _now_ms() -> int:
    return int(time.time() * 1000)


class TraceSender(Protocol):
    """The dispatcher's own producer: AsyncTraceDispatcher's traceProducer."""

    def send(self, topic: str, body: bytes, keys: list[str]) -> Awaitable[None]: ...

    def close(self) -> Awaitable[None]: ...


def _no_sender(group: str) -> TraceSender:
    raise RuntimeError(f"trace dispatcher {group} was given no sender")


class ConsumeTrace:
    """A SubBefore's records, kept for its SubAfter."""
    __slots__ = ("records", "started")

    def __init__(self, records: list[TraceRecord], started: int):
        self.records, self.started = records, started


class TraceDispatcher:
    """One per traced client: `kind` is PRODUCE or CONSUME (the trace producer's group names it).
    `make_sender(group)` gives the trace producer; `new_id()` a consume request id (32 hex digits)."""

    def __init__(self, host_group: str, kind: str, trace_topic: str | None = None,
                 make_sender: Callable[[str], TraceSender] = _no_sender, new_id: Callable[[], str] | None = None):
        self.topic = trace_topic or DEFAULT_TRACE_TOPIC
        self.group = f"_INNER_TRACE_PRODUCER-{host_group}-{kind}-{next(_COUNTER)}"
        self.make_sender = make_sender
        self.new_id = new_id or (lambda: uuid.uuid4().hex.upper())
        self.queue: collections.deque[TraceRecord] = collections.deque()
        self.dropped = 0
        self.sent_messages = 0
        self.failed_messages = 0
        self._sender: TraceSender | None = None
        self._task: asyncio.Task | None = None
        self._closing = False

    # ---- the hooks' side: never waits ---------------------------------------------------------------
    def append(self, records: list[TraceRecord]) -> None:
        for r in records:
            if len(self.queue) >= QUEUE_SIZE:
                self.dropped += 1
                continue
            self.queue.append(r)
        if self._task is None and not self._closing:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="trace dispatcher")

    def traces(self, topic: str) -> bool:
        """The hooks leave trace messages themselves alone."""
        return not topic.startswith(self.topic)

    def pub(self, group: str, topic: str, msg_id: str, tags: str | None, keys: str | None, store_host: str,
            body_length: int, started_ms: int, msg_type: MsgType, offset_msg_id: str, send_ok: bool,
            region_id: str | None = DEFAULT_REGION, trace_on: bool = True) -> None:
        """SendMessageTraceHookImpl: one Pub after a send that returned a result."""
        if not self.traces(topic) or not trace_on:
            return
        self.append([TraceRecord(TraceType.Pub, msg_id, started_ms, region_id or DEFAULT_REGION, group, topic=topic,
                                 tags=tags, keys=keys or None, store_host=store_host, body_length=body_length,
                                 cost_time=_now_ms() - started_ms, msg_type=msg_type, offset_msg_id=offset_msg_id,
                                 success=send_ok)])

    def end_transaction(self, group: str, topic: str, msg_id: str, tags: str | None, keys: str | None,
                        store_host: str, transaction_id: str | None, state: int, from_check: bool,
                        region_id: str | None = None) -> None:
        """EndTransactionTraceHookImpl."""
        if not self.traces(topic):
            return
        self.append([TraceRecord(TraceType.EndTransaction, msg_id, _now_ms(), region_id or DEFAULT_REGION, group,
                                 topic=topic, tags=tags, keys=keys or None, store_host=store_host,
                                 msg_type=MsgType.Trans_msg_Commit, transaction_id=transaction_id,
                                 transaction_state=TX_STATES.get(state, "UNKNOW"), from_transaction_check=from_check)])

    def sub_before(self, group: str, messages: list) -> ConsumeTrace | None:
        """ConsumeMessageTraceHookImpl.consumeMessageBefore for one consume call over `messages`
        (MessageRecords); None when none of them is traced."""
        request_id, now = self.new_id(), _now_ms()
        records = []
        for m in messages:
            props = m.properties
            if props.get("TRACE_ON") == "false" or not self.traces(m.topic):
                continue
            records.append(TraceRecord(TraceType.SubBefore, m.uniq_key or m.msg_id, now, props.get("MSG_REGION"),
                                       group, request_id, keys=props.get("KEYS") or None,
                                       retry_times=m.reconsume_times))
        if not records:
            return None
        self.append(records)
        return ConsumeTrace(records, now)

    def sub_after(self, before: ConsumeTrace | None, success: bool,
                  code: ConsumeReturnType = ConsumeReturnType.SUCCESS) -> None:
        """consumeMessageAfter: the cost is the consume call's time shared over its messages."""
        if before is None:
            return
        now = _now_ms()
        cost = (now - before.started) // len(before.records)
        self.append([TraceRecord(TraceType.SubAfter, b.msg_id, now, "", b.group, b.request_id, keys=b.keys,
                                 cost_time=cost, success=success, context_code=code) for b in before.records])

    # ---- the worker: batches and trace messages -----------------------------------------------------
    async def _run(self) -> None:
        batch: list[tuple[str, set[str]]] = []
        size, oldest = 0, 0.0
        while True:
            while self.queue:
                r = self.queue.popleft()
                text = encode(r)
                if not batch:
                    oldest = time.monotonic()
                batch.append((text, keys_of(r)))
                size += len(text.encode())
                if size >= FLUSH_AT:
                    await self._send(batch)
                    batch, size = [], 0
            if batch and (self._closing or time.monotonic() - oldest >= MAX_AGE_S):
                await self._send(batch)
                batch, size = [], 0
            if self._closing and not self.queue:
                return
            await asyncio.sleep(POLL_S)

    async def _send(self, batch: list[tuple[str, set[str]]]) -> None:
        keys: set[str] = set().union(*(k for _, k in batch))
        body = "".join(t for t, _ in batch).encode()
        try:
            if self._sender is None:
                self._sender = self.make_sender(self.group)
            await self._sender.send(self.topic, body, sorted(keys))
            self.sent_messages += 1
        except Exception as exc:  # noqa: BLE001 - a trace message is never worth failing the client for
            self.failed_messages += 1
            log.warning("trace message of %d records to %s not sent: %s", len(batch), self.topic, exc)

    async def close(self) -> None:
        """Send what is still queued (the client is closing), then stop."""
        self._closing = True
        if self._task is not None:
            try:
                async with asyncio.timeout(2 * TRACE_TIMEOUT_S):
                    await self._task
            except TimeoutError:
                log.warning("trace records still unsent at close: dropped")
        if self._sender is not None:
            await self._sender.close()
