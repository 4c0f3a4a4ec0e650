"""ReceiveMessage (ReceiveMessageActivity + ConsumerProcessor.popMessage in Local mode, rocketmq5.md
3.11): the request checked, one POP_MESSAGE over every queue of the named broker (this one) handed to
the broker's own POP handler, its long polling included, and the answer written as a stream: a status,
the messages with their receipt handles, then the delivery timestamp."""
from __future__ import annotations

import asyncio
import logging
import time

from mqtool.client.popconsumer import popped_messages
from mqtool.common.subscription import Subscription
from mqtool.proxy import ack, consumer, local
from mqtool.proxy.codes import Code
from mqtool.proxy.context import ProxyError, version_ordinal
from mqtool.proxy.convert import to_message
from mqtool.proxy.descriptors import pb
from mqtool.proxy.route import validate_topic
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand

log = logging.getLogger("mqtool.proxy")
MIN_POLLING_MS, MAX_POLLING_MS = 5_000, 20_000      # grpcClientConsumer{Min,Max}LongPollingTimeoutMillis
MIN_INVISIBLE_MS, MAX_INVISIBLE_MS = 10_000, 43_200_000   # minInvisibleTimeMillsForRecv, maxInvisibleTimeMills
AUTO_RENEW_INVISIBLE_MS = 60_000                     # defaultInvisibleTimeMills
MAX_BATCH = 32                                       # ProxyUtils.MAX_MSG_NUMS_FOR_POP_REQUEST
SETTINGS_WAIT_S = 2.0                                # a receive before the client's Settings waits this long
RESTORE_INVISIBLE_MS = 1_000                         # what was popped but not written comes back after 1 s
INIT_MODE_MAX = 1
VERSION_5_0_3 = version_ordinal("5.0.3")
NOT_ENOUGH = "The deadline time remaining is not enough for polling, please check network condition"


def polling_ms(request, settings, remaining_s: float | None, client_version: str) -> int:
    if remaining_s is None:
        raise ProxyError(Code.INTERNAL_SERVER_ERROR, "the call has no deadline: ReceiveMessage needs one")
    remaining = int(remaining_s * 1000)
    if request.HasField("long_polling_timeout"):
        poll = request.long_polling_timeout.ToMilliseconds()
    else:
        poll = remaining - settings.request_timeout.ToMilliseconds() // 2
    poll = min(max(poll, MIN_POLLING_MS), MAX_POLLING_MS)
    if poll > remaining:
        if remaining < MIN_POLLING_MS:
            old = version_ordinal(client_version) < VERSION_5_0_3
            raise ProxyError(Code.BAD_REQUEST if old else Code.ILLEGAL_POLLING_TIME, NOT_ENOUGH)
        poll = remaining
    return poll


def invisible_ms(request, auto_renew_enabled: bool = True) -> int:
    if request.auto_renew and auto_renew_enabled:
        return AUTO_RENEW_INVISIBLE_MS
    given = request.invisible_duration.ToMilliseconds()
    if given < MIN_INVISIBLE_MS:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {MIN_INVISIBLE_MS}")
    if given > MAX_INVISIBLE_MS:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {MAX_INVISIBLE_MS}")
    return given


def filter_of(ctrl, request) -> tuple[str, str]:
    """(expType, exp) of the POP; ILLEGAL_FILTER_EXPRESSION when it does not compile."""
    expr = request.filter_expression
    kind = consumer.expression_type(expr)
    text = expr.expression or "*"
    if kind == "SQL92":
        from mqtool.broker.filters import compile_filter
        from mqtool.common.sql92 import FilterCompileError
        try:
            compile_filter(kind, text)
        except FilterCompileError as exc:
            raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, f"SQL92 expression {text!r} is illegal: {exc}") from None
    return kind, text


def _status(code: Code, message: str):
    return pb.ReceiveMessageResponse(status=pb.Status(code=code, message=message))


def _timestamp():
    ts = pb.Timestamp()
    ts.FromMilliseconds(int(time.time() * 1000))
    return pb.ReceiveMessageResponse(delivery_timestamp=ts)


