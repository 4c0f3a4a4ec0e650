"""Name server request handlers (DefaultRequestProcessor.java, 4.9.8) over the route table, and an
embeddable server: `await NameServer(...).start(host, port)` ... `await stop()`, or `run_namesrv`."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mqtool.common.conffile import keep_in_conf
from mqtool.common.javakeys import check_keys
from mqtool.namesrv import registerbody
from mqtool.namesrv.kvconfig import ORDER_TOPIC_CONFIG, KVConfig, KVConfigError
from mqtool.namesrv.routes import BROKER_CHANNEL_EXPIRED_MS, RouteTable
from mqtool_remoting import jsonbody
from mqtool_remoting.bodies import DataVersion, KVTable, TopicConfigSerializeWrapper
from mqtool_remoting.codes import DEFAULT_NAMESRV_PORT, MQVersion, RequestCode, ResponseCode, code_name
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import HeaderError
from mqtool_remoting.headers import (BrokerNameHeader, ClusterHeader, DeleteTopicFromNamesrvRequestHeader,
                              GetRouteInfoRequestHeader, KVConfigRequestHeader, QueryDataVersionRequestHeader,
                              RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
                              UnRegisterBrokerRequestHeader, from_ext_fields, to_ext_fields)
from mqtool_remoting.transport import Connection, Server

log = logging.getLogger("mqtool.namesrv")
EXPIRY_SCAN_S = 10.0          # scanNotActiveBroker period
ROWS_PER_TURN = 500           # topics of a registration read, or put into the table, per turn of the loop
CONFIG_BLACK_LIST = {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"}
RUNTIME_KEYS = frozenset({"orderMessageEnable", "clusterTest", "productEnvName"})   # read where they are used
START_KEYS = frozenset({"listenPort", "enableControllerInNamesrv"})                # used when it starts only


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class NamesrvConfig:
    """The NamesrvConfig properties this name server has (GET/UPDATE_NAMESRV_CONFIG show and set them)."""
    kvConfigPath: str = str(Path.home() / "namesrv" / "kvConfig.json")
    orderMessageEnable: bool = False
    clusterTest: bool = False
    productEnvName: str = "center"
    listenPort: int = DEFAULT_NAMESRV_PORT

    def to_properties(self) -> str:
        items = {"clusterTest": self.clusterTest, "configBlackList": ";".join(sorted(CONFIG_BLACK_LIST)),
                 "kvConfigPath": self.kvConfigPath, "listenPort": self.listenPort,
                 "orderMessageEnable": self.orderMessageEnable, "productEnvName": self.productEnvName}
        return "".join(f"{k}={_prop(v)}\n" for k, v in items.items())

    def update(self, props: dict[str, str]) -> None:
        """Set the RUNTIME_KEYS of `props`; any other key is left out, as Java's Configuration.update
        merges only the keys its configs have (a key shown by GET_NAMESRV_CONFIG is one it honours)."""
        for k, v in props.items():
            if k in ("orderMessageEnable", "clusterTest"):
                setattr(self, k, v.strip().lower() == "true")
            elif k == "productEnvName":
                self.productEnvName = v


def _prop(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def parse_properties(text: str) -> dict[str, str]:
    """`key=value` lines (java.util.Properties, without escapes or continuations)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for i, c in enumerate(line):
            if c in "=:":
                out[line[:i].strip()] = line[i + 1:].strip()
                break
        else:
            out[line] = ""
    return out


