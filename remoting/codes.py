"""The one registry of remoting numbers, under their Java names.

RequestCode/ResponseCode are 4.9.8's `common/.../protocol/RequestCode.java` and `ResponseCode.java`
(with `RemotingSysResponseCode` 0-4 folded in), so logs can be grepped against the Java source.
Numbers a peer sends that are not listed here stay plain ints: use `named()` when decoding.
"""
from __future__ import annotations

from enum import IntEnum, IntFlag

FRAME_MAX_LENGTH = 16 * 1024 * 1024   # NettyDecoder: com.rocketmq.remoting.frameMaxLength
RPC_TYPE = 0x1                        # flag bit 0: this command is a response
RPC_ONEWAY = 0x2                      # flag bit 1: the sender expects no response

DEFAULT_NAMESRV_PORT = 9876
DEFAULT_BROKER_PORT = 10911
BROKER_VIP_PORT_OFFSET = -2           # the "fast" channel: listenPort - 2
BROKER_HA_PORT_OFFSET = 1             # HA (not remoting): listenPort + 1


class MQVersion(IntEnum):
    """`MQVersion.Version` ordinals that servers branch on (the `version` header field)."""
    V3_0_11 = 37      # register-broker body with filter servers
    V3_4_9 = 121      # maxReconsumeTimes honoured
    V4_0_0 = 213
    V4_6_0 = 333      # what the 2.x C++ client sends
    V4_9_0 = 393
    V4_9_4 = 401      # route JSON switches to standard (quoted keys)
    V4_9_8 = 409
    V5_0_0 = 413


def version_desc(ordinal: int) -> str:
    """MQVersion.getVersionDesc from V4_0_0_SNAPSHOT (212) on: two entries a release, SNAPSHOT first
    (437 -> V5_1_2, what RocketMQ 5's clients report); older or unknown ordinals as the number."""
    if not isinstance(ordinal, int) or not 212 <= ordinal < 212 + 2 * 200:
        return str(ordinal)
    index, snapshot = divmod(ordinal - 212, 2)
    name = f"V{4 + index // 100}_{index % 100 // 10}_{index % 10}"
    return name if snapshot else name + "_SNAPSHOT"


VERSION_V4_9_4 = int(MQVersion.V4_9_4)
VERSION_V4_9_8 = int(MQVersion.V4_9_8)
VERSION_V3_4_9 = int(MQVersion.V3_4_9)


class SerializeType(IntEnum):
    JSON = 0
    ROCKETMQ = 1


class LanguageCode(IntEnum):
    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class RequestCode(IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    GET_TOPIC_CONFIG = 351              # 5.x; mqtool's brokers answer it (one topic's config), 4.9.8's do not
    BROKER_HEARTBEAT = 904              # 5.x: broker -> every controller, oneway (controller.md 3.1)
    GET_BROKER_HA_STATUS = 907          # 5.x; mqtool's brokers answer it (HARuntimeInfo)
    # 5.x controller mode (RIP-44; shared/spec/controller.md 3.1)
    CONTROLLER_ALTER_SYNC_STATE_SET = 1001
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003
    CONTROLLER_GET_REPLICA_INFO = 1004
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006
    GET_BROKER_EPOCH_CACHE = 1007
    NOTIFY_BROKER_ROLE_CHANGED = 1008
    UPDATE_CONTROLLER_CONFIG = 1009
    GET_CONTROLLER_CONFIG = 1010
    CLEAN_BROKER_DATA = 1011
    CONTROLLER_GET_NEXT_BROKER_ID = 1012
    CONTROLLER_APPLY_BROKER_ID = 1013
    # mqtool's own, in no RocketMQ (a Java broker answers REQUEST_CODE_NOT_SUPPORTED): every topic's
    # queue max offsets in one answer, what `mqtool top` otherwise asks GET_TOPIC_STATS_INFO per topic
    GET_ALL_TOPIC_OFFSETS = 90001
    # 5.x POP consumption over remoting (shared/spec/rocketmq5.md 2.1); 200056 POP_ROLLBACK is
    # defined there but registered by no 5.3.3 broker: REQUEST_CODE_NOT_SUPPORTED
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    POLLING_INFO = 200055
    POP_ROLLBACK = 200056
    BATCH_ACK_MESSAGE = 200151
    # 5.x timer messages (shared/spec/rocketmq5.md §1.9, §1.11)
    GET_TIMER_CHECK_POINT = 60
    GET_TIMER_METRICS = 61
    RECALL_MESSAGE = 370
    # 5.x server-side load balance (QueryAssignmentProcessor; shared/spec/rocketmq5.md 2.1)
    QUERY_ASSIGNMENT = 400
    SET_MESSAGE_REQUEST_MODE = 401
    GET_ALL_MESSAGE_REQUEST_MODE = 402


class ResponseCode(IntEnum):
    # RemotingSysResponseCode
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    # ResponseCode
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    FLOW_CONTROL = 215
    # 5.x POP (rocketmq5.md 2.1): 5.x gave 209 and 210 these meanings (4.9.8's ACL failure codes above)
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    INVALID_PARAMETER = 29
    ILLEGAL_OPERATION = 604             # 5.x: a bad recall handle (RecallMessageProcessor); POP (rocketmq5.md 2.1)
    # 5.x controller mode (controller.md 3.2)
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014
    CONTROLLER_JRAFT_INTERNAL_ERROR = 2015
    CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS = 2016


class PermName(IntFlag):
    """Topic/queue permissions (`common/.../constant/PermName.java`)."""
    PERM_INHERIT = 0x1
    PERM_WRITE = 0x2
    PERM_READ = 0x4
    PERM_PRIORITY = 0x8


class TopicSysFlag(IntFlag):
    FLAG_UNIT = 0x1
    FLAG_UNIT_SUB = 0x2


class PullSysFlag(IntFlag):
    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10


def named(enum_cls, value: int):
    """`enum_cls(value)` when the number is known, else the plain int (never raises for an int)."""
    try:
        return enum_cls(value)
    except ValueError:
        return value


def code_name(enum_cls, value: int) -> str:
    """`NAME` for a known number, else the number as text: for log lines and remarks."""
    v = named(enum_cls, value)
    return v.name if isinstance(v, enum_cls) else str(value)
