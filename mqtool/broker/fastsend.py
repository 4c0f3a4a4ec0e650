"""The send hot path: a SEND_MESSAGE_V2 frame to its answer frame in one synchronous call.

`fast_send` is the broker's `Server(fast=...)` hook. It takes the common send only: a JSON-header
SEND_MESSAGE_V2 request (not oneway) with every V2 field in the form every client sends, to an
existing writable topic that is not a retry, DLQ or system topic, with no DELAY or TRAN_MSG property,
no "TIMER_" in its properties (5.x timer messages) and no transaction bits, on an ASYNC_MASTER with
ASYNC_FLUSH and no ACL, where the put never waits
(no SYNC_FLUSH, no SYNC_MASTER, no controller mode in-sync minimum). It answers exactly what
`send.send_message` under `BrokerController.handle` answers and stores the same record, through
the same rules (the properties, a Message's fields, MessageStore.put, the SEND_OK template), minus the general
path's command object, coroutines, header dataclass and layers; tests/broker/test_fastsend.py holds
the two to the same bytes on disk and on the wire. Anything else returns None: the frame is decoded
and takes the general path, which also words every refusal.

`fast_send_batch` does the same for SEND_BATCH_MESSAGE under the same conditions, for a batch of at
least KERNEL_RUN_MIN messages (no DELAY property, no transaction bits) to a topic the store has put
before: the store kernel reads the batch body straight into the run the general path's messages
make (recordrun.batch_columns), without an entry tuple or a Message per message.
"""
from __future__ import annotations

import functools
import struct
from random import random as _random
import time

from mqtool.broker.send import PERM_WRITE, _put_response, _send_ok, peer_host
from mqtool.broker.stats import SENT_CODES
from mqtool.broker.topics import NOT_ALLOWED_SEND_TOPICS, check_topic_name
from mqtool_remoting.codes import RequestCode
from mqtool_remoting.command import RemotingCommand
from mqtool_store.codes import RETRY_GROUP_TOPIC_PREFIX, Prop, SysFlag
from mqtool_remoting.batch import merge_batch_properties
from mqtool_store.messagestore import PutStatus, message_of_row
from mqtool_store.recordrun import batch_columns, batch_run
from mqtool_store.properties import broker_properties
from mqtool_store.storeconfig import ASYNC_MASTER, SYNC_FLUSH

try:
    from orjson import JSONDecodeError as _JSONError, loads as _loads
except ImportError:                      # without orjson the general path takes every frame
    _loads = None
JSON_HEADERS = _loads is not None        # the fast paths read JSON headers with orjson
try:                                     # the header's fields in one C pass (remoting/csrc/header.c)
    from mqtool_remoting._header import fill_frame as _c_fill, send_batch_fields as _c_batch_fields, \
        send_v2_fields as _c_fields
except ImportError:
    _c_fields = _c_batch_fields = _c_fill = None
try:                                     # a read's sends in one C loop (csrc/sendrun.c)
    from mqtool.broker._sendrun import send_run as _send_run
except ImportError:
    _send_run = None

_INT = struct.Struct(">i")
# fastjson writes bean properties in alphabetical order: "code" leads every header Java, mqtool and
# the C++ client write; a header that starts otherwise simply takes the general path.
_SEND_V2 = b'{"code":%d,' % RequestCode.SEND_MESSAGE_V2
_SEND_BATCH = b'{"code":%d,' % RequestCode.SEND_BATCH_MESSAGE
_V2, _BATCH = int(RequestCode.SEND_MESSAGE_V2), int(RequestCode.SEND_BATCH_MESSAGE)
_HEAD_AT = 4                             # the header follows the header-length int
_MULTI_TAGS = int(SysFlag.MULTI_TAGS_FLAG)
_NAMES_OK: set[str] = set()              # topic names check_topic_name passed (a pure check)
_NAMES_MAX = 4096
_PUT_OK = PutStatus.PUT_OK


SMALL_INTS = {str(i): i for i in range(-1, 1024)}   # the queue ids, flags and counts clients send, parsed once


def plain_int(v, digits: int = 10):
    """A V2 int field as the compiled header reader takes it without the general reader (ASCII
    digits short enough to be in range, or a minus sign before them): its value, else None."""
    if type(v) is not str:
        return None
    d = v[1:] if v[:1] == "-" else v
    if 0 < len(d) < digits and d.isdigit() and d.isascii():
        return int(v)
    return None


