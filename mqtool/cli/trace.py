"""`mqtool message trace`: a message's trace records (mqadmin queryMsgTraceById, and what it leaves out)."""
from __future__ import annotations

import re
import sys
from datetime import datetime, tzinfo
from typing import Annotated

import typer

from mqtool.cli.admin import JsonOpt, run
from mqtool.cli.auth import with_credentials
from mqtool.cli.errors import UsageError, err_console
from mqtool.cli.output import emit_json
from mqtool.cli.send import NamesrvOpt

ROW = "%-10s %-20s %-20s %-20s %-10s %-10s"          # QueryMsgTraceByIdSubCommand's line
WIDE = "%-14s %-20s %-20s %-20s %-10s %-10s %s"      # mqtool's: every type, and a detail column
_ORDER = {"Pub": 0, "EndTransaction": 1, "SubBefore": 2, "SubAfter": 3}     # for records of the same ms
_MSG_ID = re.compile(r"^[0-9A-Fa-f]{32}$")


@with_credentials
def message_trace(msg_id: Annotated[str, typer.Option("-i", "--msg-id", "--msgId", help="The message id (UNIQ_KEY, "
                                                      "as `mqtool send` prints it).")],
                  trace_topic: Annotated[str, typer.Option("-t", "--trace-topic", "--traceTopic",
                                                           help="The trace topic.")] = "RMQ_SYS_TRACE_TOPIC",
                  mqadmin: Annotated[bool, typer.Option("--mqadmin", help="Print exactly what mqadmin "
                                                        "queryMsgTraceById prints (Pub and SubAfter only).")] = False,
                  namesrv: NamesrvOpt = "127.0.0.1:9876", json_out: JsonOpt = False) -> None:
    """A message's trace records (mqadmin queryMsgTraceById), every type, in time order.

    Pub, SubBefore, SubAfter and EndTransaction records, as traced producers and consumers (Java's
    with enableMsgTrace, mqtool's with --trace) wrote them to the trace topic."""
    from mqtool.client.admin import QUERY_CAP
    msg_id = msg_id.strip()
    if not msg_id:
        raise UsageError("--msg-id is empty")
    if mqadmin and json_out:
        raise UsageError("give either --mqadmin or --json, not both")
    found = run(namesrv, lambda a: a.message_trace(msg_id, trace_topic))
    for line in found["errors"]:
        err_console.print(f"mqtool: note: {line} (Java's decoder would lose that trace message whole)", markup=False)
    if found["capped"]:
        err_console.print(f"mqtool: note: a broker returned its cap of {QUERY_CAP} trace messages for this id; "
                          "some records may be missing", markup=False)
    views = found["records"]
    if not views:
        hint = "" if _MSG_ID.match(msg_id) else " (a message id is 32 hex digits)"
        what = "no trace message" if not found["messages"] else "no trace record"
        err_console.print(f"mqtool: {what} of message {msg_id} in topic {trace_topic}{hint}", markup=False)
        raise typer.Exit(1)
    if mqadmin:
        sys.stdout.write(mqadmin_text(views))
    elif json_out:
        for rec, host, ms in in_time_order(views):
            emit_json({**rec.to_json(), "client_host": host, "time": _time(ms, None)})
    else:
        sys.stdout.write(table_text(views))


def _time(ms: int, tz: tzinfo | None) -> str:
    return datetime.fromtimestamp(ms / 1000, tz).strftime("%Y-%m-%d %H:%M:%S")


def _line(fmt: str, *values) -> str:
    return (fmt % values) + "\n"


def mqadmin_text(views: list, tz: tzinfo | None = None) -> str:
    """printMessageTrace: each Pub as its own block, then the SubAfter records by consumer group
    (the groups in java.util.HashMap's order, the records as found), a blank line after each block."""
    from mqtool.common.tracedata import TraceType
    from mqtool_remoting.jsonbody import java_order
    out, by_group = [], {}
    for rec, host in views:
        if rec.type is TraceType.Pub:
            out.append(_line(ROW, "#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"))
            out.append(_line(ROW, "Pub", rec.group, host, _time(rec.timestamp, tz), f"{rec.cost_time}ms",
                             "success" if rec.success else "failed"))
            out.append("\n")
        elif rec.type is TraceType.SubAfter:
            by_group.setdefault(rec.group, []).append((rec, host))
    for group in java_order(by_group):
        out.append(_line(ROW, "#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"))
        for rec, host in by_group[group]:
            out.append(_line(ROW, "Sub", rec.group, host, _time(rec.timestamp, tz), f"{rec.cost_time}ms",
                             "success" if rec.success else "failed"))
        out.append("\n")
    return "".join(out)


def in_time_order(views: list) -> list:
    """(record, client host, time) by time; a SubAfter of an older writer (no time written) at its
    SubBefore's time plus its cost (Java shows the time it read the record)."""
    from mqtool.common.tracedata import TraceType
    before = {r.request_id: r.timestamp for r, _ in views if r.type is TraceType.SubBefore}

    def when(rec) -> int:
        if rec.type is TraceType.SubAfter and not rec.timestamp_known and rec.request_id in before:
            return before[rec.request_id] + rec.cost_time
        return rec.timestamp
    timed = [(rec, host, when(rec)) for rec, host in views]
    return sorted(timed, key=lambda v: (v[2], _ORDER[v[0].type.value]))


def _detail(rec) -> tuple[str, str, str]:
    """(cost, status, detail) of one record in mqtool's table."""
    from mqtool.common.tracedata import ConsumeReturnType, MsgType
    status = "success" if rec.success else "failed"
    if rec.type.value == "Pub":
        msg_type = MsgType(rec.msg_type).name if rec.msg_type in MsgType._value2member_map_ else rec.msg_type
        return (f"{rec.cost_time}ms", status, f"topic={rec.topic} tags={rec.tags} keys={rec.keys} "
                f"storeHost={rec.store_host} msgType={msg_type} offsetMsgId={rec.offset_msg_id}")
    if rec.type.value == "SubBefore":
        return "", "", f"retryTimes={rec.retry_times} requestId={rec.request_id}"
    if rec.type.value == "SubAfter":
        code = rec.context_code
        name = ConsumeReturnType(code).name if code in ConsumeReturnType._value2member_map_ else code
        return f"{rec.cost_time}ms", status, f"contextCode={name} requestId={rec.request_id}"
    return ("", rec.transaction_state, f"topic={rec.topic} storeHost={rec.store_host} "
            f"fromTransactionCheck={'true' if rec.from_transaction_check else 'false'}")


def table_text(views: list, tz: tzinfo | None = None) -> str:
    """mqtool's table: every record of the message, in time order, one line each."""
    out = [_line(WIDE, "#Type", "#Group", "#ClientHost", "#Time", "#CostTimes", "#Status", "#Detail")]
    for rec, host, ms in in_time_order(views):
        cost, status, detail = _detail(rec)
        out.append(_line(WIDE, rec.type.value, rec.group, host, _time(ms, tz), cost, status, detail))
    return "".join(out)
