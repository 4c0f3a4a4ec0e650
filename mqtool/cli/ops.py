"""mqadmin's remaining operator commands: consume stats of a broker, consumer status, queue units,
offset cloning, clean-ups, statsAll, topic clusters, write permission, producers, name server config."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from mqtool.cli.admin import JsonOpt, out_rows, run
from mqtool.cli.auth import with_credentials
from mqtool.cli.errors import UsageError, err_console
from mqtool.cli.output import console, emit_json, fmt_time, report_config_change
from mqtool.cli.send import NamesrvOpt

BrokerOpt = Annotated[Optional[str], typer.Option("-b", "--broker", help="Broker address HOST:PORT.")]
ClusterOpt = Annotated[Optional[str], typer.Option("-c", "--cluster", help="Every master of this cluster.")]


async def _call(admin, addr: str, code, ext: dict | None = None, what: str = "request") -> dict:
    from mqtool.client.base import check
    from mqtool_remoting import jsonbody
    from mqtool_remoting.command import RemotingCommand
    resp = check(await admin.invoke(addr, RemotingCommand.request(code, ext or {}, language="JAVA"), 10), what)
    return jsonbody.loads(resp.body) if resp.body else {}


async def _targets(admin, broker: str | None, cluster: str | None) -> dict[str, str]:
    if broker and ":" in broker:
        return {broker: broker}
    if not broker and not cluster:
        raise UsageError("give -b BROKER_ADDR or -c CLUSTER")
    return await admin.masters(cluster, broker)


def _mq_rows(table: dict) -> list[tuple[dict, object]]:
    from mqtool_remoting.jsonbody import ObjectKey
    rows = [(k.as_dict() if isinstance(k, ObjectKey) else {}, v) for k, v in table.items()]
    return sorted(rows, key=lambda r: (r[0].get("topic", ""), r[0].get("brokerName", ""), r[0].get("queueId", 0)))


@with_credentials
def broker_consume_stats(broker: Annotated[str, typer.Option("-b", "--broker", help="Broker address HOST:PORT.")],
                         namesrv: NamesrvOpt = "127.0.0.1:9876",
                         order: Annotated[bool, typer.Option("-o", "--order", help="Order topics only.")] = False,
                         level: Annotated[int, typer.Option("-l", "--level", help="Show queues with at least this lag.")] = 0,
                         json_out: JsonOpt = False) -> None:
    """Every group's consume progress on one broker (mqadmin brokerConsumeStats)."""
    from mqtool_remoting.codes import RequestCode
    body = run(namesrv, lambda a: _call(a, broker, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": order},
                                        "broker consume stats"))
    rows = []
    for entry in body.get("consumeStatsList", []):
        for group, stats in entry.items():
            for s in stats:
                for q, w in _mq_rows(s.get("offsetTable", {})):
                    lag = w["brokerOffset"] - w["consumerOffset"]
                    if lag >= level:
                        rows.append({"topic": q.get("topic"), "group": group, "broker": q.get("brokerName"),
                                     "queue_id": q.get("queueId"), "broker_offset": w["brokerOffset"],
                                     "consumer_offset": w["consumerOffset"], "diff": lag,
                                     "last_time": fmt_time(w.get("lastTimestamp") or None)})
    out_rows(rows, json_out, ["topic", "group", "broker", "queue_id", "broker_offset", "consumer_offset", "diff",
                              "last_time"])
    if not json_out:
        console.print(f"Diff Total: {body.get('totalDiff', 0)}")


@with_credentials
def group_status(group: Annotated[str, typer.Option("-g", "--group")], namesrv: NamesrvOpt = "127.0.0.1:9876",
                 client: Annotated[Optional[str], typer.Option("-i", "--client-id")] = None,
                 json_out: JsonOpt = False) -> None:
    """Each online consumer's running info: subscriptions, queues and positions (mqadmin consumerStatus)."""
    from mqtool_remoting.codes import RequestCode

    async def go(a):
        from mqtool_remoting.codes import ResponseCode
        from mqtool_remoting.errors import RemotingCommandError
        try:
            conns = await a.connections(group)
        except RemotingCommandError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            conns = []                      # said below in one line
        out = []
        for c in conns:
            if client and c["client_id"] != client:
                continue
            addr = (await a.masters()).get(c["broker"]) or c["broker"]
            info = await _call(a, addr, RequestCode.GET_CONSUMER_RUNNING_INFO,
                               {"consumerGroup": group, "clientId": c["client_id"]}, "consumer running info")
            out.append({"client_id": c["client_id"], "info": info})
        return out
    infos = run(namesrv, go)
    if not infos:                       # like message query: nothing found is said, and exits 1
        who = f"consumer {client} of group {group}" if client else f"consumer of group {group}"
        err_console.print(f"mqtool: no {who} is online", markup=False)
        raise typer.Exit(1)
    if json_out:
        for i in infos:
            emit_json({"client_id": i["client_id"], **_plain(i["info"])})
        return
    for i in infos:
        props = i["info"].get("properties", {})
        console.print(f"{i['client_id']}  {props.get('PROP_CLIENT_VERSION', '')}  {props.get('PROP_CONSUME_TYPE', '')}"
                      f"  subscriptions: {', '.join(s['topic'] + ' ' + s['subString'] for s in i['info'].get('subscriptionSet', []))}")
        rows = [{"topic": q.get("topic"), "broker": q.get("brokerName"), "queue_id": q.get("queueId"),
                 "commit_offset": v.get("commitOffset"), "locked": v.get("locked")}
                for q, v in _mq_rows(i["info"].get("mqTable", {}))]
        out_rows(rows, False, ["topic", "broker", "queue_id", "commit_offset", "locked"])


