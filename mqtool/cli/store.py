"""`mqtool store ...`: read a broker's store directory offline, strictly read-only."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.errors import EXIT_PROBLEMS, EXIT_USAGE, UsageError, err_console, register_lazy
from mqtool.cli.output import (BODY_MODES, check_choice, console, count, emit_json, fmt_time, json_line,
                               parse_time, render_body, table, utf8_stdout)
from mqtool.cli.recover import recover

app = typer.Typer(help="Read a store directory offline: dump, stats, verify, query.",
                  no_args_is_help=True)

# store.layout.Kind's values, spelled out so `--help` does not import the store (a test holds them equal).
KIND_NAMES = "root, commitlog-dir, commitlog, consumequeue-dir, consumequeue, index-dir, index, checkpoint, config, abort, lock, timerlog, timerwheel, timercheck"
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON object per line.")]
PathArg = Annotated[Path, typer.Argument(help="Store root, or a commitlog/consumequeue/index/checkpoint/config path.")]
RootArg = Annotated[Path, typer.Argument(help="The store root (storePathRootDir).")]
BodyOpt = Annotated[str, typer.Option("--body", help="Body as text, hex, base64 or none.")]
BodyMaxOpt = Annotated[Optional[int], typer.Option(
    "--body-max", min=0, help="Show at most this many body bytes (default 120 in tables, all with --json).")]

register_lazy("mqtool_store.query", "TopicNeeded", EXIT_USAGE)


def _root(path: Path) -> Path:
    from mqtool_store.layout import is_store_root
    from mqtool_store.errors import WrongKindError
    if not path.exists():
        raise UsageError(f"{path}: no such directory")
    if not is_store_root(path):
        raise WrongKindError("not a store root (no commitlog, consumequeue or checkpoint inside)", path=path)
    return path


def _progress(total: int, what: str):
    """A transient progress bar on stderr (silent when stderr is not a terminal)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
    bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                   TimeRemainingColumn(), console=err_console, transient=True,
                   disable=not err_console.is_terminal)       # (else a bare newline on a piped stderr)
    task = bar.add_task(what, total=total or None)
    return bar, (lambda n: bar.advance(task, n))


def _commitlog_bytes(root: Path) -> int:
    from mqtool_store.layout import StorePaths
    d = StorePaths.of(root).commitlog
    return sum(p.stat().st_size for p in d.iterdir() if p.is_file()) if d.is_dir() else 0


# ------------------------------------------------------------------------------- dump

@app.command()
def dump(
    path: PathArg,
    kind: Annotated[Optional[str], typer.Option("--kind", help="Force the kind: " + KIND_NAMES)] = None,
    topic: Annotated[Optional[str], typer.Option("--topic", "-t")] = None,
    queue: Annotated[Optional[int], typer.Option("--queue", "-q", help="Queue id.")] = None,
    key: Annotated[Optional[str], typer.Option("--key", "-k", help="A key of KEYS, or the UNIQ_KEY.")] = None,
    tag: Annotated[Optional[str], typer.Option("--tag")] = None,
    from_offset: Annotated[Optional[int], typer.Option("--from-offset", min=0, help="Commitlog offset (queue offset for consume queues).")] = None,
    to_offset: Annotated[Optional[int], typer.Option("--to-offset", min=0, help="Exclusive end, same unit as --from-offset.")] = None,
    since: Annotated[Optional[str], typer.Option("--since", help="Store time from (epoch ms or ISO).")] = None,
    until: Annotated[Optional[str], typer.Option("--until", help="Store time until (epoch ms or ISO).")] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", "-n", min=0)] = None,
    body: BodyOpt = "text",
    body_max: BodyMaxOpt = None,
    json_out: JsonOpt = False,
    pop: Annotated[bool, typer.Option("--pop", help="Only the records of the 5.x POP revive topics "
                                      "(rmq_sys_REVIVE_LOG_*), decoded: checkpoints and acks.")] = False,
) -> None:
    """Decode any store file or directory: records, queue units, index entries, checkpoint, config, timer files."""
    from mqtool_store.dump import COMMITLOG_KINDS, Filters, dump_path, unused_filters
    from mqtool_store.layout import Kind, detect_kind
    check_choice(body, BODY_MODES, "--body")
    if kind is not None:
        try:
            k = Kind(kind)
        except ValueError:
            raise UsageError(f"--kind must be one of {', '.join(x.value for x in Kind)}") from None
        if not path.exists():
            raise UsageError(f"{path}: no such file or directory")
    else:
        k = detect_kind(path)
    filters = Filters(topic, queue, key, tag, from_offset, to_offset, parse_time(since), parse_time(until), limit)
    unused = unused_filters(k, filters)
    if unused:
        names = ", ".join("--" + name.replace("_", "-") for name in unused)
        hint = " without --key" if k in (Kind.INDEX_DIR, Kind.INDEX_FILE) and filters.key is None else ""
        raise UsageError(f"{names} {'does' if len(unused) == 1 else 'do'} not apply to a dump of kind {k.value}{hint}")
    cap = body_max if body_max is not None else (None if json_out else 120)
    counts: dict[str, int] = {}
    stops: list[dict] = []
    pending: list[dict] = []
    if pop and k not in COMMITLOG_KINDS:
        raise UsageError(f"--pop goes with a commit log (a store root, its commitlog directory or a file), not {k.value}")
    if json_out and k in COMMITLOG_KINDS and not pop:
        _dump_commitlog_json(path, k, filters, body, cap, stops)
        _report_stops(stops)
        return
    rows = dump_path(path, k, filters)
    if pop:
        rows = _pop_rows(rows)
    for row in rows:
        counts[row["kind"]] = counts.get(row["kind"], 0) + 1
        if row["kind"] == "message":
            text, cut = render_body(row.pop("body_bytes"), body, cap)
            row["body"], row["body_truncated"], row["body_encoding"] = text, cut, body
        if row["kind"] == "stop":
            stops.append(row)
            if row["clean"]:
                counts["stop"] -= 1
                continue
        if json_out:
            emit_json(row)
        else:
            pending.append(row)
            if len(pending) >= 500:
                _print_rows(pending)
                pending = []
    if not json_out:
        _print_rows(pending)
        summary = ", ".join(count(n, name.replace("_", " ")) for name, n in counts.items() if n and name != "stop")
        console.print(f"[bold]{path}[/] ({k.value}): {summary or 'nothing matched'}")
    _report_stops(stops)


