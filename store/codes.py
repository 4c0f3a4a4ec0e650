"""The one registry of every number the store formats use, with RocketMQ's Java names.

An unknown value decodes to a plain int (see `named`), never a crash.
"""
from enum import IntEnum, IntFlag


class MagicCode(IntEnum):
    """First int after TOTALSIZE in a commitlog record (CommitLog.java)."""
    MESSAGE_MAGIC_CODE = -626843481      # 0xDAA320A7
    MESSAGE_MAGIC_CODE_V2 = -626843477   # 0xDAA320AB, 5.x: 2-byte topic length
    BLANK_MAGIC_CODE = -875286124        # 0xCBD43194, end-of-file filler


class SysFlag(IntFlag):
    """MessageSysFlag.java bits (the transaction and compression fields are masks)."""
    COMPRESSED_FLAG = 0x1
    MULTI_TAGS_FLAG = 0x2
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    BORNHOST_V6_FLAG = 0x10
    STOREHOSTADDRESS_V6_FLAG = 0x20
    NEED_UNWRAP_FLAG = 0x40
    INNER_BATCH_FLAG = 0x80


TRANSACTION_TYPE_MASK = 0xC
COMPRESSION_TYPE_MASK = 0x700


class TransactionType(IntEnum):
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC


class CompressionType(IntEnum):
    """Bits 8-10 of the sysflag, shifted down (CompressionType.java, 4.9.4+)."""
    LZ4 = 1
    ZSTD = 2
    ZLIB = 3


class Perm(IntFlag):
    """PermName.java: topic permission bits."""
    PERM_INHERIT = 0x1
    PERM_WRITE = 0x2
    PERM_READ = 0x4
    PERM_PRIORITY = 0x8


class Prop:
    """MessageConst.java property names that the store acts on or reports."""
    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT = "WAIT"
    DELAY = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QID = "REAL_QID"
    TRAN_MSG = "TRAN_MSG"
    PGROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    UNIQ_KEY = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CLUSTER = "CLUSTER"
    TRAN_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    # 5.x timer messages (MessageConst; shared/spec/rocketmq5.md §1)
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    TIMER_OUT_MS = "TIMER_OUT_MS"
    TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
    BORN_TIMESTAMP = "BORN_TIMESTAMP"
    TRACE_CONTEXT = "TRACE_CONTEXT"


class TimerMagic(IntFlag):
    """TimerMessageStore.MAGIC_*: a timerlog unit's magic bits."""
    MAGIC_DEFAULT = 1
    MAGIC_ROLL = 2
    MAGIC_DELETE = 4


NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
SYSTEM_TOPICS = frozenset({       # TopicValidator.SYSTEM_TOPIC_SET (4.9.8)
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, "TBW102", "SELF_TEST_TOPIC",
    "BenchmarkTest", "OFFSET_MOVED_EVENT", "RMQ_SYS_TRACE_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
})
TIMER_TOPIC = "rmq_sys_wheel_timer"   # TimerMessageStore.TIMER_TOPIC (5.x)
SYSTEM_TOPIC_PREFIX = "rmq_sys_"  # TopicValidator.SYSTEM_TOPIC_PREFIX: any topic named so is a system one

# Fixed sizes (bytes).
MSG_FIXED_SIZE_V4 = 91             # calMsgLength without body/topic/properties, both hosts IPv4
HOST_V6_EXTRA = 12                 # each IPv6 host adds 16-4 bytes
END_FILE_MIN_BLANK_LENGTH = 8
CQ_UNIT_SIZE = 20
INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
CHECKPOINT_FILE_SIZE = 4096
MAPPED_FILE_NAME_DIGITS = 20
# 5.x timer store (TimerLog.UNIT_SIZE, Slot.SIZE, TimerMessageStore constants, TimerCheckpoint)
TIMER_UNIT_SIZE = 52
TIMER_SLOT_SIZE = 32
TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 86400
TIMER_SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS      # slotsTotal; the wheel file holds twice as many
TIMER_BLANK_SLOTS = 60
TIMER_CHECK_FILE_SIZE = 4096
TIMER_BLANK_SIZE = 16              # int bytesLeft, long 0, int BLANK_MAGIC_CODE
DEFAULT_MAPPED_FILE_SIZE_TIMER_LOG = 104857600
INT32_MAX = 0x7FFFFFFF
INT32_MIN = -0x80000000

# MessageStoreConfig defaults (4.9.8) for the sizes readers need to know.
DEFAULT_MAPPED_FILE_SIZE_COMMITLOG = 1024 * 1024 * 1024
DEFAULT_MAPPED_FILE_SIZE_CONSUME_QUEUE = 300000 * CQ_UNIT_SIZE
DEFAULT_MAX_HASH_SLOT_NUM = 5000000
DEFAULT_MAX_INDEX_NUM = 5000000 * 4
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
DEFAULT_MAX_MSGS_NUM_BATCH = 64
DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def named(enum_cls, value: int):
    """`enum_cls(value)` when known, else the plain int."""
    try:
        return enum_cls(value)
    except ValueError:
        return value
