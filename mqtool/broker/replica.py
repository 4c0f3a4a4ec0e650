"""The broker's side of master/slave: metadata copies (SlaveSynchronize) and the requests behind them.

A slave pulls topics, consumer offsets, delay offsets and subscription groups from its master
over remoting every 10 s (first after 3 s), as 4.9.8's SlaveSynchronize does: the topics from the
master's fast port (listenPort - 2, BrokerOuterAPI.getAllTopicConfig's VIP channel), the other three
from its main port, each on its own (one that fails does not stop the others). The master answers
GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45) and, as 5.x brokers do, GET_BROKER_HA_STATUS (907).
From a 5.x master a slave also copies the timer checkpoint and the PULL/POP request modes.
"""
from __future__ import annotations

import asyncio
import logging
import time

from mqtool.broker.background import cancel
from mqtool.broker.pop.requestmode import table_from_json
from mqtool.broker.subscriptions import SubscriptionGroupConfig
from mqtool.broker.topics import DataVersion, TopicConfig
from mqtool.common.vipchannel import vip_channel
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingError
from mqtool.broker.offsets import offsets_text
from mqtool_store.configfiles import int_keys, write_config

log = logging.getLogger("mqtool.broker.slave")
FIRST_SYNC_S = 3.0
SYNC_PERIOD_S = 10.0


# ---------------------------------------------------------------------- master's answers

async def all_consumer_offsets(ctrl, conn, cmd):
    return cmd.response(ResponseCode.SUCCESS, None, None, offsets_text(ctrl.offsets.copy()).encode())


async def all_delay_offsets(ctrl, conn, cmd):
    ctrl.schedule.persist()
    return cmd.response(ResponseCode.SUCCESS, None, None, ctrl.schedule.path.read_bytes())


async def ha_status(ctrl, conn, cmd):
    """HARuntimeInfo (rocketmq 5.x `GET_BROKER_HA_STATUS`), from whichever side this broker is."""
    if ctrl.autoswitch is not None:
        info = ctrl.autoswitch.runtime_info()
        client = ctrl.autoswitch.client
        info["haClientRuntimeInfo"] = client.runtime_info() if client is not None and not info["master"] else None
        info["masterEpoch"] = ctrl.replicas.master_epoch
        info["controllerId"] = ctrl.replicas.controller_id
    elif ctrl.ha_master is not None:
        info = ctrl.ha_master.runtime_info()
        info["haClientRuntimeInfo"] = None
    else:
        info = {"master": False, "masterCommitLogMaxOffset": 0, "inSyncSlaveNums": 0, "haConnectionInfo": [],
                "haClientRuntimeInfo": ctrl.ha_slave.runtime_info() if ctrl.ha_slave else None}
    info["brokerRole"] = ctrl.store_config.brokerRole
    info["commitLogMaxOffset"] = ctrl.store.commitlog_max_offset
    info["commitLogMinOffset"] = ctrl.store.commitlog_min_offset
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(info))


async def role_changed(ctrl, conn, cmd):
    """NOTIFY_BROKER_ROLE_CHANGED (1008), from the controller leader (controller mode only)."""
    if ctrl.replicas is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "this broker is not in controller mode (enableControllerMode)")
    return await ctrl.replicas.notified(cmd)


async def epoch_cache(ctrl, conn, cmd):
    """GET_BROKER_EPOCH_CACHE (1007): the epoch file with the last entry ending at the max offset."""
    if ctrl.replicas is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")
    return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(ctrl.replicas.epoch_cache()))


# ---------------------------------------------------------------------- slave's copies

# A 4.x broker does not sign its requests to other brokers (BrokerOuterAPI has no RPC hook before
# 5.x), so an ACL master answers a slave's metadata requests only from a whitelisted address.
ACL_HINT = (" (the master has aclEnable=true and brokers do not sign their requests to each other: add this"
            " slave's address to globalWhiteRemoteAddresses in the master's plain_acl.yml)")


