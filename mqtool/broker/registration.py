"""The broker's registrations with its name servers (BrokerController.registerBrokerAll and
registerIncrementBrokerData, BrokerOuterAPI.registerBrokerAll in 4.9.8).

* full: every topic, at start, every registerNameServerPeriod, and when the broker's permission
  changes; the body is built on the loop and compressed (compressedRegister) on a thread;
* incremental: a created or changed topic is registered alone, with the table's new data version
  (the name server adds it and keeps the rest); the changes made while one is on its way go out
  together in the next, so a burst costs one small registration per round trip, not one per change.

* periodic with forceRegister=false: each name server is first asked QUERY_DATA_VERSION (the
  broker's data version in the body); the name server takes the query as a heartbeat. As 4.9.8's
  needRegister, once any of them has another version (or did not answer) the full registration goes
  to every name server, and to none when all agree.

One registration is on its way at a time, to every name server at once (4.9.8 sends them from a
thread pool and waits for all, registerBrokerTimeoutMills at most).
"""
from __future__ import annotations

import asyncio
import json
import logging
import zlib

from mqtool.broker.topics import PERM_RW, TopicConfig
from mqtool_remoting import bodies, jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingError

log = logging.getLogger("mqtool.broker")


class NamesrvRegistration:
    def __init__(self, ctrl):
        self.ctrl = ctrl
        self._lock: asyncio.Lock | None = None
        self._pending: dict[str, TopicConfig] = {}
        self._round: asyncio.Future | None = None     # done once the pending changes were sent
        self.sent = {"full": 0, "incremental": 0, "skipped": 0}   # registrations made or not needed (tests, figures)

    @property
    def lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    # ------------------------------------------------------------------ incremental

    def topic_changed(self, cfg: TopicConfig) -> None:
        """TopicConfigManager.on_change: register `cfg` with the next incremental registration."""
        if not self.ctrl.config.namesrv_addrs or not self.ctrl.running:
            return
        self._pending[cfg.topicName] = cfg
        if self._round is None:
            loop = asyncio.get_running_loop()
            self._round = loop.create_future()
            loop.create_task(self._send_increment())

    async def wait_registered(self) -> None:
        """Until the changes made so far reached the name servers (or failed to): an admin create is
        answered once its route is known, as 4.9.8's updateAndCreateTopic registers before it answers."""
        if self._round is not None:
            await asyncio.shield(self._round)

    async def _send_increment(self) -> None:
        async with self.lock:
            batch, self._pending = self._pending, {}
            done, self._round = self._round, None
            try:
                if batch:
                    version = self.ctrl.topics.data_version.to_json()
                    await self._register(self._table(batch.values()), version, "incremental")
            finally:
                done.set_result(None)

    # ------------------------------------------------------------------ full

    async def register_all(self, force: bool = True) -> None:
        """Every topic to every name server; with force=False (forceRegister=false, the periodic one)
        only when some name server's data version for this broker is not the broker's."""
        async with self.lock:
            if not force and not await self._need_register(self.ctrl.topics.data_version.to_json()):
                self.sent["skipped"] += 1
                return
            with self.ctrl.topics.lock:
                configs = list(self.ctrl.topics.table.values())
                version = self.ctrl.topics.data_version.to_json()
            await self._register(self._table(configs), version, "full")

    async def _need_register(self, version: dict) -> bool:
        """BrokerController.needRegister: any name server whose version differs (or that cannot say)."""
        addrs = self.ctrl.config.namesrv_addrs
        return any(await asyncio.gather(*(self._version_differs(addr, version) for addr in addrs)))

    async def _version_differs(self, addr: str, version: dict) -> bool:
        """BrokerOuterAPI.needRegister for one name server: its `changed`, or a data version it
        returns that is not ours; a failed query counts as changed (so is an error answer, which
        4.9.8 counts as unchanged: a name server that cannot say is registered with)."""
        cfg = self.ctrl.config
        ext = {"brokerName": cfg.brokerName, "brokerAddr": cfg.broker_addr, "clusterName": cfg.brokerClusterName,
               "brokerId": cfg.brokerId}
        try:
            resp = await self.ctrl.namesrv_client.invoke(addr, RemotingCommand.request(
                RequestCode.QUERY_DATA_VERSION, ext, jsonbody.dumps(version), language="JAVA"),
                cfg.registerBrokerTimeoutMills / 1000)
            if resp.code != ResponseCode.SUCCESS:
                log.warning("query data version from name server %s: %s %s", addr, resp.code, resp.remark)
                return True
            if resp.ext_fields.get("changed", "true").lower() != "false":
                return True
            return bool(resp.body) and bodies.DataVersion.from_json(jsonbody.loads(resp.body)) != \
                bodies.DataVersion.from_json(version)
        except (RemotingError, ValueError, TypeError, AttributeError) as exc:
            log.warning("query data version from name server %s failed: %s", addr, exc)
            return True

    # ------------------------------------------------------------------ the request

    def _table(self, configs) -> dict[str, bodies.TopicConfig]:
        perm = self.ctrl.config.brokerPermission
        if perm & PERM_RW != PERM_RW:
            # a broker that is not both readable and writeable registers every topic with its own
            # permission (as new TopicConfig(name, r, w, perm)), in both kinds of registration
            return {c.topicName: bodies.TopicConfig(c.topicName, c.readQueueNums, c.writeQueueNums, perm)
                    for c in configs}
        return {c.topicName: bodies.TopicConfig(c.topicName, c.readQueueNums, c.writeQueueNums, c.perm,
                                                c.topicFilterType, c.topicSysFlag, c.order) for c in configs}

    async def _register(self, table: dict, version: dict, kind: str) -> None:
        addrs = self.ctrl.config.namesrv_addrs
        if not addrs:
            return
        body = bodies.RegisterBrokerBody(bodies.TopicConfigSerializeWrapper(
            table, bodies.DataVersion.from_json(version)), [])
        compressed = self.ctrl.config.compressedRegister
        if compressed and len(table) > 64:       # zlib at level 9 over thousands of lines: off the loop
            data = await asyncio.get_running_loop().run_in_executor(None, body.encode, True)
        elif compressed:
            data = body.encode(True)
        else:
            # body.encode(False)'s bytes (strings, numbers, booleans only) by the json module's encoder:
            # 27 ms instead of 300 ms of the loop for 10,000 topics every registerNameServerPeriod
            data = json.dumps(body.to_json(), ensure_ascii=False, separators=(",", ":")).encode()
        cfg = self.ctrl.config
        ext = {"brokerName": cfg.brokerName, "brokerAddr": cfg.broker_addr, "clusterName": cfg.brokerClusterName,
               "haServerAddr": self.ctrl.ha_server_addr, "brokerId": cfg.brokerId, "compressed": compressed,
               "bodyCrc32": zlib.crc32(data) & 0x7FFFFFFF}
        await asyncio.gather(*(self._register_one(addr, ext, data) for addr in addrs))
        self.sent[kind] += 1

    async def _register_one(self, addr: str, ext: dict, data: bytes) -> None:
        ctrl = self.ctrl
        try:
            resp = await ctrl.namesrv_client.invoke(addr, RemotingCommand.request(
                RequestCode.REGISTER_BROKER, ext, data, language="JAVA"), ctrl.config.registerBrokerTimeoutMills / 1000)
        except RemotingError as exc:
            log.warning("register to name server %s failed: %s", addr, exc)
            return
        if resp.code != 0:
            log.warning("register to name server %s failed: %s %s", addr, resp.code, resp.remark)
        elif ctrl.is_slave:
            ctrl._learn_master(resp.ext_fields)
