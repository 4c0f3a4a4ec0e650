"""broker.conf (and namesrv.conf) keys of RocketMQ 4.9.8 that mqtool does not implement, and what it
says about them.

BrokerStartup hands the properties file to four beans (BrokerConfig, MessageStoreConfig,
NettyServerConfig, NettyClientConfig) through their setters, and ignores any other key without a
word, so a typo in broker.conf goes unnoticed there. mqtool takes the keys its own configs have
(mqtool/broker/config.py, store/storeconfig.py) and, for every other key, says in one line which
of three it is:

* a 4.9.8 key that would change what the broker stores or how it replicates when set to true, or
  would name data for it to serve: refused (the broker does not start), since going on would claim
  a feature it does not perform;
* a 4.9.8 key mqtool does not implement: ignored, with the reason when it is a known kind (thread
  pools, Netty buffers, ...);
* not a 4.9.8 broker key at all: ignored, with the nearest real key when one is close (a typo).
"""
from __future__ import annotations

import difflib

# Set to true, these change the files the broker writes or the way it replicates them.
REFUSED_WHEN_TRUE = {
    "enableDLegerCommitLog": "DLedger commit logs, with Raft replication and another file layout, are not implemented",
    "enableConsumeQueueExt": "consume queue extension files, the bit maps of SQL92 filtering, are not implemented",
    "enableLmq": "light message queues are not implemented",
    "enableMultiDispatch": "dispatching a message to several light message queues is not implemented",
    "duplicationEnable": "dispatching only up to a confirmed offset set by an outside replicator is not implemented",
}

# Set to anything, these name data the broker would serve: refused rather than left unserved.
REFUSED_WHEN_SET = {
    "readOnlyCommitLogStorePaths": "read-only commit log directories (a multi-path commit log) are not implemented",
}