async def receive_message(proxy, client, ctx, request, context):
    """The stream's items; every stream ends with a delivery timestamp."""
    try:
        async for item in _receive(proxy, client, ctx, request, context):
            yield item
    except ProxyError as exc:
        yield _status(exc.code, exc.message)
    yield _timestamp()


async def _receive(proxy, client, ctx, request, context):
    ctrl = proxy.ctrl
    if client.settings is None:             # a client's first receive may overtake its Settings on the
        try:                                # Telemetry stream: wait for them a little (5.3.3 answers at once)
            async with asyncio.timeout(SETTINGS_WAIT_S):
                await client.settled.wait()
        except TimeoutError:
            pass
    settings = client.settings
    if settings is None:
        raise ProxyError(Code.INTERNAL_SERVER_ERROR, "cannot find client settings for this client")
    poll = polling_ms(request, settings, context.time_remaining(), client.version)
    topic, group = request.message_queue.topic.name, request.group.name
    validate_topic(topic)
    consumer.validate_group(group)
    invisible = invisible_ms(request, ctrl.config.enableProxyAutoRenew)
    exp_type, exp = filter_of(ctrl, request)
    fifo = bool(settings.subscription.fifo)
    max_attempts = settings.backoff_policy.max_attempts or 17
    header = {"consumerGroup": group, "topic": topic, "queueId": -1,
              "maxMsgNums": min(max(request.batch_size, 1), MAX_BATCH), "invisibleTime": invisible,
              "pollTime": poll, "bornTime": int(time.time() * 1000), "initMode": INIT_MODE_MAX,
              "expType": exp_type, "exp": exp, "order": fifo}
    if request.HasField("attempt_id"):
        header["attemptId"] = request.attempt_id
    resp = await local.call(ctrl, client.channel, RemotingCommand.request(RequestCode.POP_MESSAGE, header,
                                                                          language=client.language))
    if resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
        yield _status(Code.MESSAGE_NOT_FOUND, "no new message")
        return
    if resp.code == ResponseCode.POLLING_FULL:
        yield _status(Code.TOO_MANY_REQUESTS, "polling full")
        return
    if resp.code != ResponseCode.SUCCESS:
        raise local.status_error(resp)
    popped = popped_messages(resp, ctrl.config.brokerName, "")
    tags = Subscription.parse(topic, exp) if exp_type == "TAG" else None
    out = []
    for p in popped:
        handle = f"{p.extra.text()} {p.record.physical_offset}"
        rec = p.record
        if tags is not None and tags.sub_string != "*" and rec.tags not in tags.tags:
            await ack.ack_handle(proxy, client, group, topic, handle)              # not for this subscription
        elif rec.reconsume_times >= max_attempts:
            await ack.forward_and_ack(proxy, client, group, topic, handle, rec.properties.get("UNIQ_KEY") or rec.msg_id)
        else:
            out.append((handle, rec))
    if not out:
        yield _status(Code.MESSAGE_NOT_FOUND, "no match message")
        return
    if request.auto_renew and ctrl.config.enableProxyAutoRenew:
        for handle, rec in out:
            proxy.renewals.add(client, group, topic, handle, rec.properties.get("UNIQ_KEY") or rec.msg_id)
    yield _status(Code.OK, "OK")
    written = 0
    try:
        for handle, rec in out:
            yield pb.ReceiveMessageResponse(message=to_message(rec, topic, receipt_handle=handle))
            written += 1
    finally:
        if written < len(out):        # the client went away: what it did not get comes back soon
            rest = [h for h, _ in out[written:]]
            asyncio.get_running_loop().create_task(_restore(proxy, client, group, topic, rest))


async def _restore(proxy, client, group: str, topic: str, handles: list[str]) -> None:
    for handle in handles:
        try:
            await ack.change_handle(proxy, client, group, topic, handle, RESTORE_INVISIBLE_MS)
        except ProxyError as exc:
            log.info("could not make an unwritten message visible again (%s): %s", handle, exc.message)
