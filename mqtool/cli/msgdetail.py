"""One message in full, as mqadmin queryMsgById prints it (4.9.8 QueryMsgByIdSubCommand.printMsg):
a label a line, the same labels, then the body, as text when it is UTF-8 and as hex otherwise.

Where 4.9.8 differs: it always writes the body to /tmp/rocketmq/msgbodys/<msgId> and prints that
path; here the body is printed, and written (to DIR/<msgId>) only with --save-body DIR. It then
lists each consumer group's delivery state of the message (messageTrackDetail); this does not.
"""
from __future__ import annotations

from pathlib import Path

from mqtool.cli.output import console, fmt_time

LABEL_WIDTH = 20        # printMsg's "%-20s %s"


def message_fields(broker: str, rec) -> tuple[dict, bytes | None]:
    """(every field of a looked-up record as plain data (--json), the body rendered once; the body's
    bytes, inflated when the producer compressed them)."""
    from mqtool_store.dump import record_row
    row = record_row(rec.physical_offset, rec)
    for internal in ("kind", "file"):
        row.pop(internal)
    body = row.pop("body_bytes")
    text, encoding = body_text(body)
    return {"broker": broker, **row, "msg_id": rec.uniq_key or rec.msg_id, "offset_msg_id": rec.msg_id,
            "store_time": fmt_time(rec.store_timestamp), "body": text, "body_encoding": encoding}, body


def body_text(body: bytes | None) -> tuple[str | None, str | None]:
    """(the body as text, "text") when it decodes as UTF-8, else (its hex, "hex")."""
    if body is None:
        return None, None
    try:
        return body.decode("utf-8"), "text"
    except UnicodeDecodeError:
        return body.hex(), "hex"


def save_body(msg_id: str, body: bytes | None, directory: Path) -> Path:
    """Write the body to DIRECTORY/<msgId>, as mqadmin writes it under /tmp/rocketmq/msgbodys."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / msg_id
    path.write_bytes(body or b"")
    return path


def print_detail(f: dict, body_path: Path | None = None) -> None:
    flags = f" ({', '.join(f['sys_flags'])})" if f["sys_flags"] else ""
    props = "{" + ", ".join(f"{k}={v}" for k, v in f["properties"].items()) + "}"
    if f["body_encoding"] == "hex":
        body = f"{f['body']} (hex: not UTF-8 text)"
    elif f["body"] is None:
        body = f"(not shown: {f['body_note']})"
    else:
        body = f["body"]
    lines = [("Broker", f["broker"]), ("Message ID", f["msg_id"]), ("OffsetID", f["offset_msg_id"]),
             ("Topic", f["topic"]), ("Tags", f"[{f['tags'] or ''}]"), ("Keys", f"[{' '.join(f['keys'])}]"),
             ("Queue ID", f["queue_id"]), ("Queue Offset", f["queue_offset"]),
             ("CommitLog Offset", f["commitlog_offset"]), ("Reconsume Times", f["reconsume_times"]),
             ("Born Timestamp", fmt_time(f["born_timestamp"])), ("Store Timestamp", fmt_time(f["store_timestamp"])),
             ("Born Host", f["born_host"]), ("Store Host", f["store_host"]), ("System Flag", f"{f['sys_flag']}{flags}"),
             ("Properties", props)]
    if body_path is not None:
        lines.append(("Message Body Path", str(body_path)))
    lines.append(("Message Body", body))
    for label, value in lines:
        console.print(f"{label + ':':<{LABEL_WIDTH}} {value}", markup=False, highlight=False, soft_wrap=True)