# The 4.9.8 keys mqtool does not implement, by kind: (keys, why they change nothing here).
NOT_IMPLEMENTED = [
    ("""sendMessageThreadPoolNums putMessageFutureThreadPoolNums pullMessageThreadPoolNums
        processReplyMessageThreadPoolNums queryMessageThreadPoolNums adminBrokerThreadPoolNums
        clientManageThreadPoolNums consumerManageThreadPoolNums heartbeatThreadPoolNums endTransactionThreadPoolNums
        sendThreadPoolQueueCapacity putThreadPoolQueueCapacity pullThreadPoolQueueCapacity replyThreadPoolQueueCapacity
        queryThreadPoolQueueCapacity clientManagerThreadPoolQueueCapacity consumerManagerThreadPoolQueueCapacity
        heartbeatThreadPoolQueueCapacity endTransactionPoolQueueCapacity waitTimeMillsInSendQueue
        waitTimeMillsInPullQueue waitTimeMillsInHeartbeatQueue waitTimeMillsInTransactionQueue
        brokerFastFailureEnable serverWorkerThreads serverCallbackExecutorThreads serverSelectorThreads
        serverOnewaySemaphoreValue serverAsyncSemaphoreValue clientWorkerThreads clientCallbackExecutorThreads
        clientOnewaySemaphoreValue clientAsyncSemaphoreValue""",
     "requests are served on one asyncio event loop, with no thread pools or request queues to size"),
    ("useReentrantLockWhenPutMessage debugLockEnable", "the put lock is one plain lock"),
    ("""serverSocketSndBufSize serverSocketRcvBufSize serverSocketBacklog serverPooledByteBufAllocatorEnable
        useEpollNativeSelector writeBufferHighWaterMark writeBufferLowWaterMark clientSocketSndBufSize
        clientSocketRcvBufSize clientPooledByteBufAllocatorEnable clientChannelMaxIdleTimeSeconds
        clientCloseSocketIfTimeout connectTimeoutMillis channelNotActiveInterval transferMsgByHeap""",
     "a Netty setting; sockets here are asyncio's with the system's buffer sizes"),
    ("""transientStorePoolEnable transientStorePoolSize fastFailIfNoBufferInStorePool commitIntervalCommitLog
        commitCommitLogLeastPages commitCommitLogThoroughInterval warmMapedFileEnable
        flushLeastPagesWhenWarmMapedFile flushCommitLogTimed osPageCacheBusyTimeOutMills""",
     "messages are written straight into the mapped commit log, the same bytes on disk, and its next file "
     "is made ready ahead by a background thread"),
    ("flushConsumeQueueLeastPages flushConsumeQueueThoroughInterval",
     "every consume queue is flushed each flushIntervalConsumeQueue, which is at least as often"),
    ("enableCalcFilterBitMap bitMapLengthConsumeQueueExt mappedFileSizeConsumeQueueExt",
     "the bit maps of SQL92 filtering (consume queue extension files) are not implemented: with "
     "enablePropertyFilter=true every candidate message is read and its expression evaluated, as 4.9.8 does "
     "with enableCalcFilterBitMap=false"),
    ("filterServerNums", "filter servers (class filters) are not implemented"),
    ("""dLegerGroup dLegerPeers dLegerSelfId preferredLeaderId enableBatchPush storePathDLedgerCommitLog""",
     "DLedger is not implemented; replicate with brokerRole master and slave"),
    ("commercialEnable commercialTimerCount commercialTransCount commercialBigCount commercialBaseCount",
     "commercial statistics are not implemented"),
    ("""deleteCommitLogFilesInterval deleteConsumeQueueFilesInterval destroyMapedFileIntervalForcibly
        redeleteHangedFileInterval""",
     "expired files are deleted at once, every cleanResourceInterval, with no pause between files"),
    ("""enableScheduleAsyncDeliver scheduleAsyncDeliverMaxPendingLimit scheduleAsyncDeliverMaxResendNum2Blocked
        enableScheduleMessageStats maxDelayTime""",
     "delayed messages are delivered by one task on the broker's event loop"),
    ("""maxLmqConsumeQueueNum messageStorePlugIn putMsgIndexHightWater
        maxTransferBytesOnMessageInDisk maxTransferCountOnMessageInDisk
        disableConsumeIfConsumerReadSlowly consumerFallbehindThreshold diskFallRecorded""",
     "not implemented"),
    ("""flushConsumerOffsetHistoryInterval startAcceptSendRequestTimeStamp highSpeedMode
        fetchNamesrvAddrByAddressServer storeReplyMessageEnable enableDetailStat
        autoDeleteUnusedStats isolateLogEnable configBlackList useTLS""",
     "not implemented"),
]

_WHY = {key: why for keys, why in NOT_IMPLEMENTED for key in keys.split()}
KEYS_4_9_8_NOT_HERE = frozenset(_WHY) | frozenset(REFUSED_WHEN_TRUE) | frozenset(REFUSED_WHEN_SET)

# 5.x broker keys of controller mode (BrokerConfig, MessageStoreConfig; controller.md §8) that mqtool's
# broker does not take; the ones it does are fields of its configs.
CONTROLLER_MODE_NOT_HERE = {
    "fetchControllerAddrByDnsLookup": "controllerAddr is read as HOST:PORT;HOST:PORT, never resolved as a DNS name",
    "readUnCommitted": "consume queues are built only up to confirmOffset",
    "haFlowControlEnable": "replication is not rate-limited",
    "maxHaTransferByteInSecond": "replication is not rate-limited",
    "enableSlaveActingMaster": "a slave never acts as master; in controller mode a replica is elected instead",
    "enableAutoInSyncReplicas": "not used in controller mode (5.3.0 neither)",
    "haMaxGapNotInSync": "not used in controller mode (5.3.0 neither)",
}

# namesrv.conf (NamesrvStartup: NamesrvConfig and NettyServerConfig): the keys mqtool's name server
# does not take. It takes listenPort, kvConfigPath, orderMessageEnable, clusterTest, productEnvName.
_NAMESRV_WHY = {
    "rocketmqHome": "the name server reads nothing from the RocketMQ home",
    "configStorePath": "config changes made at run time are not saved to a file",
    "serverChannelMaxIdleTimeSeconds": "the name server keeps idle connections open",
}
NAMESRV_KEYS_NOT_HERE = frozenset(_NAMESRV_WHY) | frozenset(
    """serverWorkerThreads serverCallbackExecutorThreads serverSelectorThreads serverOnewaySemaphoreValue
    serverAsyncSemaphoreValue serverSocketSndBufSize serverSocketRcvBufSize serverSocketBacklog
    serverPooledByteBufAllocatorEnable useEpollNativeSelector writeBufferHighWaterMark writeBufferLowWaterMark""".split())


