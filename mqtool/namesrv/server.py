"""Name server request handlers over the route table, and an embeddable server."""
from __future__ import annotations

import asyncio
import logging
import struct
import time
import zlib
from pathlib import Path

from mqtool.namesrv.kvconfig import KVConfig
from mqtool.namesrv.routes import RouteTable
from remoting import jsonbody
from remoting.codes import RequestCode, ResponseCode, VERSION_V4_9_4
from remoting.command import RemotingCommand
from remoting.errors import HeaderError
from remoting.headers import (BrokerNameHeader, ClusterHeader, DeleteTopicFromNamesrvRequestHeader,
                              GetRouteInfoRequestHeader, KVConfigRequestHeader, RegisterBrokerRequestHeader,
                              UnRegisterBrokerRequestHeader, from_ext_fields)
from remoting.transport import Connection, Server

log = logging.getLogger("mqtool.namesrv")
EXPIRY_SCAN_S = 10.0
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


def _now() -> int:
    return int(time.time() * 1000)


def decode_register_body(body: bytes, compressed: bool) -> tuple[dict, dict]:
    """RegisterBrokerBody -> (topicConfigTable, dataVersion); both the JSON and the compressed form."""
    if not body:
        return {}, {}
    if not compressed:
        data = jsonbody.loads(body)
        wrapper = data.get("topicConfigSerializeWrapper", data)
        return wrapper.get("topicConfigTable", {}) or {}, wrapper.get("dataVersion", {}) or {}
    raw = zlib.decompress(body)
    p = 0

    def take() -> bytes:
        nonlocal p
        n = struct.unpack_from(">i", raw, p)[0]
        p += 4
        chunk = raw[p:p + n]
        p += n
        return chunk
    version = jsonbody.loads(take())
    count = struct.unpack_from(">i", raw, p)[0]
    p += 4
    topics = {}
    for _ in range(count):
        name, read, write, perm, ftype = take().decode().split(" ")[:5]
        topics[name] = {"topicName": name, "readQueueNums": int(read), "writeQueueNums": int(write),
                        "perm": int(perm), "topicFilterType": ftype}
    return topics, version


