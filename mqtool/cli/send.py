"""`mqtool send`: produce messages from an argument, stdin lines, or files."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.auth import with_credentials
from mqtool.cli.errors import UsageError, err_console
from mqtool.cli.output import console, emit_json, table
from mqtool.cli.output import count as count_of  # `count` is --count here

NamesrvOpt = Annotated[str, typer.Option("-n", "--namesrv-addr", envvar="NAMESRV_ADDR",
                                         help="Name servers, ';'-separated (or NAMESRV_ADDR).")]
TraceOpt = Annotated[bool, typer.Option("--trace", help="Write message trace records (as Java's enableMsgTrace); "
                                        "read them with `mqtool message trace`.")]
TraceTopicOpt = Annotated[Optional[str], typer.Option("--trace-topic", help="With --trace: the trace topic "
                                                      "(default RMQ_SYS_TRACE_TOPIC).")]
VipOpt = Annotated[bool, typer.Option("--vip-channel", help="Send to each broker's fast port, listenPort - 2 (as "
                                      "Java's sendMessageWithVIPChannel); heartbeats stay on the main port.")]


@with_credentials
def send(
    topic: Annotated[str, typer.Option("-t", "--topic")],
    body: Annotated[Optional[str], typer.Argument(help="Message body; omit to read stdin.")] = None,
    namesrv: NamesrvOpt = "127.0.0.1:9876",
    files: Annotated[Optional[list[Path]], typer.Option("--file", "-f", help="One message per file.")] = None,
    delimiter: Annotated[str, typer.Option("--delimiter", help="Stdin message separator.")] = "\n",
    keys: Annotated[Optional[str], typer.Option("--keys", "-k", help="Space-separated keys.")] = None,
    tags: Annotated[Optional[str], typer.Option("--tags")] = None,
    prop: Annotated[Optional[list[str]], typer.Option("--property", "-p", help="k=v, repeatable.")] = None,
    queue: Annotated[Optional[str], typer.Option("--queue", "-q", help="Queue id N, or BROKER_NAME:N when "
                                                                      "several brokers have queue N.")] = None,
    sharding_key: Annotated[Optional[str], typer.Option("--sharding-key", help="Orderly: same key, same queue.")] = None,
    delay_level: Annotated[int, typer.Option("--delay-level", min=0)] = 0,
    deliver_at: Annotated[Optional[str], typer.Option("--deliver-at", help="Timer message (5.x): deliver at this "
                                                      "time (epoch ms or ISO 8601).")] = None,
    delay: Annotated[Optional[str], typer.Option("--delay", help="Timer message (5.x): deliver after this long "
                                                 "(e.g. 1500ms, 30s, 5m, 2h).")] = None,
    batch: Annotated[int, typer.Option("--batch", min=0, help="Send in batches of N.")] = 0,
    oneway: Annotated[bool, typer.Option("--oneway")] = False,
    group: Annotated[str, typer.Option("--group", "-g", help="Producer group.")] = "PID_MQTOOL",
    trace: TraceOpt = False,
    trace_topic: TraceTopicOpt = None,
    vip: VipOpt = False,
    count: Annotated[int, typer.Option("--count", min=0, help="Bench mode: messages to send (0: not bench mode).")] = 0,
    size: Annotated[int, typer.Option("--size", min=1, help="Bench mode: body bytes.")] = 128,
    threads: Annotated[int, typer.Option("--threads", min=1, help="Bench mode: concurrent senders.")] = 1,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Send messages; one result line per message (status, msgId, broker, queue, queue offset)."""
    import asyncio
    from mqtool.client.producer import OutMessage
    queue = _queue(topic, queue)
    if trace_topic is not None and not trace:
        raise UsageError("--trace-topic goes with --trace")
    producer_opts = {"trace": trace, "trace_topic": trace_topic, "vip_channel": vip}
    deliver_ms, delay_ms = timer_options(deliver_at, delay, delay_level, batch)
    properties = {}
    for p in prop or []:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise UsageError(f"--property must be k=v, not {p!r}")
        properties[k] = v
    if count:
        unused = [name for name, given in (("a body", body is not None), ("--file", bool(files)),
                                            ("--sharding-key", sharding_key), ("--delay-level", delay_level),
                                            ("--deliver-at", deliver_at), ("--delay", delay),
                                            ("--oneway", oneway)) if given]
        if unused:
            raise UsageError(f"--count (bench mode) sends generated bodies and does not take {', '.join(unused)}")
        template = OutMessage(topic, b"x" * size, keys.split() if keys else [], tags, properties)
        asyncio.run(_bench(namesrv, group, template, count, threads, json_out, batch, queue, producer_opts))
        return
    if files:
        for f in files:
            if not f.is_file():
                raise UsageError(f"{f}: no such file")
        bodies = [f.read_bytes() for f in files]
    elif body is not None:
        bodies = [body.encode()]
    else:                       # stdin: each message sent as it arrives (sendstream.py)
        if not delimiter:
            raise UsageError("--delimiter must not be empty")
        bodies = None

    def make(b: bytes) -> OutMessage:
        return OutMessage(topic, b, keys.split() if keys else [], tags, properties, delay_level,
                          deliver_time_ms=deliver_ms, delay_time_ms=delay_ms)
    results: list[dict] = []

    def each(r: dict) -> None:          # --json: a line per message as it is answered; else one table at the end
        if json_out:
            emit_json(r)
            sys.stdout.flush()
        else:
            results.append(r)
    try:
        if bodies is None:
            asyncio.run(_send_stdin(namesrv, group, topic, make, delimiter.encode(), queue, sharding_key, oneway,
                                    batch, each, producer_opts))
        else:
            for r in asyncio.run(_send(namesrv, group, [make(b) for b in bodies], queue, sharding_key, oneway, batch,
                                       producer_opts)):
                each(r)
    except BaseException:
        if results:             # what was sent before a failure is said too
            _print_results(results)
        raise
    if not json_out:
        _print_results(results)


