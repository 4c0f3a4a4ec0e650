"""`mqtool namesrv ...`: run a name server."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.errors import EXIT_USAGE, register_lazy
from mqtool.cli.serve import parse_listen, run_until_signal, setup_logging

app = typer.Typer(help="Run a RocketMQ name server.", no_args_is_help=True)
register_lazy("mqtool.namesrv.kvconfig", "KVConfigError", EXIT_USAGE)


@app.command()
def start(
    listen: Annotated[str, typer.Option("--listen", "-l", help="HOST:PORT (or PORT) to listen on.")] = "0.0.0.0:9876",
    kv_config: Annotated[Optional[Path], typer.Option(
        "--kv-config", help="KV config file (default ~/namesrv/kvConfig.json, as RocketMQ).")] = None,
    order_message_enable: Annotated[bool, typer.Option(
        "--order-message-enable", help="Add ORDER_TOPIC_CONFIG values to routes (namesrv orderMessageEnable).")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Start a name server (port 9876 by default); SIGINT/SIGTERM stop it."""
    import asyncio
    from mqtool.namesrv.server import NameServer
    host, port = parse_listen(listen)
    setup_logging(verbose)
    server = NameServer(kv_config, order_message_enable)   # reads the KV file now: errors before listening

    async def begin():
        await server.start(host, port)
        logging.getLogger("mqtool.namesrv").info(
            "The Name Server boot success. serializeType=JSON, listening on %s:%d, kv config %s",
            host, server.port, server.kv.path)

    asyncio.run(run_until_signal(begin, server.stop))
