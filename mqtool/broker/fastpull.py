"""The pull hot path: a PULL_MESSAGE frame to its answer frame in one synchronous call.

`fast_pull` takes the common pull only: a JSON-header PULL_MESSAGE (not oneway) with every field
in the form every client sends, from an existing consumable group, of a readable topic's queue, by
a TAG subscription (in the request or registered by the group's heartbeats; not a retry topic under
filterSupportRetry), on a master without ACL, that finds messages the common way
(`MessageStore.get_joined`: one joined body, no Python object per message). It answers exactly
what `pull.pull_message` under `BrokerController.handle` answers, commits the same offset and counts
the same statistics; tests/broker/test_fastpull.py holds the two to the same bytes. Anything else
returns None: the frame is decoded and takes the general path, which also holds pulls that found
nothing and words every refusal.
"""
from __future__ import annotations

import functools
import struct

from mqtool.broker.fastsend import JSON_HEADERS, SMALL_INTS, fast_send, plain_int, plain_request
from mqtool.broker.filters import is_tag_type
from mqtool.common.subscription import SUB_ALL, Subscription
from mqtool_remoting.codes import RPC_TYPE, RequestCode, ResponseCode
from mqtool_remoting.command import HeaderTemplate, RemotingCommand
from mqtool_remoting.headers import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION
from mqtool_store.codes import RETRY_GROUP_TOPIC_PREFIX, Perm
from mqtool_store.pullbody import codes_bytes

_FRAME_HEAD = struct.Struct(">ii")
_PULL = b'{"code":%d,' % RequestCode.PULL_MESSAGE    # (fastjson: "code" leads, see fastsend.py)
_HEAD_AT = 4
PERM_READ = int(Perm.PERM_READ)
MASTER_ID = 0
_INT_DIGITS, _LONG_DIGITS = 10, 19      # plain_int: fewer digits than these are in Java's int / long range
_CACHE_MAX = 4096
_ALL = object()
_BY_TEXT: dict[str, bytes | None] = {}          # a request's subscription text -> its codes (None: "*")
_BY_CODES: dict[frozenset, bytes] = {}          # a registered subscription's codes -> the same


@functools.lru_cache(maxsize=1)
def _found_template() -> HeaderTemplate | None:
    """The SUCCESS answer's header, its four offsets and the opaque left open (in pull.py's key order)."""
    marks = {"suggestWhichBrokerId": "\0s\0", "nextBeginOffset": "\0n\0", "minOffset": "\0a\0", "maxOffset": "\0b\0"}
    return HeaderTemplate.make(RemotingCommand(ResponseCode.SUCCESS, 0, RPC_TYPE, None, dict(marks)), marks)


def _request_codes(text: str | None):
    """A request's TAG subscription as pull_body's codes: None for every message."""
    key = text or ""
    got = _BY_TEXT.get(key, _ALL)
    if got is _ALL:
        sub = Subscription.parse("", text)
        got = None if sub.sub_string == SUB_ALL else codes_bytes(sub.codes)
        if len(_BY_TEXT) >= _CACHE_MAX:
            _BY_TEXT.clear()
        _BY_TEXT[key] = got
    return got


def _registered_codes(sub: Subscription):
    if sub.sub_string == SUB_ALL:
        return None
    got = _BY_CODES.get(sub.codes)
    if got is None:
        if len(_BY_CODES) >= _CACHE_MAX:
            _BY_CODES.clear()
        got = _BY_CODES[sub.codes] = codes_bytes(sub.codes)
    return got


def _int_of(v):
    got = SMALL_INTS.get(v)
    return got if got is not None else plain_int(v, _INT_DIGITS)


def _long_of(v):
    got = SMALL_INTS.get(v)
    return got if got is not None else plain_int(v, _LONG_DIGITS)


def fast_pull(ctrl, conn, body: bytes) -> bytes | None:
    """The answer frame to one request frame (`body`: the bytes after the length field), or None."""
    if not body.startswith(_PULL, _HEAD_AT) or not JSON_HEADERS or ctrl.acl is not None or ctrl.is_slave:
        return None
    got = plain_request(body, RequestCode.PULL_MESSAGE)
    if got is None:
        return None
    opaque, ext, _ = got
    group, topic = ext.get("consumerGroup"), ext.get("topic")
    queue_id, max_nums, sys_flag = _int_of(ext.get("queueId")), _int_of(ext.get("maxMsgNums")), \
        _int_of(ext.get("sysFlag"))
    offset, commit_offset = _long_of(ext.get("queueOffset")), _long_of(ext.get("commitOffset"))
    sub_version = _long_of(ext.get("subVersion"))
    if group is None or topic is None or queue_id is None or offset is None or max_nums is None \
            or sys_flag is None or commit_offset is None or sub_version is None \
            or _long_of(ext.get("suspendTimeoutMillis")) is None:
        return None
    config = ctrl.config
    if not config.brokerPermission & PERM_READ:
        return None
    sub_cfg = ctrl.groups.table.get(group)
    topic_cfg = ctrl.topics.get(topic)
    if sub_cfg is None or not sub_cfg.consumeEnable or topic_cfg is None or not topic_cfg.perm & PERM_READ \
            or queue_id < 0 or queue_id >= topic_cfg.readQueueNums \
            or (config.filterSupportRetry and topic.startswith(RETRY_GROUP_TOPIC_PREFIX)):
        return None
    if sys_flag & PULL_SUBSCRIPTION:
        if not is_tag_type(ext.get("expressionType")):
            return None
        codes = _request_codes(ext.get("subscription"))
    else:                   # the subscription the group's heartbeats registered
        consumers = ctrl.consumers.get(group)
        if consumers is None or (not sub_cfg.consumeBroadcastEnable and consumers.message_model == "BROADCASTING"):
            return None
        sub = consumers.subscriptions.get(topic)
        if sub is None or sub.sub_version < sub_version or not is_tag_type(sub.expression_type):
            return None
        codes = _registered_codes(sub)
    count_max = max(1, min(max_nums, ctrl.store.cfg.maxTransferCountOnMessageInMemory))
    got = ctrl.store.get_joined(topic, queue_id, offset, count_max, codes)
    template = _found_template()
    if got is None or template is None:
        return None
    records, count, next_begin, min_offset, max_offset, suggest_slave = got
    # From here on: what pull_message does with a found result.
    if sys_flag & PULL_COMMIT_OFFSET and commit_offset >= 0:
        ctrl.offsets.commit(group, topic, queue_id, commit_offset)
    suggest = MASTER_ID if not config.slaveReadEnable else \
        sub_cfg.whichBrokerWhenConsumeSlowly if suggest_slave else sub_cfg.brokerId
    ctrl.stats.got(group, topic, count, len(records))
    header = template.fill(opaque, str(suggest), str(next_begin), str(min_offset), str(max_offset))
    return b"".join((_FRAME_HEAD.pack(4 + len(header) + len(records), len(header)), header, records))


def fast_request(ctrl, conn, body: bytes) -> bytes | None:
    """The main port's fast path: a common send or pull answered at once, else None."""
    answer = fast_send(ctrl, conn, body)
    return answer if answer is not None else fast_pull(ctrl, conn, body)

