"""Rendering shared by every command: JSON lines, rich tables, times and bodies."""
from __future__ import annotations

import base64
import json
import sys
from datetime import datetime

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from mqtool.cli.errors import NothingChanged, UsageError
from mqtool.common.plural import count  # noqa: F401 - the commands take it from here

console = Console(highlight=False, soft_wrap=True)
BODY_MODES = ("text", "hex", "base64", "none")


def emit_json(obj) -> None:
    sys.stdout.write(json_line(obj))


def utf8_stdout():
    """sys.stdout's binary layer, its text layer flushed, where UTF-8 bytes written there are what
    writing their text to sys.stdout would write (it encodes UTF-8 and writes newlines as they
    are); else None. (Bulk output skips an encode and a copy per chunk.)"""
    import codecs
    import os
    out = sys.stdout
    buffer = getattr(out, "buffer", None)
    encoding = getattr(out, "encoding", None)
    if buffer is None or not encoding or os.linesep != "\n" or codecs.lookup(encoding).name != "utf-8":
        return None
    out.flush()
    return buffer


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


class _Table(Table):
    """A rich table on a terminal. Anywhere else (a pipe, a file) one line per row, as mqadmin's printf
    columns: the title on a line of its own, then the header and the rows, each column padded to its
    widest cell (right-justified columns on the right), two spaces between columns, never wrapped;
    a line break inside a cell is written as \\n so that a row stays one line."""

    def __rich_console__(self, console, options):
        if console.is_terminal:
            yield from super().__rich_console__(console, options)
            return
        for line in self.plain_lines(console):
            yield Segment(line)
            yield Segment.line()

    def plain_lines(self, console: Console) -> list[str]:
        def plain(cell) -> str:
            text = cell if isinstance(cell, Text) else console.render_str(cell) if isinstance(cell, str) else Text(str(cell))
            return text.plain.replace("\n", "\\n")
        cols = [[plain(c.header), *map(plain, c.cells)] for c in self.columns]
        widths = [max(map(cell_len, cells)) for cells in cols]
        lines = [str(self.title)] if self.title else []
        for r in range(len(cols[0]) if cols else 0):
            cells = []
            for col, cells_of, width in zip(self.columns, cols, widths):
                pad = " " * (width - cell_len(cells_of[r]))
                cells.append(pad + cells_of[r] if col.justify == "right" else cells_of[r] + pad)
            lines.append("  ".join(cells).rstrip())
        return lines


def table(*columns: str, title: str | None = None) -> Table:
    t = _Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    return t


def check_choice(value: str, choices: tuple[str, ...], option: str) -> str:
    if value not in choices:
        raise UsageError(f"{option} must be one of {', '.join(choices)}, not {value!r}")
    return value


def report_config_change(what: str, addr: str, props: dict[str, str], have: dict[str, str], remark: str,
                         json_out: bool) -> None:
    """What a config update (updateBrokerConfig, updateNamesrvConfig) did on `addr`: the keys of
    `props` that `have` (its config read just before) holds were updated, the others ignored; the
    server's remark says why. NothingChanged when it took none of them."""
    updated = {k: v for k, v in props.items() if k in have}
    ignored = [k for k in props if k not in have]
    if json_out:
        emit_json({what: addr, "updated": updated, "ignored": ignored, "remark": remark})
    elif updated:
        console.print(f"updated {', '.join(updated)} on {addr}" + (f" ({remark})" if remark else ""), markup=False)
    if not updated:
        raise NothingChanged(f"nothing updated on {addr}: {remark or 'it has none of ' + ', '.join(ignored)}")