def _plain(obj):
    from mqtool_remoting.jsonbody import ObjectKey
    if isinstance(obj, dict):
        return {(f"{k.as_dict()['topic']}/{k.as_dict()['brokerName']}/{k.as_dict()['queueId']}"
                 if isinstance(k, ObjectKey) else k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


@with_credentials
def message_cq(topic: Annotated[str, typer.Option("-t", "--topic")],
               queue: Annotated[int, typer.Option("-q", "--queue")],
               namesrv: NamesrvOpt = "127.0.0.1:9876",
               broker: Annotated[Optional[str], typer.Option(
                   "-b", "--broker", help="Broker address HOST:PORT or name (default: the broker group of the "
                                          "topic's route that has the queue).")] = None,
               index: Annotated[int, typer.Option("-i", "--index", min=0, help="First queue offset.")] = 0,
               count: Annotated[int, typer.Option("-c", "--count", min=1)] = 10,
               group: Annotated[Optional[str], typer.Option("-g", "--group")] = None,
               json_out: JsonOpt = False) -> None:
    """Consume queue units of one queue on a running broker (mqadmin queryCq)."""
    from mqtool_remoting.codes import RequestCode
    ext = {"topic": topic, "queueId": queue, "index": index, "count": count}
    if group:
        ext["consumerGroup"] = group

    async def go(a):
        addr = broker if broker and ":" in broker else await _queue_broker(a, topic, queue, broker)
        return await _call(a, addr, RequestCode.QUERY_CONSUME_QUEUE, ext, "query consume queue")
    body = run(namesrv, go)
    rows = [{"queue_offset": index + n, "commitlog_offset": u["physicOffset"], "size": u["physicSize"],
             "tags_code": u["tagsCode"]} for n, u in enumerate(body.get("queueData", []))]
    out_rows(rows, json_out, ["queue_offset", "commitlog_offset", "size", "tags_code"])
    if not json_out:
        console.print(f"min {body.get('minQueueIndex')}, max {body.get('maxQueueIndex')}")


async def _queue_broker(admin, topic: str, queue: int, name: str | None) -> str:
    """The address of the broker group holding the topic's queue, from its route (as mqadmin queryCq
    finds it without -b): its master, else a slave. Several groups with that queue need -b NAME."""
    route = await admin.route(topic, refresh=True)
    found = sorted(q["brokerName"] for q in route.queues
                   if queue < max(q.get("readQueueNums", 0), q.get("writeQueueNums", 0))
                   and name in (None, q["brokerName"]))
    if not found:
        raise UsageError(f"topic {topic} has no queue {queue}" + (f" on broker {name}" if name else ""))
    if len(found) > 1:
        raise UsageError(f"topic {topic} has queue {queue} on brokers {', '.join(found)}: pass -b BROKER_NAME")
    addr = route.reader(found[0])
    if addr is None:
        raise UsageError(f"broker {found[0]} of topic {topic} has no address in the route")
    return addr


@with_credentials
def group_clone_offset(src: Annotated[str, typer.Option("-s", "--src-group")],
                       dest: Annotated[str, typer.Option("-d", "--dest-group")],
                       topic: Annotated[str, typer.Option("-t", "--topic")],
                       namesrv: NamesrvOpt = "127.0.0.1:9876",
                       offline: Annotated[bool, typer.Option("-o", "--offline", help="The source group is offline.")] = False,
                       json_out: JsonOpt = False) -> None:
    """Copy one group's committed offsets of a topic to another (mqadmin cloneGroupOffset)."""
    from mqtool_remoting.codes import RequestCode

    async def go(a):
        route = await a.route(topic, refresh=True)
        done = []
        for name in sorted(route.brokers):
            addr = route.master(name)
            if addr:
                await _call(a, addr, RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": src, "destGroup": dest, "topic": topic,
                                                                      "offline": offline}, "clone group offset")
                done.append({"broker": name, "src": src, "dest": dest, "topic": topic})
        return done
    out_rows(run(namesrv, go), json_out, ["broker", "src", "dest", "topic"])


def _clean(code_name: str, what: str):
    @with_credentials
    def command(namesrv: NamesrvOpt = "127.0.0.1:9876", broker: BrokerOpt = None, cluster: ClusterOpt = None,
                json_out: JsonOpt = False) -> None:
        from mqtool_remoting.codes import RequestCode

        async def go(a):
            out = []
            for name, addr in (await _targets(a, broker, cluster)).items():
                await _call(a, addr, RequestCode[code_name], {}, what)
                out.append({"broker": addr, "done": what})
            return out
        out_rows(run(namesrv, go), json_out, ["broker", "done"])
    command.__doc__ = f"Ask brokers to {what} now."
    return command


clean_expired_cq = _clean("CLEAN_EXPIRED_CONSUMEQUEUE", "remove consume queues of deleted messages")
clean_unused_topic = _clean("CLEAN_UNUSED_TOPIC", "remove consume queues of deleted topics")
delete_expired_commitlog = _clean("DELETE_EXPIRED_COMMITLOG", "delete expired commit log files")


@with_credentials
def stats_all(namesrv: NamesrvOpt = "127.0.0.1:9876",
              topic: Annotated[Optional[str], typer.Option("-t", "--topic")] = None,
              active: Annotated[bool, typer.Option("-a", "--active", help="Topics with traffic only.")] = False,
              json_out: JsonOpt = False) -> None:
    """Per topic and consumer group: accumulation, TPS in and out, messages in the last 24 hours (mqadmin statsAll)."""
    from mqtool_remoting.codes import RequestCode
    from mqtool_remoting.command import RemotingCommand
    from mqtool_remoting import jsonbody

    async def stat(a, addr, name, key):
        resp = await a.invoke(addr, RemotingCommand.request(RequestCode.VIEW_BROKER_STATS_DATA,
                                                            {"statsName": name, "statsKey": key}), 5)
        return jsonbody.loads(resp.body) if resp.code == 0 and resp.body else None

    async def go(a):
        if topic:
            await a.route(topic, refresh=True)       # no such topic: TOPIC_NOT_EXIST, as mqadmin statsAll -t
        topics = [topic] if topic else [t for t in await a.topic_list() if not t.startswith(("%RETRY%", "%DLQ%"))]
        masters = await a.masters()
        rows = []
        for t in topics:
            in_tps = in_day = 0.0
            for addr in masters.values():
                s = await stat(a, addr, "TOPIC_PUT_NUMS", t)
                if s:
                    in_tps += s["statsMinute"]["tps"]
                    in_day += s["statsDay"]["sum"]
            groups = set()
            for addr in masters.values():
                groups |= set((await _call(a, addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": t}, "who"))
                              .get("groupList", []))
            if active and not in_day and not groups:
                continue
            for g in sorted(groups) or [""]:
                out_tps = out_day = 0.0
                lag = 0
                if g:
                    for addr in masters.values():
                        s = await stat(a, addr, "GROUP_GET_NUMS", f"{t}@{g}")
                        if s:
                            out_tps += s["statsMinute"]["tps"]
                            out_day += s["statsDay"]["sum"]
                    lag = sum(r["lag"] for r in await a.group_progress(g, t))
                rows.append({"topic": t, "group": g, "accumulation": lag, "in_tps": round(in_tps, 2),
                             "out_tps": round(out_tps, 2), "in_msg_24h": int(in_day), "out_msg_24h": int(out_day)})
        return rows
    out_rows(run(namesrv, go), json_out, ["topic", "group", "accumulation", "in_tps", "out_tps", "in_msg_24h",
                                          "out_msg_24h"])


@with_credentials
def topic_clusters(topic: Annotated[str, typer.Option("-t", "--topic")], namesrv: NamesrvOpt = "127.0.0.1:9876",
                   json_out: JsonOpt = False) -> None:
    """The clusters a topic lives in (mqadmin topicClusterList)."""
    async def go(a):
        route, info = await a.route(topic, refresh=True), await a.cluster_info()
        names = set(route.brokers)
        return [{"cluster": c} for c, brokers in sorted(info.get("clusterAddrTable", {}).items()) if names & set(brokers)]
    out_rows(run(namesrv, go), json_out, ["cluster"])


@with_credentials
def write_perm(action: Annotated[str, typer.Argument(help="wipe or add")],
               broker: Annotated[str, typer.Option("-b", "--broker-name", help="Broker name.")],
               namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """Take away (wipe) or give back (add) a broker's write permission in the name server
    (mqadmin wipeWritePerm / addWritePerm): producers stop (or resume) sending to it."""
    from mqtool_remoting.codes import RequestCode
    from mqtool_remoting.command import RemotingCommand
    from mqtool.client.base import check
    codes = {"wipe": RequestCode.WIPE_WRITE_PERM_OF_BROKER, "add": RequestCode.ADD_WRITE_PERM_OF_BROKER}
    if action not in codes:
        raise UsageError(f"write-perm takes wipe or add, not {action!r}")

    async def go(a):
        out = []
        for addr in a.namesrv_addrs:
            resp = check(await a.invoke(addr, RemotingCommand.request(codes[action], {"brokerName": broker})),
                         f"{action} write permission")
            count = resp.ext_fields.get("wipeTopicCount", resp.ext_fields.get("addTopicCount", "0"))
            out.append({"namesrv": addr, "broker": broker, "action": action, "topics": int(count)})
        return out
    out_rows(run(namesrv, go), json_out, ["namesrv", "broker", "action", "topics"])


@with_credentials
def producer_list(broker: Annotated[str, typer.Option("-b", "--broker", help="Broker address HOST:PORT.")],
                  namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """Every producer connected to a broker, by group (mqadmin producer)."""
    from mqtool_remoting.codes import RequestCode
    body = run(namesrv, lambda a: _call(a, broker, RequestCode.GET_ALL_PRODUCER_INFO, {}, "producer info"))
    rows = [{"group": g, "client_id": p["clientId"], "address": p["remoteIP"], "language": p["language"],
             "version": p["version"], "last_update": fmt_time(p["lastUpdateTimestamp"])}
            for g, ps in sorted(body.get("data", {}).items()) for p in ps]
    out_rows(rows, json_out, ["group", "client_id", "address", "language", "version", "last_update"])


@with_credentials
def namesrv_update_config(settings: Annotated[list[str], typer.Argument(help="key=value pairs")],
                          namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """Change name server settings at run time (mqadmin updateNamesrvConfig)."""
    from mqtool_remoting import javaprops
    from mqtool.client.base import check
    from mqtool_remoting.codes import RequestCode
    from mqtool_remoting.command import RemotingCommand
    props = {}
    for item in settings:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"settings are key=value, not {item!r}")
        props[k.strip()] = v

    async def go(a):
        answers = []
        for addr in a.namesrv_addrs:
            have = await a.namesrv_config(addr)         # its keys: a key it lacks is one it ignores
            resp = check(await a.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG,
                                                                      body=javaprops.dumps(props).encode())),
                         "update name server config")
            answers.append((addr, have, resp.remark or ""))
        return answers
    for addr, have, remark in run(namesrv, go):
        report_config_change("namesrv", addr, props, have, remark, json_out)


def _wire() -> None:
    """Hang the admin and operator commands on their groups (done once, when ops is imported)."""
    from mqtool.cli import admin
    from mqtool.cli import broker as broker_cli
    from mqtool.cli import localcluster
    from mqtool.cli import namesrv as namesrv_cli
    from mqtool.cli import trace as trace_cli
    b, n = broker_cli.app, namesrv_cli.app
    b.add_typer(admin.broker_admin_app, name="admin", hidden=True)
    b.command("status")(admin.broker_status)
    b.add_typer(admin.broker_config_app, name="config")
    b.command("consume-stats")(broker_consume_stats)
    b.command("clean-expired-cq")(clean_expired_cq)
    b.command("clean-unused-topic")(clean_unused_topic)
    b.command("delete-expired-commitlog")(delete_expired_commitlog)
    n.add_typer(admin.namesrv_admin_app, name="admin", hidden=True)
    n.command("config")(admin.namesrv_config)
    n.command("kv")(admin.namesrv_kv)
    n.command("write-perm")(write_perm)
    n.command("update-config")(namesrv_update_config)
    admin.group_app.command("status")(group_status)
    admin.group_app.command("clone-offset")(group_clone_offset)
    admin.message_app.command("cq")(message_cq)
    admin.message_app.command("trace")(trace_cli.message_trace)
    admin.topic_app.command("clusters")(topic_clusters)
    admin.cluster_app.command("stats")(stats_all)
    admin.cluster_app.command("start")(localcluster.cluster_start)
    admin.cluster_app.command("status")(localcluster.cluster_status)
    admin.cluster_app.command("stop")(localcluster.cluster_stop)
    admin.producer_app.command("list")(producer_list)


_wire()
