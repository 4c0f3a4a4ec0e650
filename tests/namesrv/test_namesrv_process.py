"""`python -m mqtool namesrv start` as a real process: serves, stops cleanly on signals, fails in one line."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import pytest

from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import connect
from tests.servers import REPO, Process, free_port


async def ask(addr: str, cmd: RemotingCommand) -> RemotingCommand:
    conn = await connect(addr)
    try:
        return await conn.request(cmd)
    finally:
        await conn.close()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mqtool", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_and_stops_cleanly_on_signal(tmp_path, sig):
    port = free_port()
    kv = tmp_path / "conf" / "kv.json"
    ns = Process(["namesrv", "start", "--listen", f"127.0.0.1:{port}", "--kv-config", str(kv)], "boot success")
    try:
        addr = f"127.0.0.1:{port}"
        route = asyncio.run(ask(addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})))
        assert route.code == ResponseCode.TOPIC_NOT_EXIST
        put = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"})
        assert asyncio.run(ask(addr, put)).code == ResponseCode.SUCCESS
    finally:
        os.kill(ns.proc.pid, sig)
        code = ns.proc.wait(20)
        err = ns.proc.stderr.read()
        ns.proc.stderr.close()
    assert code == 0, err
    assert "Traceback" not in err
    # issue 31: a Ctrl-C left no line; the stop is logged, as the broker logs its own
    assert err.splitlines()[-1].endswith(f"mqtool.namesrv: The Name Server on 127.0.0.1:{port} shut down cleanly"), err
    assert json.loads(kv.read_text()) == {"configTable": {"n": {"k": "v"}}}


def test_port_in_use_is_one_line_and_non_zero(tmp_path):
    port = free_port()
    first = Process(["namesrv", "start", "--listen", f"127.0.0.1:{port}", "--kv-config", str(tmp_path / "a.json")],
                    "boot success")
    try:
        second = run_cli("namesrv", "start", "--listen", f"127.0.0.1:{port}", "--kv-config", str(tmp_path / "b.json"))
    finally:
        assert first.stop() == 0
    assert second.returncode != 0
    assert second.stderr.strip().splitlines()[-1] == \
        f"mqtool: error: cannot listen on 127.0.0.1:{port}: address already in use"
    assert "Traceback" not in second.stderr


def test_bad_arguments_and_bad_kv_file_exit_2(tmp_path):
    bad_listen = run_cli("namesrv", "start", "--listen", "127.0.0.1:notaport")
    assert bad_listen.returncode == 2 and "--listen" in bad_listen.stderr and "Traceback" not in bad_listen.stderr
    kv = tmp_path / "kv.json"
    kv.write_text("{not json")
    bad_kv = run_cli("namesrv", "start", "--listen", "127.0.0.1:0", "--kv-config", str(kv))
    assert bad_kv.returncode == 2 and "Traceback" not in bad_kv.stderr
    assert bad_kv.stderr.strip().startswith("mqtool: error: KV config") and str(kv) in bad_kv.stderr


def test_namesrv_conf_as_mqnamesrv_c_reads_it(tmp_path):
    """`namesrv start -c namesrv.conf`: NamesrvConfig's and NettyServerConfig's keys as NamesrvStartup
    reads them; a key it does not take is one warning line (a typo gets the nearest real key)."""
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={port}\norderMessageEnable=true\nkvConfigPath={tmp_path / 'kv.json'}\n"
                    "productEnvName=staging\nserverWorkerThreads=8\nkvConfigPth=x\n")
    ns = Process(["namesrv", "start", "-c", str(conf)], "boot success")
    try:
        warnings = [line for line in ns.startup if line.startswith("mqtool: warning:")]
        got = asyncio.run(ask(f"127.0.0.1:{port}", RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG)))
    finally:
        assert ns.stop() == 0
    props = dict(line.split("=", 1) for line in got.body.decode().splitlines())
    assert (props["listenPort"], props["orderMessageEnable"], props["productEnvName"]) == (str(port), "true", "staging")
    assert props["kvConfigPath"] == str(tmp_path / "kv.json")
    assert warnings == [
        "mqtool: warning: unknown config key 'kvConfigPth' ignored: not a RocketMQ 4.9.8 name server key; "
        "did you mean 'kvConfigPath'?\n",
        "mqtool: warning: serverWorkerThreads ignored: a RocketMQ 4.9.8 key mqtool does not implement (requests "
        "are served on one asyncio event loop, with no thread pools or request queues to size)\n"]
    bad = tmp_path / "bad.conf"
    bad.write_text("listenPort=ten\n")
    r = run_cli("namesrv", "start", "-c", str(bad))
    assert r.returncode == 2 and r.stderr.strip() == "mqtool: error: listenPort must be a port number, not 'ten'"
