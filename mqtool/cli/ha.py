"""`mqtool ha status`: replication of each broker group, live (name server) or offline (two stores)."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.auth import with_credentials
from mqtool.cli.errors import UsageError, err_console
from mqtool.cli.output import console, emit_json, fmt_time, table
from mqtool.cli.send import NamesrvOpt

app = typer.Typer(help="Master/slave replication (HA).", no_args_is_help=True)


def _bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _lag_time(ms) -> str:
    if ms is None:
        return "-"
    return f"{ms / 1000:.1f} s" if ms < 120_000 else f"{ms / 60_000:.1f} min"


def render_live(groups: list[dict]):
    t = table("cluster", "broker", "id", "address", "max offset", "lag", "lag time", "rate/s", "in sync", "why",
              title=f"Replication ({time.strftime('%H:%M:%S')})")
    for g in groups:
        m = g["master"]
        t.add_row(g["cluster"], g["brokerName"], "0", str(m["addr"] or "-"),
                  str(m.get("commitLogMaxOffset", "-")) if m["reachable"] else "unreachable", "", "", "", "",
                  m.get("error", ""))
        for s in g["slaves"]:
            rate = s.get("transferredBytesPerSecond")
            t.add_row("", "", str(s["brokerId"]), s["addr"], str(s.get("commitLogMaxOffset", "-")),
                      _bytes(s.get("lagBytes")), _lag_time(s.get("lagMs")), "-" if rate is None else _bytes(rate),
                      "yes" if s["inSync"] else "no", s.get("why", ""))
        if not g["slaves"]:
            t.add_row("", "", "", "(no slave)", "", "", "", "", "", "")
        cm = g.get("controllerMode")
        if cm is not None:
            epochs = ", ".join(f"{e['epoch']}@{e['startOffset']}" for e in cm.get("epochs", [])) or "-"
            t.add_row("", "", "", f"master epoch {cm['masterEpoch']}, SyncStateSet {cm['syncStateSet']}",
                      "", "", "", "", "", cm.get("noMaster") or f"epochs {epochs}")
    notes = sorted({n for g in groups for n in g["notes"]})
    return t, notes


def _online(namesrv: str, cluster: str | None, broker: str | None) -> list[dict]:
    import asyncio
    return asyncio.run(_online_async(namesrv, cluster, broker))


async def _online_async(namesrv: str, cluster: str | None, broker: str | None) -> list[dict]:
    from mqtool.client.admin import Admin
    from mqtool.client.ha import ha_status
    admin = Admin(namesrv)
    try:
        return await ha_status(admin, cluster, broker)
    finally:
        await admin.close()


def _offline(stores: list[Path], json_out: bool) -> None:
    from mqtool_store.storediff import compare_commitlogs
    if len(stores) != 2:
        raise UsageError("--store takes exactly two store roots: --store MASTER_ROOT --store SLAVE_ROOT")
    for s in stores:
        if not s.exists():
            raise UsageError(f"{s}: no such store")
    diff = compare_commitlogs(stores[0], stores[1]).to_json()
    if json_out:
        emit_json(diff)
    else:
        _print_diff(stores, diff)
    corrupt = [(side, store) for side, store in zip(("master", "slave"), stores)
               if diff[f"{side}_end"].startswith("corrupt")]
    for side, store in corrupt:
        err_console.print(f"mqtool: unreadable: the {side}'s commit log ({store}) holds no valid record at offset "
                          f"{diff[f'{side}_max_offset']} ({diff[f'{side}_end']})", markup=False)
    if diff["first_difference"] is not None or corrupt:
        raise typer.Exit(1)             # the copies disagree (not lag but divergence), or cannot be read


def _print_diff(stores: list[Path], diff: dict) -> None:
    t = table("", "value", title=f"{stores[0]} (master) vs {stores[1]} (slave)")
    for key, value in diff.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value)) or "-"
        if key.endswith("_timestamp"):
            value = f"{value} ({fmt_time(value)})" if isinstance(value, int) else value
        t.add_row(key, "-" if value is None else str(value))
    console.print(t)


@app.command()
@with_credentials
def status(
    namesrv: NamesrvOpt = "127.0.0.1:9876",
    cluster: Annotated[Optional[str], typer.Option("-c", "--cluster", help="Only this cluster.")] = None,
    broker: Annotated[Optional[str], typer.Option("-b", "--broker", help="Only the group of this broker (name or HOST:PORT).")] = None,
    store: Annotated[Optional[list[Path]], typer.Option("--store", help="Offline: MASTER_ROOT then SLAVE_ROOT.")] = None,
    watch: Annotated[Optional[float], typer.Option("--watch", min=0.2, help="Redraw every SECONDS.")] = None,
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """For each broker group: the master's max offset, each slave's offset, lag in bytes and time,
    transfer rate, in sync or not and why. With --store: compare two stores' commit logs offline
    (exit 1 when the copies differ inside the range both hold)."""
    if store:
        if watch:
            raise UsageError("--watch needs a live cluster, not --store")
        if cluster or broker:
            raise UsageError("--cluster and --broker pick groups of a live cluster; --store compares the two stores given")
        _offline(list(store), json_out)
        return
    if watch is None:
        groups = _online(namesrv, cluster, broker)
        if json_out:
            for g in groups:
                emit_json(g)
            return
        t, notes = render_live(groups)
        console.print(t)
        for n in notes:
            console.print(f"note: {n}")
        return
    _watch(namesrv, cluster, broker, watch, json_out)


def _watch(namesrv: str, cluster, broker, seconds: float, json_out: bool) -> None:
    import asyncio

    from rich.console import Group

    from mqtool.cli.watching import every, frames

    async def line():
        emit_json({"time": int(time.time() * 1000), "groups": await _online_async(namesrv, cluster, broker)})
        sys.stdout.flush()

    async def redraw(show):
        t, notes = render_live(await _online_async(namesrv, cluster, broker))
        show(Group(t, *[f"note: {n}" for n in notes]))
    try:
        if json_out:
            asyncio.run(every(seconds, line))
            return
        with frames(console) as show:
            asyncio.run(every(seconds, lambda: redraw(show)))
    except KeyboardInterrupt:      # a Ctrl-C before the watch started
        return


@app.command()
def elect(
    broker: Annotated[str, typer.Option("-b", "--broker", help="The broker set (brokerName).")],
    controller: Annotated[str, typer.Option(
        "-a", "--controller", envvar="CONTROLLER_ADDR", help="Controller address(es), HOST:PORT;HOST:PORT.")
    ] = "127.0.0.1:9878",
    broker_id: Annotated[Optional[int], typer.Option(
        "--broker-id", help="Make this controller id the master (a switchover); default: the controller's choice.")
    ] = None,
    cluster: Annotated[str, typer.Option("-c", "--cluster", help="Cluster name.")] = "DefaultCluster",
    json_out: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Elect a master for a broker set in controller mode (mqadmin electMaster)."""
    import asyncio

    from mqtool.client.controller import ControllerAdmin

    async def go():
        admin = ControllerAdmin(controller)
        try:
            return await admin.elect_master(cluster, broker, broker_id)
        finally:
            await admin.close()
    r = asyncio.run(go())
    if json_out:
        emit_json(r)
        return
    for key, label in (("clusterName", "ClusterName"), ("brokerName", "BrokerName"),
                       ("masterAddress", "BrokerMasterAddr"), ("masterEpoch", "MasterEpoch"),
                       ("syncStateSetEpoch", "SyncStateSetEpoch")):
        typer.echo(f"#{label}:\t{r[key]}")          # mqadmin's lines, tabs kept
    for bid, addr in r["brokerAddrs"].items():
        typer.echo(f"\t#Broker:\t{bid}\t{addr}")
