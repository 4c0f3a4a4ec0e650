"""The POP request handlers by request code (with 5.x's server-side rebalance, assignment.py), and the
codes served on the main port only (the others are on both ports, as 5.3.3 registers them)."""
from __future__ import annotations

from mqtool_remoting.codes import RequestCode

from mqtool.broker.pop import ack, assignment, notify, popmsg

HANDLERS = {
    RequestCode.POP_MESSAGE: popmsg.pop_message,
    RequestCode.PEEK_MESSAGE: popmsg.peek_message,
    RequestCode.NOTIFICATION: notify.notification,
    RequestCode.POLLING_INFO: notify.polling_info,
    RequestCode.ACK_MESSAGE: ack.ack_message,
    RequestCode.BATCH_ACK_MESSAGE: ack.batch_ack_message,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: ack.change_invisible_time,
    RequestCode.QUERY_ASSIGNMENT: assignment.query_assignment,
    RequestCode.SET_MESSAGE_REQUEST_MODE: assignment.set_message_request_mode,
    RequestCode.GET_ALL_MESSAGE_REQUEST_MODE: assignment.all_message_request_modes,
}
# 5.3.3 registers these on the main port only (the fast/VIP port answers REQUEST_CODE_NOT_SUPPORTED)
MAIN_PORT_ONLY = frozenset({RequestCode.POP_MESSAGE, RequestCode.PEEK_MESSAGE, RequestCode.NOTIFICATION,
                            RequestCode.POLLING_INFO})
