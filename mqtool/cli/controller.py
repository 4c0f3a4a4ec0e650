"""`mqtool controller ...`: run a controller (RocketMQ 5 controller mode) and ask one."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.auth import with_credentials
from mqtool.cli.errors import EXIT_PROBLEMS, EXIT_USAGE, NothingChanged, UsageError, err_console, register_lazy
from mqtool.cli.output import console, emit_json, table
from mqtool.cli.send import NamesrvOpt
from mqtool.cli.serve import parse_listen, run_until_signal, setup_logging

app = typer.Typer(help="Run a controller (RocketMQ 5 controller mode) and ask it: leader, syncStateSets, elections.",
                  no_args_is_help=True)
register_lazy("mqtool.controller.config", "ControllerConfigError", EXIT_USAGE)
register_lazy("mqtool.controller.raft", "RaftBindError", EXIT_PROBLEMS)

ControllerOpt = Annotated[str, typer.Option(
    "-a", "--controller", envvar="CONTROLLER_ADDR",
    help="Controller address(es), HOST:PORT;HOST:PORT (the leader is found through the first that answers).")]
JsonOpt = Annotated[bool, typer.Option("--json")]


def run(addrs: str, fn):
    import asyncio

    from mqtool.client.controller import ControllerAdmin

    async def go():
        admin = ControllerAdmin(addrs)
        try:
            return await fn(admin)
        finally:
            await admin.close()
    return asyncio.run(go())


def cluster_broker_names(namesrv: str, cluster: str) -> list[str]:
    """The broker names the name server lists under `cluster` (CommandUtil.fetchBrokerNameByClusterName)."""
    import asyncio

    from mqtool.client.admin import Admin

    async def go():
        admin = Admin(namesrv)
        try:
            return await admin.cluster_info()
        finally:
            await admin.close()
    names = asyncio.run(go()).get("clusterAddrTable", {}).get(cluster)
    if not names:
        raise UsageError(f"cluster {cluster!r} has no broker on name server {namesrv}")
    return sorted(names)


def read_props(config_file: Path | None) -> dict[str, str]:
    if config_file is None:
        return {}
    from mqtool_remoting import javaprops
    if not config_file.is_file():
        raise UsageError(f"{config_file}: no such config file")
    return javaprops.loads(config_file.read_text(encoding="utf-8"))


def controller_config(props: dict[str, str], listen: tuple[str, int] | None, also_known: tuple[str, ...] = ()):
    """The ControllerConfig of a properties file, its warnings printed; with --listen and no
    controllerDLegerPeers, a one-node group at that address."""
    from mqtool.controller.config import load
    props = dict(props)
    if listen is not None and "controllerDLegerPeers" not in props:
        host = "127.0.0.1" if listen[0] in ("0.0.0.0", "::", "") else listen[0]
        props["controllerDLegerPeers"] = f"n0-{host}:{listen[1]}"
        props.setdefault("controllerDLegerSelfId", "n0")
    config, notes = load(props, also_known)
    for note in notes:
        err_console.print(f"mqtool: warning: {note}", markup=False)
    return config


@app.command()
def start(
    config_file: Annotated[Optional[Path], typer.Option(
        "-c", "--config", help="controller.conf (5.3.0 names: controllerDLegerGroup, controllerDLegerPeers, "
                               "controllerDLegerSelfId, controllerStorePath, ...).")] = None,
    listen: Annotated[Optional[str], typer.Option(
        "--listen", "-l", help="HOST:PORT to answer on (default: this node's address in controllerDLegerPeers; "
                               "alone, a one-node group there).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Start a controller (127.0.0.1:9878 by default); SIGINT/SIGTERM stop it."""
    import asyncio
    props = read_props(config_file)
    where = parse_listen(listen) if listen else None
    config = controller_config(props, where)
    setup_logging(verbose)
    from mqtool.controller.server import Controller
    controller = Controller(config)
    controller.config_file = config_file

    async def begin():
        await controller.start(where)
        logging.getLogger("mqtool.controller").info(
            "The Controller boot success: %s of %s, listening on port %d, store %s",
            config.controllerDLegerSelfId, config.controllerDLegerGroup, controller.port, config.store_path)

    async def end():            # as the broker and the name server log their clean stop
        await controller.stop()
        logging.getLogger("mqtool.controller").info(
            "The Controller %s of %s on port %d shut down cleanly", config.controllerDLegerSelfId,
            config.controllerDLegerGroup, controller.port)

    asyncio.run(run_until_signal(begin, end))


@app.command()
def status(controller: ControllerOpt = "127.0.0.1:9878", json_out: JsonOpt = False) -> None:
    """The controller group, its leader and peers (mqadmin getControllerMetaData)."""
    meta = run(controller, lambda a: a.metadata())
    if json_out:
        emit_json(meta.to_json())
        return
    console.print(f"group   {meta.group or '-'}")
    console.print(f"leader  {meta.leader_id or '(none)'} {meta.leader_addr or ''}".rstrip())
    t = table("peer", "address", "role")
    for node, addr in meta.peers:
        t.add_row(node, addr, "leader" if node == meta.leader_id else "follower")
    console.print(t)


