"""`mqtool timer status`: RocketMQ 5 timer messages on each master (waiting, next due, how far behind)."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from mqtool.cli.auth import with_credentials
from mqtool.cli.output import console, emit_json, fmt_time, table
from mqtool.cli.send import NamesrvOpt

app = typer.Typer(help="RocketMQ 5 timer messages: waiting, next due, behind, per master.", no_args_is_help=True)


@app.command()
@with_credentials
def status(namesrv: NamesrvOpt = "127.0.0.1:9876",
           cluster: Annotated[Optional[str], typer.Option("-c", "--cluster", help="Only this cluster.")] = None,
           json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Per master: timer messages waiting, the next one due, and how far enqueue and delivery are behind."""
    import asyncio
    from mqtool.client.admin import Admin

    async def ask():
        admin = Admin(namesrv)
        try:
            return await admin.timer_rows(cluster)
        finally:
            await admin.close()
    rows = asyncio.run(ask())
    if json_out:
        for r in rows:
            emit_json(r)
        return
    t = table("broker", "address", "waiting", "next due", "delivery behind", "not enqueued", "enqueue TPS",
              "delivery TPS", title="Timer messages")
    for r in rows:
        if not r["reachable"]:
            t.add_row(r["broker"], r["address"], "unreachable", "", "", "", "", "")
        elif r["timer_pending"] is None:
            t.add_row(r["broker"], r["address"], "-", "no timer (a 4.x broker)", "", "", "", "")
        else:
            due = r["timer_next_due_ms"]
            t.add_row(r["broker"], r["address"], f"{r['timer_pending']:,}", fmt_time(due) if due > 0 else "-",
                      f"{r['timer_behind_s']}s", f"{r['timer_offset_behind']:,}", f"{r['timer_enqueue_tps']:.1f}",
                      f"{r['timer_dequeue_tps']:.1f}")
    console.print(t)