def plain_request(body: bytes, code: int) -> tuple[int, dict, int] | None:
    """(opaque, extFields, header length) of a request frame with a JSON header of request `code`
    whose fields all have the types Java sends (every extFields value a str), else None: the
    general path takes it (and words what is wrong with it)."""
    mark = _INT.unpack_from(body, 0)[0]
    if mark >> 24:                                   # ROCKETMQ (binary) header
        return None
    hlen = mark & 0xFFFFFF
    if 4 + hlen > len(body):                         # the decoder refuses it (FrameError: the connection closes)
        return None
    try:
        head = _loads(memoryview(body)[4:4 + hlen])
    except _JSONError:
        return None
    opaque, ext, flag = head.get("opaque"), head.get("extFields"), head.get("flag", 0)
    if type(opaque) is not int or type(flag) is not int or flag != 0 or type(ext) is not dict \
            or type(head.get("version", 0)) is not int or type(head.get("language", "")) is not str \
            or type(head.get("remark", "")) is not str or head.get("code") != code:
        return None
    try:
        "".join(ext.values())                        # every value a str, as Java sends them
    except TypeError:
        return None
    return opaque, ext, hlen


def can_take_sends(ctrl) -> bool:
    """Whether a send's put never waits and no request-level hook applies (else: the general path)."""
    sc = ctrl.store_config
    return (ctrl.acl is None and ctrl.writeable and sc.brokerRole == ASYNC_MASTER and sc.flushDiskType != SYNC_FLUSH
            and ctrl.flush_waiters is None
            and (ctrl.autoswitch is None or sc.minInSyncReplicas <= 1))


def send_fields(body: bytes, code: int = _V2):
    """(opaque, header length, topic, properties text, queue id, sys flag, flag, born timestamp,
    reconsume times) of a SEND_MESSAGE_V2 frame (or, with `code` SEND_BATCH_MESSAGE, of a batch's)
    the fast path can take, else None: the C reader where it is sure, else this reader (orjson),
    which the C one never widens."""
    reader = _c_fields if code == _V2 else _c_batch_fields
    if reader is not None:
        got = reader(body)
        if got is not None:
            return got
    return py_send_fields(body, code)


def py_send_fields(body: bytes, code: int = _V2):
    """send_fields in Python: the reference the C reader is tested against."""
    got = plain_request(body, code)
    if got is None:
        return None
    opaque, ext, hlen = got
    topic, props_text = ext.get("b"), ext.get("i", "")
    if type(ext.get("a")) is not str or type(topic) is not str or type(ext.get("c")) is not str \
            or type(props_text) is not str:
        return None
    small = SMALL_INTS.get
    queue_id, sys_flag, flag, queue_nums = small(ext.get("e")), small(ext.get("f")), small(ext.get("h")), \
        small(ext.get("d"))
    if queue_id is None:
        queue_id = plain_int(ext.get("e"))
    if sys_flag is None:
        sys_flag = plain_int(ext.get("f"))
    if flag is None:
        flag = plain_int(ext.get("h"))
    born_ts = plain_int(ext.get("g"), 19)
    if queue_id is None or sys_flag is None or flag is None or born_ts is None or \
            (queue_nums is None and plain_int(ext.get("d")) is None):
        return None
    reconsume = ext.get("j", "0")
    reconsume = small(reconsume) if reconsume in SMALL_INTS else plain_int(reconsume)
    batch = ext.get("m")       # (SEND_BATCH_MESSAGE is a batch whatever it says)
    if reconsume is None or (code == _V2 and batch is not None and batch.lower() == "true"):
        return None
    return opaque, hlen, topic, props_text, queue_id, sys_flag, flag, born_ts, reconsume


