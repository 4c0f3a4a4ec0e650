"""mqadmin-style administration: topic, cluster, broker, group, message. Table by default, --json everywhere."""
from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.auth import with_credentials
from mqtool.cli.errors import UsageError, err_console
from mqtool.cli.output import console, emit_json, fmt_time, parse_time, report_config_change, table
from mqtool.cli.send import NamesrvOpt

JsonOpt = Annotated[bool, typer.Option("--json")]
WatchOpt = Annotated[Optional[float], typer.Option("--watch", min=0.2, help="Refresh every SECONDS until Ctrl-C.")]
topic_app = typer.Typer(help="Create, delete, list and inspect topics.", no_args_is_help=True)
cluster_app = typer.Typer(help="Clusters and their brokers.", no_args_is_help=True)
broker_admin_app = typer.Typer(help="Broker status.", no_args_is_help=True)
group_app = typer.Typer(help="Consumer groups: progress and lag.", no_args_is_help=True)
message_app = typer.Typer(help="Find messages by key or id; a message's trace.", no_args_is_help=True)


def run(namesrv: str, fn):
    import asyncio

    from mqtool.client.admin import Admin

    async def go():
        admin = Admin(namesrv)
        try:
            return await fn(admin)
        finally:
            await admin.close()
    return asyncio.run(go())


def watch_rows(namesrv: str, fetch, seconds: float, json_out: bool, columns: list[str], summary) -> None:
    """Fetch and redraw every `seconds` until Ctrl-C: a table in place, or with --json one line per
    refresh ({"time": ms, "rows": [...]})."""
    import asyncio
    import time

    from mqtool.client.admin import Admin

    async def go():
        from rich.console import Group

        from mqtool.cli.watching import every, frames
        admin = Admin(namesrv)
        try:
            if json_out:
                async def line():
                    emit_json({"time": int(time.time() * 1000), "rows": await fetch(admin)})
                    sys.stdout.flush()
                await every(seconds, line)
                return
            with frames(console) as show:
                async def redraw():
                    rows = await fetch(admin)
                    t = table(*columns, title=f"every {seconds:g}s, {fmt_time(int(time.time() * 1000))}")
                    for r in rows:
                        t.add_row(*(str(r.get(c, "")) for c in columns))
                    show(Group(t, summary(rows)))
                await every(seconds, redraw)
        finally:
            await admin.close()
    try:
        asyncio.run(go())
    except KeyboardInterrupt:      # a Ctrl-C before the watch started
        return


def out_rows(rows: list[dict], json_out: bool, columns: list[str], title: str | None = None) -> None:
    if json_out:
        for r in rows:
            emit_json(r)
        return
    t = table(*columns, title=title)
    for r in rows:
        t.add_row(*(str(r.get(c, "")) for c in columns))
    console.print(t)


class MessageType(str, Enum):
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