def _print_results(results: list[dict]) -> None:
    t = table("status", "msgId", "broker", "queue", "queue offset")
    for r in results:
        t.add_row(r["status"], r["msg_id"], r["broker"], str(r["queue_id"]), str(r["queue_offset"]))
    console.print(t)
    for r in results:
        if r.get("recall_handle"):
            console.print(f"recall handle of {r['msg_id']}: {r['recall_handle']}")


_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def timer_options(deliver_at: str | None, delay: str | None, delay_level: int, batch: int) -> tuple[int, int]:
    """--deliver-at / --delay as (TIMER_DELIVER_MS, TIMER_DELAY_MS) values (0: not given)."""
    from mqtool.cli.output import parse_time
    given = [name for name, v in (("--deliver-at", deliver_at), ("--delay", delay), ("--delay-level", delay_level))
             if v]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} do not go together: give one")
    if batch and (deliver_at or delay):
        raise UsageError(f"{given[0]} does not go with --batch (a batch is never a timer message)")
    if deliver_at is not None:
        return parse_time(deliver_at), 0
    if delay is not None:
        text = delay.strip().lower()
        unit = "ms" if text.endswith("ms") else text[-1:]
        number = text[:-len(unit)] if unit in _DURATION_MS else ""
        if not number.isascii() or not number.isdigit() or int(number) <= 0:
            raise UsageError(f"--delay takes a duration such as 1500ms, 30s, 5m or 2h, not {delay!r}")
        return 0, int(number) * _DURATION_MS[unit]
    return 0, 0


