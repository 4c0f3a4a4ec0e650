"""Tables on a terminal are rich tables; piped or redirected, one line per row, never wrapped."""
from __future__ import annotations

import io

from rich.console import Console

from mqtool.cli.output import table
from tests.conftest import run_cli

LONG = "a-very-long-broker-name-that-would-never-fit-in-a-folded-column-" * 2


def render(terminal: bool, width: int = 80) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=terminal, highlight=False, soft_wrap=True)
    t = table("cluster", "broker", "address", "tps", title="Brokers")
    t.columns[3].justify = "right"
    t.add_row("DefaultCluster", LONG, "127.0.0.1:10911", "1.50")
    t.add_row("C2", "b", "[::1]:10911", "12.25")
    t.add_row("C3", "line\nbreak", "", "0")
    console.print(t)
    return out.getvalue()


def test_a_piped_table_is_one_padded_line_per_row():
    lines = render(terminal=False).splitlines()
    widths = (len("DefaultCluster"), len(LONG), len("127.0.0.1:10911"), len("12.25"))   # each column's widest

    def row(*cells):
        return "  ".join(c.rjust(w) if i == 3 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    assert lines == ["Brokers", row("cluster", "broker", "address", "tps"),
                     row("DefaultCluster", LONG, "127.0.0.1:10911", "1.50"),
                     row("C2", "b", "[::1]:10911", "12.25"),
                     row("C3", "line\\nbreak", "", "0")]         # a cell's line break stays on the row


def test_a_terminal_still_gets_the_rich_table():
    text = render(terminal=True)
    assert "│" in text and LONG not in text          # folded into its column at 80 wide


def test_cluster_list_into_a_pipe_keeps_each_broker_on_one_line(cluster):
    proc = run_cli("cluster", "list", "-n", cluster["namesrv"], check=True)
    [row] = [ln for ln in proc.stdout.splitlines() if cluster["broker"] in ln]
    assert row.split()[:4] == ["DefaultCluster", "broker-a", "0", cluster["broker"]]
    assert proc.stdout.splitlines()[0].split()[:4] == ["cluster", "broker", "BID", "address"]