def fast_send(ctrl, conn, body: bytes) -> bytes | None:
    """The answer frame to one request frame (`body`: the bytes after the length field), or None."""
    if body.startswith(_SEND_BATCH, _HEAD_AT):
        return fast_send_batch(ctrl, conn, body)
    if not body.startswith(_SEND_V2, _HEAD_AT) or _loads is None or not can_take_sends(ctrl):
        return None
    got = send_fields(body)
    if got is None:
        return None
    opaque, hlen, topic, props_text, queue_id, sys_flag, flag, born_ts, reconsume = got
    if sys_flag & 0xC or "DELAY\x01" in props_text or "TRAN_MSG\x01" in props_text or "TIMER_" in props_text:
        return None                 # (a timer property: the put hook decides, on the general path)
    cfg = _writable_topic(ctrl, topic, queue_id)
    if cfg is None:
        return None
    # From here on: what send_message and BrokerController.put do for this request.
    start = time.monotonic()
    if queue_id < 0:
        queue_id = int(_random() * (cfg.writeQueueNums or 1))    # (randrange costs 3x this)
    if cfg.topicFilterType == "MULTI_TAG":
        sys_flag |= _MULTI_TAGS
    config = ctrl.config
    props, text = broker_properties(props_text, config.brokerClusterName)
    # The Message's fields as a row (messagestore.ROW_FIELDS): put_quick stores it without the object.
    row = (topic, queue_id, sys_flag, peer_host(conn), born_ts, reconsume, 0, body[4 + hlen:], text, props, flag)
    template = _send_ok(config.regionId, "true" if config.traceOn else "false")
    got = ctrl.store.put_quick(row) if template is not None else None
    if got is None:
        return _slow_put(ctrl, opaque, queue_id, row, start)
    msg_id, size, queue_offset = got        # what put_now and _answer do with a stored message: the
    ctrl.drain_soon()                       # dispatch drained once per loop turn, the put counted, SEND_OK
    ctrl.stats.put_one(topic, size, int((time.monotonic() - start) * 1000))
    return template.frame_plain(opaque, msg_id, queue_id, queue_offset)


class FastRequests(functools.partial):
    """A server's fast path (remoting.transport.FastPath): FastRequests(single, ctrl) calls
    `single(ctrl, conn, body)` per frame (at partial's C speed), and `runner(conn)` serves a read's
    frames at once: the sends fast_send takes the usual way, answered by one C loop
    (csrc/sendrun.c: send_run) with the same rules and calls, counted once per run."""

    def runner(self, conn):
        """A callable(bodies, i, j, answers) -> (taken, error) for the frames of one read, made
        from the broker's state now (the caller makes another after anything else ran), or None
        where send_run does not apply."""
        ctrl = self.args[0]
        ctx = run_context(ctrl, conn)
        if ctx is None:
            return None

        def run(bodies: list[bytes], i: int, j: int, answers: list[bytes]):
            taken, tally, zeros, slow, error = _send_run(bodies, i, j, ctx, answers)
            if taken:
                ctrl.drain_soon()
                ctrl.stats.put_run(tally, zeros, slow)
            return taken, error
        run.head = _SEND_V2           # it takes only frames whose header starts so (the transport looks)
        return run


def run_context(ctrl, conn) -> tuple | None:
    """send_run's ctx (csrc/sendrun.c's order): what fast_send reads per frame that holds for a
    whole read, or None where fast_send itself is to decide each frame."""
    if _send_run is None or _c_fields is None or _c_fill is None or _loads is None or not can_take_sends(ctrl):
        return None
    config, store = ctrl.config, ctrl.store
    template = _send_ok(config.regionId, "true" if config.traceOn else "false")
    quick = store.quick_put_args()
    if template is None or quick is None:
        return None
    put, state, host_row, id_prefix, max_body, dispatch_batch, min_blank, clock, on_dispatch = quick
    return (_c_fields, broker_properties, put, _c_fill, template.frame_plain, store, state, host_row, id_prefix,
            max_body, dispatch_batch, min_blank, clock, on_dispatch, ctrl.topics.table, _NAMES_OK, NOT_ALLOWED_SEND_TOPICS,
            bool(config.brokerPermission & PERM_WRITE), config.brokerClusterName, peer_host(conn),
            template.byte_parts, template.slots, _SEND_V2, RETRY_GROUP_TOPIC_PREFIX, _random,
            functools.partial(_slow_put, ctrl))


def _slow_put(ctrl, opaque: int, queue_id: int, row: tuple, start: float) -> bytes:
    """fast_send's answer where the store kernel did not put the row: the general put of it."""
    return _answer(ctrl, opaque, queue_id, ctrl.put_now(message_of_row(row)), start, _V2)


