"""`mqtool namesrv ...`: run a name server."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.errors import EXIT_USAGE, UsageError, err_console, register_lazy
from mqtool.cli.serve import parse_listen, run_until_signal, setup_logging

app = typer.Typer(help="Run a RocketMQ name server.", no_args_is_help=True)
register_lazy("mqtool.namesrv.kvconfig", "KVConfigError", EXIT_USAGE)


NAMESRV_KEYS = ("listenPort", "kvConfigPath", "orderMessageEnable", "clusterTest", "productEnvName",
                "enableControllerInNamesrv")


@app.command()
def start(
    listen: Annotated[Optional[str], typer.Option(
        "--listen", "-l", help="HOST:PORT (or PORT) to listen on (default 0.0.0.0:9876, or listenPort).")] = None,
    config_file: Annotated[Optional[Path], typer.Option(
        "-c", "--config", help="namesrv.conf (RocketMQ property names: listenPort, kvConfigPath, "
                               "orderMessageEnable, ...); the options here win over it.")] = None,
    kv_config: Annotated[Optional[Path], typer.Option(
        "--kv-config", help="KV config file (default ~/namesrv/kvConfig.json, as RocketMQ).")] = None,
    order_message_enable: Annotated[bool, typer.Option(
        "--order-message-enable", help="Add ORDER_TOPIC_CONFIG values to routes (namesrv orderMessageEnable).")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Start a name server (port 9876 by default); SIGINT/SIGTERM stop it."""
    import asyncio
    from mqtool.namesrv.server import NameServer
    props = {}
    if config_file is not None:
        from mqtool.common.javakeys import check_keys
        from mqtool_remoting import javaprops
        if not config_file.is_file():
            raise UsageError(f"{config_file}: no such config file")
        props = javaprops.loads(config_file.read_text(encoding="utf-8"))
        with_controller = props.get("enableControllerInNamesrv", "").strip().lower() == "true"
        for note in [] if with_controller else check_keys({k: v for k, v in props.items() if k not in NAMESRV_KEYS}, list(NAMESRV_KEYS),
                               server="name server"):
            err_console.print(f"mqtool: warning: {note}", markup=False)
    if listen is None and "listenPort" in props:
        listen = props["listenPort"].strip()
        if not listen.isdigit():
            raise UsageError(f"listenPort must be a port number, not {listen!r}")
    host, port = parse_listen(listen or "0.0.0.0:9876")
    setup_logging(verbose)
    order = order_message_enable or props.get("orderMessageEnable", "").strip().lower() == "true"
    server = NameServer(kv_config or props.get("kvConfigPath") or None, order)   # reads the KV file now
    server.config.update({k: props[k] for k in ("clusterTest", "productEnvName") if k in props})
    server.config_file = config_file
    controller = None
    if props.get("enableControllerInNamesrv", "").strip().lower() == "true":
        # NamesrvStartup: a controller from the same file, on its own address (never the name server's port)
        from mqtool.cli.controller import controller_config
        from mqtool.controller.server import Controller
        controller = Controller(controller_config(props, None, NAMESRV_KEYS))
        controller.config_file = config_file

    async def begin():
        await server.start(host, port)
        logging.getLogger("mqtool.namesrv").info(
            "The Name Server boot success. serializeType=JSON, listening on %s:%d, kv config %s",
            host, server.port, server.kv.path)
        if controller is not None:
            await controller.start()
            logging.getLogger("mqtool.controller").info(
                "The Controller boot success: %s of %s, listening on port %d", controller.config.controllerDLegerSelfId,
                controller.config.controllerDLegerGroup, controller.port)

    async def end():
        if controller is not None:
            await controller.stop()
        await server.stop()
        logging.getLogger("mqtool.namesrv").info("The Name Server on %s:%d shut down cleanly", host, server.port)

    asyncio.run(run_until_signal(begin, end))
