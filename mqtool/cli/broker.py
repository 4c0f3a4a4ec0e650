"""`mqtool broker ...`: run a broker (with an embedded name server when none is given)."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from mqtool.cli.errors import StartError, UsageError, err_console
from mqtool.cli.serve import parse_listen, run_until_signal, setup_logging, taken_port

app = typer.Typer(help="Run a RocketMQ broker.", no_args_is_help=True)
log = logging.getLogger("mqtool.broker")


@app.command()
def start(
    namesrv: Annotated[Optional[str], typer.Option("-n", "--namesrv-addr", help="Name servers, ';'-separated.")] = None,
    config_file: Annotated[Optional[Path], typer.Option("-c", "--config", help="broker.conf (RocketMQ property names).")] = None,
    listen: Annotated[Optional[str], typer.Option("--listen", "-l", help="HOST:PORT (default 0.0.0.0:10911).")] = None,
    store_dir: Annotated[Optional[Path], typer.Option("--store-dir", help="storePathRootDir (default ~/store).")] = None,
    broker_ip: Annotated[Optional[str], typer.Option("--broker-ip", help="brokerIP1: the address clients are given.")] = None,
    embedded_namesrv: Annotated[Optional[str], typer.Option(
        "--embedded-namesrv", help="HOST:PORT for the embedded name server (default 0.0.0.0:9876).")] = None,
    metrics_port: Annotated[Optional[int], typer.Option(
        "--metrics-port", help="metricsPort: serve Prometheus metrics at http://HOST:PORT/metrics (default off).")] = None,
    enable_proxy: Annotated[bool, typer.Option(
        "--enable-proxy", help="Serve RocketMQ 5 clients over gRPC on grpcServerPort (8081), as mqbroker "
                               "--enable-proxy (Local mode); broker.conf: enableProxy=true.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Start a broker. With no name server given anywhere, an embedded one runs in the same process;
    --embedded-namesrv starts it whatever NAMESRV_ADDR or broker.conf's namesrvAddr say."""
    import asyncio
    from mqtool.broker.config import BrokerConfig, apply_properties, load_broker_conf
    if namesrv and embedded_namesrv:
        raise UsageError("give either -n/--namesrv-addr or --embedded-namesrv, not both")
    setup_logging(verbose)
    cfg = BrokerConfig(brokerName="broker-a")
    props = {}
    if config_file is not None:
        if not config_file.is_file():
            raise UsageError(f"{config_file}: no such config file")
        props = load_broker_conf(config_file)
    env_ns = os.environ.get("NAMESRV_ADDR")
    try:
        rest = apply_properties(cfg, props)
        if embedded_namesrv:        # the explicit flag wins over the file and the environment
            ignored = [f"namesrvAddr={cfg.namesrvAddr} (broker.conf)"] if cfg.namesrvAddr else []
            ignored += [f"NAMESRV_ADDR={env_ns} (environment)"] if env_ns else []
            if ignored:
                err_console.print(f"mqtool: warning: --embedded-namesrv given: {' and '.join(ignored)} ignored",
                                  markup=False)
            cfg.namesrvAddr = ""
        elif env_ns and not cfg.namesrvAddr:
            cfg.namesrvAddr = env_ns
        if namesrv:
            cfg.namesrvAddr = namesrv
        host = "0.0.0.0"
        if listen:
            host, cfg.listenPort = parse_listen(listen)
        if store_dir:
            cfg.storePathRootDir = str(store_dir)
        if metrics_port is not None:
            cfg.metricsPort = metrics_port
        if enable_proxy:
            cfg.enableProxy = True
        if broker_ip:
            cfg.brokerIP1 = broker_ip
        elif listen and host not in ("0.0.0.0", "::"):
            cfg.brokerIP1 = host
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from mqtool.broker.controller import BrokerController
    try:
        controller = BrokerController(cfg, rest)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    controller.config_file = config_file
    for note in controller.notes:
        err_console.print(f"mqtool: warning: {note}", markup=False)
    embedded = None
    if not cfg.namesrv_addrs:
        from mqtool.namesrv.server import NameServer
        ns_host, ns_port = parse_listen(embedded_namesrv or "0.0.0.0:9876")
        embedded = (NameServer(Path(cfg.storePathRootDir).expanduser() / "namesrv" / "kvConfig.json"), ns_host, ns_port)
    # A port taken by another process: said before the name server, the store or a port is started.
    # (Named as the controller's own errors name them, which stay for a port taken meanwhile.)
    sc, fast = controller.store_config, cfg.fast_port if cfg.listenPort else 0
    ha = sc.haListenPort if cfg.listenPort and not controller.is_slave else 0
    taken = taken_port(host, [
        (cfg.listenPort, f"{host}:{cfg.listenPort}"),
        (fast, f"the fast port {fast} ({'fastListenPort' if cfg.fastListenPort else 'listenPort - 2'})"),
        (ha, f"the HA port {ha} (listenPort + 1)"), (cfg.metricsPort, f"metricsPort {cfg.metricsPort}"),
        (cfg.grpcServerPort if cfg.enableProxy else 0, f"grpcServerPort {cfg.grpcServerPort}")])
    if taken is None and embedded:
        taken = taken_port(embedded[1], [(embedded[2], f"the embedded name server's port {embedded[1]}:{embedded[2]}")])
    if taken:
        raise StartError(f"broker could not start: {taken}")

    async def begin():
        if embedded:
            ns, ns_host_, ns_port_ = embedded
            await ns.start(ns_host_, ns_port_)
            reach = "127.0.0.1" if ns_host_ in ("0.0.0.0", "::") else ns_host_
            cfg.namesrvAddr = f"{reach}:{ns.port}"
            log.info("embedded name server listening on %s:%d", ns_host_, ns.port)
        try:
            await controller.start(host)
        except OSError as exc:          # the fast or HA port taken: exit 1, as a taken main port
            raise StartError(f"broker could not start: {exc}") from None

    async def finish():
        await controller.stop()
        if embedded:
            await embedded[0].stop()

    asyncio.run(run_until_signal(begin, finish))
