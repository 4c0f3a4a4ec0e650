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