def _dump_commitlog_json(path: Path, k, filters, body: str, cap: int | None, stops: list[dict]) -> None:
    """JSON lines of commitlog records, written by the store's fast encoder; the same bytes as
    rendering each row of dump_path and emit_json (tests/store/test_dumpjson.py)."""
    import sys
    from mqtool_store.dump import commitlog_reader
    from mqtool_store.dumpjson import commitlog_json

    def encode_row(row: dict) -> str:
        text, cut = render_body(row.pop("body_bytes"), body, cap)
        row["body"], row["body_truncated"], row["body_encoding"] = text, cut, body
        return json_line(row)

    # Where stdout takes UTF-8 bytes, the store kernel's lines come as bytes and go to its binary layer
    # as they are, and the rest encoded as its text layer would: all of it there, so the order stays.
    binary = utf8_stdout()
    if binary is None:
        write = text = sys.stdout.write
    else:
        write, errors = binary.write, sys.stdout.errors or "strict"

        def text(s: str) -> None:
            write(s.encode("utf-8", errors))
    with commitlog_reader(path, k) as reader:
        for item in commitlog_json(reader, filters, body, cap, encode_row, as_bytes=binary is not None):
            if type(item) is bytes:
                write(item)
            elif isinstance(item, str):
                text(item)
            else:
                stops.append(item)
                if not item["clean"]:
                    text(json_line(item))
    if binary is not None:
        binary.flush()


def _pop_rows(rows):
    """The revive topics' records of a commit log dump as their POP checkpoints and acks (and its stops)."""
    from mqtool_store.dump import pop_row
    for row in rows:
        if row["kind"] != "message":
            yield row
            continue
        decoded = pop_row(row)
        if decoded is not None:
            yield decoded


def _render_pop(rows: list[dict]) -> None:
    t = table("offset", "record", "revive q/off", "topic", "group", "queue", "start", "offsets", "pop time",
              "invisible", "acked bits")
    for r in rows:
        where = f"{r['revive_queue']}/{'wheel' if r['in_timer_wheel'] else r['revive_offset']}"
        t.add_row(str(r["commitlog_offset"]), r["kind"].removeprefix("pop_"), where,
                  r.get("topic", ""), r.get("group", ""), str(r.get("queue_id", "")), str(r.get("start_offset", "")),
                  ",".join(map(str, r.get("offsets", []))), fmt_time(r["pop_timestamp"]) if "pop_timestamp" in r else "",
                  str(r.get("invisible_time", "")), bin(r["ack_bits"]) if "ack_bits" in r else "")
    console.print(t)


