"""PlainAccessValidator (4.9.8): what a request needs, the broker's one ACL hook, the file watcher.

`AclService.check` runs before every request's handler; a failure is SYSTEM_ERROR (1) with
`AclException: <message>, <java frame>` as the remark, never NO_PERMISSION. Which resources a
code needs is `needed_resources`; every other code is only signature-checked.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from mqtool.broker.acl import files
from mqtool.broker.acl.manager import PlainPermissionManager
from mqtool.broker.acl.perms import PUB, SUB, AclError, is_group, retry_topic
from mqtool_remoting import jsonbody
from mqtool_remoting.acl import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, broker_content
from mqtool_remoting.codes import RequestCode, ResponseCode, code_name

log = logging.getLogger("mqtool.broker.acl")
WATCH_INTERVAL_S = 5.0
PARSE_FRAME = "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java:134)"


@dataclass
class AccessResource:
    """PlainAccessResource of one request: who, from where, what it needs, what was signed."""
    ip: str
    code: int
    access_key: str | None = None
    signature: str | None = None
    token: str | None = None
    needed: dict[str, int] = field(default_factory=dict)
    content: bytes = b""


def peer_ip(host: str) -> str:
    """Netty's `ip:port` cut at the last ':'; JDK >= 14 writes an IPv6 peer as `[...]`."""
    return f"[{host}]" if ":" in host else host


def _required(ext: dict, name: str) -> str:
    value = ext.get(name)
    if value is None:
        raise AclError(f"the custom field <{name}> is null", PARSE_FRAME)
    return value


POP_CODES = frozenset({RequestCode.POP_MESSAGE, RequestCode.PEEK_MESSAGE, RequestCode.ACK_MESSAGE,
                       RequestCode.CHANGE_MESSAGE_INVISIBLETIME, RequestCode.NOTIFICATION, RequestCode.POLLING_INFO})


def needed_resources(code: int, ext: dict, body: bytes) -> dict[str, int]:
    """parse(): the resources (topics, groups as `%RETRY%g`) and perms a request code needs."""
    need: dict[str, int] = {}

    def add(resource, perm):
        if resource is not None:
            need[resource] = perm
    if code == RequestCode.SEND_MESSAGE:
        topic = ext.get("topic")
        add(retry_topic(ext.get("group")), SUB) if is_group(topic) else add(topic, PUB)
    elif code == RequestCode.SEND_MESSAGE_V2:
        topic = ext.get("b")
        add(retry_topic(ext.get("a")), SUB) if is_group(topic) else add(topic, PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        add(retry_topic(ext.get("group")), SUB)
    elif code == RequestCode.PULL_MESSAGE:
        add(ext.get("topic"), SUB)
        add(retry_topic(ext.get("consumerGroup")), SUB)
    elif code in POP_CODES:        # 5.x POP: SUB on its topic and group, as its headers' annotations say
        add(ext.get("topic"), SUB)
        add(retry_topic(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        add(ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        try:
            data = jsonbody.loads(body)
            for consumer in data.get("consumerDataSet") or []:
                add(retry_topic(consumer.get("groupName")), SUB)
                for sub in consumer.get("subscriptionDataSet") or []:
                    add(sub.get("topic"), SUB)
        except (ValueError, AttributeError, TypeError, UnicodeDecodeError) as exc:
            raise AclError(str(exc) or "error parse new", PARSE_FRAME) from None
    elif code == RequestCode.UNREGISTER_CLIENT:
        _required(ext, "clientID")
        add(retry_topic(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        add(retry_topic(_required(ext, "consumerGroup")), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        for name in ("consumerGroup", "topic", "queueId", "commitOffset"):
            _required(ext, name)
        add(retry_topic(ext["consumerGroup"]), SUB)
        add(ext["topic"], SUB)
    return need


def parse(cmd, host: str) -> AccessResource:
    res = AccessResource(peer_ip(host), cmd.code)
    ext = cmd.ext_fields
    if not ext:                  # Java: extFields null, nothing read (a whitelisted peer still passes)
        return res
    res.access_key, res.signature, res.token = ext.get(ACCESS_KEY), ext.get(SIGNATURE), ext.get(SECURITY_TOKEN)
    res.needed = needed_resources(cmd.code, ext, cmd.body)
    res.content = broker_content(ext, cmd.body)
    return res


class AclService:
    """The broker's ACL: the manager, the per-request check, and the 5 s file watcher."""

    def __init__(self, home: str):
        self.home = home
        try:
            self.manager = PlainPermissionManager(home)
        except AclError as exc:
            raise AclError(f"invalid ACL config: {exc.message}") from None
        self._counted = len(self.manager.file_list)
        self._mtimes = {p: files.last_modified(p) for p in self.manager.file_list}
        self.reloads = 0

    def check(self, conn, cmd):
        """None to go on, or the SYSTEM_ERROR response that refuses the request."""
        try:
            self.manager.validate(parse(cmd, conn.peer_host))
            return None
        except AclError as exc:
            log.warning("ACL refused %s from %s: %s", code_name(RequestCode, cmd.code), conn.peer, exc.message)
            return cmd.response(ResponseCode.SYSTEM_ERROR, exc.remark())

    def poll(self) -> None:
        """One round of AclFileWatchService: a changed file count reloads all, else each changed file."""
        current = files.acl_files(self.home)
        if len(current) != self._counted:
            self._counted = len(current)
            self._mtimes = {p: files.last_modified(p) for p in current}
            self._reload(self.manager.load, "all ACL files")
            return
        for path in current:
            mtime = files.last_modified(path)
            if mtime != self._mtimes.get(path):
                self._mtimes[path] = mtime
                self._reload(lambda p=path: self.manager.load_file(p), path)

    def _reload(self, fn, what: str) -> None:
        try:
            fn()
            self.reloads += 1
            log.info("ACL reloaded from %s", what)
        except AclError as exc:
            log.warning("ACL reload of %s failed, the old config stays: %s", what, exc.message)

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            try:
                self.poll()
            except OSError as exc:
                log.warning("ACL file watch: %s", exc)
