"""Rendering shared by every command: JSON lines, rich tables, times and bodies."""
from __future__ import annotations

import base64
import json
import sys
from datetime import datetime

from rich.console import Console
from rich.table import Table

from mqtool.cli.errors import UsageError

console = Console(highlight=False, soft_wrap=True)
BODY_MODES = ("text", "hex", "base64", "none")


def emit_json(obj) -> None:
    sys.stdout.write(json_line(obj))


def json_line(obj) -> str:
    """One JSON line, as every --json output writes it."""
    return json.dumps(obj, ensure_ascii=False, default=_json_default) + "\n"


def _json_default(o):
    if isinstance(o, bytes):
        return base64.b64encode(o).decode()
    if hasattr(o, "value"):
        return o.value
    return str(o)


def fmt_time(ms: int | None) -> str:
    if not ms:
        return "-" if ms is None else "0"
    try:
        return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"
    except (OverflowError, OSError, ValueError):
        return f"{ms} (out of range)"


def parse_time(text: str | None) -> int | None:
    """Epoch milliseconds, or an ISO date/time (local time unless it has an offset)."""
    if text is None:
        return None
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    try:
        return int(datetime.fromisoformat(t).timestamp() * 1000)
    except ValueError:
        raise UsageError(f"cannot read time {text!r}: give epoch milliseconds or ISO 8601 "
                         "(e.g. 2026-11-22T11:23:00)") from None


def render_body(body: bytes | None, mode: str, cap: int | None) -> tuple[str | None, bool]:
    """(rendered body, truncated?) for --body text|hex|base64|none with a byte cap (the store's)."""
    from mqtool_store.dump import render_body as store_render_body
    return store_render_body(body, mode, cap)


def table(*columns: str, title: str | None = None) -> Table:
    t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    return t


def check_choice(value: str, choices: tuple[str, ...], option: str) -> str:
    if value not in choices:
        raise UsageError(f"{option} must be one of {', '.join(choices)}, not {value!r}")
    return value