def _report_stops(stops: list[dict]) -> None:
    bad = [s for s in stops if not s["clean"]]
    for s in bad:
        err_console.print(f"mqtool: stopped reading {s['file']} at offset {s['position']}: {s['detail']}"
                          + (f" ({count(s['invalid_bytes'], 'invalid byte')} follow)" if s.get("invalid_bytes") else ""),
                          markup=False)
    if bad:
        raise typer.Exit(EXIT_PROBLEMS)


def _print_rows(rows: list[dict]) -> None:
    by_kind: dict[str, list[dict]] = {}
    for r in rows:
        by_kind.setdefault(r["kind"], []).append(r)
    for kind, items in by_kind.items():
        render = _RENDERERS.get(kind, _render_generic)
        render(items)


def _render_messages(rows: list[dict]) -> None:
    t = table("offset", "topic", "q", "qoff", "size", "stored", "tags", "keys", "body")
    for r in rows:
        body = r["body"] if r["body"] is not None else f"<{r['body_note']}>"
        if r["body_truncated"]:
            body += f"… ({count(r['body_len'], 'byte')})"
        crc = "" if r["crc_ok"] else " [red]CRC![/]"
        t.add_row(str(r["commitlog_offset"]), r["topic"], str(r["queue_id"]), str(r["queue_offset"]),
                  str(r["store_size"]) + crc, fmt_time(r["store_timestamp"]), r["tags"] or "",
                  " ".join(r["keys"]), _escape(body))
    console.print(t)


def _escape(s: str) -> str:
    from rich.markup import escape
    return escape(s)


def _render_units(rows: list[dict]) -> None:
    t = table("topic", "queue", "queue offset", "commitlog offset", "size", "tags code")
    for r in rows:
        t.add_row(r["topic"], str(r["queue_id"]), str(r["queue_offset"]),
                  "pre-blank" if r["pre_blank"] else str(r["commitlog_offset"]),
                  "" if r["pre_blank"] else str(r["size"]), str(r["tags_code"]))
    console.print(t)


def _render_index_entries(rows: list[dict]) -> None:
    t = table("entry", "key hash", "commitlog offset", "time", "prev")
    for r in rows:
        t.add_row(str(r["entry"]), str(r["key_hash"]), str(r["commitlog_offset"]), fmt_time(r["store_time"]),
                  str(r["prev_index"]))
    console.print(t)


def _render_generic(rows: list[dict]) -> None:
    for r in rows:
        t = table("field", "value", title=f"{r['kind']}")
        for k, v in r.items():
            if k == "kind":
                continue
            shown = f"{v}  ({fmt_time(v)})" if k.endswith("timestamp") and isinstance(v, int) and v > 0 else str(v)
            t.add_row(k, _escape(shown))
        console.print(t)


def _render_config(rows: list[dict]) -> None:
    import json
    for r in rows:
        console.print(f"[bold]{r['file']}[/]")
        console.print_json(json.dumps(r["data"], ensure_ascii=False))


def _render_timer_units(rows: list[dict]) -> None:
    t = table("position", "prev", "flags", "written", "slot time", "commitlog offset", "size", "topic hash")
    for r in rows:
        t.add_row(str(r["position"]), str(r["prev_pos"]), ",".join(r["flags"]), fmt_time(r["write_time"]),
                  fmt_time(r["slot_time"]), str(r["offset_py"]), str(r["size_py"]), str(r["topic_hash"]))
    console.print(t)


def _render_timer_slots(rows: list[dict]) -> None:
    t = table("index", "time / P", "first", "last", "num")
    for r in rows:
        t.add_row(str(r["index"]), str(r["time"]), str(r["first_pos"]), str(r["last_pos"]), str(r["num"]))
    console.print(t)


_RENDERERS = {"message": _render_messages, "cq_unit": _render_units, "index_entry": _render_index_entries,
              "config": _render_config, "pop_checkpoint": _render_pop, "pop_ack": _render_pop,
              "pop_batch_ack": _render_pop,
              "timer_unit": _render_timer_units, "timer_slot": _render_timer_slots}


# ------------------------------------------------------------------------------- stats

@app.command()
def stats(root: RootArg, json_out: JsonOpt = False) -> None:
    """Per topic and queue: messages, bytes, offsets, times; files, checkpoint and configs."""
    from mqtool_store.stats import store_stats
    _root(root)
    bar, advance = _progress(_commitlog_bytes(root), "scanning commitlog")
    with bar:
        result = store_stats(root, advance)
    damaged = [i for i in result["index"] if "error" in i]
    for i in damaged:
        err_console.print(f"mqtool: warning: damaged index file {i['file']} skipped: {i['error']}", markup=False)
    if json_out:
        emit_json(result)
    else:
        _print_stats(result)
    for line in result["unreadable"]:
        err_console.print(f"mqtool: unreadable: {line}", markup=False)
    if damaged or result["unreadable"]:
        raise typer.Exit(EXIT_PROBLEMS)