@with_credentials
def send_message(
    topic: Annotated[str, typer.Option("-t", "--topic")],
    body: Annotated[str, typer.Option("-p", "--body", help="The message body (UTF-8).")],
    namesrv: NamesrvOpt = "127.0.0.1:9876",
    keys: Annotated[Optional[str], typer.Option("-k", "--key", help="Message keys.")] = None,
    tags: Annotated[Optional[str], typer.Option("-c", "--tags", help="Message tags.")] = None,
    broker: Annotated[Optional[str], typer.Option("-b", "--broker", help="Broker name (with -i).")] = None,
    qid: Annotated[Optional[int], typer.Option("-i", "--qid", min=0, help="Queue id on -b's broker.")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Send one message, with mqadmin sendMessage's options (-p is the body, as there)."""
    if qid is not None and broker is None:
        raise UsageError("-i (queue id) needs -b BROKER_NAME, as mqadmin sendMessage")
    queue = f"{broker}:{qid}" if qid is not None else None
    send.__wrapped__(topic, body.strip(), namesrv, keys=keys.strip() if keys else None, tags=tags.strip() if tags else None,
         queue=queue, json_out=json_out)


def _queue(topic: str, text: str | None):
    """--queue: None, a queue id, or a MessageQueue for BROKER_NAME:N."""
    if text is None:
        return None
    broker, sep, n = text.rpartition(":")
    if not n.isdigit() or (sep and not broker):
        raise UsageError(f"--queue takes N or BROKER_NAME:N, not {text!r}")
    if not sep:
        return int(n)
    from mqtool.client.base import MessageQueue
    return MessageQueue(topic, broker, int(n))


async def _send(namesrv, group, msgs, queue, sharding_key, oneway, batch, producer_opts=None) -> list[dict]:
    from mqtool.client.producer import Producer
    p = Producer(namesrv, group, **(producer_opts or {}))
    out = []
    try:
        if batch:
            for i in range(0, len(msgs), batch):
                chunk = msgs[i:i + batch]
                r = await p.send_batch(chunk, queue)
                ids = r.msg_id.split(",")
                for k, m in enumerate(chunk):
                    out.append({"status": r.status, "msg_id": ids[k], "broker": r.broker, "queue_id": r.queue_id,
                                "queue_offset": r.queue_offset + k})
            return out
        for m in msgs:
            r = await p.send(m, queue, sharding_key, oneway)
            if r is None:
                out.append({"status": "ONEWAY", "msg_id": "", "broker": "", "queue_id": -1, "queue_offset": -1})
            else:
                out.append({"status": r.status, "msg_id": r.msg_id, "broker": r.broker, "queue_id": r.queue_id,
                            "queue_offset": r.queue_offset, **({"recall_handle": r.recall_handle}
                                                               if r.recall_handle else {})})
        return out
    finally:
        await p.close()


async def _send_stdin(namesrv, group, topic, make, delimiter, queue, sharding_key, oneway, batch, each,
                      producer_opts) -> None:
    from mqtool.cli.sendstream import StdinMessages, send_stream
    from mqtool.client.producer import Producer
    p = Producer(namesrv, group, **(producer_opts or {}))
    try:
        source = StdinMessages(getattr(sys.stdin, "buffer", sys.stdin), delimiter)
        await send_stream(p, source, make, queue, sharding_key, oneway, batch, each, topic)
    finally:
        await p.close()


async def _bench(namesrv, group, template, count, threads, json_out, batch=0, queue=None, producer_opts=None) -> None:
    """producer.sh-style figures: TPS, average and max RT, failures. With `batch` each send is a
    batch of that many messages (SEND_BATCH_MESSAGE), and RT is per batch."""
    import asyncio
    from dataclasses import replace

    from mqtool.client.producer import Producer
    p = Producer(namesrv, group, **(producer_opts or {}))
    rts: list[float] = []
    sent = [0]
    failures = 0
    first_error: list[BaseException] = []
    remaining = [count]

    async def worker():
        nonlocal failures
        while remaining[0] > 0:
            n = min(batch or 1, remaining[0])
            remaining[0] -= n
            t0 = time.perf_counter()
            try:
                if batch:
                    await p.send_batch([replace(template) for _ in range(n)], queue)
                else:
                    await p.send(replace(template), queue)
                rts.append(time.perf_counter() - t0)
                sent[0] += n
            except Exception as exc:  # noqa: BLE001 - counted, like producer.sh
                failures += n
                if not first_error:
                    first_error.append(exc)
                if getattr(exc, "route_gone", False):     # BrokerUnreachable: no broker left to send to
                    failures += remaining[0]
                    remaining[0] = 0
    start = time.perf_counter()
    try:
        await asyncio.gather(*(worker() for _ in range(threads)))
    finally:
        await p.close()
    elapsed = time.perf_counter() - start
    rts.sort()
    result = {"messages": sent[0], "failures": failures, "seconds": round(elapsed, 3),
              "tps": round(sent[0] / elapsed, 1) if elapsed else 0,
              "avg_rt_ms": round(1000 * sum(rts) / len(rts), 3) if rts else None,
              "p99_rt_ms": round(1000 * rts[int(len(rts) * 0.99) - 1], 3) if rts else None,
              "max_rt_ms": round(1000 * rts[-1], 3) if rts else None, "size": len(template.body),
              "threads": threads, "batch": batch}
    if json_out:
        emit_json(result)
    else:
        console.print(f"Send TPS: {result['tps']} Max RT(ms): {result['max_rt_ms']} Average RT(ms): "
                      f"{result['avg_rt_ms']} Send Failed: {failures} Response Failed: 0")
    if failures:               # the figures stand; the run did not go as asked
        err_console.print(f"mqtool: {failures} of {count_of(count, 'message')} not sent; the first failure: "
                          f"{first_error[0]}",
                          markup=False)
        raise typer.Exit(1)
