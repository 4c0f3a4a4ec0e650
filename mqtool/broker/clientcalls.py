"""Admin requests the broker relays to online consumers (AdminBrokerProcessor.callConsumer and
Broker2Client of 4.9.8): reset offsets by time (RESET_CONSUMER_CLIENT_OFFSET pushed to every
consumer of the group), consumer status, running info, and consume one message directly."""
from __future__ import annotations

import logging

from mqtool_remoting import jsonbody
from mqtool_remoting.bodies import GetConsumerStatusBody, MessageQueue, ResetOffsetBody, ResetOffsetBodyForC
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingError, RemotingTimeout
from mqtool_remoting.headers import (ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
                                     GetConsumerStatusRequestHeader, ResetOffsetRequestHeader, from_ext_fields,
                                     to_ext_fields)
from mqtool_store.errors import FormatError
from mqtool_store.msgid import decode_offset_msg_id

log = logging.getLogger("mqtool.broker")
CALL_CLIENT_TIMEOUT_S = 10.0          # Broker2Client.callClient
STATUS_TIMEOUT_S = 5.0                # getConsumeStatus


def _find_channel(ctrl, group: str, client_id: str):
    info = ctrl.consumers.get(group)
    return next((c for c in list(info.channels.values()) if c.client_id == client_id), None) if info else None


async def _call_consumer(ctrl, code: int, cmd, group: str, client_id: str, ext: dict, body: bytes):
    """callConsumer: the admin's request, re-made with its extFields and body, to one client; the
    client's answer goes back as it is."""
    client = _find_channel(ctrl, group, client_id)
    if client is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
    request = RemotingCommand.request(code, ext, body, language="JAVA")
    try:
        resp = await client.channel.request(request, CALL_CLIENT_TIMEOUT_S)
    except RemotingTimeout as exc:
        return cmd.response(ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}")
    except (RemotingError, OSError) as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
    return cmd.response(resp.code, resp.remark, resp.ext_fields, resp.body)


async def consumer_running_info(ctrl, conn, cmd):
    """GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus, the dashboard): the client's ConsumerRunningInfo."""
    h = from_ext_fields(GetConsumerRunningInfoRequestHeader, cmd.ext_fields)
    return await _call_consumer(ctrl, RequestCode.GET_CONSUMER_RUNNING_INFO, cmd, h.consumerGroup, h.clientId,
                                dict(cmd.ext_fields), cmd.body)


async def consume_message_directly(ctrl, conn, cmd):
    """CONSUME_MESSAGE_DIRECTLY: the record named by the offset msgId, given to one client to consume."""
    h = from_ext_fields(ConsumeMessageDirectlyResultRequestHeader, cmd.ext_fields)
    ext = {**cmd.ext_fields, "brokerName": ctrl.config.brokerName}
    try:
        _ip, _port, offset = decode_offset_msg_id(h.msgId or "")
    except FormatError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad message id {h.msgId!r}: {exc}")
    data = ctrl.store.read_bytes(offset)
    if data is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"no message at commit log offset {offset}")
    return await _call_consumer(ctrl, RequestCode.CONSUME_MESSAGE_DIRECTLY, cmd, h.consumerGroup, h.clientId,
                                ext, bytes(data))


def reset_table(ctrl, topic: str, group: str, timestamp: int, force: bool) -> dict[MessageQueue, int] | str:
    """Broker2Client.resetOffset's offsets: each queue's offset at `timestamp` (-1: the end), kept
    at the committed offset when that is lower, unless `force`. A string is the error."""
    cfg = ctrl.topics.get(topic)
    if cfg is None:
        return f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"
    table = {}
    for q in range(cfg.writeQueueNums):
        committed = ctrl.offsets.query(group, topic, q)
        if committed == -1:
            return f"THe consumer group <{group}> not exist"
        at = ctrl.store.max_offset(topic, q) if timestamp == -1 else ctrl.store.offset_by_time(topic, q, timestamp)
        at = max(at, 0)
        table[MessageQueue(topic, ctrl.config.brokerName, q)] = at if force or at < committed else committed
    return table


async def reset_offset(ctrl, conn, cmd):
    """INVOKE_BROKER_TO_RESET_OFFSET (mqadmin resetOffsetByTime): push the offsets to every online
    consumer (RESET_CONSUMER_CLIENT_OFFSET, oneway; ResetOffsetBodyForC when the admin request came
    from a CPP client, as Java decides), commit them here too, and answer with the ResetOffsetBody."""
    h = from_ext_fields(ResetOffsetRequestHeader, cmd.ext_fields)
    log.info("[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%s, isForce=%s",
             conn.peer, h.topic, h.group, h.timestamp, h.isForce)
    table = reset_table(ctrl, h.topic, h.group, h.timestamp, bool(h.isForce))
    if isinstance(table, str):
        return cmd.response(ResponseCode.SYSTEM_ERROR, table)
    info = ctrl.consumers.get(h.group)
    if info is None or not info.channels:
        return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, f"Consumer not online, so can not reset offset, "
                                                               f"Group: {h.group} Topic: {h.topic} Timestamp: {h.timestamp}")
    body = ResetOffsetBody(table)
    push_body = ResetOffsetBodyForC(table) if cmd.language == "CPP" else body
    header = to_ext_fields(ResetOffsetRequestHeader(h.topic, h.group, h.timestamp, False))
    for client in list(info.channels.values()):
        push = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header,
                                       jsonbody.dumps(push_body.to_json()), oneway=True, language="JAVA")
        try:
            await client.channel.oneway(push)
        except (RemotingError, OSError) as exc:
            log.error("[reset-offset] reset offset exception. topic=%s, group=%s, error=%s", h.topic, h.group, exc)
    # Java leaves the commit to the clients; committing here too moves the group even for a
    # client that does not persist what it was pushed (a Java client overwrites it with the same).
    for q, offset in table.items():
        ctrl.offsets.commit(h.group, h.topic, q.queueId, offset)
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(body.to_json()))


async def consumer_status(ctrl, conn, cmd):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GET_CONSUMER_STATUS_FROM_CLIENT to each online consumer
    (or just clientAddr, a client id), their messageQueueTables gathered by client id."""
    h = from_ext_fields(GetConsumerStatusRequestHeader, cmd.ext_fields)
    info = ctrl.consumers.get(h.group)
    if info is None or not info.channels:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{h.group}]")
    wanted = (h.clientAddr or "").strip()
    out = GetConsumerStatusBody()
    header = to_ext_fields(GetConsumerStatusRequestHeader(h.topic, h.group))
    for client in list(info.channels.values()):
        if wanted and wanted != client.client_id:
            continue
        request = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, header, language="JAVA")
        try:
            resp = await client.channel.request(request, STATUS_TIMEOUT_S)
            if resp.code == ResponseCode.SUCCESS and resp.body:
                out.consumerTable[client.client_id] = GetConsumerStatusBody.from_json(
                    jsonbody.loads(resp.body)).messageQueueTable
        except (RemotingError, OSError, ValueError) as exc:
            log.error("[get-consumer-status] get consumer status exception. topic=%s, group=%s, error=%s",
                      h.topic, h.group, exc)
        if wanted:
            break
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(out.to_json()))