def _print_stats(result: dict) -> None:
    cl = result["commitlog"]
    cq = {(q["topic"], q["queue_id"]): q for q in result["consumequeues"]}
    t = table("topic", "queue", "messages", "bytes", "min qoff", "max qoff", "cq max", "first store time",
              "last store time", title="Messages by topic and queue (commitlog)")
    for q in cl["queues"]:
        t.add_row(q["topic"], str(q["queue_id"]), str(q["messages"]), str(q["bytes"]),
                  str(q["min_queue_offset"]), str(q["max_queue_offset"]),
                  str(cq.get((q["topic"], q["queue_id"]), {}).get("max_offset", "-")),
                  fmt_time(q["first_store_time"]), fmt_time(q["last_store_time"]))
    console.print(t)
    t = table("file", "size", "records", "write position", "ends with", title="Commitlog files")
    for f in cl["files"]:
        t.add_row(f["file"], str(f["size"]), str(f["records"]), str(f["write_position"]),
                  f["end"] + (f": {f['detail']}" if f["detail"] else ""))
    console.print(t)
    if result["index"]:
        t = table("file", "entries", "slots used", "begin", "end", "phy offsets", title="Index files")
        for i in result["index"]:
            if "error" in i:
                t.add_row(i["file"], "-", "-", "-", "-", f"damaged: {i['error']}")
                continue
            t.add_row(i["file"], str(max(i["index_count"] - 1, 0)), str(i["hash_slot_count"]),
                      fmt_time(i["begin_timestamp"]), fmt_time(i["end_timestamp"]),
                      f"{i['begin_phy_offset']}..{i['end_phy_offset']}")
        console.print(t)
    cp = result["checkpoint"]
    if cp:
        console.print(f"checkpoint: physicMsgTimestamp {fmt_time(cp['physic_msg_timestamp'])}, "
                      f"logicsMsgTimestamp {fmt_time(cp['logics_msg_timestamp'])}, "
                      f"indexMsgTimestamp {fmt_time(cp['index_msg_timestamp'])}")
    cfg = result["config"]
    if cfg:
        console.print(f"config: {count(cfg['topics']['count'], 'topic')}, "
                      f"{count(cfg['subscription_groups']['count'], 'subscription group')}, "
                      f"{count(len(cfg['consumer_offsets']['entries']), 'consumer offset entry')}, "
                      f"delay levels in progress {sorted(cfg['delay_offsets']['levels'])}")
        for part in cfg.values():
            for w in part.get("warnings", []):
                if w in result["unreadable"]:
                    continue        # said once, with the other unreadable parts
                err_console.print(f"mqtool: warning: {w}", markup=False)
    total = sum(q["messages"] for q in cl["queues"])
    console.print(f"[bold]{total}[/] {'message' if total == 1 else 'messages'} in "
                  f"{count(len(cl['files']), 'commitlog file')}, {count(len(cl['queues']), 'queue')}; abort file: {'present' if result['abort'] else 'absent'}")


# ------------------------------------------------------------------------------- verify

@app.command()
def verify(root: RootArg, json_out: JsonOpt = False,
           delay_level: Annotated[Optional[str], typer.Option(
               "--message-delay-level", help="The broker's messageDelayLevel, if not the default.")] = None,
           config: Annotated[Optional[Path], typer.Option(
               "-c", "--config", help="The broker's broker.conf, for its messageDelayLevel.")] = None) -> None:
    """Check records, consume queues, index, checkpoint and timer files against each other. Exit 1 on problems."""
    from mqtool.cli.recover import broker_conf_settings
    from mqtool_store.verify import verify_store
    _root(root)
    delay_level = delay_level or broker_conf_settings(config, ("messageDelayLevel",)).get("messageDelayLevel")
    bar, advance = _progress(_commitlog_bytes(root), "verifying commitlog")
    with bar:
        report = verify_store(root, delay_level, advance)
    if json_out:
        emit_json(report.to_dict())
    else:
        for p in report.problems:
            console.print(f"[red]PROBLEM[/] [{p.area}] {_escape(str(p))}")
        for area, n in report.suppressed.items():
            console.print(f"... and {count(n, f'more {area} problem')} (see --json)")
        if report.deleted_topics:
            console.print(f"deleted topics (records kept, queues and config gone, as a topic delete leaves them): "
                          f"{_escape(', '.join(report.deleted_topics))}")
        found = len(report.problems) + sum(report.suppressed.values())
        state = "[green]clean[/]" if report.ok else f"[red]{count(found, 'problem')}[/]"
        timer = f", {count(report.timer_units, 'timerlog unit')}" if report.timer_units else ""
        console.print(f"{root}: {count(report.records, 'record')}, {count(report.queue_units, 'consume queue unit')}, "
                      f"{count(report.index_entries, 'index entry')}{timer}: {state}")
    if not report.ok:
        raise typer.Exit(EXIT_PROBLEMS)


