"""BrokerController: the store, the managers, the request table, and the name server registration."""
from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import os
import time

from mqtool.broker import admin, adminops, clientcalls, clientreq, fastpull, fastsend, pull, replica, runtime, send, transaction
from mqtool.broker import timerreq
from mqtool.broker.acl import requests as acl_requests
from mqtool.broker.pop import requests as pop_requests
from mqtool.broker.pop.service import PopService
from mqtool.broker.background import cancel
from mqtool.broker.clients import ConsumerManager, ProducerManager
from mqtool.broker.filters import ConsumerFilterManager
from mqtool.broker.config import RUNTIME_KEYS, BrokerConfig, apply_properties
from mqtool.broker.flushwait import FlushWaiters
from mqtool.broker.offsets import ConsumerOffsetManager
from mqtool.broker.pullhold import PullHoldService
from mqtool.broker.registration import NamesrvRegistration
from mqtool.broker.schedule import ScheduleService
from mqtool.broker.stats import BrokerStats, timed_put
from mqtool.broker.subscriptions import SubscriptionGroupManager
from mqtool.broker.timer import TimerService
from mqtool.broker.topics import TopicConfigManager
from mqtool.common.conffile import keep_in_conf
from mqtool.common.javakeys import check_keys
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import HeaderError, RemotingError
from mqtool_remoting.transport import Connection, RemotingClient, Server
from mqtool_store.codes import Prop
from mqtool_store.kernel import kernel as store_kernel
from mqtool_store.messagestore import MessageStore, PutResult, PutStatus
from mqtool_store.properties import format_properties
from mqtool_store.storeconfig import (BROKER_ROLES, SLAVE, STORE_KEYS, SYNC_MASTER, MessageStoreConfig,
                                      apply_store_properties)

log = logging.getLogger("mqtool.broker")

