"""Local mode's way into the broker: a 4.x request handed to the broker's own handler on its loop
(LocalMessageService), and the broker's answer codes as gRPC statuses (ResponseBuilder.buildStatus)."""
from __future__ import annotations

import logging

from mqtool.proxy.codes import Code
from mqtool.proxy.context import ProxyError
from mqtool_remoting.codes import ResponseCode
from mqtool_remoting.errors import HeaderError

log = logging.getLogger("mqtool.proxy")
REMOTING_CODES = {ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
                  ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
                  ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND}


async def call(ctrl, channel, cmd):
    """The broker's handler of `cmd.code`, as BrokerController.handle runs it but without the remoting
    ACL hook: a gRPC request was checked by its own signature (auth.py)."""
    from mqtool.broker.controller import HANDLERS
    try:
        return await HANDLERS[cmd.code](ctrl, channel, cmd)
    except (HeaderError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("gRPC request (as remoting code %s) from %s failed: %s", cmd.code, channel, exc)
        raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"bad request: {exc}") from None


def status_error(resp) -> ProxyError:
    """A broker refusal: most become INTERNAL_SERVER_ERROR with the broker's remark, as in 5.3.3's Local mode."""
    return ProxyError(REMOTING_CODES.get(resp.code, Code.INTERNAL_SERVER_ERROR),
                      resp.remark or f"the broker answered code {resp.code}")
