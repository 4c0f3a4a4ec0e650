"""The admin API: one method per operation the CLI offers (mqadmin's coverage, as data)."""
from __future__ import annotations

from mqtool.client.base import ClientBase, check
from mqtool.client.records import decode_records
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode, version_desc
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingCommandError, RemotingError
from mqtool_store.errors import FormatError
from mqtool_store.msgid import decode_offset_msg_id, offset_id_fields

QUERY_CAP = 64
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"   # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG
TOPIC_DEFAULTS = {"readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "order": False}   # mqadmin updateTopic's
GROUP_DEFAULTS = {"brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True, "consumeFromMinEnable": True,
                  "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 16, "retryQueueNums": 1,
                  "whichBrokerWhenConsumeSlowly": 1}   # SubscriptionGroupConfig's


class Admin(ClientBase):
    async def cluster_info(self) -> dict:
        resp = check(await self.invoke_namesrv(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)),
                     "cluster info")
        return jsonbody.loads(resp.body)

    async def cluster_rows(self) -> list[dict]:
        """One row per broker address, with the figures mqadmin clusterList shows from its runtime info."""
        import time
        info = await self.cluster_info()
        rows = []
        for cluster, names in sorted(info.get("clusterAddrTable", {}).items()):
            for name in sorted(names):
                addrs = info.get("brokerAddrTable", {}).get(name, {}).get("brokerAddrs", {})
                for bid, addr in sorted(addrs.items(), key=lambda kv: int(kv[0])):
                    row = {"cluster": cluster, "broker": name, "broker_id": int(bid), "address": addr}
                    try:
                        kv = await self.broker_runtime(addr)
                    except (RemotingError, RemotingCommandError) as exc:
                        rows.append(dict(row, reachable=False, error=str(exc)))
                        continue
                    earliest = _num(kv.get("earliestMessageTimeStamp"), int)
                    rows.append(dict(
                        row, reachable=True, version=kv.get("brokerVersionDesc", ""),
                        in_tps=_num((kv.get("putTps") or "0").split(" ")[0], float),
                        out_tps=_num((kv.get("getTransferedTps") or "0").split(" ")[0], float),
                        send_queue=kv.get("sendThreadPoolQueueSize", ""),
                        send_wait_ms=kv.get("sendThreadPoolQueueHeadWaitTimeMills", ""),
                        pull_queue=kv.get("pullThreadPoolQueueSize", ""),
                        pull_wait_ms=kv.get("pullThreadPoolQueueHeadWaitTimeMills", ""),
                        page_cache_wait_ms=kv.get("pageCacheLockTimeMills", ""),
                        hours=(time.time() * 1000 - earliest) / 3_600_000 if earliest > 0 else 0.0,
                        space=_num(kv.get("commitLogDiskRatio"), float),
                        put_today=_num(kv.get("msgPutTotalTodayNow"), int) - _num(kv.get("msgPutTotalTodayMorning"), int),
                        get_today=_num(kv.get("msgGetTotalTodayNow"), int) - _num(kv.get("msgGetTotalTodayMorning"), int)))
        return rows

    async def timer_rows(self, cluster: str | None = None) -> list[dict]:
        """Per master: its 5.x timer figures (runtime info), or why there are none."""
        rows = []
        for name, addr in sorted((await self.masters(cluster)).items()):
            row = {"broker": name, "address": addr}
            try:
                rows.append(dict(row, reachable=True, **timer_fields(await self.broker_runtime(addr))))
            except (RemotingError, RemotingCommandError) as exc:
                rows.append(dict(row, reachable=False, error=str(exc)))
        return rows

    async def masters(self, cluster: str | None = None, broker: str | None = None) -> dict[str, str]:
        """brokerName -> master address, for one cluster or broker (or all)."""
        info = await self.cluster_info()
        names = set(info.get("brokerAddrTable", {}))
        if cluster:
            if cluster not in info.get("clusterAddrTable", {}):
                raise RemotingCommandError(ResponseCode.SYSTEM_ERROR, f"no cluster named {cluster}", "cluster")
            names &= set(info["clusterAddrTable"][cluster])
        out = {}
        for name in sorted(names):
            addr = info["brokerAddrTable"][name]["brokerAddrs"].get("0") or info["brokerAddrTable"][name]["brokerAddrs"].get(0)
            if addr and (broker is None or broker in (name, addr)):
                out[name] = addr
        if broker and not out:
            raise RemotingCommandError(ResponseCode.SYSTEM_ERROR, f"no master broker {broker}", "broker")
        return out

    async def create_topic(self, topic: str, read: int | None = None, write: int | None = None,
                           perm: int | None = None, order: bool | None = None, cluster: str | None = None,
                           broker: str | None = None, attributes: str | None = None) -> list[dict]:
        """Create or update `topic` on every master of `cluster` (or one broker, or every master).

        A value left None keeps what each broker has for the topic, or takes mqadmin's default for a
        new one (8 read and 8 write queues, perm 6, not ordered); mqadmin's updateTopic resets an
        existing topic to those defaults instead, which silently changed its queue numbers. With
        `order` the name server's ORDER_TOPIC_CONFIG gets `brokerName:writeQueueNums` for these
        brokers, as mqadmin writes it (the whole value for a cluster, merged for one broker); with
        order=False their entries are taken out; a new write queue number of an ordered topic
        replaces its entries too. `attributes`: 5.x topic attributes as mqadmin's -a writes them
        (`+message.type=FIFO`); the topic's other attributes are kept.
        """
        given = {"readQueueNums": read, "writeQueueNums": write, "perm": perm, "order": order}
        done = []
        for name, addr in (await self.masters(cluster, broker)).items():
            current = await self.topic_config(addr, topic) if None in given.values() else {}
            cfg = {k: v if v is not None else current.get(k, TOPIC_DEFAULTS[k]) for k, v in given.items()}
            ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": cfg["readQueueNums"],
                   "writeQueueNums": cfg["writeQueueNums"], "perm": cfg["perm"],
                   "topicFilterType": current.get("topicFilterType", "SINGLE_TAG"),
                   "topicSysFlag": current.get("topicSysFlag", 0), "order": cfg["order"]}
            if attributes:
                ext["attributes"] = attributes
            check(await self.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)),
                  f"create topic {topic}")
            done.append({"broker": name, **cfg})
        if order is not None and done:
            await self._order_conf(topic, {d["broker"]: d["writeQueueNums"] for d in done}, order, whole=broker is None)
        elif write is not None and any(d["order"] for d in done):     # an ordered topic's new write queues
            await self._order_conf(topic, {d["broker"]: d["writeQueueNums"] for d in done if d["order"]}, True,
                                   whole=False)
        return done

    async def topic_config(self, addr: str, topic: str) -> dict:
        """One topic's config on one broker ({} where it has none) by GET_TOPIC_CONFIG (5.x; mqtool's brokers
        answer it), a cost that does not grow with the broker's table; a 4.9.8 broker answers it
        REQUEST_CODE_NOT_SUPPORTED and is asked for its whole table (GET_ALL_TOPIC_CONFIG) instead."""
        resp = await self.invoke(addr, RemotingCommand.request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic}))
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return {}
        if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            return (await self.topic_configs(addr)).get(topic, {})
        return jsonbody.loads(check(resp, f"topic config {topic}").body)

    async def topic_configs(self, addr: str) -> dict[str, dict]:
        """topic -> its config on one broker (GET_ALL_TOPIC_CONFIG)."""
        resp = check(await self.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)), "topic config")
        return jsonbody.loads(resp.body).get("topicConfigTable", {})

    async def _order_conf(self, topic: str, writes: dict[str, int], order: bool, whole: bool) -> None:
        """ORDER_TOPIC_CONFIG for `topic` (DefaultMQAdminExt.createOrUpdateOrderConf): ordered, the whole
        value for a cluster, or these brokers' entries replaced in (or added to) the one there; not
        ordered, these brokers' entries taken out (the key deleted when none is left; mqadmin leaves them)."""
        resp = await self.invoke_namesrv(RemotingCommand.request(RequestCode.GET_KV_CONFIG, {
            "namespace": ORDER_TOPIC_CONFIG, "key": topic}))
        old = resp.ext_fields.get("value") if resp.code == ResponseCode.SUCCESS else None
        entries = {item.split(":")[0]: item for item in (old or "").split(";") if item.strip()}
        if order:
            if whole:
                entries = {}
            entries.update({name: f"{name}:{w}" for name, w in writes.items()})
        else:
            entries = {name: item for name, item in entries.items() if name not in writes}
        if entries:
            await self.kv("put", ORDER_TOPIC_CONFIG, topic, ";".join(entries.values()))
        elif old is not None:
            await self.kv("delete", ORDER_TOPIC_CONFIG, topic)

    async def delete_topic(self, topic: str, cluster: str | None = None) -> dict[str, bool]:
        """Delete `topic` from every master of `cluster` (or all) and from the name servers (mqadmin
        deleteTopic); returns broker name -> whether that broker had the topic."""
        had = {}
        for name, addr in (await self.masters(cluster)).items():
            had[name] = bool(await self.topic_config(addr, topic))
            check(await self.invoke(addr, RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER,
                                                                  {"topic": topic})), f"delete topic {topic}")
        check(await self.invoke_namesrv(RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                                                                {"topic": topic})), "delete topic in name server")
        return had

    async def topic_list(self) -> list[str]:
        resp = check(await self.invoke_namesrv(RemotingCommand.request(
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)), "topic list")
        return sorted(jsonbody.loads(resp.body).get("topicList", []))

    async def topic_route(self, topic: str) -> dict:
        r = await self.route(topic, refresh=True)
        return {"brokerDatas": [{"brokerName": n, "brokerAddrs": a} for n, a in r.brokers.items()],
                "queueDatas": r.queues}

    async def topic_status(self, topic: str) -> list[dict]:
        route = await self.route(topic, refresh=True)
        rows = []
        for name in sorted(route.brokers):
            addr = route.master(name)
            resp = check(await self.invoke(addr, RemotingCommand.request(RequestCode.GET_TOPIC_STATS_INFO,
                                                                          {"topic": topic})), "topic status")
            for key, v in jsonbody.loads(resp.body).get("offsetTable", {}).items():
                mq = key.as_dict()
                rows.append({"broker": mq["brokerName"], "queue_id": mq["queueId"], "min_offset": v["minOffset"],
                             "max_offset": v["maxOffset"], "last_update": v["lastUpdateTimestamp"]})
        return sorted(rows, key=lambda r: (r["broker"], r["queue_id"]))

    async def group_progress(self, group: str, topic: str | None = None) -> list[dict]:
        rows = []
        for name, addr in (await self.masters()).items():
            ext = {"consumerGroup": group}
            if topic:
                ext["topic"] = topic
            resp = check(await self.invoke(addr, RemotingCommand.request(RequestCode.GET_CONSUME_STATS, ext)),
                         f"consume stats of {group} on {name}")
            for key, v in jsonbody.loads(resp.body).get("offsetTable", {}).items():
                mq = key.as_dict()
                rows.append({"topic": mq["topic"], "broker": mq["brokerName"], "queue_id": mq["queueId"],
                             "broker_offset": v["brokerOffset"], "consumer_offset": v["consumerOffset"],
                             "lag": v["brokerOffset"] - v["consumerOffset"]})
        return sorted(rows, key=lambda r: (r["topic"], r["broker"], r["queue_id"]))

    async def query_by_key(self, topic: str, key: str, max_num: int = QUERY_CAP, begin: int = 0,
                           end: int = 2**62, unique: bool = False) -> tuple[list, bool]:
        route = await self.route(topic)
        found = []
        capped = False
        for name in sorted(route.brokers):
            addr = route.reader(name)          # the master, else any broker of the group (as MQAdminImpl)
            if addr is None:
                continue
            ext = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin, "endTimestamp": end,
                   "_UNIQUE_KEY_QUERY": "true" if unique else "false"}
            resp = await self.invoke(addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext))
            if resp.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            check(resp, f"query {topic}#{key}")
            recs = decode_records(resp.body)
            capped |= len(recs) >= min(max_num, QUERY_CAP)
            found += [(name, r) for r in recs if key in r.keys or r.uniq_key == key]
        return found, capped

    async def message_trace(self, msg_id: str, trace_topic: str = "RMQ_SYS_TRACE_TOPIC") -> dict:
        """mqadmin queryMsgTraceById's look-up: the trace messages whose KEYS hold `msg_id` (a key
        query to every broker of the trace topic, at most 64 each, any time), decoded; the records
        of `msg_id`, each with the IP of the client that wrote it (its trace message's born host).
        Returns {"records": [(TraceRecord, client_ip)], "messages": n, "errors": [...], "capped": bool}."""
        import ipaddress
        import time

        from mqtool.common.tracedata import decode
        try:
            found, capped = await self.query_by_key(trace_topic, msg_id, QUERY_CAP, 0, int(time.time() * 1000))
        except RemotingCommandError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise RemotingCommandError(exc.code, f"no broker has the trace topic {trace_topic}: nothing traced "
                                           "there yet (or another --trace-topic)", "message trace") from None
            raise
        out, errors, messages = [], [], 0
        for _broker, rec in found:
            if rec.topic != trace_topic or msg_id not in rec.keys:
                continue                       # an index hash collision, or the id only as a UNIQ_KEY
            messages += 1
            decoded = decode(rec.body.decode("utf-8", "replace"))
            errors += [f"trace message {rec.uniq_key or rec.msg_id}: {e}" for e in decoded.errors]
            host = str(ipaddress.ip_address(rec.born_ip))
            out += [(r, host) for r in decoded.records if r.msg_id == msg_id]
        return {"records": out, "messages": messages, "errors": errors, "capped": capped}

    async def view(self, offset_msg_id: str):
        ip, port, offset = decode_offset_msg_id(offset_msg_id)
        addr = f"{ip}:{port}"
        resp = check(await self.invoke(addr, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID,
                                                                     {"offset": offset})), "view message")
        try:
            return decode_records(resp.body)[0]
        except (FormatError, IndexError):     # a broker that sends whatever bytes lie there
            raise RemotingCommandError(ResponseCode.SYSTEM_ERROR, f"no record starts at commitlog offset {offset}",
                                       f"view message on {addr}") from None

    async def message_by_id(self, msg_id: str, topic: str | None = None) -> list[tuple[str, object]]:
        """mqadmin queryMsgById: (broker name, record) for a message id of either kind. An offset
        id is read at the broker it names (VIEW_MESSAGE_BY_ID); any other id is a unique key
        (UNIQ_KEY), looked up through the index of the brokers of `topic` (QUERY_MESSAGE with
        _UNIQUE_KEY_QUERY, MQAdminImpl.queryMessageByUniqKey); an offset id that cannot be read is
        tried as a unique key too when a topic is given, as DefaultMQAdminExtImpl.viewMessage falls back."""
        failed = None
        fields = offset_id_fields(msg_id)
        if fields is not None:
            try:
                rec = await self.view(msg_id)
                return [(await self._broker_name(f"{fields[0]}:{fields[1]}"), rec)]
            except (RemotingError, RemotingCommandError) as exc:
                if topic is None:     # other clients' unique keys (the C++ client's) can look like offset ids
                    raise RemotingError(f"message id {msg_id}: {exc}; if it is a unique key (UNIQ_KEY), give -t "
                                        "TOPIC to find it through the index") from None
                failed = exc
        elif topic is None:
            raise ValueError(f"message id {msg_id} is not an offset id: a unique key needs its topic")
        key = msg_id.strip()
        try:
            found, _ = await self.query_by_key(topic, key, unique=True)
        except (RemotingError, RemotingCommandError):
            if failed is not None:
                raise failed from None
            raise
        found = [(b, r) for b, r in found if r.uniq_key == key]
        if not found and failed is not None:
            raise failed
        return found

    async def _broker_name(self, addr: str) -> str:
        """The name of the broker group `addr` belongs to (an offset id's store host), else `addr`."""
        try:
            table = (await self.cluster_info()).get("brokerAddrTable", {})
        except (RemotingError, RemotingCommandError):
            return addr
        for name, data in table.items():
            if addr in (data.get("brokerAddrs") or {}).values():
                return name
        return addr

    async def broker_runtime(self, addr: str) -> dict:
        resp = check(await self.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)),
                     "broker status")
        return jsonbody.loads(resp.body).get("table", {})

    # ---- groups, connections, config (mqadmin's remaining everyday commands) -------------------

    async def group_list(self) -> list[dict]:
        out = {}
        for name, addr in (await self.masters()).items():
            for g, cfg in (await self.group_configs(addr)).items():
                out.setdefault(g, dict(cfg, brokers=[]))["brokers"].append(name)
        return [out[g] for g in sorted(out)]

    async def group_update(self, group: str, retry_max_times: int | None = None, retry_queue_nums: int | None = None,
                           consume_enable: bool | None = None, broadcast_enable: bool | None = None,
                           cluster: str | None = None, broker: str | None = None,
                           orderly: bool | None = None) -> list[dict]:
        """Create or update a subscription group on every master of `cluster` (or one broker, or all).
        A value left None keeps what each broker has for the group (a new group: SubscriptionGroupConfig's
        defaults); mqadmin's updateSubGroup resets an existing group's other settings instead."""
        given = {"retryMaxTimes": retry_max_times, "retryQueueNums": retry_queue_nums,
                 "consumeEnable": consume_enable, "consumeBroadcastEnable": broadcast_enable,
                 "consumeMessageOrderly": orderly}
        given = {k: v for k, v in given.items() if v is not None}
        done = []
        for name, addr in (await self.masters(cluster, broker)).items():
            current = (await self.group_configs(addr)).get(group, {})
            cfg = {**GROUP_DEFAULTS, **current, **given, "groupName": group}
            check(await self.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                                                  body=jsonbody.dumps(cfg))), f"update group {group}")
            done.append({"broker": name, **cfg})
        return done

    async def set_consume_mode(self, group: str, topic: str, mode: str, pop_share_queue_num: int = 0,
                               cluster: str | None = None, broker: str | None = None) -> list[dict]:
        """5.x: whether `group`'s clients pull or pop `topic` (SET_MESSAGE_REQUEST_MODE, mqadmin setConsumeMode),
        on every master of `cluster` (or one broker, or every master); the brokers answer it in
        QUERY_ASSIGNMENT. The topic must be on the broker; the group is created there if the broker
        auto-creates groups."""
        body = {"consumerGroup": group, "mode": mode, "popShareQueueNum": pop_share_queue_num, "topic": topic}
        done = []
        for name, addr in (await self.masters(cluster, broker)).items():
            check(await self.invoke(addr, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE,
                                                                  body=jsonbody.dumps(body))),
                  f"set consume mode of {group} on {topic} at {name}")
            done.append({"broker": name, "address": addr, **body})
        return done

    async def group_delete(self, group: str, remove_offset: bool = True, cluster: str | None = None) -> dict[str, bool]:
        """Delete the subscription group from every master (of `cluster`); returns broker name ->
        whether that broker had it."""
        had = {}
        for name, addr in (await self.masters(cluster)).items():
            had[name] = group in await self.group_configs(addr)
            check(await self.invoke(addr, RemotingCommand.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {
                "groupName": group, "removeOffset": remove_offset})), f"delete group {group}")
        return had

    async def group_configs(self, addr: str) -> dict[str, dict]:
        """group -> its subscription group config on one broker (GET_ALL_SUBSCRIPTIONGROUP_CONFIG)."""
        resp = check(await self.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)),
                     "group config")
        return jsonbody.loads(resp.body).get("subscriptionGroupTable", {})

    async def connections(self, group: str, producer: bool = False) -> list[dict]:
        code = RequestCode.GET_PRODUCER_CONNECTION_LIST if producer else RequestCode.GET_CONSUMER_CONNECTION_LIST
        key = "producerGroup" if producer else "consumerGroup"
        rows = []
        for name, addr in (await self.masters()).items():
            resp = await self.invoke(addr, RemotingCommand.request(code, {key: group}))
            if resp.code != ResponseCode.SUCCESS:
                continue
            for c in jsonbody.loads(resp.body).get("connectionSet", []):
                rows.append({"broker": name, "client_id": c.get("clientId"), "address": c.get("clientAddr"),
                             "language": c.get("language"), "version": c.get("version"),
                             "version_name": version_desc(c.get("version"))})
        if not rows and producer:           # each broker's answer: SYSTEM_ERROR, as 4.9.8's
            raise RemotingCommandError(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist",
                                       "producer connections")
        if not rows:                        # the broker's words (ConsumerConnection: not online)
            raise RemotingCommandError(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online",
                                       "consumer connections")
        return rows

    async def reset_offset_by_time(self, group: str, topic: str, timestamp: int, force: bool = True) -> list[dict]:
        """Each queue's offset moved to the first message stored at or after `timestamp`, as mqadmin's
        resetOffsetByTime does: INVOKE_BROKER_TO_RESET_OFFSET on each master, which commits the offsets
        and pushes them to the group's online consumers; for a group with no online consumer
        (CONSUMER_NOT_ONLINE) or a broker without the request, the offsets are committed directly."""
        route = await self.route(topic, refresh=True)
        rows, fallback = [], False
        for name in sorted(route.brokers):
            addr = route.master(name)
            if addr is None:
                continue
            resp = await self.invoke(addr, RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
                "topic": topic, "group": group, "timestamp": timestamp, "isForce": force}))
            no_offsets = resp.code == ResponseCode.SYSTEM_ERROR and "not exist" in (resp.remark or "")
            if no_offsets or resp.code in (ResponseCode.CONSUMER_NOT_ONLINE, ResponseCode.REQUEST_CODE_NOT_SUPPORTED):
                fallback = True        # offline (or offset-less) group: mqadmin's old way, commit them
                continue
            check(resp, f"reset offsets of {group} on {name}")
            table = jsonbody.loads(resp.body).get("offsetTable", {}) if resp.body else {}
            for key, off in table.items():
                q = key.as_dict() if isinstance(key, jsonbody.ObjectKey) else {}
                rows.append({"topic": q.get("topic", topic), "broker": q.get("brokerName", name),
                             "queue_id": int(q.get("queueId", -1)), "offset": int(off), "pushed": True})
        if fallback:
            rows += [dict(r, pushed=False) for r in await self._commit_offsets_by_time(group, topic, timestamp)
                     if not any(x["broker"] == r["broker"] for x in rows)]
        return sorted(rows, key=lambda r: (r["broker"], r["queue_id"]))

    async def _commit_offsets_by_time(self, group: str, topic: str, timestamp: int) -> list[dict]:
        """The old way (no online consumer): SEARCH_OFFSET_BY_TIMESTAMP, then UPDATE_CONSUMER_OFFSET."""
        from mqtool.client.consumer import Consumer
        c = Consumer(";".join(self.namesrv_addrs), group)
        rows = []
        try:
            for mq in await c.queues(topic):
                off = await c.offset_by_time(mq, timestamp)
                await self.invoke(await c.broker_addr(mq), RemotingCommand.request(
                    RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic,
                                                         "queueId": mq.queue_id, "commitOffset": off}))
                rows.append({"topic": topic, "broker": mq.broker_name, "queue_id": mq.queue_id, "offset": off})
        finally:
            await c.close()
        return rows

    async def broker_config(self, addr: str) -> dict[str, str]:
        from mqtool_remoting import javaprops
        resp = check(await self.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG)), "broker config")
        return javaprops.loads(resp.body.decode("utf-8", "replace"))

    async def set_broker_config(self, addr: str, props: dict[str, str]) -> str:
        from mqtool_remoting import javaprops
        resp = check(await self.invoke(addr, RemotingCommand.request(
            RequestCode.UPDATE_BROKER_CONFIG, body=javaprops.dumps(props).encode())), "update broker config")
        return resp.remark or ""

    async def namesrv_config(self, addr: str | None = None) -> dict[str, str]:
        """GET_NAMESRV_CONFIG of the name server `addr`, or of the first that answers."""
        from mqtool_remoting import javaprops
        cmd = RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG)
        resp = check(await (self.invoke(addr, cmd) if addr else self.invoke_namesrv(cmd)), "name server config")
        return javaprops.loads(resp.body.decode("utf-8", "replace"))

    async def kv(self, action: str, namespace: str, key: str | None = None, value: str | None = None):
        codes = {"put": RequestCode.PUT_KV_CONFIG, "get": RequestCode.GET_KV_CONFIG,
                 "delete": RequestCode.DELETE_KV_CONFIG, "list": RequestCode.GET_KVLIST_BY_NAMESPACE}
        ext = {"namespace": namespace, "key": key, "value": value}
        resp = await self.invoke_namesrv(RemotingCommand.request(codes[action], ext))
        if action == "list" and resp.code == ResponseCode.QUERY_NOT_FOUND:
            return {}           # the name server's answer for a namespace with no item left: an empty list
        check(resp, f"kv {action}")
        if action == "get":
            return {key: resp.ext_fields.get("value")}
        if action == "list":
            return jsonbody.loads(resp.body).get("table", {})
        return {}


def _num(text, kind):
    """A runtime-info value as a number; mqadmin reads unparsable values as 0, so do we."""
    try:
        return kind(text)
    except (TypeError, ValueError):
        return kind(0)


def timer_fields(kv: dict) -> dict:
    """A 5.x broker's timer figures from its runtime info (None where it has none: a 4.x broker)."""
    if "timerCongestNum" not in kv:
        return {"timer_pending": None}
    return {"timer_pending": _num(kv.get("timerCongestNum"), int), "timer_behind_s": _num(kv.get("timerReadBehind"), int),
            "timer_offset_behind": _num(kv.get("timerOffsetBehind"), int),
            "timer_enqueue_tps": _num(kv.get("timerEnqueueTps"), float),
            "timer_dequeue_tps": _num(kv.get("timerDequeueTps"), float),
            "timer_next_due_ms": _num(kv.get("timerNextDueMs", "-1"), int)}
