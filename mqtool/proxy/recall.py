"""RecallMessage (RecallMessageActivity, ProducerProcessor.recallMessage; rocketmq5.md 3.15): a timer
message's recall handle handed to the broker's own RECALL_MESSAGE (370)."""
from __future__ import annotations

from mqtool.proxy import local
from mqtool.proxy.codes import MESSAGE_TYPE_ATTR, Code
from mqtool.proxy.context import ProxyError
from mqtool.proxy.descriptors import pb
from mqtool.proxy.route import validate_topic
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand

RECALLABLE = ("DELAY", "MIXED")


async def recall_message(proxy, client, ctx, request):
    ctrl = proxy.ctrl
    topic = request.topic.name
    validate_topic(topic)
    if ctrl.config.enableTopicMessageTypeCheck:
        cfg = ctrl.topics.get(topic)
        kind = "UNSPECIFIED" if cfg is None else (cfg.attributes or {}).get(MESSAGE_TYPE_ATTR, "NORMAL")
        if kind not in RECALLABLE:
            raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                             f"RecallMessage needs a DELAY topic: {topic} is {kind}")
    cmd = RemotingCommand.request(RequestCode.RECALL_MESSAGE, {"topic": topic, "recallHandle": request.recall_handle,
                                                               "producerGroup": topic}, language=client.language)
    resp = await local.call(ctrl, client.channel, cmd)
    if resp.code != ResponseCode.SUCCESS:
        raise ProxyError(Code.INTERNAL_SERVER_ERROR, resp.remark or f"recall failed: code {resp.code}")
    return pb.RecallMessageResponse(status=pb.Status(code=Code.OK, message="OK"),
                                    message_id=(resp.ext_fields or {}).get("msgId", ""))