class NameServer:
    def __init__(self, kv_path: str | os.PathLike | None = None, order_message_enable: bool = False,
                 clock: Callable[[], int] = _wall_ms, scan_interval_s: float = EXPIRY_SCAN_S):
        self.config = NamesrvConfig(orderMessageEnable=order_message_enable)
        self.config_file: Path | None = None     # the namesrv.conf it started with (-c): updates are kept there
        self.kv = KVConfig(kv_path)
        self.config.kvConfigPath = str(self.kv.path)
        self.routes = RouteTable()
        self.clock = clock
        self.scan_interval_s = scan_interval_s
        self.server = Server(self.handle, on_close=self._channel_closed)
        self._expiry: asyncio.Task | None = None
        self._lists: dict[tuple, tuple[int, bytes]] = {}     # topic list bodies, by request, with the table's generation
        self._stepping: asyncio.Lock | None = None            # one registration read in steps at a time

    @property
    def port(self) -> int:
        """The bound port (useful after starting on port 0)."""
        return self.server.port

    async def start(self, host: str = "0.0.0.0", port: int = DEFAULT_NAMESRV_PORT) -> "NameServer":
        await self.server.start(host, port)
        self.config.listenPort = self.server.port
        self._expiry = asyncio.get_running_loop().create_task(self._expire_loop())
        log.info("name server listening on %s:%s", host, self.server.port)
        return self

    async def stop(self) -> None:
        if self._expiry:
            self._expiry.cancel()
            await asyncio.gather(self._expiry, return_exceptions=True)
            self._expiry = None
        await self.server.stop()

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(self.scan_interval_s)
            self.scan_not_active_brokers()

    def scan_not_active_brokers(self) -> int:
        gone = self.routes.expire(self.clock())
        for live in gone:
            log.warning("broker %s expired: no registration for %d s", live.addr, BROKER_CHANNEL_EXPIRED_MS // 1000)
            if isinstance(live.channel, Connection):
                live.channel.shutdown()          # Java closes the broker's channel too
        return len(gone)

    def _channel_closed(self, conn: Connection) -> None:
        for addr in self.routes.channel_closed(conn, conn.peer):
            log.info("broker %s removed: its connection closed", addr)

    async def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        handler = _HANDLERS.get(cmd.code)
        if handler is None:
            # Java's name server stays silent (the caller times out); an answer is kinder and harmless.
            log.warning("request code %s from %s not supported", cmd.code, conn.peer)
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
        try:
            resp = handler(self, conn, cmd)
            return await resp if asyncio.iscoroutine(resp) else resp
        except HeaderError as exc:
            log.warning("bad %s from %s: %s", code_name(RequestCode, cmd.code), conn.peer, exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        except KVConfigError as exc:
            log.error("%s", exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))

    # ---- brokers ---------------------------------------------------------------------

    def register_broker(self, conn, cmd):
        h = from_ext_fields(RegisterBrokerRequestHeader, cmd.ext_fields)
        if h.bodyCrc32 and (zlib.crc32(cmd.body) & 0x7FFFFFFF) != h.bodyCrc32:
            log.warning("register from %s: crc32 not match", conn.peer)
            return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        try:
            if not cmd.body:
                body = TopicConfigSerializeWrapper(dataVersion=DataVersion(0, 0))
                filters = []
            elif cmd.version >= MQVersion.V3_0_11:
                body = registerbody.read(cmd.body, bool(h.compressed))
                filters = body.filterServerList
            else:   # very old brokers send a bare TopicConfigSerializeWrapper and no filter servers
                body, filters = TopicConfigSerializeWrapper.from_json(jsonbody.loads(cmd.body)), None
            if isinstance(body, registerbody.RegisterView) and self.routes.takes_topics(
                    h.brokerAddr, h.brokerName, h.brokerId, body.dataVersion):
                if body.count > ROWS_PER_TURN:
                    return self._register_in_steps(conn, cmd, h, body)
                body.queue_rows()         # read now: a bad topic entry is refused before the table changes
        except (ValueError, TypeError, AttributeError, zlib.error) as exc:
            return self._bad_body(conn, cmd, exc)
        return self._registered(conn, cmd, h, body, filters)

    def _bad_body(self, conn, cmd, exc):
        log.warning("register from %s: bad body: %s", conn.peer, exc)
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"Failed to decode RegisterBrokerBody: {exc}")

    async def _register_in_steps(self, conn, cmd, h, body):
        """A registration whose thousands of topics the table takes: read ROWS_PER_TURN at a time,
        one such registration at a time, so a route look-up that arrives meanwhile waits for one
        step (a millisecond or two), not for every broker's registration (8 brokers' 10,000 topics
        each after a restart of the name server)."""
        if self._stepping is None:
            self._stepping = asyncio.Lock()
        async with self._stepping:
            try:
                await body.read_rows_in_steps(ROWS_PER_TURN)
            except ValueError as exc:
                return self._bad_body(conn, cmd, exc)
            rows = body.queue_rows()
            if self.routes.takes_topics(h.brokerAddr, h.brokerName, h.brokerId, body.dataVersion):
                for i in range(0, len(rows), ROWS_PER_TURN):      # the table takes them in steps too
                    self.routes.put_queues(h.brokerName, rows[i:i + ROWS_PER_TURN])
                    await asyncio.sleep(0)
                body.mark_applied()
            return self._registered(conn, cmd, h, body, body.filterServerList)

    def _registered(self, conn, cmd, h, body, filters):
        new = h.brokerAddr not in self.routes.live
        result = self.routes.register(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId, h.haServerAddr,
                                      body, filters, conn, self.clock())
        if new:
            log.info("new broker registered: %s %s id %d at %s (HA %s)", h.clusterName, h.brokerName, h.brokerId,
                     h.brokerAddr, h.haServerAddr)
        order = self.kv.namespace(ORDER_TOPIC_CONFIG)
        body_out = jsonbody.dumps(KVTable(order).to_json()) if order is not None else b""
        return cmd.response(ResponseCode.SUCCESS, None,
                            to_ext_fields(RegisterBrokerResponseHeader(result.haServerAddr, result.masterAddr)),
                            body_out)

    def unregister_broker(self, conn, cmd):
        h = from_ext_fields(UnRegisterBrokerRequestHeader, cmd.ext_fields)
        self.routes.unregister(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId)
        log.info("broker unregistered: %s %s id %d at %s", h.clusterName, h.brokerName, h.brokerId, h.brokerAddr)
        return cmd.response(ResponseCode.SUCCESS)

    def query_data_version(self, conn, cmd):
        h = from_ext_fields(QueryDataVersionRequestHeader, cmd.ext_fields)
        try:
            version = DataVersion.from_json(jsonbody.loads(cmd.body)) if cmd.body else None
        except (ValueError, TypeError, AttributeError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad DataVersion body: {exc}")
        changed = version is None or self.routes.topic_config_changed(h.brokerAddr, version)
        if not changed:
            self.routes.touch(h.brokerAddr, self.clock())
        ours = self.routes.data_version(h.brokerAddr)
        return cmd.response(ResponseCode.SUCCESS, None, {"changed": changed},
                            jsonbody.dumps(ours.to_json()) if ours else b"")

    # ---- routes and clusters -----------------------------------------------------------

    def route_by_topic(self, conn, cmd):
        h = from_ext_fields(GetRouteInfoRequestHeader, cmd.ext_fields)
        route = self.routes.route(h.topic)
        if route is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {h.topic}\n"
                                "See http://rocketmq.apache.org/docs/faq/ for further details.")
        if self.config.orderMessageEnable:
            route.orderTopicConf = self.kv.get(ORDER_TOPIC_CONFIG, h.topic)
        # 4.9.4+ clients (or ones that ask) get standard JSON; older ones fastjson's bare integer keys.
        standard = cmd.version >= MQVersion.V4_9_4 or bool(h.acceptStandardJsonOnly)
        return cmd.response(ResponseCode.SUCCESS, None, None, route.encode(standard))

    def cluster_info(self, conn, cmd):
        return cmd.response(ResponseCode.SUCCESS, None, None, self.routes.cluster_info().encode())

    def _topic_list(self, cmd, topics):
        return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(topics.to_json()))

    def _cached_list(self, cmd, key: tuple, make):
        """A topic list body made once per change of the route table: 80,000 topics take ~50 ms to
        sort and encode, a registration that changes nothing should not pay that on every call."""
        hit = self._lists.get(key)
        if hit is None or hit[0] != self.routes.generation:
            # {"topicList": [...]} of strings: the json module writes what jsonbody.dumps writes, faster
            body = json.dumps(make().to_json(), ensure_ascii=False, separators=(",", ":")).encode()
            if len(self._lists) > 64:
                self._lists.clear()
            hit = self._lists[key] = (self.routes.generation, body)
        return cmd.response(ResponseCode.SUCCESS, None, None, hit[1])

    def all_topics(self, conn, cmd):
        return self._cached_list(cmd, ("all",), self.routes.all_topics)

    def topics_by_cluster(self, conn, cmd):
        cluster = from_ext_fields(ClusterHeader, cmd.ext_fields).cluster
        return self._cached_list(cmd, ("cluster", cluster), lambda: self.routes.topics_of_cluster(cluster))

    def system_topics(self, conn, cmd):
        return self._topic_list(cmd, self.routes.system_topics())

    def unit_topics(self, conn, cmd):
        return self._topic_list(cmd, self.routes.unit_topics(cmd.code))

    def wipe_write_perm(self, conn, cmd):
        h = from_ext_fields(BrokerNameHeader, cmd.ext_fields)
        n = self.routes.wipe_write_perm(h.brokerName)
        log.info("wipe write perm of broker %s by %s: %d topics", h.brokerName, conn.peer, n)
        return cmd.response(ResponseCode.SUCCESS, None, {"wipeTopicCount": n})

    def add_write_perm(self, conn, cmd):
        h = from_ext_fields(BrokerNameHeader, cmd.ext_fields)
        n = self.routes.add_write_perm(h.brokerName)
        log.info("add write perm of broker %s by %s: %d topics", h.brokerName, conn.peer, n)
        return cmd.response(ResponseCode.SUCCESS, None, {"addTopicCount": n})

    def delete_topic(self, conn, cmd):
        h = from_ext_fields(DeleteTopicFromNamesrvRequestHeader, cmd.ext_fields)
        self.routes.delete_topic(h.topic, h.clusterName)
        return cmd.response(ResponseCode.SUCCESS)

    # ---- KV config and name server config ---------------------------------------------

    def put_kv(self, conn, cmd):
        h = from_ext_fields(KVConfigRequestHeader, cmd.ext_fields)
        if h.key is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "namespace or key is null")
        if h.value is None:
            raise HeaderError("the request header misses required field 'value'")
        self.kv.put(h.namespace, h.key, h.value)
        return cmd.response(ResponseCode.SUCCESS)

    def get_kv(self, conn, cmd):
        h = from_ext_fields(KVConfigRequestHeader, cmd.ext_fields)
        value = self.kv.get(h.namespace, h.key) if h.key is not None else None
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace} Key: {h.key}")
        return cmd.response(ResponseCode.SUCCESS, None, {"value": value})

    def delete_kv(self, conn, cmd):
        h = from_ext_fields(KVConfigRequestHeader, cmd.ext_fields)
        if h.key is None:
            raise HeaderError("the request header misses required field 'key'")
        self.kv.delete(h.namespace, h.key)
        return cmd.response(ResponseCode.SUCCESS)

    def kv_list(self, conn, cmd):
        h = from_ext_fields(KVConfigRequestHeader, cmd.ext_fields)
        table = self.kv.namespace(h.namespace)
        if table is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace}")
        return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(KVTable(table).to_json()))

    def get_config(self, conn, cmd):
        return cmd.response(ResponseCode.SUCCESS, None, None, self.config.to_properties().encode())

    def update_config(self, conn, cmd):
        if not cmd.body:
            return cmd.response(ResponseCode.SUCCESS)
        try:
            props = parse_properties(cmd.body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
        if CONFIG_BLACK_LIST & props.keys():
            return cmd.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        fixed = sorted(props.keys() & START_KEYS)
        if fixed:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{', '.join(fixed)} cannot change while the name server "
                                                           "runs (used when it starts): set it in namesrv.conf and restart")
        try:
            notes = check_keys({k: v for k, v in props.items() if k not in RUNTIME_KEYS}, list(RUNTIME_KEYS),
                               server="name server")
        except ValueError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        self.config.update(props)
        log.info("config updated by %s: %s", conn.peer, props)
        honoured = {k: v for k, v in props.items() if k in RUNTIME_KEYS}
        kept = keep_in_conf(self.config_file, honoured, "name server") if honoured else None
        return cmd.response(ResponseCode.SUCCESS, "; ".join(notes + [kept] if kept else notes) or None)


