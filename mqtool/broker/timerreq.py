"""5.x timer requests: RECALL_MESSAGE (370, RecallMessageProcessor), GET_TIMER_CHECK_POINT (60) and
GET_TIMER_METRICS (61) (AdminBrokerProcessor); spec rocketmq5.md §1.9, §1.11."""
from __future__ import annotations

import time

from mqtool.broker.send import peer_host
from mqtool.broker.timerhook import parse_recall_handle
from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.headers import RecallMessageRequestHeader, from_ext_fields
from mqtool_store.codes import Prop
from mqtool_store.messagestore import Message, PutStatus
from mqtool_store.properties import format_properties
from mqtool_store.timerlog import TimerCheck

RECALL_TAG = "_RECALL_TAG_"
_STORED = (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT,
           PutStatus.SLAVE_NOT_AVAILABLE)


async def recall_message(ctrl, conn, cmd):
    h = from_ext_fields(RecallMessageRequestHeader, cmd.ext_fields)
    if not ctrl.config.recallMessageEnable:
        return cmd.response(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
    if ctrl.is_slave:
        return cmd.response(ResponseCode.SLAVE_NOT_AVAILABLE, "recall failed, broker service not available")
    if not ctrl.writeable:
        return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, "recall failed, broker service not available")
    if ctrl.topics.get(h.topic) is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{h.topic}] not exist")
    handle = parse_recall_handle(h.recallHandle)
    if handle is None:
        return cmd.response(ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid")
    topic, broker, timestamp, msg_id = handle
    if topic != h.topic or broker != ctrl.config.brokerName:
        return cmd.response(ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid")
    now = int(time.time() * 1000)
    if timestamp - now <= 0 or timestamp - now >= ctrl.store_config.timerMaxDelaySec * 1000:
        return cmd.response(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
    props = {Prop.TAGS: RECALL_TAG, Prop.TIMER_DEL_UNIQKEY: f"{topic}+{msg_id}", Prop.UNIQ_KEY: msg_id,
             Prop.TIMER_DELIVER_MS: str(timestamp), Prop.BORN_TIMESTAMP: str(now), Prop.TRACE_CONTEXT: "",
             Prop.CLUSTER: ctrl.config.brokerClusterName}
    if h.producerGroup:
        props[Prop.PGROUP] = h.producerGroup
    marker = Message(topic, 0, b"0", props, format_properties(props), born_timestamp=now, born_host=peer_host(conn))
    result = await ctrl.put(marker)
    if result.status not in _STORED:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"recall failed, put the recall marker: {result.status.value}")
    return cmd.response(ResponseCode.SUCCESS, None, {"msgId": msg_id})


async def timer_check_point(ctrl, conn, cmd):
    timer = ctrl.timer
    if not ctrl.store_config.timerWheelEnable:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
    check = timer.check.read() if timer.check is not None else TimerCheck(timer.read_ms, 0, timer.queue_offset,
                                                                          timer.queue_offset)
    return cmd.response(ResponseCode.SUCCESS, None, None, check.encode())


async def timer_metrics(ctrl, conn, cmd):
    if not ctrl.store_config.timerWheelEnable:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "The timer message store is null")
    return cmd.response(ResponseCode.SUCCESS, None, None, ctrl.timer.metrics_json().encode())
