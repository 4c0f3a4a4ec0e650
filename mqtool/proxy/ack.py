"""AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue (rocketmq5.md 3.12, 3.13):
each receipt handle decoded, checked for expiry, and handed to the broker's own ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME or CONSUMER_SEND_MSG_BACK handler.

A changed handle is the cluster-mode form (9 fields, its checkpoint starting at the message's own
offset), not 5.3.3 Local mode's 10-field one whose later ack misses the new checkpoint (3.12: the
message would come back although acked)."""
from __future__ import annotations

import time

from mqtool.proxy import local
from mqtool.proxy.codes import Code
from mqtool.proxy.consumer import validate_group
from mqtool.proxy.context import ProxyError
from mqtool.proxy.descriptors import pb
from mqtool.proxy.route import validate_topic
from mqtool_remoting import extrainfo as ei
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand

MAX_INVISIBLE_MS = 43_200_000          # maxInvisibleTimeMills
OK = (Code.OK, "OK")


def decode(handle: str, *, check_expiry: bool = True) -> ei.ReceiptHandle:
    try:
        decoded = ei.parse_receipt_handle(handle)
    except ValueError as exc:
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {exc}") from None
    if decoded.extra.queue_offset is None:
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle has no queue offset")
    if check_expiry and int(time.time() * 1000) >= decoded.next_visible_time:
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
    return decoded


async def _call(proxy, client, code: int, header: dict):
    return await local.call(proxy.ctrl, client.channel, RemotingCommand.request(code, header, language=client.language))


async def ack_handle(proxy, client, group: str, topic: str, handle: str, *, check_expiry: bool = True) -> tuple:
    """(code, message) of one ack."""
    rh = decode(handle, check_expiry=check_expiry)
    e = rh.extra
    resp = await _call(proxy, client, RequestCode.ACK_MESSAGE, {
        "consumerGroup": group, "topic": ei.real_topic(e.kind, topic, group), "queueId": e.queue_id,
        "extraInfo": handle, "offset": e.queue_offset})
    if resp.code != ResponseCode.SUCCESS:
        return Code.INTERNAL_SERVER_ERROR, f"ack failed: status is abnormal ({resp.remark or resp.code})"
    return OK


async def change_handle(proxy, client, group: str, topic: str, handle: str, invisible_ms: int,
                        *, check_expiry: bool = True) -> str:
    """The new receipt handle after a change of invisible time; ProxyError when refused."""
    rh = decode(handle, check_expiry=check_expiry)
    e = rh.extra
    resp = await _call(proxy, client, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
        "consumerGroup": group, "topic": ei.real_topic(e.kind, topic, group), "queueId": e.queue_id,
        "extraInfo": handle, "offset": e.queue_offset, "invisibleTime": invisible_ms})
    if resp.code != ResponseCode.SUCCESS:
        raise ProxyError(Code.INTERNAL_SERVER_ERROR,
                         f"changeInvisibleDuration failed: status is abnormal ({resp.remark or resp.code})")
    ext = resp.ext_fields or {}
    start = e.ck_offset if e.order else e.queue_offset
    new = ei.ExtraInfo(start, int(ext["popTime"]), int(ext["invisibleTime"]), int(ext["reviveQid"]), e.kind,
                       e.broker_name, e.queue_id, e.queue_offset)
    return ei.ReceiptHandle(new, rh.commit_log_offset).text()


async def forward_and_ack(proxy, client, group: str, topic: str, handle: str, message_id: str) -> tuple:
    """The message copied to %DLQ%<group>, then acked: (code, message)."""
    rh = decode(handle, check_expiry=False)
    if rh.commit_log_offset < 0:
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
    resp = await _call(proxy, client, RequestCode.CONSUMER_SEND_MSG_BACK, {
        "offset": rh.commit_log_offset, "group": group, "delayLevel": -1, "originMsgId": message_id,
        "originTopic": ei.real_topic(rh.extra.kind, topic, group), "maxReconsumeTimes": 0})
    if resp.code != ResponseCode.SUCCESS:
        return local.status_error(resp).code, resp.remark or ""
    return await ack_handle(proxy, client, group, topic, handle, check_expiry=False)


def _validated(request) -> tuple[str, str]:
    topic, group = request.topic.name, request.group.name
    validate_topic(topic)
    validate_group(group)
    return topic, group


async def ack_message(proxy, client, ctx, request):
    topic, group = _validated(request)
    entries = []
    for entry in request.entries:
        handle = proxy.renewals.take(client.client_id, group, entry.message_id) or entry.receipt_handle
        try:
            code, message = await ack_handle(proxy, client, group, topic, handle)
        except ProxyError as exc:
            code, message = exc.code, exc.message
        entries.append(pb.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                                                status=pb.Status(code=code, message=message)))
    codes = {e.status.code for e in entries}
    if len(codes) == 1:
        top = pb.Status(code=codes.pop(), message=entries[0].status.message)
    elif not entries:
        top = pb.Status(code=Code.OK, message="OK")
    else:
        top = pb.Status(code=Code.MULTIPLE_RESULTS, message="ack message failed")
    return pb.AckMessageResponse(status=top, entries=entries)


async def change_invisible_duration(proxy, client, ctx, request):
    topic, group = _validated(request)
    invisible = request.invisible_duration.ToMilliseconds()
    if invisible > MAX_INVISIBLE_MS:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {MAX_INVISIBLE_MS}")
    if invisible < 0:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, "the invisibleTime cannot be negative")
    handle = proxy.renewals.take(client.client_id, group, request.message_id) or request.receipt_handle
    new = await change_handle(proxy, client, group, topic, handle, invisible)
    return pb.ChangeInvisibleDurationResponse(status=pb.Status(code=Code.OK, message="OK"), receipt_handle=new)


async def forward_message_to_dlq(proxy, client, ctx, request):
    topic, group = _validated(request)
    handle = proxy.renewals.take(client.client_id, group, request.message_id) or request.receipt_handle
    code, message = await forward_and_ack(proxy, client, group, topic, handle, request.message_id)
    return pb.ForwardMessageToDeadLetterQueueResponse(status=pb.Status(code=code, message=message))
