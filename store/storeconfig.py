"""MessageStoreConfig: the store's settings under RocketMQ 4.9.8's property names and defaults."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from .codes import (DEFAULT_MAPPED_FILE_SIZE_COMMITLOG, DEFAULT_MAPPED_FILE_SIZE_CONSUME_QUEUE,
                    DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, DEFAULT_MAX_MESSAGE_SIZE,
                    DEFAULT_MESSAGE_DELAY_LEVEL)

ASYNC_FLUSH = "ASYNC_FLUSH"
ASYNC_MASTER = "ASYNC_MASTER"
SYNC_MASTER = "SYNC_MASTER"
SLAVE = "SLAVE"
BROKER_ROLES = (ASYNC_MASTER, SYNC_MASTER, SLAVE)
SYNC_FLUSH = "SYNC_FLUSH"


@dataclass
class MessageStoreConfig:
    storePathRootDir: str = field(default_factory=lambda: str(Path.home() / "store"))
    storePathCommitLog: str = ""
    mappedFileSizeCommitLog: int = DEFAULT_MAPPED_FILE_SIZE_COMMITLOG
    mappedFileSizeConsumeQueue: int = DEFAULT_MAPPED_FILE_SIZE_CONSUME_QUEUE
    maxHashSlotNum: int = DEFAULT_MAX_HASH_SLOT_NUM
    maxIndexNum: int = DEFAULT_MAX_INDEX_NUM
    maxMessageSize: int = DEFAULT_MAX_MESSAGE_SIZE
    flushDiskType: str = ASYNC_FLUSH
    flushIntervalCommitLog: int = 500
    flushCommitLogLeastPages: int = 4
    flushCommitLogThoroughInterval: int = 10_000
    flushIntervalConsumeQueue: int = 1000
    syncFlushTimeout: int = 5000
    checkCRCOnRecover: bool = True
    messageIndexEnable: bool = True
    messageIndexSafe: bool = False
    maxMsgsNumBatch: int = 64
    defaultQueryMaxNum: int = 32
    fileReservedTime: int = 72
    recoveryBackupKeep: int = 3            # mqtool: recovery-backup-* dirs kept (backups.py); not a 4.9.8 key
    cleanResourceInterval: int = 10_000    # ms between checks for expired files
    flushDelayOffsetInterval: int = 10_000   # ms between saves of delayOffset.json (the broker's)
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    cleanFileForciblyEnable: bool = True
    messageDelayLevel: str = DEFAULT_MESSAGE_DELAY_LEVEL
    brokerRole: str = "ASYNC_MASTER"
    maxTransferBytesOnMessageInMemory: int = 256 * 1024
    maxTransferCountOnMessageInMemory: int = 32
    accessMessageInMemoryMaxRatio: int = 40
    # HA (replication); haListenPort is always the broker's listenPort + 1, as BrokerStartup sets it.
    haListenPort: int = 10912
    haSendHeartbeatInterval: int = 5000
    haHousekeepingInterval: int = 20_000
    haTransferBatchSize: int = 32 * 1024
    haMasterAddress: str = ""
    haSlaveFallbehindMax: int = 256 * 1024 * 1024
    slaveTimeout: int = 3000
    # controller mode (5.x MessageStoreConfig; shared/spec/controller.md §8)
    allAckInSyncStateSet: bool = False      # ack once every SyncStateSet member has the message
    inSyncReplicas: int = 1                 # acks needed, the master's included, when not all-ack
    minInSyncReplicas: int = 1              # refuse puts while the SyncStateSet is smaller
    haMaxTimeSlaveNotCatchup: int = 15_000  # a replica behind this long leaves the SyncStateSet
    storePathEpochFile: str = ""            # "": {storePathRootDir}/epochFileCheckpoint
    storePathBrokerIdentity: str = ""       # "": {storePathRootDir}/brokerIdentity
    syncFromLastFile: bool = False          # an empty replica starts at the master's last file
    asyncLearner: bool = False              # never joins the SyncStateSet
    offsetCheckInSlave: bool = False
    # 5.x timer messages (shared/spec/rocketmq5.md §1.2); the broker's timer service reads them
    timerWheelEnable: bool = True
    timerPrecisionMs: int = 1000              # snapped to 100/200/500/1000 where read
    timerMaxDelaySec: int = 259200
    timerRollWindowSlot: int = 172800
    mappedFileSizeTimerLog: int = 104857600
    timerFlushIntervalMs: int = 1000
    timerCongestNumEachSlot: int = 0x7FFFFFFF
    timerStopEnqueue: bool = False
    timerStopDequeue: bool = False
    timerEnableRetryUntilSuccess: bool = False

    def __post_init__(self):
        # ConsumeQueue's getter rounds the size up to a whole number of 20-byte units.
        self.mappedFileSizeConsumeQueue = -(-int(self.mappedFileSizeConsumeQueue) // 20) * 20

    @property
    def root(self) -> Path:
        return Path(self.storePathRootDir).expanduser()

    @property
    def commitlog_dir(self) -> Path:
        return Path(self.storePathCommitLog).expanduser() if self.storePathCommitLog else self.root / "commitlog"

    @property
    def sync_flush(self) -> bool:
        return self.flushDiskType == SYNC_FLUSH

    @property
    def is_slave(self) -> bool:
        return self.brokerRole == SLAVE


STORE_KEYS = {f.name: f for f in dataclasses.fields(MessageStoreConfig)}


def set_typed_fields(obj, props: dict[str, str]) -> dict[str, str]:
    """Set a config dataclass's fields from Java-properties text (bool: only "true" is true; int
    parsed); returns the keys it does not have. Shared by the store's and the broker's configs."""
    fields = {f.name: f for f in dataclasses.fields(obj)}
    rest = {}
    for key, value in props.items():
        f = fields.get(key)
        if f is None:
            rest[key] = value
        elif f.type in ("bool", bool):
            setattr(obj, key, str(value).strip().lower() == "true")
        elif f.type in ("int", int):
            try:
                setattr(obj, key, int(str(value).strip()))
            except ValueError:
                raise ValueError(f"{key} must be an integer, not {value!r}") from None
        else:
            setattr(obj, key, str(value).strip())
    return rest


# Periods (ms) the store waits between rounds: 0 or less would spin a thread without a pause.
PERIOD_KEYS = ("flushIntervalCommitLog", "timerFlushIntervalMs", "flushIntervalConsumeQueue", "cleanResourceInterval", "flushDelayOffsetInterval",
               "haSendHeartbeatInterval", "haHousekeepingInterval")


def check_periods(cfg, keys) -> None:
    """ValueError for a period key of `cfg` that is not above 0 (Java's scheduler refuses those too)."""
    for key in keys:
        if getattr(cfg, key) <= 0:
            raise ValueError(f"{key} must be above 0 (milliseconds), not {getattr(cfg, key)}")


def apply_store_properties(cfg: MessageStoreConfig, props: dict[str, str]) -> dict[str, str]:
    """Set known keys from text values; returns the keys the store does not know."""
    rest = set_typed_fields(cfg, props)
    cfg.__post_init__()
    check_periods(cfg, PERIOD_KEYS)
    if cfg.flushDiskType not in (ASYNC_FLUSH, SYNC_FLUSH):
        raise ValueError(f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, not {cfg.flushDiskType!r}")
    if cfg.brokerRole not in BROKER_ROLES:
        raise ValueError(f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, not {cfg.brokerRole!r}")
    return rest