@topic_app.command("create")
@with_credentials
def topic_create(topic: Annotated[str, typer.Option("-t", "--topic")], namesrv: NamesrvOpt = "127.0.0.1:9876",
                 read: Annotated[Optional[int], typer.Option("-r", "--read-queues", min=1,
                                                             help="Default: kept, 8 for a new topic.")] = None,
                 write: Annotated[Optional[int], typer.Option("-w", "--write-queues", min=1,
                                                              help="Default: kept, 8 for a new topic.")] = None,
                 perm: Annotated[Optional[int], typer.Option("-p", "--perm", min=0, max=15,
                                                             help="Default: kept, 6 for a new topic.")] = None,
                 order: Annotated[Optional[bool], typer.Option("--order/--no-order", "-o",
                                                               help="Ordered topic (also written to the name "
                                                                    "server's ORDER_TOPIC_CONFIG).")] = None,
                 cluster: Annotated[Optional[str], typer.Option("-c", "--cluster")] = None,
                 broker: Annotated[Optional[str], typer.Option("-b", "--broker", help="Broker name or address.")] = None,
                 message_type: Annotated[Optional[MessageType], typer.Option(
                     "--message-type", case_sensitive=False,
                     help="RocketMQ 5's topic attribute message.type: the only kind of message its gRPC "
                          "clients may send to it.")] = None,
                 attributes: Annotated[Optional[str], typer.Option(
                     "-a", "--attributes", help="5.x topic attributes as mqadmin writes them: +message.type=FIFO "
                                                "(',' between several, -KEY removes one).")] = None,
                 json_out: JsonOpt = False) -> None:
    """Create or update a topic on every master of a cluster (or one broker). What is not given keeps
    the topic's current value (mqadmin's updateTopic resets it to 8 queues, perm 6)."""
    attrs = ",".join(a for a in (attributes, message_type and f"+message.type={message_type.value}") if a) or None
    done = run(namesrv, lambda a: a.create_topic(topic, read, write, perm, order, cluster, broker, attrs))
    rows = [{"topic": topic, "broker": d["broker"], "read": d["readQueueNums"], "write": d["writeQueueNums"],
             "perm": d["perm"], "order": d["order"]} for d in done]
    columns = ["topic", "broker", "read", "write", "perm", "order"]
    if attrs:
        columns.append("attributes")
        for row in rows:
            row["attributes"] = attrs
    out_rows(rows, json_out, columns)


topic_app.command("update", help="Update a topic's queue numbers, permission or order flag (the same request as "
                                 "create); what is not given is kept.")(topic_create)


@topic_app.command("delete")
@with_credentials
def topic_delete(topic: Annotated[str, typer.Option("-t", "--topic")], namesrv: NamesrvOpt = "127.0.0.1:9876",
                 cluster: Annotated[Optional[str], typer.Option("-c", "--cluster")] = None,
                 json_out: JsonOpt = False) -> None:
    """Delete a topic from the brokers and the name server; `deleted` says which brokers had it."""
    had = run(namesrv, lambda a: a.delete_topic(topic, cluster))
    if not any(had.values()):       # the name server's route (if any) is gone all the same
        err_console.print(f"mqtool: no broker{' of cluster ' + cluster if cluster else ''} has topic {topic}",
                          markup=False)
        raise typer.Exit(1)
    out_rows([{"topic": topic, "broker": b, "deleted": d} for b, d in had.items()], json_out,
             ["topic", "broker", "deleted"])


