"""`mqtool consume`: read messages as a consumer group or from explicit queues."""
from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from mqtool.cli.auth import with_credentials
from mqtool.cli.errors import UsageError, err_console
from mqtool.cli.output import BODY_MODES, check_choice, emit_json, fmt_time, parse_time, render_body
from mqtool.cli.send import NamesrvOpt, TraceOpt, TraceTopicOpt

if TYPE_CHECKING:
    from mqtool.client.consumer import Consumer

TOKENS = {"%t": "topic", "%q": "queue_id", "%o": "queue_offset", "%k": "keys", "%T": "tags", "%b": "body",
          "%i": "msg_id", "%s": "store_time", "%p": "properties"}


def envelope(mq, rec, body_mode: str) -> dict:
    body, _ = render_body(rec.body, body_mode, None)
    return {"topic": rec.topic, "broker": mq.broker_name, "queue_id": rec.queue_id, "queue_offset": rec.queue_offset,
            "msg_id": rec.uniq_key or rec.msg_id, "offset_msg_id": rec.msg_id, "keys": rec.keys, "tags": rec.tags,
            "store_timestamp": rec.store_timestamp, "born_timestamp": rec.born_timestamp,
            "reconsume_times": rec.reconsume_times, "properties": rec.properties, "body": body}


def render(env: dict, fmt: str) -> str:
    out = fmt
    for tok, key in TOKENS.items():
        if key == "store_time":
            val = fmt_time(env["store_timestamp"])
        elif key == "keys":
            val = " ".join(env["keys"])
        elif key == "properties":
            val = json.dumps(env["properties"], ensure_ascii=False)
        else:
            val = env.get(key)
        out = out.replace(tok, "" if val is None else str(val))
    return out.replace("\\t", "\t")


@with_credentials
def consume(
    topic: Annotated[str, typer.Option("-t", "--topic")],
    namesrv: NamesrvOpt = "127.0.0.1:9876",
    group: Annotated[Optional[str], typer.Option("-g", "--group", help="Consume as this group (offsets committed).")] = None,
    broadcast: Annotated[bool, typer.Option("--broadcast", help="Broadcasting mode (with -g).")] = False,
    queue: Annotated[Optional[list[int]], typer.Option("--queue", "-q", help="Explicit queue ids (no group).")] = None,
    start: Annotated[Optional[str], typer.Option("--from", help="beginning|end|OFFSET|-N|@TIME, or earliest|latest "
                                                 "(as beginning|end) (default: beginning; "
                                                 "with -g: the group's committed offsets, and --from moves them)")] = None,
    exit_at_end: Annotated[bool, typer.Option("-e", "--exit-at-end")] = False,
    count: Annotated[int, typer.Option("-c", "--count", min=0)] = 0,
    idle_timeout: Annotated[float, typer.Option("--idle-timeout", min=0, help="Stop after this many idle seconds.")] = 0,
    tag: Annotated[str, typer.Option("--tag", help="Tag expression, e.g. 'TagA || TagB'.")] = "*",
    sql: Annotated[Optional[str], typer.Option("--sql", help="SQL92 filter over message properties, e.g. "
                                               "\"region = 'eu' AND amount > 100\" (the broker needs "
                                               "enablePropertyFilter=true).")] = None,
    fmt: Annotated[Optional[str], typer.Option("--format", help="e.g. '%t %q %o %k %T %b'")] = None,
    body: Annotated[str, typer.Option("--body", help="text, hex or base64")] = "text",
    json_out: Annotated[bool, typer.Option("--json")] = False,
    trace: TraceOpt = False,
    trace_topic: TraceTopicOpt = None,
    pop: Annotated[bool, typer.Option("--pop", help="Consume as a RocketMQ 5 POP group (with -g): the broker hands "
                                      "out messages, hidden for --invisible; un-acked ones come back later.")] = False,
    invisible: Annotated[str, typer.Option("--invisible", help="With --pop: how long a popped message stays hidden "
                                           "before it comes back unless acked (e.g. 30s, 500ms, 2m).")] = "30s",
    no_ack: Annotated[bool, typer.Option("--no-ack", help="With --pop: do not ack (the messages come back).")] = False,
    orderly: Annotated[bool, typer.Option("--orderly", help="With --pop: orderly POP (a queue's next batch waits "
                                          "for the acks of the last).")] = False,
) -> None:
    """Consume messages: a real group (-g), or explicit queues from a start position."""
    import asyncio
    check_choice(body, BODY_MODES[:3], "--body")
    if pop or no_ack or orderly or invisible != "30s":
        _check_pop(pop, group, broadcast, queue, start, sql, trace)
        asyncio.run(_consume_pop(namesrv, topic, group, tag, parse_duration_ms(invisible, "--invisible"), no_ack,
                                 orderly, start, exit_at_end, count, idle_timeout, fmt or "%t %q %o %k %T %b", body,
                                 json_out))
        return
    if group and queue:
        raise UsageError("give either -g GROUP or --queue, not both")
    if broadcast and not group:
        raise UsageError("--broadcast needs -g GROUP")
    if fmt is not None and json_out:
        raise UsageError("give either --format or --json, not both")
    if start is not None:
        start = _check_start(start)
    if trace_topic is not None and not trace:
        raise UsageError("--trace-topic goes with --trace")
    if sql is not None:
        _check_sql(sql, tag)
    asyncio.run(_consume(namesrv, topic, group, broadcast, queue, start, exit_at_end, count, idle_timeout, tag,
                         fmt or "%t %q %o %k %T %b", body, json_out, sql,
                         {"trace": trace, "trace_topic": trace_topic}))


