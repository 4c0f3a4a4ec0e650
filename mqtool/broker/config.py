"""BrokerConfig: the broker's settings under RocketMQ's own property names (BrokerConfig.java).

Store settings (MessageStoreConfig keys) travel beside it as plain properties and are given to
the store's own config loader; anything neither knows is reported, not fatal.
"""
from __future__ import annotations

import dataclasses
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from mqtool_remoting import javaprops
from mqtool_store.storeconfig import check_periods, set_typed_fields

DEFAULT_NAMESRV_PORT = 9876
DEFAULT_LISTEN_PORT = 10911


@dataclass
class BrokerConfig:
    brokerClusterName: str = "DefaultCluster"
    brokerName: str = field(default_factory=lambda: socket.gethostname())
    brokerId: int = 0
    listenPort: int = DEFAULT_LISTEN_PORT
    brokerIP1: str = "127.0.0.1"
    brokerIP2: str = ""
    namesrvAddr: str = ""
    storePathRootDir: str = field(default_factory=lambda: str(Path.home() / "store"))
    storePathCommitLog: str = ""
    brokerRole: str = "ASYNC_MASTER"
    flushDiskType: str = "ASYNC_FLUSH"
    brokerPermission: int = 6
    autoCreateTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    defaultTopicQueueNums: int = 8
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    traceTopicEnable: bool = False
    msgTraceTopicName: str = "RMQ_SYS_TRACE_TOPIC"
    regionId: str = "DefaultRegion"    # MSG_REGION in every send answer (a trace record's region)
    traceOn: bool = True               # TRACE_ON in every send answer: false stops clients' Pub trace records
    rocketmqHome: str = ""            # the ACL files' home; ROCKETMQ_HOME when empty (as Java's default)
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    maxMessageSize: int = 4 * 1024 * 1024
    registerBrokerTimeoutMills: int = 6000
    registerNameServerPeriod: int = 30000
    compressedRegister: bool = False   # the full registration's body deflated (RegisterBrokerBody.encode(true))
    forceRegister: bool = True         # false: the periodic registration only to name servers whose data version differs
    longPollingEnable: bool = True
    shortPollingTimeMills: int = 1000
    notifyConsumerIdsChangedEnable: bool = True
    transactionTimeOut: int = 6000
    transactionCheckMax: int = 15
    transactionCheckInterval: int = 60000
    flushConsumerOffsetInterval: int = 5000
    rejectTransactionMessage: bool = False
    recallMessageEnable: bool = False      # 5.x: RECALL_MESSAGE (370) of timer messages
    slaveReadEnable: bool = False
    serverChannelMaxIdleTimeSeconds: int = 120   # NettyServerConfig: close a connection idle this long
    metricsPort: int = 0          # mqtool's: Prometheus /metrics on this port (0: off); not a 4.9.8 key
    fastListenPort: int = 0       # mqtool's: the fast port (VIP channel); 0: listenPort - 2, as 4.9.8 always has it
    aclEnable: bool = False            # plain ACL: $ROCKETMQ_HOME/conf/plain_acl.yml and conf/acl/*.yml
    enablePropertyFilter: bool = False     # SQL92 subscriptions (mqtool/broker/filters.py)
    filterSupportRetry: bool = False       # filter %RETRY% topics by the original topic's SQL92 expression
    filterDataCleanTimeSpan: int = 24 * 3600 * 1000    # dead SQL92 filters leave consumerFilter.json after this
    expectConsumerNumUseFilter: int = 32   # bloom sizing of consumerFilter.json's bloomFilterData
    maxErrorRateOfBloomFilter: int = 20
    # controller mode (5.x BrokerConfig; shared/spec/controller.md §8): brokerId and brokerRole are
    # then set by the controller's elections, not by the file
    enableControllerMode: bool = False
    controllerAddr: str = ""                   # the controllers' peer addresses, HOST:PORT;HOST:PORT
    syncBrokerMetadataPeriod: int = 5000       # GET_REPLICA_INFO poll
    checkSyncStateSetPeriod: int = 5000        # a master's SyncStateSet shrink check
    syncControllerMetadataPeriod: int = 10_000   # which controller leads
    controllerHeartBeatTimeoutMills: int = 10_000
    brokerElectionPriority: int = 2 ** 31 - 1  # lower wins a tie of epoch and offset
    brokerHeartbeatInterval: int = 1000
    sendHeartbeatTimeoutMillis: int = 1000
    # 5.x POP consumption (rocketmq5.md 2; mqtool/broker/pop/)
    reviveQueueNum: int = 8                    # queues of rmq_sys_REVIVE_LOG_<cluster>
    popPollingSize: int = 1024                 # held POPs on one topic@group@queueId
    maxPopPollingSize: int = 100_000           # held POPs in all
    popFromRetryProbability: int = 20          # percent of POPs that read the retry topic first
    enableRetryTopicV2: bool = False           # %RETRY%group+topic instead of %RETRY%group_topic
    initPopOffsetByCheckMsgInMem: bool = True  # a new group starts at 0 when the first message is in memory
    popResponseReturnActualRetryTopic: bool = False
    # 5.x server-side load balance (QUERY_ASSIGNMENT; mqtool/broker/pop/assignment.py)
    defaultMessageRequestMode: str = "PULL"    # PULL or POP: a topic/group no setConsumeMode named
    defaultPopShareQueueNum: int = -1          # popShareQueueNum of that default when it is POP
    serverLoadBalancerEnable: bool = True      # false: every client of a clustering group gets every queue
    loadBalancePollNameServerInterval: int = 30_000   # ms a topic's queues (read from the name server) are kept
    # the gRPC endpoint for RocketMQ 5 clients (5.x ProxyConfig names; mqtool/proxy/), as `mqbroker --enable-proxy`
    enableProxy: bool = False                  # mqtool's key for --enable-proxy: serve gRPC on grpcServerPort
    grpcServerPort: int = 8081
    grpcMaxInboundMessageSize: int = 130 * 1024 * 1024
    grpcTlsCertPath: str = ""                  # with grpcTlsKeyPath (PEM files): TLS on the gRPC port
    grpcTlsKeyPath: str = ""
    tlsServerMode: str = ""                    # 5.x tls.server.mode: permissive|enforcing|disabled (proxy/tls.py)
    enableProxyAutoRenew: bool = True          # ReceiveMessage auto_renew: 60 s invisible, renewed until acked (3 h)
    enableTopicMessageTypeCheck: bool = True   # a send's type (FIFO, DELAY, ...) must match the topic's message.type
    enableMixedMessageType: bool = False       # a topic may be message.type=MIXED
    useDelayLevel: bool = False                # a gRPC delivery time also as the 4.x delay level above it

    @property
    def broker_addr(self) -> str:
        return f"{self.brokerIP1}:{self.listenPort}"

    @property
    def fast_port(self) -> int:
        """The fast port 4.9.8 derives from listenPort (fastConfig.setListenPort(listenPort - 2)), below 0 a
        random one, as 5.x; fastListenPort overrides it (Java slaves and VIP clients still look at listenPort - 2)."""
        return self.fastListenPort or max(self.listenPort - 2, 0)

    @property
    def controller_addrs(self) -> list[str]:
        return [a.strip() for a in self.controllerAddr.split(";") if a.strip()]

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrvAddr.split(";") if a.strip()]

    def to_properties(self) -> dict[str, str]:
        return {f.name: _to_text(getattr(self, f.name)) for f in dataclasses.fields(self)}