# controller.conf (ControllerStartup: ControllerConfig, JraftConfig, NettyServerConfig): the 5.3.0 keys
# mqtool's controller does not take (mqtool/controller/config.py has those it does).
_CONTROLLER_WHY = {
    "controllerType": "mqtool's controllers replicate through pysyncobj's Raft whatever this says",
    "mappedFileSize": "the Raft journal is pysyncobj's file, not DLedger's mapped files",
    "processReadEvent": "reads are answered from the leader's memory, never through the Raft log",
    "isProcessReadEvent": "reads are answered from the leader's memory, never through the Raft log",
    "controllerThreadPoolNums": "requests are served on one asyncio event loop, with no thread pools to size",
    "controllerRequestThreadPoolQueueCapacity": "requests are served on one asyncio event loop, with no queues to size",
    "metricsExporterType": "controller metrics are not implemented",
    "jRaftGroupId": "jRaft is not implemented", "jRaftServerId": "jRaft is not implemented",
    "jRaftInitConf": "jRaft is not implemented", "jRaftControllerRPCAddr": "jRaft is not implemented",
    "jRaftElectionTimeoutMs": "jRaft is not implemented", "jRaftScanWaitTimeoutMs": "jRaft is not implemented",
    "jRaftSnapshotIntervalSecs": "jRaft is not implemented",
    "configStorePath": "config changes made at run time are not saved to a file",
    "configBlackList": "the black list is fixed: configBlackList, configStorePath, rocketmqHome",
    "rocketmqHome": "the controller reads nothing from the RocketMQ home",
    "listenPort": "a controller answers on its own address in controllerDLegerPeers (or --listen)",
}
CONTROLLER_KEYS_NOT_HERE = frozenset(_CONTROLLER_WHY) | NAMESRV_KEYS_NOT_HERE
_NOT_HERE = {"broker": (KEYS_4_9_8_NOT_HERE, _WHY, "4.9.8 broker"),
             "name server": (NAMESRV_KEYS_NOT_HERE, _NAMESRV_WHY, "4.9.8 name server"),
             "controller": (CONTROLLER_KEYS_NOT_HERE, _CONTROLLER_WHY, "5.3.0 controller")}


def check_keys(unknown: dict[str, str], known: list[str], server: str = "broker") -> list[str]:
    """One warning line per key of `unknown` (the keys no mqtool config took) of a broker's or a
    name server's config file; ValueError for a key that would make the broker claim what it does
    not do. `known` are the keys mqtool does take (for a typo's suggestion)."""
    not_here, whys, kind = _NOT_HERE[server]
    for key, value in sorted(unknown.items()):
        if key in REFUSED_WHEN_TRUE and key in not_here and str(value).strip().lower() == "true":
            raise ValueError(f"{key}=true: {REFUSED_WHEN_TRUE[key]} in mqtool")
        if key in REFUSED_WHEN_SET and key in not_here and str(value).strip():
            raise ValueError(f"{key}={value}: {REFUSED_WHEN_SET[key]} in mqtool")
    notes = []
    for key in sorted(unknown):
        if server == "broker" and key in CONTROLLER_MODE_NOT_HERE:
            notes.append(f"{key} ignored: a RocketMQ 5.x controller-mode key mqtool does not implement "
                         f"({CONTROLLER_MODE_NOT_HERE[key]})")
            continue
        if key in not_here:
            why = whys.get(key) or _NAMESRV_WHY.get(key) or _WHY.get(key, "not implemented")
            notes.append(f"{key} ignored: a RocketMQ {kind.split()[0]} key mqtool does not implement ({why})")
            continue
        near = difflib.get_close_matches(key, list(known) + sorted(not_here), 1, 0.8)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        notes.append(f"unknown config key {key!r} ignored: not a RocketMQ {kind} key{hint}")
    return notes