def fast_send_batch(ctrl, conn, body: bytes) -> bytes | None:
    """SEND_BATCH_MESSAGE: what send.py's _send_batch stores and answers, for a batch of at least
    KERNEL_RUN_MIN messages that the store kernel makes into one run (recordrun.batch_columns)
    straight from the frame, without the general path's entries and Message objects; else None."""
    if _loads is None or not can_take_sends(ctrl):
        return None
    got = send_fields(body, _BATCH)
    if got is None:
        return None
    opaque, hlen, topic, outer, queue_id, sys_flag, _flag, born_ts, reconsume = got
    if sys_flag & 0xC or "DELAY\x01" in outer:      # a delayed or transactional batch: refused there
        return None
    cfg = _writable_topic(ctrl, topic, queue_id)
    store = ctrl.store
    topic_part = store.topic_part(topic) if cfg is not None else None
    if topic_part is None:
        return None
    start = time.monotonic()
    if cfg.topicFilterType == "MULTI_TAG":
        sys_flag |= _MULTI_TAGS
    born, store_host = peer_host(conn), store.store_host
    columns = batch_columns(body, 4 + hlen, _outer_all(outer, ctrl.config.brokerClusterName), topic, sys_flag,
                            born[0], topic_part, store.cfg.maxMessageSize, store_host)
    if columns is None:
        return None
    # From here on: what send_message, _send_batch and BrokerController.put do for this request.
    if queue_id < 0:
        queue_id = int(_random() * (cfg.writeQueueNums or 1))
    run = batch_run(columns, topic, queue_id, sys_flag, born_ts, born, reconsume, topic_part, store_host)
    config = ctrl.config
    template = _send_ok(config.regionId, "true" if config.traceOn else "false")
    got = store.put_run_quick(run) if template is not None else None
    if got is None:
        return _answer(ctrl, opaque, queue_id, ctrl.put_run_now(run, store_host), start, _BATCH)
    ids, queue_offset = got          # what put_run_now and _answer do with a stored run
    ctrl.drain_soon()
    stats = ctrl.stats
    stats.put(topic, len(run), run.total)
    stats.put_time(int((time.monotonic() - start) * 1000))
    return template.frame_plain(opaque, ids, queue_id, queue_offset)


def _writable_topic(ctrl, topic: str, queue_id: int):
    """The topic's config where the general path would store a send to it as asked, else None."""
    if topic not in _NAMES_OK:
        if check_topic_name(topic) is not None:
            return None
        if len(_NAMES_OK) >= _NAMES_MAX:
            _NAMES_OK.clear()
        _NAMES_OK.add(topic)
    cfg = ctrl.topics.get(topic)
    if cfg is None or topic in NOT_ALLOWED_SEND_TOPICS or not cfg.perm & PERM_WRITE \
            or (cfg.order and not ctrl.config.brokerPermission & PERM_WRITE) \
            or queue_id >= max(cfg.readQueueNums, cfg.writeQueueNums) or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    return cfg


_OUTER: dict[tuple[str, str], str] = {}


def _outer_all(outer: str, cluster_name: str) -> str:
    """A batch's own properties with CLUSTER merged in, as _send_batch does (a producer's few texts, kept)."""
    key = (outer, cluster_name)
    got = _OUTER.get(key)
    if got is None:
        cluster = f"{Prop.CLUSTER}\x01{cluster_name}"
        got = merge_batch_properties(outer, cluster) if cluster not in outer else outer
        if len(_OUTER) >= _NAMES_MAX:
            _OUTER.clear()
        _OUTER[key] = got
    return got


def _answer(ctrl, opaque: int, queue_id: int, result, start: float, code: int) -> bytes:
    """The answer frame of a stored (or refused) send, with its put time counted as timed_put does."""
    if result.status is _PUT_OK:
        config = ctrl.config
        template = _send_ok(config.regionId, "true" if config.traceOn else "false")
        if template is not None:
            ids = result.msg_ids
            frame = template.frame_plain(opaque, ids[0] if len(ids) == 1 else ",".join(ids), queue_id,
                                         result.queue_offset)
            ctrl.stats.put_time(int((time.monotonic() - start) * 1000))
            return frame
    cmd = RemotingCommand(code, opaque, 0)
    resp = _put_response(cmd, ctrl, result, queue_id)
    if resp.code in SENT_CODES:
        ctrl.stats.put_time(int((time.monotonic() - start) * 1000))
    return resp.encode()
