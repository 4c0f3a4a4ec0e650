"""`mqtool top`: a live view of a cluster (brokers, busiest topics, consumer groups with lag)."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from mqtool.cli.auth import with_credentials
from mqtool.cli.errors import UsageError
from mqtool.cli.output import console, emit_json
from mqtool.cli.send import NamesrvOpt

SORTS = ("rate", "lag", "name")
KEYS_HELP = "q quit · s sort ({sort}) · / filter{filt} · Esc clear filter"


@with_credentials
def top(namesrv: NamesrvOpt = "127.0.0.1:9876",
        cluster: Annotated[Optional[str], typer.Option("-c", "--cluster", help="Only this cluster.")] = None,
        interval: Annotated[float, typer.Option("-i", "--interval", min=0.2, help="Seconds between refreshes.")] = 2.0,
        once: Annotated[bool, typer.Option("--once", help="Print one snapshot (two samples INTERVAL apart) and exit.")] = False,
        sort: Annotated[str, typer.Option("--sort", help="rate, lag or name.")] = "rate",
        filter_: Annotated[Optional[str], typer.Option("--filter", help="Only topics and groups containing this text.")] = None,
        limit: Annotated[int, typer.Option("--limit", min=1, help="Rows of topics and of groups.")] = 15,
        system: Annotated[bool, typer.Option("--system", help="Show system topics too.")] = False,
        json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """A live view of a cluster: brokers, the busiest topics, consumer groups with lag and its trend.

    Brokers show put/get TPS and disk use; topic and consume rates are offset changes between
    refreshes. Keys: q quits, s changes the sort, / filters (Enter ends, Esc clears). --once prints
    one snapshot of two samples INTERVAL apart; --json prints it (or one line per refresh) as JSON."""
    import asyncio
    if sort not in SORTS:
        raise UsageError(f"--sort must be one of {', '.join(SORTS)}, not {sort!r}")
    state = {"sort": sort, "filter": filter_ or "", "typing": None}
    asyncio.run(_run(namesrv, cluster, interval, once, state, limit, system, json_out))


async def _run(namesrv, cluster, interval, once, state, limit, system, json_out) -> None:
    import asyncio
    import sys

    from mqtool.client.admin import Admin
    from mqtool.client.top import ClusterWatch
    admin = Admin(namesrv)
    watch = ClusterWatch(admin, cluster, system)
    try:
        if once:
            await watch.step()
            await asyncio.sleep(interval)
            view = await watch.step()
            if json_out:
                emit_json(shape(view, state, limit))
            else:
                console.print(render(view, state, limit, keys=False))     # a snapshot: no keys to press
            return
        if json_out:
            while True:
                emit_json(shape(await watch.step(), state, limit))
                sys.stdout.flush()
                await asyncio.sleep(interval)
        await _live(watch, interval, state, limit)
    finally:
        await admin.close()


async def _live(watch, interval: float, state: dict, limit: int) -> None:
    import asyncio
    import sys

    from mqtool.cli.watching import frames
    keys: asyncio.Queue = asyncio.Queue()
    restore = _keyboard(asyncio.get_running_loop(), keys) if sys.stdin.isatty() else None
    try:
        with frames(console, screen=True) as show:
            view = await watch.step()
            while True:
                show(render(view, state, limit))
                try:
                    async with asyncio.timeout(interval):
                        key = await keys.get()
                except TimeoutError:
                    view = await watch.step()
                    continue
                if not on_key(state, key):
                    return
    finally:
        if restore:
            restore()


def _keyboard(loop, keys) -> callable:
    """Read single key presses from the terminal (cbreak mode) into `keys`; returns the undo."""
    import os
    import sys
    import termios
    import tty
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    loop.add_reader(fd, lambda: keys.put_nowait(os.read(fd, 32).decode(errors="replace")))

    def restore():
        loop.remove_reader(fd)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    return restore


def on_key(state: dict, text: str) -> bool:
    """Apply key presses to the view state; False to quit."""
    for ch in text:
        if state["typing"] is not None:              # typing a filter
            if ch in "\r\n":
                state["filter"], state["typing"] = state["typing"], None
            elif ch == "\x1b":
                state["typing"] = None
            elif ch in "\x7f\b":
                state["typing"] = state["typing"][:-1]
            elif ch.isprintable():
                state["typing"] += ch
        elif ch in "qQ":
            return False
        elif ch == "s":
            state["sort"] = SORTS[(SORTS.index(state["sort"]) + 1) % len(SORTS)]
        elif ch == "/":
            state["typing"] = ""
        elif ch == "\x1b":
            state["filter"] = ""
    return True


def shape(view: dict, state: dict, limit: int) -> dict:
    """The view after sort, filter and limit: what is drawn, and what --json prints."""
    text = state["filter"]
    topics = [t for t in view["topics"] if text in t["topic"]]
    groups = [g for g in view["groups"] if text in g["group"] or text in g["topic"]]
    if state["sort"] == "name":
        topics.sort(key=lambda t: t["topic"])
        groups.sort(key=lambda g: (g["group"], g["topic"]))
    elif state["sort"] == "lag":
        topics.sort(key=lambda t: (-t["max_offset"], t["topic"]))
        groups.sort(key=lambda g: (-g["lag"], g["group"], g["topic"]))
    else:
        topics.sort(key=lambda t: (-(t["put_tps"] or 0), -t["max_offset"], t["topic"]))
        groups.sort(key=lambda g: (-(g["consume_tps"] or 0), -g["lag"], g["group"], g["topic"]))
    return dict(view, topics=topics[:limit], groups=groups[:limit], sort=state["sort"], filter=text)


def _tps(v) -> str:
    return "-" if v is None else f"{v:,.1f}"


def _timer(b: dict) -> str:
    """5.x timer messages: waiting, and how far delivery is behind (- for a broker without a timer)."""
    if b.get("timer_pending") is None:
        return "-"
    return f"{b['timer_pending']:,} waiting, {b['timer_behind_s']}s behind"


def render(view: dict, state: dict, limit: int, keys: bool = True):
    """The three tables, and (`keys`: the live view) the line of keys that drive it."""
    from rich.console import Group
    from rich.text import Text

    from mqtool.cli.output import table
    from mqtool.client.top import sparkline
    v = shape(view, state, limit)
    brokers = table("cluster", "broker", "BID", "address", "put TPS", "get TPS", "disk", "put today", "get today",
                    "timer", title="Brokers")
    for b in v["brokers"]:
        if not b["reachable"]:
            brokers.add_row(b["cluster"], b["broker"], str(b["broker_id"]), b["address"], "unreachable", "", "", "", "",
                            "")
            continue
        brokers.add_row(b["cluster"], b["broker"], str(b["broker_id"]), b["address"], _tps(b["put_tps"]),
                        _tps(b["get_tps"]), f"{b['disk_ratio']:.1%}", f"{b['put_today']:,}", f"{b['get_today']:,}",
                        _timer(b))
    topics = table("topic", "put TPS", "max offset", title=f"Topics ({len(view['topics'])})")
    for t in v["topics"]:
        topics.add_row(t["topic"], _tps(t["put_tps"]), f"{t['max_offset']:,}")
    groups = table("group", "topic", "consume TPS", "lag", "behind", "trend", title=f"Consumer groups ({len(view['groups'])})")
    for g in v["groups"]:
        behind = f"{g['behind_ms'] / 1000:,.1f}s" if g["lag"] else "0s"
        groups.add_row(g["group"], g["topic"], _tps(g["consume_tps"]), f"{g['lag']:,}", behind, sparkline(g["trend"]))
    filt = f" [{state['typing']}_]" if state["typing"] is not None else (f" [{state['filter']}]" if state["filter"] else "")
    if not keys:
        return Group(brokers, topics, groups)
    footer = Text(KEYS_HELP.format(sort=state["sort"], filt=filt), style="dim")
    return Group(brokers, topics, groups, footer)
