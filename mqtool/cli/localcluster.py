"""`mqtool cluster start`, `status` and `stop`: a local cluster in one command, what runs where, and
its stop from another terminal."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.errors import EXIT_PROBLEMS, EXIT_USAGE, UsageError, err_console, register_lazy
from mqtool.cli.output import console, count, emit_json, table

register_lazy("mqtool.cluster.plan", "ClusterInputError", EXIT_USAGE)
register_lazy("mqtool.cluster.supervisor", "ClusterStartError", EXIT_PROBLEMS)
register_lazy("mqtool.cluster.state", "ClusterStopError", EXIT_PROBLEMS)

StoreDirOpt = Annotated[Path, typer.Option("--store-dir", help="Where every process keeps its config, log and "
                                                                "store, and cluster.json.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="JSON lines instead of a table.")]
COLUMNS = ("role", "name", "id", "address", "pid", "store")


def cluster_start(
    groups: Annotated[Optional[int], typer.Option("--groups", "-g", help="Broker groups (broker-a, broker-b, ...); "
                                                  "default: the number of cores.")] = None,
    replicas: Annotated[int, typer.Option("--replicas", "-r", help="Brokers per group; above 1, controller mode "
                                          "(the controller embedded in the name server elects each master).")] = 1,
    namesrv: Annotated[str, typer.Option("--namesrv", "-n", help="HOST:PORT the name server listens on; the "
                                         "controller takes its port + 2.")] = "127.0.0.1:9876",
    base_port: Annotated[int, typer.Option("--base-port", help="The first broker's listenPort; broker i takes "
                                           "base + 10 * i.")] = 10911,
    store_dir: StoreDirOpt = Path("~/mqtool-cluster"),
    config_file: Annotated[Optional[Path], typer.Option("-c", "--config", help="broker.conf: the template of "
                                                        "every broker (ports, names, paths are the cluster's).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Start a name server (with a controller when --replicas > 1) and broker groups, supervised: a process
    that dies is started again. Ctrl-C or SIGTERM stops brokers, then the name server, cleanly."""
    import signal
    import threading

    from mqtool.cluster.plan import plan_cluster, write_files
    from mqtool.cluster.state import is_supervisor, pid_running, read_state
    from mqtool.cluster.supervisor import Supervisor
    template = _read_template(config_file) if config_file is not None else {}
    plan = plan_cluster(groups if groups is not None else (os.cpu_count() or 1), replicas, store_dir, namesrv,
                        base_port, template)
    try:
        old = read_state(plan.store_dir)
    except ValueError:
        old = None                  # a broken state file is rewritten
    if old and old.get("status") == "running" and pid_running(old.get("supervisor_pid")) \
            and old.get("supervisor_pid") != os.getpid() and is_supervisor(old["supervisor_pid"]):
        raise UsageError(f"a cluster already runs from {plan.store_dir} (supervisor pid {old['supervisor_pid']}): "
                         "stop it first, or give another --store-dir")
    if plan.ignored:
        err_console.print(f"mqtool: warning: {config_file} sets {', '.join(plan.ignored)}: the cluster sets these "
                          "for every broker (the template's values are ignored)", markup=False)
    stop = threading.Event()
    sup = Supervisor(plan, lambda e: _event(e, json_out), stop)
    sup.check_ports()
    write_files(plan)
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if sup.start():
            _print_rows(sup.rows(), json_out, _title(plan))
            _child_warnings(plan)
            if not json_out:
                console.print("Running. Ctrl-C stops every broker, then the name server.", markup=False)
            sys.stdout.flush()
            sup.run()
    finally:
        problems = sup.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if problems:
        for p in problems:
            err_console.print(f"mqtool: error: {p}", markup=False)
        raise typer.Exit(EXIT_PROBLEMS)
    if not json_out:
        console.print("Stopped: every process exited cleanly.", markup=False)


def _state(store_dir: Path) -> dict:
    """The store dir's cluster.json; UsageError when there is none or it is not one."""
    from mqtool.cluster.state import read_state, state_path
    try:
        state = read_state(store_dir)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if state is None:
        raise UsageError(f"no cluster in {store_dir} ({state_path(store_dir)} does not exist): "
                         "start one with `mqtool cluster start --store-dir DIR`")
    return state