class NameServer:
    def __init__(self, kv_path: Path | None = None):
        self.routes = RouteTable()
        self.kv = KVConfig(kv_path)
        self.server = Server(self.handle, on_close=self._channel_closed)
        self._expiry: asyncio.Task | None = None

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self, host: str = "0.0.0.0", port: int = 9876) -> "NameServer":
        await self.server.start(host, port)
        self._expiry = asyncio.get_running_loop().create_task(self._expire_loop())
        log.info("name server listening on %s:%s", host, self.server.port)
        return self

    async def stop(self) -> None:
        if self._expiry:
            self._expiry.cancel()
        await self.server.stop()

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_SCAN_S)
            for addr in self.routes.expire(_now()):
                log.warning("broker %s expired: no heartbeat for 120 s", addr)

    def _channel_closed(self, conn: Connection) -> None:
        for addr in self.routes.channel_closed(conn):
            log.info("broker %s removed: its connection closed", addr)

    async def handle(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        handler = _HANDLERS.get(cmd.code)
        if handler is None:
            # Java's name server sends nothing for unknown codes; answering is kinder and harmless.
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
        try:
            return handler(self, conn, cmd)
        except HeaderError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        except (ValueError, KeyError, TypeError, zlib.error, struct.error) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"bad request body: {exc}")

    # ---- handlers -------------------------------------------------------------------

    def register_broker(self, conn, cmd):
        h = from_ext_fields(RegisterBrokerRequestHeader, cmd.ext_fields)
        if h.bodyCrc32 and cmd.body and (zlib.crc32(cmd.body) & 0x7FFFFFFF) != h.bodyCrc32:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        topics, version = decode_register_body(cmd.body, bool(h.compressed))
        result = self.routes.register(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId, h.haServerAddr,
                                      topics, version, conn, _now())
        order = self.kv.namespace(ORDER_TOPIC_CONFIG)
        body = jsonbody.dumps({"table": order}) if order else b""
        return cmd.response(ResponseCode.SUCCESS, None, result, body)

    def unregister_broker(self, conn, cmd):
        h = from_ext_fields(UnRegisterBrokerRequestHeader, cmd.ext_fields)
        self.routes.unregister(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId)
        return cmd.response(ResponseCode.SUCCESS)

    def route_by_topic(self, conn, cmd):
        h = from_ext_fields(GetRouteInfoRequestHeader, cmd.ext_fields)
        route = self.routes.route(h.topic)
        if route is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {h.topic}")
        order = self.kv.get(ORDER_TOPIC_CONFIG, h.topic)
        if order:
            route = {"orderTopicConf": order, **route}
        standard = cmd.version >= VERSION_V4_9_4 or bool(h.acceptStandardJsonOnly)
        # Legacy clients get fastjson's bare integer broker-id keys; newer ones standard JSON.
        return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps(route, bare_int_keys=not standard))

    def cluster_info(self, conn, cmd):
        return cmd.response(ResponseCode.SUCCESS, None, None,
                            jsonbody.dumps(self.routes.cluster_info(), bare_int_keys=True))

    def all_topics(self, conn, cmd):
        return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps({"topicList": self.routes.all_topics()}))

    def topics_by_cluster(self, conn, cmd):
        h = from_ext_fields(ClusterHeader, cmd.ext_fields)
        return cmd.response(ResponseCode.SUCCESS, None, None,
                            jsonbody.dumps({"topicList": self.routes.topics_of_cluster(h.cluster)}))

    def wipe_write_perm(self, conn, cmd):
        h = from_ext_fields(BrokerNameHeader, cmd.ext_fields)
        n = self.routes.set_write_perm(h.brokerName, False)
        return cmd.response(ResponseCode.SUCCESS, None, {"wipeTopicCount": n})

    def add_write_perm(self, conn, cmd):
        h = from_ext_fields(BrokerNameHeader, cmd.ext_fields)
        n = self.routes.set_write_perm(h.brokerName, True)
        return cmd.response(ResponseCode.SUCCESS, None, {"addTopicCount": n})

    def delete_topic(self, conn, cmd):
        h = from_ext_fields(DeleteTopicFromNamesrvRequestHeader, cmd.ext_fields)
        self.routes.delete_topic(h.topic, h.clusterName)
        return cmd.response(ResponseCode.SUCCESS)

    def put_kv(self, conn, cmd):
        h = from_ext_fields(KVConfigRequestHeader, cmd.ext_fields)
        if h.key is None or h.value is None:
            raise HeaderError("PUT_KV_CONFIG needs key and value")
        self.kv.put(h.namespace, h.key, h.value)
        return cmd.response(ResponseCode.SUCCESS)

    def get_kv(self, conn, cmd):
        h = from_ext_fields(KVConfigRequestHeader, cmd.ext_fields)
        value = self.kv.get(h.namespace, h.key or "")
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace} Key: {h.key}")
        return cmd.response(ResponseCode.SUCCESS, None, {"value": value})

    def delete_kv(self, conn, cmd):
        h = from_ext_fields(KVConfigRequestHeader, cmd.ext_fields)
        self.kv.delete(h.namespace, h.key or "")
        return cmd.response(ResponseCode.SUCCESS)

    def kv_list(self, conn, cmd):
        h = from_ext_fields(KVConfigRequestHeader, cmd.ext_fields)
        table = self.kv.namespace(h.namespace)
        if table is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace}")
        return cmd.response(ResponseCode.SUCCESS, None, None, jsonbody.dumps({"table": table}))


_HANDLERS = {
    RequestCode.REGISTER_BROKER: NameServer.register_broker,
    RequestCode.UNREGISTER_BROKER: NameServer.unregister_broker,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: NameServer.route_by_topic,
    RequestCode.GET_BROKER_CLUSTER_INFO: NameServer.cluster_info,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: NameServer.all_topics,
    RequestCode.GET_TOPICS_BY_CLUSTER: NameServer.topics_by_cluster,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: NameServer.wipe_write_perm,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: NameServer.add_write_perm,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: NameServer.delete_topic,
    RequestCode.PUT_KV_CONFIG: NameServer.put_kv,
    RequestCode.GET_KV_CONFIG: NameServer.get_kv,
    RequestCode.DELETE_KV_CONFIG: NameServer.delete_kv,
    RequestCode.GET_KVLIST_BY_NAMESPACE: NameServer.kv_list,
}