# ------------------------------------------------------------------------------- query

@app.command()
def query(
    root: RootArg,
    topic: Annotated[Optional[str], typer.Option("--topic", "-t")] = None,
    key: Annotated[Optional[str], typer.Option("--key", "-k", help="A key or unique key (needs --topic).")] = None,
    msg_id: Annotated[Optional[str], typer.Option(
        "--msg-id", "-i", help="A message id: an offset id, or the unique key (UNIQ_KEY) a producer prints "
        "(needs --topic).")] = None,
    offset: Annotated[Optional[int], typer.Option("--offset", "-o", min=0, help="Commitlog offset.")] = None,
    begin: Annotated[Optional[str], typer.Option("--begin", help="Store time from (epoch ms or ISO).")] = None,
    end: Annotated[Optional[str], typer.Option("--end", help="Store time until (epoch ms or ISO).")] = None,
    max_num: Annotated[Optional[int], typer.Option("--max", help="Most messages to return (default and RocketMQ's cap: 64).",
                                                   min=1)] = None,
    body: BodyOpt = "text",
    body_max: BodyMaxOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Find messages by key (through the index files), by msgId (an offset id read directly, a unique
    key through the index files), or by commitlog offset."""
    from mqtool_store.dump import record_row
    from mqtool_store.msgid import is_message_id
    from mqtool_store.query import query_by_key, query_by_msg_id, query_by_offset
    _root(root)
    check_choice(body, BODY_MODES, "--body")
    chosen = [x for x in (key, msg_id, offset) if x is not None]
    if len(chosen) != 1:
        raise UsageError("give exactly one of --key, --msg-id, --offset")
    if key is None:
        unused = [name for name, value in (("--topic", topic), ("--begin", begin), ("--end", end), ("--max", max_num))
                  if value is not None and not (name == "--topic" and msg_id is not None)]
        if unused:
            raise UsageError(f"{', '.join(unused)} {'applies' if len(unused) == 1 else 'apply'} to --key lookups only")
    max_num = 64 if max_num is None else max_num
    notes = []
    if key is not None:
        if topic is None:
            raise UsageError("--key needs --topic (the index stores topic#key)")
        res = query_by_key(root, topic, key, parse_time(begin) or 0, parse_time(end) or 2**63 - 1, max_num)
        found = res.records
        if res.capped:
            notes.append(f"more than {count(max_num, 'message')} {'matches' if max_num == 1 else 'match'}; "
                         "narrow with --begin/--end or raise --max")
        if res.collisions:
            one = res.collisions == 1
            notes.append(f"{count(res.collisions, 'index hit')} {'was a hash collision' if one else 'were hash collisions'}"
                         f" for other keys and {'was' if one else 'were'} dropped")
        notes += [f"skipped damaged index data: {d}" for d in res.damaged]
    elif msg_id is not None:
        if not is_message_id(msg_id):
            raise UsageError(f"{msg_id} is not a message id (an offset id or a unique key: 32 or 56 hex digits); "
                             "a key of another form: --key with --topic")
        res_id = query_by_msg_id(root, msg_id, topic)
        found = res_id.records
        notes += res_id.notes
        if res_id.host:
            notes.append(f"message id names store host {res_id.host}")
    else:
        found = [(offset, query_by_offset(root, offset))]
    cap = body_max if body_max is not None else (None if json_out else 120)
    rows = []
    for off, rec in found:
        row = record_row(off, rec)
        row["body"], row["body_truncated"] = render_body(row.pop("body_bytes"), body, cap)
        rows.append(row)
    if json_out:
        for r in rows:
            emit_json(r)
    else:
        if rows:
            _render_messages(rows)
        console.print(f"{count(len(rows), 'message')} found")
    for n in notes:
        err_console.print(f"mqtool: note: {n}", markup=False)
    if key is not None and res.damaged:
        raise typer.Exit(EXIT_PROBLEMS)


app.command(name="recover")(recover)