@topic_app.command("list")
@with_credentials
def topic_list(namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """Every topic the name server knows."""
    out_rows([{"topic": t} for t in run(namesrv, lambda a: a.topic_list())], json_out, ["topic"])


@topic_app.command("route")
@with_credentials
def topic_route(topic: Annotated[str, typer.Option("-t", "--topic")], namesrv: NamesrvOpt = "127.0.0.1:9876",
                json_out: JsonOpt = False) -> None:
    """The topic's route: brokers and queue numbers."""
    route = run(namesrv, lambda a: a.topic_route(topic))
    if json_out:
        emit_json(route)
        return
    out_rows([dict(q) for q in route["queueDatas"]], False, ["brokerName", "readQueueNums", "writeQueueNums", "perm"])
    for b in route["brokerDatas"]:
        console.print(f"{b['brokerName']}: " + ", ".join(f"{k}={v}" for k, v in b["brokerAddrs"].items()))


@topic_app.command("status")
@with_credentials
def topic_status(topic: Annotated[str, typer.Option("-t", "--topic")], namesrv: NamesrvOpt = "127.0.0.1:9876",
                 json_out: JsonOpt = False, watch: WatchOpt = None) -> None:
    """Min and max offset of every queue of the topic."""
    columns = ["broker", "queue_id", "min_offset", "max_offset", "last_update_time"]

    async def rows(a):
        out = await a.topic_status(topic)
        for r in out:
            r["last_update_time"] = fmt_time(r["last_update"]) if r["last_update"] else "-"
        return out
    if watch:
        watch_rows(namesrv, rows, watch, json_out, columns, lambda rs: f"Max offset total: {sum(r['max_offset'] for r in rs)}")
        return
    out_rows(run(namesrv, rows), json_out, columns)


@cluster_app.command("list")
@with_credentials
def cluster_list(namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """Clusters and their brokers with version, throughput, page-cache wait, hours of messages and disk
    use (mqadmin clusterList's columns, from each broker's runtime info)."""
    rows = run(namesrv, lambda a: a.cluster_rows())
    if json_out:
        for r in rows:
            emit_json(r)
        return
    t = table("cluster", "broker", "BID", "address", "version", "InTPS(LOAD)", "OutTPS(LOAD)", "PCWait(ms)", "Hour",
              "SPACE")
    for r in rows:
        if not r["reachable"]:
            t.add_row(r["cluster"], r["broker"], str(r["broker_id"]), r["address"], "unreachable", "", "", "", "", "")
            continue
        t.add_row(r["cluster"], r["broker"], str(r["broker_id"]), r["address"], r["version"],
                  f"{r['in_tps']:.2f}({r['send_queue']},{r['send_wait_ms']}ms)",
                  f"{r['out_tps']:.2f}({r['pull_queue']},{r['pull_wait_ms']}ms)", str(r["page_cache_wait_ms"]),
                  f"{r['hours']:.2f}", f"{r['space']:.4f}")
    console.print(t)


@broker_admin_app.command("status")
@with_credentials
def broker_status(broker: Annotated[str, typer.Option("-b", "--broker", help="Broker address HOST:PORT.")],
                  namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """The broker's runtime info (GET_BROKER_RUNTIME_INFO)."""
    table_ = run(namesrv, lambda a: a.broker_runtime(broker))
    if json_out:
        emit_json(table_)
        return
    out_rows([{"key": k, "value": v} for k, v in sorted(table_.items())], False, ["key", "value"])


@group_app.command("progress")
@with_credentials
def group_progress(group: Annotated[str, typer.Option("-g", "--group")], namesrv: NamesrvOpt = "127.0.0.1:9876",
                   topic: Annotated[Optional[str], typer.Option("-t", "--topic")] = None,
                   json_out: JsonOpt = False, watch: WatchOpt = None) -> None:
    """Per queue: broker offset, consumer offset and lag (mqadmin consumerProgress)."""
    columns = ["topic", "broker", "queue_id", "broker_offset", "consumer_offset", "lag"]
    if watch:
        watch_rows(namesrv, lambda a: a.group_progress(group, topic), watch, json_out, columns,
                   lambda rs: f"Diff Total: {sum(r['lag'] for r in rs)}")
        return
    rows = run(namesrv, lambda a: a.group_progress(group, topic))
    if not rows:          # mqadmin: "Not found the consumer group consume stats, because return offset table is empty"
        on = f" on topic {topic}" if topic else ""
        err_console.print(f"mqtool: no consume progress for group {group}{on}: it has committed no offset "
                          "(it never consumed, or there is no such group)", markup=False)
        raise typer.Exit(1)
    out_rows(rows, json_out, columns)
    if not json_out:
        console.print(f"Diff Total: {sum(r['lag'] for r in rows)}")


@message_app.command("query")
@with_credentials
def message_query(namesrv: NamesrvOpt = "127.0.0.1:9876",
                  topic: Annotated[Optional[str], typer.Option("-t", "--topic")] = None,
                  key: Annotated[Optional[str], typer.Option("-k", "--key")] = None,
                  unique_key: Annotated[Optional[str], typer.Option("-u", "--unique-key")] = None,
                  msg_id: Annotated[Optional[str], typer.Option(
                      "-i", "--id", "--msgId", help="A message id: an offset id, or the unique key (UNIQ_KEY) a "
                      "producer prints (needs -t).")] = None,
                  begin: Annotated[Optional[str], typer.Option("--begin")] = None,
                  end: Annotated[Optional[str], typer.Option("--end")] = None,
                  save_body: Annotated[Optional[Path], typer.Option(
                      "--save-body", help="Write each body to DIR/<msgId> (mqadmin: /tmp/rocketmq/msgbodys).",
                      metavar="DIR")] = None,
                  json_out: JsonOpt = False) -> None:
    """Find messages by key, unique key (UNIQ_KEY), or message id (mqadmin queryMsgById: an offset id is
    read at the broker it names, a unique key is looked up through the index of its topic). A message
    found by id or unique key is shown in full: every field, and the body."""
    from mqtool.client.admin import QUERY_CAP
    if sum(x is not None for x in (key, unique_key, msg_id)) != 1:
        raise UsageError("give exactly one of --key, --unique-key, --id")
    if save_body is not None and key is not None:
        raise UsageError("--save-body applies to --id and --unique-key lookups")
    if msg_id:
        from mqtool_store.msgid import is_message_id, offset_id_fields
        if not is_message_id(msg_id):
            raise UsageError(f"{msg_id} is not a message id (an offset id or a unique key: 32 or 56 hex digits); "
                             "a key of another form: --unique-key with -t")
        unused = [n for n, v in (("--begin", begin), ("--end", end)) if v is not None]
        if unused:
            raise UsageError(f"{', '.join(unused)} {'applies' if len(unused) == 1 else 'apply'} to --key and "
                             "--unique-key lookups only")
        if topic is None and offset_id_fields(msg_id) is None:
            raise UsageError(f"message id {msg_id} is not an offset id; as a unique key (UNIQ_KEY) it is found "
                             "through the index of its topic: give -t TOPIC")
        found, capped = run(namesrv, lambda a: a.message_by_id(msg_id, topic)), False
    else:
        if not topic:
            raise UsageError("--key and --unique-key need --topic")
        found, capped = run(namesrv, lambda a: a.query_by_key(topic, key or unique_key, QUERY_CAP,
                                                              parse_time(begin) or 0, parse_time(end) or 2**62,
                                                              unique=unique_key is not None))
    if not found:                       # like grep: nothing found is said, and exits 1
        what = f"unique key {unique_key or msg_id}" if unique_key or msg_id else f"key {key}"
        err_console.print(f"mqtool: no message found for {what} in topic {topic}", markup=False)
        raise typer.Exit(1)
    if key is None:
        _show_messages(found, save_body, json_out)
        return
    rows = [{"broker": b, "topic": r.topic, "queue_id": r.queue_id, "queue_offset": r.queue_offset,
             "msg_id": r.uniq_key or r.msg_id, "keys": " ".join(r.keys), "tags": r.tags or "",
             "store_time": fmt_time(r.store_timestamp), "body": r.body.decode("utf-8", "replace")} for b, r in found]
    out_rows(rows, json_out, ["broker", "topic", "queue_id", "queue_offset", "msg_id", "keys", "tags", "store_time"])
    if capped:
        err_console.print(f"mqtool: note: a broker returned its cap of {QUERY_CAP} messages; narrow the query with "
                          "--begin/--end", markup=False)


def _show_messages(found: list, save_body: Path | None, json_out: bool) -> None:
    """Messages found by id or unique key, each in full (mqadmin printMsg)."""
    from mqtool.cli.msgdetail import message_fields, print_detail
    from mqtool.cli.msgdetail import save_body as write_body
    for n, (broker, rec) in enumerate(found):
        fields, body = message_fields(broker, rec)
        path = write_body(fields["msg_id"], body, save_body) if save_body is not None else None
        if json_out:
            emit_json(fields | ({"body_path": str(path)} if path else {}))
            continue
        if n:
            console.print()
        print_detail(fields, path)


producer_app = typer.Typer(help="Producer groups.", no_args_is_help=True)
namesrv_admin_app = typer.Typer(help="Name server config and KV config.", no_args_is_help=True)
broker_config_app = typer.Typer(help="Broker config get/set.", no_args_is_help=True)


@topic_app.command("perm")
@with_credentials
def topic_perm(topic: Annotated[str, typer.Option("-t", "--topic")],
               perm: Annotated[int, typer.Option("-p", "--perm", min=0, max=15, help="2 write, 4 read, 6 read+write.")],
               namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """Change a topic's permission on every broker that serves it, keeping its queue numbers."""
    async def go(a):
        route = await a.topic_route(topic)
        done = []
        for q in route["queueDatas"]:
            await a.create_topic(topic, q["readQueueNums"], q["writeQueueNums"], perm, broker=q["brokerName"])
            done.append({"topic": topic, "broker": q["brokerName"], "perm": perm})
        return done
    out_rows(run(namesrv, go), json_out, ["topic", "broker", "perm"])


@group_app.command("create")
@with_credentials
def group_create(group: Annotated[str, typer.Option("-g", "--group")], namesrv: NamesrvOpt = "127.0.0.1:9876",
                 retry_max_times: Annotated[Optional[int], typer.Option("--retry-max-times", "-r", min=0,
                                                                        help="Default: kept, 16 for a new group.")] = None,
                 retry_queue_nums: Annotated[Optional[int], typer.Option("--retry-queue-nums", "-q", min=0,
                                                                         help="Default: kept, 1 for a new group.")] = None,
                 consume_enable: Annotated[Optional[bool], typer.Option("--consume-enable/--consume-disable",
                                                                        help="Default: kept, enabled for a new group.")] = None,
                 broadcast_enable: Annotated[Optional[bool], typer.Option(
                     "--broadcast-enable/--broadcast-disable", help="consumeBroadcastEnable. Default: kept, enabled "
                                                                    "for a new group.")] = None,
                 orderly: Annotated[Optional[bool], typer.Option(
                     "--orderly/--not-orderly", help="consumeMessageOrderly (5.x): POP and gRPC consumers of the "
                                                     "group get FIFO order. Default: kept, off for a new group.")] = None,
                 cluster: Annotated[Optional[str], typer.Option("-c", "--cluster")] = None,
                 broker: Annotated[Optional[str], typer.Option("-b", "--broker")] = None,
                 json_out: JsonOpt = False) -> None:
    """Create or update a subscription group (mqadmin updateSubGroup); what is not given keeps the group's
    current value (mqadmin resets it to the defaults)."""
    done = run(namesrv, lambda a: a.group_update(group, retry_max_times, retry_queue_nums, consume_enable,
                                                  broadcast_enable, cluster, broker, orderly))
    out_rows([{"group": group, "broker": d["broker"], "retry_max_times": d["retryMaxTimes"],
               "retry_queue_nums": d["retryQueueNums"], "consume_enable": d["consumeEnable"],
               "broadcast_enable": d["consumeBroadcastEnable"], "orderly": bool(d.get("consumeMessageOrderly"))}
              for d in done], json_out,
             ["group", "broker", "retry_max_times", "retry_queue_nums", "consume_enable", "broadcast_enable",
              "orderly"])


group_app.command("update")(group_create)


class ConsumeMode(str, Enum):
    PULL = "PULL"
    POP = "POP"


@group_app.command("set-consume-mode")
@with_credentials
def group_set_consume_mode(group: Annotated[str, typer.Option("-g", "--group")],
                           topic: Annotated[str, typer.Option("-t", "--topic")],
                           mode: Annotated[ConsumeMode, typer.Option("-m", "--mode", case_sensitive=False,
                                                                     help="PULL or POP.")],
                           pop_share_queue_num: Annotated[int, typer.Option(
                               "-q", "--pop-share-queue-num",
                               help="POP: each client also pops the queues of the N clients after it; 0 (or N >= "
                                    "clients - 1): every client pops every queue.")] = 0,
                           namesrv: NamesrvOpt = "127.0.0.1:9876",
                           cluster: Annotated[Optional[str], typer.Option("-c", "--cluster")] = None,
                           broker: Annotated[Optional[str], typer.Option("-b", "--broker",
                                                                         help="Broker name or address.")] = None,
                           json_out: JsonOpt = False) -> None:
    """RocketMQ 5: whether the group's clients pull or pop the topic, as the brokers answer their
    QUERY_ASSIGNMENT (mqadmin setConsumeMode), on every master of a cluster (or one broker, or all)."""
    done = run(namesrv, lambda a: a.set_consume_mode(group, topic, mode.value, pop_share_queue_num, cluster, broker))
    out_rows([{"group": group, "topic": topic, "broker": d["broker"], "mode": d["mode"],
               "pop_share_queue_num": d["popShareQueueNum"]} for d in done], json_out,
             ["group", "topic", "broker", "mode", "pop_share_queue_num"])


@group_app.command("delete")
@with_credentials
def group_delete(group: Annotated[str, typer.Option("-g", "--group")], namesrv: NamesrvOpt = "127.0.0.1:9876",
                 keep_offsets: Annotated[bool, typer.Option("--keep-offsets")] = False,
                 json_out: JsonOpt = False) -> None:
    """Delete a subscription group (and its committed offsets unless --keep-offsets); `deleted` says
    which brokers had it."""
    had = run(namesrv, lambda a: a.group_delete(group, not keep_offsets))
    if not any(had.values()):
        err_console.print(f"mqtool: no broker has subscription group {group}", markup=False)
        raise typer.Exit(1)
    out_rows([{"group": group, "broker": b, "deleted": d} for b, d in had.items()], json_out,
             ["group", "broker", "deleted"])


@group_app.command("list")
@with_credentials
def group_list(namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """Every subscription group on every master."""
    rows = [{"group": g["groupName"], "brokers": ",".join(g["brokers"]), "retry_max_times": g.get("retryMaxTimes"),
             "consume_enable": g.get("consumeEnable")} for g in run(namesrv, lambda a: a.group_list())]
    out_rows(rows, json_out, ["group", "brokers", "retry_max_times", "consume_enable"])


@group_app.command("connections")
@with_credentials
def group_connections(group: Annotated[str, typer.Option("-g", "--group")], namesrv: NamesrvOpt = "127.0.0.1:9876",
                      json_out: JsonOpt = False) -> None:
    """The group's online consumers (mqadmin consumerConnection)."""
    out_rows(run(namesrv, lambda a: a.connections(group)), json_out,
             ["broker", "client_id", "address", "language", "version"])


@group_app.command("reset-offset")
@with_credentials
def group_reset_offset(group: Annotated[str, typer.Option("-g", "--group")],
                       topic: Annotated[str, typer.Option("-t", "--topic")],
                       to_time: Annotated[str, typer.Option("--to-time", help="Epoch ms or ISO time.")],
                       namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """Move the group's offsets to the first message stored at or after a time (mqadmin resetOffsetByTime):
    online consumers are told by their broker and continue from there; `pushed` says which were."""
    ts = parse_time(to_time)
    out_rows(run(namesrv, lambda a: a.reset_offset_by_time(group, topic, ts)), json_out,
             ["topic", "broker", "queue_id", "offset", "pushed"])


@producer_app.command("connections")
@with_credentials
def producer_connections(group: Annotated[str, typer.Option("-g", "--group")],
                         namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """The producer group's connected producers."""
    out_rows(run(namesrv, lambda a: a.connections(group, producer=True)), json_out,
             ["broker", "client_id", "address", "language", "version", "version_name"])


@broker_config_app.command("get")
@with_credentials
def broker_config_get(broker: Annotated[str, typer.Option("-b", "--broker", help="Broker address.")],
                      namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """The broker's configuration (RocketMQ property names)."""
    props = run(namesrv, lambda a: a.broker_config(broker))
    if json_out:
        emit_json(props)
        return
    out_rows([{"key": k, "value": v} for k, v in sorted(props.items())], False, ["key", "value"])


@broker_config_app.command("set")
@with_credentials
def broker_config_set(broker: Annotated[str, typer.Option("-b", "--broker")],
                      pairs: Annotated[list[str], typer.Argument(help="key=value ...")],
                      namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """Change broker settings at run time (UPDATE_BROKER_CONFIG)."""
    props = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise UsageError(f"settings must be key=value, not {p!r}")
        props[k] = v

    async def go(a):
        have = await a.broker_config(broker)      # its keys: a key it lacks is one it ignores
        return have, await a.set_broker_config(broker, props)
    have, remark = run(namesrv, go)
    report_config_change("broker", broker, props, have, remark, json_out)


@namesrv_admin_app.command("config")
@with_credentials
def namesrv_config(namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """The name server's configuration."""
    props = run(namesrv, lambda a: a.namesrv_config())
    if json_out:
        emit_json(props)
        return
    out_rows([{"key": k, "value": v} for k, v in sorted(props.items())], False, ["key", "value"])


@namesrv_admin_app.command("kv")
@with_credentials
def namesrv_kv(action: Annotated[str, typer.Argument(help="put, get, delete or list")],
               namespace: Annotated[str, typer.Option("-s", "--namespace")],
               key: Annotated[Optional[str], typer.Option("-k", "--key")] = None,
               value: Annotated[Optional[str], typer.Option("-v", "--value")] = None,
               namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """KV config on the name server (e.g. ORDER_TOPIC_CONFIG)."""
    if action not in ("put", "get", "delete", "list"):
        raise UsageError("action must be put, get, delete or list")
    if action in ("put", "get", "delete") and not key:
        raise UsageError(f"kv {action} needs --key")
    if action == "put" and value is None:
        raise UsageError("kv put needs --value")
    if action != "put" and value is not None:
        raise UsageError(f"kv {action} does not take --value")
    if action == "list" and key is not None:
        raise UsageError("kv list does not take --key (it lists the whole namespace)")
    table_ = run(namesrv, lambda a: a.kv(action, namespace, key, value))
    if json_out:
        emit_json(table_)
    elif action in ("get", "list"):
        out_rows([{"key": k, "value": v} for k, v in table_.items()], False, ["key", "value"])
    else:
        console.print(f"{action} {namespace}/{key}: done")


@message_app.command("print")
@with_credentials
def message_print(topic: Annotated[str, typer.Option("-t", "--topic")],
                  queue: Annotated[int, typer.Option("-q", "--queue")],
                  begin: Annotated[int, typer.Option("--begin-offset", min=0)] = 0,
                  end: Annotated[Optional[int], typer.Option("--end-offset", min=0, help="Exclusive.")] = None,
                  broker: Annotated[Optional[str], typer.Option(
                      "-b", "--broker", help="Broker name: needed when several brokers have the queue.")] = None,
                  namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """Messages of one queue by queue-offset range (mqadmin printMsgByQueue)."""
    import asyncio
    from mqtool.client.consumer import Consumer

    async def go():
        c = Consumer(namesrv, "CID_MQTOOL_PRINT")
        try:
            found = [q for q in await c.queues(topic) if q.queue_id == queue and broker in (None, q.broker_name)]
            if not found:
                on = f" on broker {broker}" if broker else ""
                raise UsageError(f"topic {topic} has no queue {queue}{on}")
            if len(found) > 1:
                raise UsageError(f"topic {topic} has queue {queue} on brokers {', '.join(q.broker_name for q in found)}:"
                                 " pass -b BROKER_NAME")
            mq = found[0]
            stop = end if end is not None else await c.max_offset(mq)
            rows, off = [], begin
            while off < stop:
                res = await c.pull(mq, off, 32)
                for rec in res.messages:
                    if rec.queue_offset < stop:
                        rows.append({"queue_offset": rec.queue_offset, "msg_id": rec.uniq_key or rec.msg_id,
                                     "keys": " ".join(rec.keys), "tags": rec.tags or "",
                                     "store_time": fmt_time(rec.store_timestamp),
                                     "body": rec.body.decode("utf-8", "replace")})
                if res.next_offset <= off:
                    break
                off = res.next_offset
            return rows
        finally:
            await c.close()
    out_rows(asyncio.run(go()), json_out, ["queue_offset", "msg_id", "keys", "tags", "store_time", "body"])
