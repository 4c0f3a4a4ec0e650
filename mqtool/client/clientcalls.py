"""What a broker asks of a consumer (ClientRemotingProcessor of the 4.9.8 Java client).

RESET_CONSUMER_CLIENT_OFFSET (220, oneway) moves the consumer to the offsets mqadmin's
resetOffsetByTime computed; GET_CONSUMER_STATUS_FROM_CLIENT (221), GET_CONSUMER_RUNNING_INFO (307)
and CONSUME_MESSAGE_DIRECTLY (309) are relayed by the broker from admin tools and the dashboard.
Bodies are fastjson JSON with MessageQueue objects as map keys.
"""
from __future__ import annotations

import asyncio
import time

from mqtool import __version__
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool.client.records import decode_records     # bodies inflated, as MessageDecoder.decode does

CONSUME_RESULTS = {True: "CR_SUCCESS", False: "CR_LATER"}


def _mq_key(mq) -> jsonbody.ObjectKey:
    return jsonbody.ObjectKey.of(mq.to_json())


def reset_offsets(consumer, cmd) -> None:
    """Jump every queue of the topic this consumer holds to the offset the broker sent, and commit it."""
    from mqtool.client.base import MessageQueue
    topic = cmd.ext_fields.get("topic", "")
    table = jsonbody.loads(cmd.body).get("offsetTable", {}) if cmd.body else {}
    for key, offset in table.items():
        q = key.as_dict() if isinstance(key, jsonbody.ObjectKey) else {}
        mq = MessageQueue(q.get("topic", topic), q.get("brokerName", ""), int(q.get("queueId", -1)))
        if mq.topic == topic and mq in consumer.state.assigned:
            consumer.state.assigned[mq] = int(offset)
            consumer.state.committed.pop(mq, None)       # commit the new position at the next commit
            consumer.interrupted.add(mq)                 # drop what was pulled from the old position
    consumer.reset_count += 1


def consumer_status(consumer, cmd):
    topic = cmd.ext_fields.get("topic", "")
    table = {_mq_key(mq): off for mq, off in consumer.state.assigned.items() if mq.topic == topic}
    return cmd.response(ResponseCode.SUCCESS, None, None,
                        jsonbody.dumps({"consumerTable": {}, "messageQueueTable": table}))


def running_info(consumer, cmd):
    """ConsumerRunningInfo: what mqadmin consumerStatus and the dashboard show of a client."""
    now = int(time.time() * 1000)
    mq_table = {_mq_key(mq): {
        "cachedMsgCount": 0, "cachedMsgMaxOffset": 0, "cachedMsgMinOffset": 0, "cachedMsgSizeInMiB": 0,
        "commitOffset": off, "droped": False, "lastConsumeTimestamp": consumer.last_consume_ms.get(mq, 0),
        "lastLockTimestamp": 0, "lastPullTimestamp": now, "locked": mq in getattr(consumer, "locked", ()),
        "transactionMsgCount": 0, "transactionMsgMaxOffset": 0, "transactionMsgMinOffset": 0, "tryUnlockTimes": 0}
        for mq, off in sorted(consumer.state.assigned.items(), key=lambda kv: (kv[0].topic, kv[0].broker_name,
                                                                               kv[0].queue_id))}
    types = getattr(consumer, "types", {})
    subs = [{"classFilterMode": False, "codeSet": [], "expressionType": types.get(topic, "TAG"), "subString": expr,
             "subVersion": consumer.started_ms, "tagsSet": [], "topic": topic} for topic, expr in consumer.subs.items()]
    orderly = bool(getattr(consumer, "orderly", False))
    info = {
        "mqTable": mq_table,
        "properties": {
            "PROP_NAMESERVER_ADDR": ";".join(consumer.namesrv_addrs),
            "PROP_THREADPOOL_CORE_SIZE": "1",
            "PROP_CONSUMEORDERLY": "true" if orderly else "false",
            "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY" if hasattr(consumer, "orderly") else "CONSUME_ACTIVELY",
            "PROP_CLIENT_VERSION": f"mqtool {__version__}",
            "PROP_CONSUMER_START_TIMESTAMP": str(consumer.started_ms),
            "messageModel": "BROADCASTING" if consumer.broadcast else "CLUSTERING",
        },
        "statusTable": {topic: {"consumeFailedMsgs": consumer.failed, "consumeFailedTPS": 0.0, "consumeOKTPS": 0.0,
                                "consumeRT": 0.0, "pullRT": 0.0, "pullTPS": 0.0} for topic in consumer.subs},
        "subscriptionSet": subs,
    }
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(info))


async def consume_directly(consumer, cmd):
    """Run the consumer's own listener on the message the broker sent (push consumers only)."""
    listener = getattr(consumer, "listener", None)
    if listener is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "this consumer has no message listener (not a push consumer)")
    try:
        [rec] = decode_records(cmd.body)
    except Exception as exc:  # noqa: BLE001 - a body the client cannot decode is the caller's problem
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"cannot decode the message: {exc}")
    began = time.monotonic()
    remark = None
    try:
        ok = listener(rec)
        if asyncio.iscoroutine(ok):
            ok = await ok
        result = CONSUME_RESULTS[bool(ok)]
    except Exception as exc:  # noqa: BLE001 - the listener's failure is the answer
        result, remark = "CR_THROW_EXCEPTION", f"{type(exc).__name__}: {exc}"
    body = {"autoCommit": True, "consumeResult": result, "order": bool(getattr(consumer, "orderly", False)),
            "spentTimeMills": int((time.monotonic() - began) * 1000)}
    if remark:
        body["remark"] = remark
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(body))


HANDLERS = {
    RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: consumer_status,
    RequestCode.GET_CONSUMER_RUNNING_INFO: running_info,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: consume_directly,
}
