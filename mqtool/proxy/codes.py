"""The gRPC endpoint's numbers under their proto names (definition.proto v2.0.4): status codes,
message types, queue permissions, client types, languages. A number a client sends that is not
listed stays a plain int (`named`)."""
from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    OK = 20000
    MULTIPLE_RESULTS = 30000
    BAD_REQUEST = 40000
    ILLEGAL_TOPIC = 40002
    ILLEGAL_CONSUMER_GROUP = 40003
    ILLEGAL_MESSAGE_TAG = 40004
    ILLEGAL_MESSAGE_KEY = 40005
    ILLEGAL_MESSAGE_GROUP = 40006
    ILLEGAL_MESSAGE_PROPERTY_KEY = 40007
    INVALID_TRANSACTION_ID = 40008
    ILLEGAL_MESSAGE_ID = 40009
    ILLEGAL_FILTER_EXPRESSION = 40010
    ILLEGAL_INVISIBLE_TIME = 40011
    ILLEGAL_DELIVERY_TIME = 40012
    INVALID_RECEIPT_HANDLE = 40013
    MESSAGE_PROPERTY_CONFLICT_WITH_TYPE = 40014
    UNRECOGNIZED_CLIENT_TYPE = 40015
    MESSAGE_CORRUPTED = 40016
    CLIENT_ID_REQUIRED = 40017
    ILLEGAL_POLLING_TIME = 40018
    UNAUTHORIZED = 40100
    FORBIDDEN = 40300
    NOT_FOUND = 40400
    MESSAGE_NOT_FOUND = 40401
    TOPIC_NOT_FOUND = 40402
    CONSUMER_GROUP_NOT_FOUND = 40403
    MESSAGE_BODY_TOO_LARGE = 41301
    MESSAGE_BODY_EMPTY = 41302
    TOO_MANY_REQUESTS = 42900
    MESSAGE_PROPERTIES_TOO_LARGE = 43101
    INTERNAL_SERVER_ERROR = 50001
    HA_NOT_AVAILABLE = 50002
    NOT_IMPLEMENTED = 50100
    PROXY_TIMEOUT = 50400
    MASTER_PERSISTENCE_TIMEOUT = 50401
    SLAVE_PERSISTENCE_TIMEOUT = 50402


class MessageType(IntEnum):
    MESSAGE_TYPE_UNSPECIFIED = 0
    NORMAL = 1
    FIFO = 2
    DELAY = 3
    TRANSACTION = 4


class Permission(IntEnum):
    NONE = 1
    READ = 2
    WRITE = 3
    READ_WRITE = 4


class ClientType(IntEnum):
    CLIENT_TYPE_UNSPECIFIED = 0
    PRODUCER = 1
    PUSH_CONSUMER = 2
    SIMPLE_CONSUMER = 3
    PULL_CONSUMER = 4


class AddressScheme(IntEnum):
    IPv4 = 1
    IPv6 = 2
    DOMAIN_NAME = 3


class TransactionResolution(IntEnum):
    TRANSACTION_RESOLUTION_UNSPECIFIED = 0
    COMMIT = 1
    ROLLBACK = 2


class TransactionSource(IntEnum):
    SOURCE_UNSPECIFIED = 0
    SOURCE_CLIENT = 1
    SOURCE_SERVER_CHECK = 2


class Encoding(IntEnum):
    ENCODING_UNSPECIFIED = 0
    IDENTITY = 1
    GZIP = 2


# `message.type` topic attribute values (5.x TopicMessageType) and the queue's accept_message_types
TOPIC_MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
ACCEPTS = {"NORMAL": [MessageType.NORMAL], "FIFO": [MessageType.FIFO], "DELAY": [MessageType.DELAY],
           "TRANSACTION": [MessageType.TRANSACTION],
           "MIXED": [MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION]}
MESSAGE_TYPE_ATTR = "message.type"


def named(enum, value: int):
    try:
        return enum(value)
    except ValueError:
        return value