HANDLERS = {
    RequestCode.SEND_MESSAGE: timed_put(send.send_message),
    RequestCode.SEND_MESSAGE_V2: timed_put(send.send_message),
    RequestCode.SEND_BATCH_MESSAGE: timed_put(send.send_message),
    RequestCode.CONSUMER_SEND_MSG_BACK: send.send_back,
    RequestCode.PULL_MESSAGE: pull.pull_message,
    RequestCode.HEART_BEAT: clientreq.heart_beat,
    RequestCode.UNREGISTER_CLIENT: clientreq.unregister_client,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: clientreq.consumer_list,
    RequestCode.QUERY_CONSUMER_OFFSET: clientreq.query_consumer_offset,
    RequestCode.UPDATE_CONSUMER_OFFSET: clientreq.update_consumer_offset,
    RequestCode.GET_MAX_OFFSET: clientreq.get_max_offset,
    RequestCode.GET_MIN_OFFSET: clientreq.get_min_offset,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: clientreq.search_offset,
    RequestCode.GET_EARLIEST_MSG_STORETIME: clientreq.earliest_time,
    RequestCode.QUERY_MESSAGE: clientreq.query_message,
    RequestCode.VIEW_MESSAGE_BY_ID: clientreq.view_message,
    RequestCode.LOCK_BATCH_MQ: clientreq.lock_batch,
    RequestCode.UNLOCK_BATCH_MQ: clientreq.unlock_batch,
    RequestCode.END_TRANSACTION: transaction.end_transaction,
    RequestCode.UPDATE_AND_CREATE_TOPIC: admin.create_topic,
    RequestCode.DELETE_TOPIC_IN_BROKER: admin.delete_topic,
    RequestCode.GET_ALL_TOPIC_CONFIG: admin.all_topic_config,
    RequestCode.GET_TOPIC_STATS_INFO: admin.topic_stats,
    RequestCode.GET_TOPIC_CONFIG: admin.topic_config,
    RequestCode.GET_ALL_TOPIC_OFFSETS: admin.all_topic_offsets,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.create_group,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.all_groups,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: admin.delete_group,
    RequestCode.GET_CONSUME_STATS: admin.consume_stats,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: admin.consumer_connections,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: admin.producer_connections,
    RequestCode.GET_BROKER_CONFIG: admin.get_broker_config,
    RequestCode.UPDATE_BROKER_CONFIG: admin.update_broker_config,
    RequestCode.GET_BROKER_RUNTIME_INFO: runtime.runtime_info,
    RequestCode.GET_ALL_CONSUMER_OFFSET: replica.all_consumer_offsets,
    RequestCode.GET_ALL_DELAY_OFFSET: replica.all_delay_offsets,
    RequestCode.GET_BROKER_HA_STATUS: replica.ha_status,
    RequestCode.NOTIFY_BROKER_ROLE_CHANGED: replica.role_changed,
    RequestCode.GET_BROKER_EPOCH_CACHE: replica.epoch_cache,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: adminops.topic_consume_by_who,
    RequestCode.QUERY_CONSUME_TIME_SPAN: adminops.consume_time_span,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: adminops.system_topics,
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: adminops.clean_expired_consume_queue,
    RequestCode.CLEAN_UNUSED_TOPIC: adminops.clean_unused_topic,
    RequestCode.DELETE_EXPIRED_COMMITLOG: adminops.delete_expired_commitlog,
    RequestCode.VIEW_BROKER_STATS_DATA: adminops.view_broker_stats,
    RequestCode.GET_BROKER_CONSUME_STATS: adminops.broker_consume_stats,
    RequestCode.QUERY_CONSUME_QUEUE: adminops.query_consume_queue,
    RequestCode.CLONE_GROUP_OFFSET: adminops.clone_group_offset,
    RequestCode.GET_ALL_PRODUCER_INFO: adminops.all_producer_info,
    RequestCode.CHECK_CLIENT_CONFIG: adminops.check_client_config,
    RequestCode.GET_CONSUMER_RUNNING_INFO: clientcalls.consumer_running_info,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: clientcalls.consume_message_directly,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: clientcalls.reset_offset,
    RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: clientcalls.consumer_status,
    RequestCode.QUERY_CORRECTION_OFFSET: adminops.query_correction_offset,
    RequestCode.RESUME_CHECK_HALF_MESSAGE: adminops.resume_check_half_message,
    RequestCode.SEND_REPLY_MESSAGE: send.send_reply,
    RequestCode.SEND_REPLY_MESSAGE_V2: send.send_reply,
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: acl_requests.update_acl_config,
    RequestCode.DELETE_ACL_CONFIG: acl_requests.delete_acl_config,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: acl_requests.acl_version,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: acl_requests.update_white_addrs,
    **pop_requests.HANDLERS,           # 5.x POP (mqtool/broker/pop/)
    # 5.x timer messages (timerreq.py)
    RequestCode.RECALL_MESSAGE: timerreq.recall_message,
    RequestCode.GET_TIMER_CHECK_POINT: timerreq.timer_check_point,
    RequestCode.GET_TIMER_METRICS: timerreq.timer_metrics,
}
# The fast port (4.9.8's fastRemotingServer, listenPort - 2) takes every request the main port takes
# but PULL_MESSAGE: its processors are the same objects, its default processor (AdminBrokerProcessor)
# answers a pull REQUEST_CODE_NOT_SUPPORTED, and the ACL hook runs on both.
FAST_HANDLERS = {code: h for code, h in HANDLERS.items()
                 if code != RequestCode.PULL_MESSAGE and code not in pop_requests.MAIN_PORT_ONLY}
# Defined in 4.9.8's RequestCode but handled by no 4.9.8 broker processor: the default processor
# answers REQUEST_CODE_NOT_SUPPORTED, and so does this one (TRIGGER_DELETE_FILES 27 among them;
# mqadmin deleteExpiredCommitLog sends DELETE_EXPIRED_COMMITLOG 329).
MASTER_ID = 0
SLAVE_SEEKING_MASTER_S = 3.0
FILTER_PERSIST_MS = 10_000          # consumerFilter.json, as 4.9.8's scheduled persist (and at shutdown)
CONFIG_REWRITE_S = 0.2        # topics.json / subscriptionGroup.json: one rewrite per this, at most