def parse_duration_ms(text: str, option: str) -> int:
    """30s, 500ms, 2m, 1h, or a plain number of milliseconds."""
    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
    t = text.strip().lower()
    for unit in ("ms", "s", "m", "h"):
        if t.endswith(unit) and t[:-len(unit)].replace(".", "", 1).isdigit():
            return int(float(t[:-len(unit)]) * units[unit])
    if t.isdigit():
        return int(t)
    raise UsageError(f"{option} must be a duration such as 30s, 500ms or 2m, not {text!r}")


def _check_pop(pop, group, broadcast, queue, start, sql, trace) -> None:
    if not pop:
        raise UsageError("--invisible, --no-ack and --orderly go with --pop")
    if not group:
        raise UsageError("--pop needs -g GROUP")
    if broadcast or queue or sql is not None or trace:
        raise UsageError("--pop takes none of --broadcast, --queue, --sql, --trace")
    if start is not None and START_ALIASES.get(start, start) not in ("beginning", "end"):
        raise UsageError("with --pop, --from is beginning or end (where a new group starts)")


async def _consume_pop(namesrv, topic, group, tag, invisible_ms, no_ack, orderly, start, exit_at_end, count, idle,
                       fmt, body, json_out) -> None:
    """`--pop`: pop with long polling from every broker, show, ack each answer's messages in one batch."""
    from mqtool.client.popconsumer import INIT_MAX, INIT_MIN, PopConsumer
    init = INIT_MIN if START_ALIASES.get(start, start) == "beginning" else INIT_MAX
    c = PopConsumer(namesrv, group, topic, tag, invisible_ms=invisible_ms, order=orderly, init_mode=init,
                    poll_ms=1000 if exit_at_end else 5000)
    seen, last = 0, time.monotonic()
    try:
        while True:
            got = await c.pop(nums=min(32, count - seen) if count else None)
            if not got:
                if exit_at_end or (idle and time.monotonic() - last >= idle):
                    break
                continue
            last = time.monotonic()
            if count:
                got = got[:count - seen]       # (a broker asked for fewer gives no more)
            for m in got:
                env = envelope(m, m.record, body)
                env["pop_ck"] = m.extra_info
                if json_out:
                    emit_json(env)
                else:
                    print(render(env, fmt), flush=True)
            if not no_ack:
                await c.ack_all(got)
            seen += len(got)
            if count and seen >= count:
                break
    finally:
        await c.close()
    _say_if_none(seen, json_out)


def _one_line(message: str) -> str:
    """A JavaCC ParseException's text on one line: what was met, then the kinds it expected."""
    first, *rest = [line.strip() for line in message.splitlines() if line.strip()]
    if not rest:
        return first
    return f"{first} {rest[0]} {', '.join(k.removesuffix(' ...') for k in rest[1:])}"


def _check_sql(sql: str, tag: str) -> None:
    """Refuse what RocketMQ 4.9.8 would not compile (a broker given it with the pull itself would
    filter nothing), and say where 4.9.8 reads the text otherwise than it looks."""
    from mqtool.common.sql92 import FilterCompileError, compile_sql92
    if tag != "*":
        raise UsageError("give either --tag or --sql, not both")
    try:
        compiled = compile_sql92(sql)
    except FilterCompileError as exc:
        raise UsageError(f"--sql {sql!r}: {_one_line(exc.message)}") from None
    reading = f" is read as {compiled.read_as!r}" if compiled.read_as != sql.strip() else ""
    for note in compiled.quirks:
        err_console.print(f"mqtool: warning: --sql {sql!r}{reading}: {note}", markup=False)