class SlaveSynchronize:
    def __init__(self, ctrl):
        self.ctrl = ctrl
        self.master_addr = ""
        self.last_sync_ms = 0
        self.last_error = ""
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        await cancel(self._task)

    async def _run(self) -> None:
        await asyncio.sleep(FIRST_SYNC_S)
        while True:
            await self.sync_all()
            await asyncio.sleep(SYNC_PERIOD_S)

    async def _fetch(self, addr: str, code: RequestCode) -> tuple[bytes | None, str]:
        """(body, "") or (None, why the master refused)."""
        resp = await self.ctrl.namesrv_client.invoke(addr, RemotingCommand.request(code, language="JAVA"), 3)
        if resp.code != ResponseCode.SUCCESS:
            return None, f"{code.name} answered {resp.code} {resp.remark}"
        return resp.body or b"", ""

    async def sync_all(self) -> bool:
        master = self.master_addr
        if not master or master == self.ctrl.config.broker_addr:
            return False
        ok = True
        refused, failed = [], []
        for addr, code, apply in ((vip_channel(master), RequestCode.GET_ALL_TOPIC_CONFIG, self._topics),
                                  (master, RequestCode.GET_ALL_CONSUMER_OFFSET, self._offsets),
                                  (master, RequestCode.GET_ALL_DELAY_OFFSET, self._delay_offsets),
                                  (master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self._groups)):
            try:
                body, why = await self._fetch(addr, code)
            except RemotingError as exc:
                failed.append(f"{code.name}: {exc}")
                ok = False
                continue
            if body is None:
                refused.append(why)
                ok = False
                continue
            try:
                done = apply(body)
                if done is not None:          # the offsets are written on a thread
                    await done
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("metadata sync: bad %s body from %s: %s", code.name, self.master_addr, exc)
                ok = False
        await self._timer_check(master)
        await self._request_modes(master)
        if refused:     # the same refusal every round is logged once
            hint = ACL_HINT if any("No accessKey" in why for why in refused) else ""
            self._note(f"metadata sync from master {master} refused: {'; '.join(refused)}{hint}")
        elif failed:
            self._note(f"metadata sync from master {master} failed: {'; '.join(failed)}")
        if ok:
            self.last_sync_ms = int(time.time() * 1000)
            self._note("")
        return ok

    def _note(self, text: str) -> None:
        """Log a failure once, not every 10 s while the master is away."""
        if text and text != self.last_error:
            log.warning("%s", text)
        elif not text and self.last_error:
            log.info("metadata sync from master %s works again", self.master_addr)
        self.last_error = text

    def _topics(self, body: bytes) -> None:
        data = jsonbody.loads(body)
        topics = self.ctrl.topics
        version = DataVersion.from_json(data.get("dataVersion") or {})
        if version.to_json() == topics.data_version.to_json():
            return
        topics.replace_all({k: TopicConfig.from_json(v) for k, v in data.get("topicConfigTable", {}).items()}, version)
        log.info("topics copied from master %s (%d topics)", self.master_addr, len(topics.table))

    async def _offsets(self, body: bytes) -> None:
        data = jsonbody.loads(body) if body else {}
        offsets = self.ctrl.offsets
        for key, queues in data.get("offsetTable", {}).items():
            offsets.replace(key, {int(q): int(v) for q, v in int_keys(queues).items()})
        await asyncio.get_running_loop().run_in_executor(None, offsets.write, offsets.snapshot())

    def _delay_offsets(self, body: bytes) -> None:
        if not body:
            return
        data = jsonbody.loads(body)
        schedule = self.ctrl.schedule
        schedule.offsets = {int(k): int(v) for k, v in int_keys(data.get("offsetTable", {})).items()}
        write_config(schedule.path, body.decode("utf-8"))     # verbatim, as Java's slave does

    async def _timer_check(self, master: str) -> None:
        """5.x: the master's timer checkpoint (GET_TIMER_CHECK_POINT), for this broker's timer if it
        is promoted. Optional: a 4.x master has none, and a master without timer messages says so."""
        try:
            body, _why = await self._fetch(master, RequestCode.GET_TIMER_CHECK_POINT)
            if body and len(body) >= 32:
                self.ctrl.timer.adopt(body)
        except (RemotingError, ValueError, OSError) as exc:
            log.debug("timer checkpoint sync from %s: %s", master, exc)

    async def _request_modes(self, master: str) -> None:
        """5.x: the master's PULL/POP modes (GET_ALL_MESSAGE_REQUEST_MODE), so this broker's QUERY_ASSIGNMENT
        answers as its master's. Optional: a 4.x master does not know the request."""
        modes = self.ctrl.pop.request_modes
        try:
            body, _why = await self._fetch(master, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE)
            if body is not None and modes.replace(table_from_json(jsonbody.loads(body) if body else {})):
                await asyncio.get_running_loop().run_in_executor(None, modes.persist)
        except (RemotingError, ValueError, TypeError, AttributeError, OSError) as exc:
            log.debug("message request mode sync from %s: %s", master, exc)

    def _groups(self, body: bytes) -> None:
        data = jsonbody.loads(body)
        groups = self.ctrl.groups
        version = DataVersion.from_json(data.get("dataVersion") or {})
        if version.to_json() == groups.data_version.to_json():
            return
        groups.replace_all({k: SubscriptionGroupConfig.from_json(v)
                            for k, v in data.get("subscriptionGroupTable", {}).items()}, version)