# The keys UPDATE_BROKER_CONFIG (mqadmin updateBrokerConfig) changes on a running broker: each is read
# where it is used, so the new value counts from the next request, put, flush or check, and is kept in
# the -c broker.conf for the next start (mqtool/common/conffile.py). Every other key is used when the
# broker starts (a listen port, a path, a role, a file size, what is created at start): changed at run
# time it would take effect nowhere until a restart, or worse (a listenPort the broker would register
# without listening on it), so it is refused: set it in broker.conf and restart.
RUNTIME_KEYS = frozenset("""
    brokerPermission defaultTopicQueueNums longPollingEnable shortPollingTimeMills notifyConsumerIdsChangedEnable
    transactionTimeOut transactionCheckMax transactionCheckInterval flushConsumerOffsetInterval
    rejectTransactionMessage slaveReadEnable registerBrokerTimeoutMills compressedRegister forceRegister
    maxMessageSize flushCommitLogLeastPages syncFlushTimeout maxMsgsNumBatch defaultQueryMaxNum fileReservedTime
    cleanResourceInterval flushDelayOffsetInterval deleteWhen diskMaxUsedSpaceRatio cleanFileForciblyEnable
    maxTransferBytesOnMessageInMemory maxTransferCountOnMessageInMemory accessMessageInMemoryMaxRatio
    messageIndexEnable haTransferBatchSize haSlaveFallbehindMax slaveTimeout offsetCheckInSlave regionId traceOn
    enablePropertyFilter filterSupportRetry recallMessageEnable timerMaxDelaySec timerStopEnqueue timerStopDequeue
    timerCongestNumEachSlot timerEnableRetryUntilSuccess defaultMessageRequestMode defaultPopShareQueueNum
    serverLoadBalancerEnable loadBalancePollNameServerInterval
""".split())


def _to_text(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def apply_properties(cfg: BrokerConfig, props: dict[str, str]) -> dict[str, str]:
    """Set every known broker key on `cfg`; return the keys it does not know (for the store or a warning)."""
    rest = set_typed_fields(cfg, props)
    check_periods(cfg, ("flushConsumerOffsetInterval", "transactionCheckInterval"))
    if cfg.defaultMessageRequestMode not in ("PULL", "POP"):
        raise ValueError(f"defaultMessageRequestMode must be PULL or POP, not {cfg.defaultMessageRequestMode!r}")
    return rest


def load_broker_conf(path: str | os.PathLike) -> dict[str, str]:
    return javaprops.loads(Path(path).read_text(encoding="utf-8"))