# Spark's and Kafka's words for the two ends
START_ALIASES = {"earliest": "beginning", "latest": "end"}


def _check_start(start: str) -> str:
    """--from, checked; earliest and latest read as beginning and end."""
    start = START_ALIASES.get(start, start)
    if start in ("beginning", "end") or start.lstrip("-").isdigit():
        return start
    if start.startswith("@"):
        parse_time(start[1:])
        return start
    raise UsageError(f"--from must be beginning (or earliest), end (or latest), OFFSET, -N or @TIME, not {start!r}")


async def _position(c: "Consumer", mq, start: str) -> int:
    if start == "beginning":
        return await c.min_offset(mq)
    if start == "end":
        return await c.max_offset(mq)
    if start.startswith("@"):
        return await c.offset_by_time(mq, parse_time(start[1:]))
    n = int(start)
    if n < 0:
        return max(await c.min_offset(mq), await c.max_offset(mq) + n)
    return n


async def _consume(namesrv, topic, group, broadcast, queue_ids, start, exit_at_end, count, idle, tag, fmt, body,
                   json_out, sql=None, tracing=None) -> None:
    import asyncio
    from mqtool.client.consumer import Consumer, GroupConsumer
    seen = 0
    last = time.monotonic()

    def show(mq, rec):
        env = envelope(mq, rec, body)
        if json_out:
            emit_json(env)
        else:
            print(render(env, fmt), flush=True)

    if group:
        c = GroupConsumer(namesrv, group, topic, tag, broadcast, "first", sql=sql, **(tracing or {}))
        if start is not None:
            c.start_at = lambda mq: _position(c, mq, start)      # an explicit --from moves the group's offsets
        try:
            gen = c.messages(500, until_end=exit_at_end)
            while True:
                try:
                    wait = None if not idle else max(0.1, idle - (time.monotonic() - last))
                    async with asyncio.timeout(wait):
                        mq, rec = await gen.__anext__()
                except (TimeoutError, StopAsyncIteration):
                    break
                show(mq, rec)
                c.state.assigned[mq] = rec.queue_offset + 1
                seen += 1
                last = time.monotonic()
                if count and seen >= count:
                    break
        finally:
            await gen.aclose()        # a traced group's last message: its SubAfter
            await c.close()
        _say_if_none(seen, json_out)
        return
    c = Consumer(namesrv, "CID_MQTOOL_CLI", **(tracing or {}))

    def consumed(mq, rec):
        traced = c.tracer.sub_before(c.group, [rec]) if c.tracer is not None else None
        show(mq, rec)
        if traced is not None:
            c.tracer.sub_after(traced, True)      # as 4.9.8's lite pull consumer: consumed once handed over

    async def pull_all():
        nonlocal seen, last
        queues = await c.queues(topic)
        if queue_ids:
            queues = [q for q in queues if q.queue_id in set(queue_ids)]
            if not queues:
                raise UsageError(f"topic {topic} has no queue {queue_ids}")
        positions = {mq: await _position(c, mq, start or "beginning") for mq in queues}
        if sql is not None:
            await c.check_client_config(topic, sql)
        while True:
            progressed = False
            for mq in queues:
                res = await c.pull(mq, positions[mq], 32, sql if sql is not None else tag,
                                   expression_type="SQL92" if sql is not None else "TAG")
                for rec in res.messages:
                    consumed(mq, rec)
                    seen += 1
                    if count and seen >= count:
                        return
                if res.next_offset != positions[mq]:
                    progressed = True
                    last = time.monotonic()
                positions[mq] = res.next_offset
            if not progressed:
                if exit_at_end:
                    return
                if idle and time.monotonic() - last >= idle:
                    return
                await asyncio.sleep(0.2)
    try:
        await pull_all()
    finally:
        await c.close()
    _say_if_none(seen, json_out)


def _say_if_none(seen: int, json_out: bool) -> None:
    """A consume that ended normally without a message says so on stderr (not after an error)."""
    if not json_out and seen == 0:
        err_console.print("mqtool: no messages", markup=False)
