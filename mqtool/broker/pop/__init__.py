"""POP consumption over remoting (RocketMQ 5.x; shared/spec/rocketmq5.md 2): the broker assigns
messages, hides them for an invisible time and redelivers what is not acked through a retry topic.

`extrainfo` (the strings clients echo) lives in remoting/, the revive records in store/poprecords.py.
Here: `service` (state, offsets, revive records), `popmsg` (POP, PEEK), `ack` (ACK, BATCH_ACK,
CHANGE_INVISIBLE), `notify` (NOTIFICATION, POLLING_INFO), `polling` (long polling), `revive`
(redelivery, DLQ), `orderinfo` (orderly POP)."""
from __future__ import annotations

from mqtool_remoting.codes import RequestCode

from mqtool.broker.pop import ack, notify, popmsg

HANDLERS = {
    RequestCode.POP_MESSAGE: popmsg.pop_message,
    RequestCode.PEEK_MESSAGE: popmsg.peek_message,
    RequestCode.NOTIFICATION: notify.notification,
    RequestCode.POLLING_INFO: notify.polling_info,
    RequestCode.ACK_MESSAGE: ack.ack_message,
    RequestCode.BATCH_ACK_MESSAGE: ack.batch_ack_message,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: ack.change_invisible_time,
}
# 5.3.3 registers these on the main port only (the fast/VIP port answers REQUEST_CODE_NOT_SUPPORTED)
MAIN_PORT_ONLY = frozenset({RequestCode.POP_MESSAGE, RequestCode.PEEK_MESSAGE, RequestCode.NOTIFICATION,
                            RequestCode.POLLING_INFO})