@app.command("sync-state")
@with_credentials
def sync_state(
    broker: Annotated[Optional[list[str]], typer.Option("-b", "--broker",
                                                        help="Broker set (brokerName); repeat for more.")] = None,
    cluster: Annotated[Optional[str], typer.Option("-c", "--cluster", help="Every broker set of this cluster, "
                                                   "as the name server lists them.")] = None,
    namesrv: NamesrvOpt = "127.0.0.1:9876",
    controller: ControllerOpt = "127.0.0.1:9878",
    json_out: JsonOpt = False,
) -> None:
    """Each broker set's master, epochs and syncStateSet, in and out (mqadmin getSyncStateSet)."""
    names = list(broker or [])
    if cluster:
        names += [n for n in cluster_broker_names(namesrv, cluster) if n not in names]
    elif not names:
        raise UsageError("give -b BROKER_NAME (repeatable) or -c CLUSTER")
    info = run(controller, lambda a: a.sync_state_sets(names))
    if json_out:
        for name, r in info.replicasInfoTable.items():
            emit_json({"brokerName": name, **r.to_dict()})
        return
    t = table("broker", "master id", "master address", "master epoch", "set epoch", "id", "address", "in sync",
              "alive")
    for name, r in info.replicasInfoTable.items():
        first = [name, str(r.masterBrokerId if r.masterBrokerId is not None else "(none)"), r.masterAddress or "-",
                 str(r.masterEpoch), str(r.syncStateSetEpoch)]
        rows = [(x, "yes") for x in r.inSyncReplicas] + [(x, "no") for x in r.notInSyncReplicas]
        for i, (rep, ins) in enumerate(rows):
            t.add_row(*(first if i == 0 else [""] * 5), str(rep.brokerId), rep.brokerAddress or "-", ins,
                      "yes" if rep.alive else "no")
        if not rows:
            t.add_row(*first, "", "", "", "")
    console.print(t)


@app.command("config")
def config_get(controller: ControllerOpt = "127.0.0.1:9878", json_out: JsonOpt = False) -> None:
    """Every controller's config (mqadmin getControllerConfig); each listed address is asked."""
    from mqtool.client.controller import split_addrs

    async def each(admin):
        return {a: await admin.config(a) for a in split_addrs(controller)}
    configs = run(controller, each)
    for addr, props in configs.items():
        if json_out:
            emit_json({"addr": addr, "config": props})
            continue
        console.print(f"============{addr}============")
        for k, v in props.items():
            console.print(f"{k:<50s}=  {v}", markup=False)


@app.command("config-set")
def config_set(
    key: Annotated[str, typer.Option("-k", "--key", help="Config key.")],
    value: Annotated[str, typer.Option("-v", "--value", help="New value.")],
    controller: ControllerOpt = "127.0.0.1:9878",
) -> None:
    """Change one key on every listed controller (mqadmin updateControllerConfig); each keeps it in the
    config file it started with (-c)."""
    from mqtool.client.controller import split_addrs

    async def each(admin):
        answers = []
        for a in split_addrs(controller):
            have = await admin.config(a)            # its keys: a key it lacks is one it ignores
            answers.append((a, key in have, await admin.update_config(a, {key: value})))
        return answers
    answers = run(controller, each)
    if not any(taken for _, taken, _ in answers):
        raise NothingChanged(f"nothing updated on {controller}: {answers[0][2] or f'it has no {key}'}")
    console.print(f"update controller config success!{{{key}={value}}} {controller}", markup=False)
    for a, _, remark in answers:
        if remark:
            err_console.print(f"mqtool: warning: {a}: {remark}", markup=False)


@app.command("clean")
def clean(
    broker: Annotated[str, typer.Option("-b", "--broker", help="Broker set (brokerName).")],
    ids: Annotated[Optional[str], typer.Option("--ids", help="Controller ids to clean, 1;2;3 (default: the whole "
                                                             "set).")] = None,
    cluster: Annotated[Optional[str], typer.Option("-c", "--cluster", help="Cluster name.")] = None,
    living: Annotated[bool, typer.Option("-l", "--clean-living", help="Clean even brokers that are alive.")] = False,
    controller: ControllerOpt = "127.0.0.1:9878",
) -> None:
    """Forget a broker set or some of its ids in the controller (mqadmin cleanBrokerMetadata)."""
    id_list = None
    if ids:
        try:
            id_list = [int(x) for x in ids.replace(",", ";").split(";") if x.strip()]
        except ValueError:
            raise UsageError(f"--ids must be numbers separated by ';', not {ids!r}") from None
    run(controller, lambda a: a.clean_broker_metadata(cluster, broker, id_list, living))
    console.print(f"clear broker {broker} metadata from controller success!", markup=False)