def cluster_stop(store_dir: StoreDirOpt = Path("~/mqtool-cluster"),
                 timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for every process to "
                                                        "exit.")] = 90.0,
                 json_out: JsonOpt = False) -> None:
    """Stop the `cluster start` running from --store-dir, from another terminal, as its Ctrl-C does (as
    mqshutdown stops a broker): SIGTERM to its supervisor, which stops the brokers, then the name server."""
    import signal
    import time

    from mqtool.cluster.state import ClusterStopError, is_supervisor, pid_running, read_state, state_path
    state = _state(store_dir)
    where = state_path(store_dir).parent
    pid = state.get("supervisor_pid")
    if state.get("status") != "running" or not pid_running(pid):
        raise ClusterStopError(f"no cluster runs from {where} (supervisor pid {pid} is not running)")
    if not is_supervisor(pid):
        raise ClusterStopError(f"no cluster runs from {where}: pid {pid} is now another program, left alone")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    with console.status(f"stopping the cluster from {where} (supervisor pid {pid})"):
        while pid_running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    if pid_running(pid):
        raise ClusterStopError(f"the cluster from {where} (supervisor pid {pid}) has not stopped within "
                               f"{timeout:g} s; it is still stopping, or see its output")
    try:
        after = read_state(store_dir) or {}
    except ValueError:
        after = {}                  # not a state file any more: said below as no record of the stop
    problems = after.get("problems", []) if after.get("status") == "stopped" else \
        [f"its supervisor (pid {pid}) ended without saying how its processes stopped"]
    if json_out:
        emit_json({"store_dir": str(where), "supervisor_pid": pid, "stopped": not problems, "problems": problems})
    if problems:
        raise ClusterStopError(f"the cluster from {where} stopped, not cleanly: {'; '.join(problems)}")
    if not json_out:
        console.print(f"stopped the cluster from {where}: every process exited cleanly", markup=False)


def cluster_status(store_dir: StoreDirOpt = Path("~/mqtool-cluster"), json_out: JsonOpt = False) -> None:
    """What a `cluster start` runs where: each process's pid and whether it is alive, and the brokerId the
    name server has for each broker address (0: the master)."""
    from mqtool.cluster.state import is_supervisor, pid_running, runs_mqtool, state_path
    state = _state(store_dir)
    supervisor = state.get("supervisor_pid")
    running = state.get("status") == "running" and pid_running(supervisor) and is_supervisor(supervisor)
    registered = _registered(state.get("namesrv")) if running else {}
    rows = []
    for r in state["processes"]:
        alive = running and pid_running(r.get("pid")) and runs_mqtool(r["pid"])
        rows.append(dict(r, alive=alive, registered_id=registered.get(r.get("address"))))
    if json_out:
        emit_json(dict(state, running=running, processes=rows))
        return
    t = table(*COLUMNS[:5], "state", "namesrv id", "store",
              title=f"cluster {'running' if running else 'stopped'} from {state_path(store_dir).parent} "
                    f"(supervisor pid {supervisor}{'' if running else ', not running'})")
    for r in rows:
        t.add_row(r["role"], r["name"], r["id"], r["address"], str(r["pid"] or "-"), "up" if r["alive"] else "down",
                  "-" if r["registered_id"] is None else str(r["registered_id"]), r["store"])
    console.print(t)


def _read_template(path: Path) -> dict[str, str]:
    from mqtool_remoting import javaprops
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the broker.conf template: "
                         f"{getattr(exc, 'strerror', None) or exc}") from None
    return javaprops.loads(text)


def _title(plan) -> str:
    mode = "controller mode" if plan.replicas > 1 else "ASYNC_MASTER brokers"
    return (f"cluster DefaultCluster: {count(plan.groups, 'group')} x {count(plan.replicas, 'replica')} ({mode}), "
            f"name server {plan.namesrv_addr}, store {plan.store_dir}")


def _print_rows(rows: list[dict], json_out: bool, title: str) -> None:
    if json_out:
        for r in rows:
            emit_json(dict(r, event="running"))
        return
    t = table(*COLUMNS, title=title)
    for r in rows:
        t.add_row(r["role"], r["name"], r["id"], r["address"], str(r["pid"]), r["store"])
    console.print(t)


def _child_warnings(plan) -> None:
    """The warnings the children wrote to their logs at start (a template key mqtool does not take), once each."""
    seen = set()
    for m in plan.members:
        try:
            lines = m.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("mqtool: warning:") and line not in seen:
                seen.add(line)
                err_console.print(f"{line} ({m.kind})", markup=False)


def _event(e: dict, json_out: bool) -> None:
    if json_out:
        emit_json(e)
    elif e["event"] == "died":
        said = f" ({e['said']})" if e["said"] and e["code"] > 0 else ""
        console.print(f"{e['key']} (pid {e['pid']}) {e['how']}{said}; starting it again in {e['restart_in']:g} s",
                      markup=False)
    elif e["event"] == "restarting":
        console.print(f"{e['key']} started again: pid {e['pid']}", markup=False)
    elif e["event"] == "up":
        console.print(f"{e['key']} is up again on {e['address']} (pid {e['pid']})", markup=False)
    elif e["event"] == "stopped":
        console.print(f"{e['key']} (pid {e['pid']}) stopped", markup=False)
    sys.stdout.flush()


def _registered(namesrv: str | None) -> dict[str, int]:
    """Broker address -> the brokerId the name server routes it as; empty if it does not answer."""
    if not namesrv:
        return {}
    import asyncio

    from mqtool.client.admin import Admin
    from mqtool_remoting.errors import RemotingError

    async def go():
        admin = Admin(namesrv)
        try:
            async with asyncio.timeout(5):
                return await admin.cluster_info()
        finally:
            await admin.close()
    try:
        info = asyncio.run(go())
    except (RemotingError, OSError, TimeoutError):   # the name server is down or restarting: the table says what it can
        return {}
    found = {}
    for entry in info.get("brokerAddrTable", {}).values():
        for bid, addr in entry.get("brokerAddrs", {}).items():
            found[addr] = int(bid)
    return found
