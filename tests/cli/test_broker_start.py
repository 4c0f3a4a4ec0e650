"""`mqtool broker start`: which name server a broker uses when several are given."""
from __future__ import annotations

import os

import pytest

from tests.conftest import json_lines, run_cli
from tests.servers import Process, free_port, free_port_pair, wait_until


@pytest.mark.slow
def test_an_explicit_embedded_namesrv_wins_over_the_environment(tmp_path):
    ns = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "NAMESRV_ADDR": "127.0.0.1:1"}          # nothing there
    broker = Process(["broker", "start", "--listen", f"127.0.0.1:{free_port_pair()}", "--store-dir",
                      str(tmp_path / "store"), "--embedded-namesrv", ns], "boot success", env=env)
    try:
        startup = "".join(broker.startup)
        assert f"embedded name server listening on {ns}" in startup
        assert f"name server is {ns}" in startup
        assert "NAMESRV_ADDR=127.0.0.1:1 (environment) ignored" in startup
        wait_until("the broker in the embedded name server's cluster list", lambda: json_lines(
            run_cli("cluster", "list", "-n", ns, "--json").stdout))
    finally:
        assert broker.stop() == 0


def test_namesrv_addr_and_embedded_namesrv_together_are_one_error(tmp_path):
    proc = run_cli("broker", "start", "-n", "127.0.0.1:9876", "--embedded-namesrv", "127.0.0.1:9877",
                   "--listen", f"127.0.0.1:{free_port_pair()}", "--store-dir", tmp_path / "store")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "mqtool: error: give either -n/--namesrv-addr or --embedded-namesrv, not both"]


@pytest.mark.parametrize("under", ["", "sub/store"])
def test_a_store_dir_that_is_a_file_is_one_line_naming_the_file(tmp_path, under):
    a_file = tmp_path / "afile"
    a_file.write_text("not a store\n")
    store_dir = a_file / under if under else a_file
    proc = run_cli("broker", "start", "--listen", f"127.0.0.1:{free_port_pair()}", "--store-dir", store_dir,
                   "--embedded-namesrv", f"127.0.0.1:{free_port()}")
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if " INFO " not in line]
    assert errors == [f"mqtool: error: {a_file} is a file, where a directory is needed"]