class BrokerController:
    def __init__(self, config: BrokerConfig, store_props: dict[str, str] | None = None,
                 rocketmq_home: str | None = None):
        self.config = config
        self.config_file = None           # the broker.conf it started with (-c): updateBrokerConfig keeps changes there
        self.notes: list[str] = []        # one-line warnings for whoever started the broker
        if config.enableControllerMode:
            controller_mode_checks(config, self.notes)
        else:
            check_role(config, self.notes)
        if config.fastListenPort and config.fastListenPort != config.listenPort - 2:
            self.notes.append(f"fastListenPort {config.fastListenPort} is not listenPort - 2: 4.9.8 slaves (their topic "
                              f"copies) and VIP-channel clients look for the fast port at listenPort - 2")
        for addr in config.namesrv_addrs:         # a malformed one would be retried forever, in vain
            host, sep, port = addr.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"namesrvAddr: {addr!r} is not HOST:PORT")
        if "," in config.storePathCommitLog:      # MessageStoreConfig.MULTI_PATH_SPLITTER
            raise ValueError(f"storePathCommitLog={config.storePathCommitLog}: a commit log over several directories "
                             "(a multi-path commit log) is not implemented in mqtool")
        if config.enableProxy:
            from mqtool.proxy.tls import tls_mode
            tls_mode(config)                      # a TLS mode the gRPC port cannot have, refused before anything opens
        self.acl = self._init_acl(rocketmq_home or config.rocketmqHome or os.environ.get("ROCKETMQ_HOME"))
        self.store_config = MessageStoreConfig(storePathRootDir=config.storePathRootDir,
                                               storePathCommitLog=config.storePathCommitLog,
                                               flushDiskType=config.flushDiskType, brokerRole=config.brokerRole,
                                               messageDelayLevel=config.messageDelayLevel,
                                               maxMessageSize=config.maxMessageSize)
        unknown = apply_store_properties(self.store_config, store_props or {})
        self.notes += check_keys(unknown, known_keys(config))
        if config.enableControllerMode:        # fenced until the controller gives a role (replicas.py)
            self.store_config.brokerRole = SLAVE
        hours = [h.strip() for h in self.store_config.deleteWhen.split(";")]
        if not all(h.isdigit() and int(h) < 24 for h in hours):       # UtilAll.isItTimeToDo skips them
            self.notes.append(f"deleteWhen={self.store_config.deleteWhen}: not hours 0-23 separated by ';' "
                              "(those parts never match): expired files are deleted only at the other hours "
                              "or when the disk is full")
        if "haListenPort" in (store_props or {}) and self.store_config.haListenPort != config.listenPort + 1:
            self.notes.append(f"haListenPort {self.store_config.haListenPort} ignored: the HA port is always "
                              f"listenPort + 1 ({config.listenPort + 1}), as RocketMQ's BrokerStartup sets it")
        self.store_config.haListenPort = config.listenPort + 1 if config.listenPort else 0
        ip = ipaddress.ip_address(config.brokerIP1).packed
        self.store = MessageStore(self.store_config, (ip, config.listenPort))
        self.store.confirm_offsets = config.enableControllerMode
        self.store.wake_dispatcher = False       # put() schedules the drain on the loop (_drain_dispatch)
        self._drain_soon = False
        cfg_dir = self.store_config.root / "config"
        self.topics = TopicConfigManager(cfg_dir, config.brokerClusterName, config.brokerName,
                                         config.autoCreateTopicEnable, config.defaultTopicQueueNums,
                                         config.clusterTopicEnable, config.brokerTopicEnable,
                                         config.msgTraceTopicName if config.traceTopicEnable else None)
        self.groups = SubscriptionGroupManager(cfg_dir, config.autoCreateSubscriptionGroup)
        self.offsets = ConsumerOffsetManager(cfg_dir)
        self.consumers = ConsumerManager()
        self._filters_saved = 0
        self.filters = ConsumerFilterManager(cfg_dir, config.maxErrorRateOfBloomFilter,
                                             config.expectConsumerNumUseFilter, config.filterDataCleanTimeSpan)
        self.producers = ProducerManager()
        self.pull_holds = PullHoldService()
        self.schedule = ScheduleService(self, cfg_dir)
        self.timer = TimerService(self)           # 5.x timer messages (timer.py), master only
        self.tx_checker = transaction.TransactionChecker(self)
        self.pop = PopService(self, cfg_dir)
        self.locks: dict[str, dict] = {}
        sends = fastsend.FastRequests(fastsend.fast_send, self)      # the send hot path, before any decoding
        self.server = Server(self.handle, on_close=self._channel_closed,      # ... and the pull's (main port only)
                             idle_timeout_s=config.serverChannelMaxIdleTimeSeconds,
                             fast=fastsend.FastRequests(fastpull.fast_request, self))
        self.fast_server = Server(self.handle_fast, on_close=self._channel_closed,
                                  idle_timeout_s=config.serverChannelMaxIdleTimeSeconds, fast=sends)
        self.namesrv_client = RemotingClient()
        self.registration = NamesrvRegistration(self)
        self.stats = BrokerStats(cluster=config.brokerClusterName)
        self.boot_ms = int(time.time() * 1000)
        self.ha_master = None
        self.flush_waiters: FlushWaiters | None = None    # SYNC_FLUSH sends wait on the loop (flushwait.py)
        self.ha_slave = None
        self.autoswitch = None                # controller mode's HA (mqtool/ha/autoswitch.py)
        self.metrics = None
        self.proxy = None                     # the gRPC endpoint (enableProxy, mqtool/proxy/)
        self.replicas = None
        if config.enableControllerMode:
            from mqtool.broker.replicas import ReplicasManager
            self.replicas = ReplicasManager(self)
        self.slave_sync = replica.SlaveSynchronize(self) if self.is_slave and self.replicas is None else None
        self.running = False
        self.writeable = True
        self._tasks: list[asyncio.Task] = []
        self._register_soon: asyncio.Event | None = None

    def _init_acl(self, home: str | None):
        """aclEnable: the plain ACL files under the RocketMQ home; a bad file stops the broker here."""
        if not self.config.aclEnable:
            return None
        from mqtool.broker.acl.validator import AclService
        if not home:
            raise ValueError("aclEnable=true needs the RocketMQ home (rocketmqHome in broker.conf, or env "
                             "ROCKETMQ_HOME): the ACL files are HOME/conf/plain_acl.yml and HOME/conf/acl/*.yml")
        return AclService(os.path.abspath(os.path.expanduser(home)))

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: str = "0.0.0.0") -> "BrokerController":
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.store.start)
        if self.store_config.sync_flush and not self.is_slave:
            self.flush_waiters = FlushWaiters(loop, self.store.flusher)
        self.store.listeners += [self.pull_holds.notify_threadsafe, self.pop.polling.notify_threadsafe]
        holds, polls = self.pull_holds.waits_on, self.pop.polling.by_topic     # (units of other queues: no call each)
        self.store.listened = lambda topic, queue_id: topic in polls or holds(topic, queue_id)
        self.pull_holds.loop = loop
        self.topics.persist()
        self.groups.persist()
        fast_port = self.config.fast_port           # from the configured port: listenPort 0 gets a random one
        await self.server.start(host, self.config.listenPort)
        if self.config.listenPort == 0:
            self.config.listenPort = self.server.port
            self.store.store_host = (self.store.store_host[0], self.server.port)
        await self._start_fast(host, fast_port)
        await self._start_ha(host)
        if self.config.metricsPort:
            await self._start_metrics(host)
        if self.config.enableProxy:
            await self._start_proxy(host)
        self.running = True
        if self.replicas is not None:
            self.replicas.start()
        elif self.is_slave:
            self.slave_sync.start()
        else:
            self.start_master_services()
        self._register_soon = asyncio.Event()
        self.topics.on_change = self.registration.topic_changed
        self._tasks += [loop.create_task(self._register_loop()), loop.create_task(self._housekeeping()),
                        loop.create_task(self._sampling()), loop.create_task(self._rewrite_configs())]
        if self.acl is not None:
            self._tasks.append(loop.create_task(self.acl.watch()))
            log.info("plain ACL enabled: %s", self.acl.manager.default_file)
        await self.register_all()
        log.info("The broker[%s, %s] boot success. serializeType=JSON and name server is %s; fast port %d",
                 self.config.brokerName, self.config.broker_addr, self.config.namesrvAddr or "(none)",
                 self.fast_server.port)
        log.info("%s", self.role_line())
        log.info("store kernel (compiled puts and dispatch, properties parsing): %s", "on" if store_kernel is not None else
                 "off (not built at install, or MQTOOL_NO_KERNEL=1): the pure-Python paths run")
        return self

    @property
    def is_slave(self) -> bool:
        return self.store_config.brokerRole == SLAVE

    @property
    def ha_server_addr(self) -> str:
        return f"{self.config.brokerIP2 or self.config.brokerIP1}:{self.store_config.haListenPort}"

    async def _start_fast(self, host: str, port: int) -> None:
        try:
            await self.fast_server.start(host, port)
        except RemotingError as exc:
            await self.server.stop()
            await asyncio.get_running_loop().run_in_executor(None, self.store.shutdown)
            how = "fastListenPort" if self.config.fastListenPort else "listenPort - 2"
            raise OSError(f"cannot listen on the fast port {port} ({how}): "
                          f"{str(exc).rpartition(': ')[2]}") from None

    async def _start_ha(self, host: str) -> None:
        from mqtool.ha.master import HAMaster
        from mqtool.ha.slave import HASlave
        if self.replicas is None and self.is_slave:
            configured = self.store_config.haMasterAddress
            self.ha_slave = HASlave(self.store, self.store_config, configured if len(configured) >= 6 else "").start()
            return
        try:
            if self.replicas is not None:
                from mqtool.ha.autoswitch import AutoSwitchHA
                self.autoswitch = AutoSwitchHA(self.store, self.store_config, self.replicas.epochs,
                                               my_id=lambda: self.replicas.controller_id,
                                               propose=self.replicas.propose, on_confirm=self._confirm_moved)
                self.replicas.ha = self.autoswitch
                await self.autoswitch.start(host, self.store_config.haListenPort)
                self.store_config.haListenPort = self.autoswitch.port
            else:
                self.ha_master = await HAMaster(self.store, self.store_config).start(host,
                                                                                     self.store_config.haListenPort)
                self.store_config.haListenPort = self.ha_master.port   # a random listen port gets a random HA port
        except OSError as exc:
            await self.fast_server.stop()
            await self.server.stop()
            await asyncio.get_running_loop().run_in_executor(None, self.store.shutdown)
            raise OSError(f"cannot listen on the HA port {self.store_config.haListenPort} (listenPort + 1): "
                          f"{exc.strerror or exc}") from None

    async def _start_metrics(self, host: str) -> None:
        from mqtool.broker.metrics import MetricsServer
        try:
            self.metrics = await MetricsServer(self).start(host, self.config.metricsPort)
        except OSError:
            if self.ha_master is not None:
                await self.ha_master.stop()
            if self.ha_slave is not None:
                await self.ha_slave.stop()
            await self.fast_server.stop()
            await self.server.stop()
            await asyncio.get_running_loop().run_in_executor(None, self.store.shutdown)
            raise

    async def _start_proxy(self, host: str) -> None:
        from mqtool.proxy.server import GrpcProxy
        try:
            self.proxy = await GrpcProxy(self).start(host, self.config.grpcServerPort)
        except OSError:
            self.running = True
            await self.stop()
            raise

    def role_line(self) -> str:
        if self.replicas is not None:
            return (f"controller mode: fenced (no writes, no name server registration) until the controller at "
                    f"{self.config.controllerAddr} gives this broker its role; HA port {self.ha_server_addr}")
        role = self.store_config.brokerRole
        if self.is_slave:
            master = self.ha_slave.master_addr if self.ha_slave else ""
            how = "haMasterAddress" if len(self.store_config.haMasterAddress) >= 6 else "the name server"
            return (f"role {role}, brokerId {self.config.brokerId}: replicating from master "
                    f"{master or '(not known yet)'} (from {how})")
        return f"role {role}, brokerId {MASTER_ID}: HA port {self.ha_server_addr} (haServerAddr)"

    async def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        self.pull_holds.wake_all()
        for t in self._tasks:
            await cancel(t)
        if self.replicas is not None:
            await self.replicas.stop()
        if self.slave_sync is not None:
            await self.slave_sync.stop()
        await self.stop_master_services()
        if self.autoswitch is not None:
            await self.autoswitch.stop()
        if self.ha_master is not None:
            await self.ha_master.stop()
        if self.ha_slave is not None:
            await self.ha_slave.stop()
        if self.metrics is not None:
            await self.metrics.stop()
        if self.proxy is not None:
            await self.proxy.stop()
        await self.unregister_all()
        await self.namesrv_client.close()
        await self.fast_server.stop()
        await self.server.stop()
        self.offsets.persist()
        self.topics.persist()
        self.groups.persist()
        self.filters.persist()
        if self.flush_waiters is not None:
            self.flush_waiters.close()
        await asyncio.get_running_loop().run_in_executor(None, self.store.shutdown)
        log.info("The broker[%s] shut down cleanly", self.config.brokerName)

    # ------------------------------------------------------------------ roles (controller mode switches them)

    def start_master_services(self) -> None:
        """changeSpecialServiceStatus(true): delay levels, timer messages and transaction checks run on
        a master only."""
        self.schedule.start()
        self.timer.start()
        self.tx_checker.start()
        self.pop.start()

    async def stop_master_services(self) -> None:
        await self.schedule.stop()
        await self.timer.stop()
        await self.tx_checker.stop()
        await self.pop.stop()

    def start_slave_sync(self, master_addr: str) -> None:
        if self.slave_sync is None:
            self.slave_sync = replica.SlaveSynchronize(self)
            self.slave_sync.start()
        self.slave_sync.master_addr = master_addr

    def stop_slave_sync(self) -> None:
        if self.slave_sync is not None:
            asyncio.get_running_loop().create_task(self.slave_sync.stop())
            self.slave_sync = None

    def _confirm_moved(self) -> None:
        if self.store._pending and not self._drain_soon:
            self._drain_soon = True
            asyncio.get_running_loop().call_soon(self._drain_dispatch)

    async def _rewrite_configs(self) -> None:
        """The changes journaled since the last rewrite go into topics.json and subscriptionGroup.json,
        written and fsynced on a thread (configjournal.py)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(CONFIG_REWRITE_S)
            for manager in (self.topics, self.groups):
                job = manager.begin_compact()
                if job is not None:
                    await loop.run_in_executor(None, manager.file.finish_compact, job)

    async def _sampling(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.stats.sample()

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(self.config.flushConsumerOffsetInterval / 1000)
            if self.offsets.dirty:        # the copy on the loop, the text and the file on a thread
                await asyncio.get_running_loop().run_in_executor(None, self.offsets.write, self.offsets.snapshot())
            now = int(time.time() * 1000)
            for group, _ch in self.consumers.expire(now):
                self.groups_left([group])
                await self.notify_consumer_ids_changed(group)
            self.producers.expire(now)
            if (self.filters.dirty or self.filters.table) and now - self._filters_saved >= FILTER_PERSIST_MS:
                self.filters.persist(now)                  # consumerFilter.json; clean() drops old dead ones
                self._filters_saved = now

    # ------------------------------------------------------------------ requests

    async def handle(self, conn: Connection, cmd: RemotingCommand, handlers: dict = HANDLERS) -> RemotingCommand | None:
        if self.acl is not None:            # the one ACL hook: every code, on both ports, before its handler
            refused = self.acl.check(conn, cmd)
            if refused is not None:
                return refused
        handler = handlers.get(cmd.code)
        if handler is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
        try:
            resp = await handler(self, conn, cmd)
        except HeaderError as exc:
            log.warning("bad request code %s from %s: %s", cmd.code, conn.peer, exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:   # a body of the wrong shape
            log.warning("bad request code %s from %s: %s", cmd.code, conn.peer, exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad request: {exc}")
        return resp

    def handle_fast(self, conn: Connection, cmd: RemotingCommand):
        """A request on the fast port: the same handlers, ACL and limits, no pulls."""
        return self.handle(conn, cmd, FAST_HANDLERS)

    async def put(self, msgs) -> PutResult:
        """Store one message or a batch; under SYNC_FLUSH wait (on the loop) for the group commit
        that covers it, under SYNC_MASTER for a slave."""
        batch = isinstance(msgs, list)
        first = msgs[0] if batch else msgs
        if not batch:                     # the timer put hook (5.x; a batch is never timed, as in Java)
            refused = self.timer.hook(msgs)
            if refused is not None:
                return refused
        if self.autoswitch is not None and self.store_config.minInSyncReplicas > 1 and \
                first.properties.get(Prop.WAIT, "true") != "false" and \
                self.autoswitch.in_sync_replicas < self.store_config.minInSyncReplicas:
            return PutResult(PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, remark="in-sync replicas not enough")
        in_thread = self.flush_waiters is None        # else the store only asks for the flush, we wait here
        result = self.store.put_batch(msgs, wait_flush=in_thread) if batch else self.store.put(msgs, wait_flush=in_thread)
        if self.store._pending and not self._drain_soon:
            self._drain_soon = True                   # consume queue and index: once per loop turn
            asyncio.get_running_loop().call_soon(self._drain_dispatch)
        waits = first.properties.get(Prop.WAIT, "true") != "false"
        if result.ok and not in_thread and waits:
            if not await self.flush_waiters.wait(result.end, self.store_config.syncFlushTimeout / 1000):
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
        if not result.ok and commit_log_refused(first, result):
            self.stats.put_failed()
        if result.ok:
            self.stats.put(first.topic, len(msgs) if batch else 1, result.size)
            if self.store_config.brokerRole == SYNC_MASTER and waits:
                await self._wait_replica(result)
        return result

    def put_now(self, msg) -> PutResult:
        """`put` of one message where no put waits (`fastsend.can_take_sends`: ASYNC_FLUSH, ASYNC_MASTER,
        no controller-mode in-sync minimum): the same store call, dispatch drain and counts."""
        result = self.store.put(msg, wait_flush=True)
        self.drain_soon()
        if result.ok:
            self.stats.put(msg.topic, 1, result.size)
        elif commit_log_refused(msg, result):
            self.stats.put_failed()
        return result

    def put_run_now(self, run, store_host) -> PutResult:
        """put_now of a batch made into a run beforehand (fastsend's batches): the same store put,
        dispatch drain and counts as `put` of the batch's messages."""
        result = self.store.put_run(run, store_host)
        self.drain_soon()
        if result.ok:                  # (a run is refused only before the commit log: not a failed put)
            self.stats.put(run.topic, len(run), result.size)
        return result

    def drain_soon(self) -> None:
        """The store's pending dispatch drained at the end of this loop turn (once per turn)."""
        if self.store._pending and not self._drain_soon:
            self._drain_soon = True
            asyncio.get_running_loop().call_soon(self._drain_dispatch)

    def _drain_dispatch(self) -> None:
        self._drain_soon = False
        self.store.drain_dispatch()

    async def _wait_replica(self, result: PutResult) -> None:
        """submitReplicaRequest; a replica failure overrides the flush status, as thenCombine does."""
        end = result.end
        if self.autoswitch is not None:        # controller mode: GroupTransferService's rules (controller.md §5.7)
            if self.autoswitch.needs_wait() and not await self.autoswitch.wait_replicated(end):
                result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
            return
        if not self.ha_master.is_slave_ok(end):
            result.status = PutStatus.SLAVE_NOT_AVAILABLE
        elif not await self.ha_master.wait_replicated(end):
            result.status = PutStatus.FLUSH_SLAVE_TIMEOUT

    def groups_left(self, groups) -> None:
        """A group whose last client went: its SQL92 filters are marked dead (CLIENT_UNREGISTER)."""
        for group in groups:
            if self.consumers.get(group) is None:
                self.filters.unregister(group, int(time.time() * 1000))

    def _channel_closed(self, conn: Connection) -> None:
        groups = self.consumers.channel_closed(conn)
        self.groups_left(groups)
        self.producers.channel_closed(conn)
        for group in groups:
            asyncio.get_running_loop().create_task(self.notify_consumer_ids_changed(group))

    async def notify_consumer_ids_changed(self, group: str) -> None:
        for info in self.consumers.channels(group):
            try:
                await info.channel.oneway(clientreq.notify_ids_changed_request(group))
            except (RemotingError, OSError):
                pass

    def earliest_message_time(self) -> int:
        rec = self.store.read(self.store.commitlog_min_offset)
        return rec.store_timestamp if rec else -1

    def all_properties(self) -> dict[str, str]:
        props = self.config.to_properties()
        for k, v in vars(self.store_config).items():
            props.setdefault(k, ("true" if v else "false") if isinstance(v, bool) else str(v))
        return props

    def update_properties(self, props: dict[str, str]) -> list[str]:
        """UPDATE_BROKER_CONFIG: set the keys that count on a running broker (RUNTIME_KEYS); ValueError,
        and nothing changed, for one that counts only at start; one line for each key mqtool does not
        take."""
        known = known_keys(self.config)
        fixed = sorted(k for k in props if k in known and k not in RUNTIME_KEYS)
        if fixed:
            raise ValueError(f"{', '.join(fixed)} cannot change while the broker runs (used when it starts): "
                             "set it in broker.conf and restart")
        broker_side = {k: v for k, v in props.items() if hasattr(self.config, k)}
        store_side = {k: v for k, v in props.items() if k in STORE_KEYS}
        apply_properties(dataclasses.replace(self.config), broker_side)           # a bad value: nothing set
        apply_store_properties(dataclasses.replace(self.store_config), store_side)
        apply_properties(self.config, broker_side)
        apply_store_properties(self.store_config, store_side)
        if "brokerPermission" in props:       # AdminBrokerProcessor.updateBrokerConfig: routes change now
            self.topics.data_version.next()
            self.schedule_register()
        notes = check_keys({k: v for k, v in props.items() if k not in known}, known)
        applied = {**broker_side, **store_side}
        kept = keep_in_conf(self.config_file, applied) if applied else None
        return notes + [kept] if kept else notes

    # ------------------------------------------------------------------ name server

    def schedule_register(self) -> None:
        if self._register_soon is not None:
            self._register_soon.set()

    async def _register_loop(self) -> None:
        period = min(max(self.config.registerNameServerPeriod, 10_000), 60_000) / 1000
        while True:
            wait = period
            seeking = self.is_slave and self._seeking_master()
            if seeking:
                wait = SLAVE_SEEKING_MASTER_S    # a slave started before its master finds it sooner
            try:
                async with asyncio.timeout(wait):
                    await self._register_soon.wait()
            except TimeoutError:
                pass
            self._register_soon.clear()
            # forceRegister=false skips the name servers that have this data version, but a slave
            # still seeking its master learns it from a registration's answer, so it registers
            await self.register_all(force=self.config.forceRegister or seeking)

    def _seeking_master(self) -> bool:
        """A slave that has not learned its master yet from a registration's answer (the metadata
        master; in controller mode the HA address, which only the name server gives): it registers
        every SLAVE_SEEKING_MASTER_S until it has."""
        if self.autoswitch is not None:
            client = self.autoswitch.client
            return client is not None and not client.master_addr
        return self.slave_sync is None or not self.slave_sync.master_addr

    async def register_all(self, force: bool = True) -> None:
        if self.replicas is not None and self.replicas.isolated:
            return          # fenced: a controller-mode broker registers once it has its role
        await self.registration.register_all(force)

    def _learn_master(self, ext: dict) -> None:
        """A slave learns its master from the register response (haServerAddr, masterAddr). In
        controller mode only an answer naming the master the controller named counts: until the new
        master has registered, a name server still names the old one (or a deposed one that came
        back), and following it copied the deposed master's bytes of its old epoch."""
        ha_addr, master = ext.get("haServerAddr"), ext.get("masterAddr")
        if self.replicas is not None and master != self.replicas.master_addr:
            return
        if ha_addr and len(self.store_config.haMasterAddress) < 6 and self.ha_slave is not None:
            self.ha_slave.set_master(ha_addr)
        if ha_addr and self.autoswitch is not None:       # updateHaMasterAddress (controller.md §5.8)
            self.autoswitch.set_master_address(ha_addr)
        if self.slave_sync is None:
            return
        if master and master != self.slave_sync.master_addr:
            log.info("master broker for metadata sync: %s", master)
            self.slave_sync.master_addr = master

    async def unregister_all(self) -> None:
        ext = {"brokerName": self.config.brokerName, "brokerAddr": self.config.broker_addr,
               "clusterName": self.config.brokerClusterName, "brokerId": self.config.brokerId}
        for addr in self.config.namesrv_addrs:
            try:
                await self.namesrv_client.invoke(addr, RemotingCommand.request(
                    RequestCode.UNREGISTER_BROKER, ext, language="JAVA"), 3)
            except RemotingError as exc:
                log.warning("unregister from name server %s failed: %s", addr, exc)



def commit_log_refused(msg, result: PutResult) -> bool:
    """What DefaultMessageStore counts in putMessageFailedTimes: a put the commit log refused (its
    encoder: the record over maxMessageSize, properties over 32767 bytes), not one that checkStoreStatus
    (a slave, a store not running) or checkMessage (a topic over 127 characters, a properties text over
    32767 characters) refused before it."""
    if result.status not in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
        return False
    text = msg.properties_text if msg.properties_text is not None else format_properties(msg.properties)
    return len(msg.topic) <= 127 and len(text) <= 32767


def known_keys(config: BrokerConfig) -> list[str]:
    """Every key mqtool's broker and store configs take (for check_keys' typo suggestions)."""
    return [*STORE_KEYS, *(f.name for f in dataclasses.fields(config))]


def controller_mode_checks(config: BrokerConfig, notes: list[str]) -> None:
    """enableControllerMode: brokerId and brokerRole come from the controller's elections."""
    if not config.controller_addrs:
        raise ValueError("enableControllerMode=true needs controllerAddr (the controllers' HOST:PORT;HOST:PORT)")
    for addr in config.controller_addrs:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"controllerAddr: {addr!r} is not HOST:PORT")
    if config.brokerRole not in BROKER_ROLES:
        raise ValueError(f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, not {config.brokerRole!r}")
    if config.brokerRole != SLAVE or config.brokerId != -1:
        notes.append(f"brokerRole {config.brokerRole} and brokerId {config.brokerId} ignored: with "
                     "enableControllerMode=true the controller's elections set them (a master is SYNC_MASTER, "
                     "brokerId 0; a slave takes its controller id)")


def check_role(config: BrokerConfig, notes: list[str]) -> None:
    """BrokerStartup's rules: a master is brokerId 0; a slave needs brokerId > 0."""
    if config.brokerRole not in BROKER_ROLES:
        raise ValueError(f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, not {config.brokerRole!r}")
    if config.brokerRole == SLAVE:
        if config.brokerId <= 0:
            raise ValueError(f"a SLAVE needs brokerId > 0 (brokerId is {config.brokerId})")
    elif config.brokerId != MASTER_ID:
        notes.append(f"brokerId {config.brokerId} ignored: a {config.brokerRole} is always brokerId 0")
        config.brokerId = MASTER_ID