_HANDLERS = {
    RequestCode.PUT_KV_CONFIG: NameServer.put_kv,
    RequestCode.GET_KV_CONFIG: NameServer.get_kv,
    RequestCode.DELETE_KV_CONFIG: NameServer.delete_kv,
    RequestCode.QUERY_DATA_VERSION: NameServer.query_data_version,
    RequestCode.REGISTER_BROKER: NameServer.register_broker,
    RequestCode.UNREGISTER_BROKER: NameServer.unregister_broker,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: NameServer.route_by_topic,
    RequestCode.GET_BROKER_CLUSTER_INFO: NameServer.cluster_info,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: NameServer.wipe_write_perm,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: NameServer.add_write_perm,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: NameServer.all_topics,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: NameServer.delete_topic,
    RequestCode.GET_KVLIST_BY_NAMESPACE: NameServer.kv_list,
    RequestCode.GET_TOPICS_BY_CLUSTER: NameServer.topics_by_cluster,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: NameServer.system_topics,
    RequestCode.GET_UNIT_TOPIC_LIST: NameServer.unit_topics,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: NameServer.unit_topics,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: NameServer.unit_topics,
    RequestCode.UPDATE_NAMESRV_CONFIG: NameServer.update_config,
    RequestCode.GET_NAMESRV_CONFIG: NameServer.get_config,
}


async def run_namesrv(host: str = "0.0.0.0", port: int = DEFAULT_NAMESRV_PORT,
                      kv_path: str | os.PathLike | None = None, order_message_enable: bool = False,
                      ready: Callable[[NameServer], None] | None = None) -> None:
    """Serve until cancelled; `ready(server)` is called once listening."""
    server = await NameServer(kv_path, order_message_enable).start(host, port)
    try:
        if ready:
            ready(server)
        await asyncio.Event().wait()
    finally:
        await server.stop()
