"""Servers that tests and benchmarks start die with whatever started them, even on `kill -9` of it
(issue 44, item 12: a benchmark's broker ran on, orphaned, 18 minutes after pytest ended)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.servers import wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")


def gone(pid: int) -> bool:
    """No such process, or one that has ended and waits to be reaped (a zombie runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def servers_of_a_killed_parent(tmp_path: Path, starts_a_server: str) -> list[int]:
    """Run a parent that starts a server (its code prints the PIDs of what it started, on one line),
    kill -9 the parent once the server is up, and return those PIDs."""
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        sys.path.insert(0, {str(REPO / "benchmarks")!r})
        tmp = Path({str(tmp_path)!r})
    """) + textwrap.dedent(starts_a_server) + "\ntime.sleep(600)\n"
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "TMPDIR": str(tmp_path)})     # a benchmark's temporary store
    try:
        line = parent.stdout.readline()
        assert line.split() and all(w.isdigit() for w in line.split()), f"the parent printed no PIDs: {line!r}"
        servers = [int(w) for w in line.split()]
        assert not any(gone(pid) for pid in servers)
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        parent.stdout.close()
    return servers


def assert_die(servers: list[int]) -> None:
    try:
        wait_until(f"servers {servers} to die with their parent", lambda: all(gone(pid) for pid in servers),
                   timeout=30)
    except AssertionError:
        for pid in servers:                   # ours: the test started them through the parent
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)
        raise


def test_a_test_server_dies_with_a_killed_parent(tmp_path):
    assert_die(servers_of_a_killed_parent(tmp_path, """
        from tests.servers import start_namesrv
        proc, addr = start_namesrv(tmp)
        print(proc.proc.pid, flush=True)
    """))


def test_a_benchmark_broker_dies_with_a_killed_parent(tmp_path):
    assert_die(servers_of_a_killed_parent(tmp_path, """
        import brokerproc
        with brokerproc.broker_process(prefix=str(tmp) + "/bench-") as broker:
            print(broker.pid, flush=True)
            time.sleep(600)
    """))


@pytest.mark.slow
def test_a_supervised_cluster_dies_with_a_killed_parent(tmp_path):
    """`cluster start` as the cluster tests run it: killing what started the supervisor ends the
    supervisor, whose own children (the servers) then get SIGTERM from it dying."""
    assert_die(servers_of_a_killed_parent(tmp_path, """
        from tests.cluster.test_cluster_start import Supervised, free_base_port
        from tests.servers import free_port, wait_until
        sup = Supervised("--groups", "1", "--namesrv", f"127.0.0.1:{free_port()}", "--base-port",
                         str(free_base_port(1)), "--store-dir", str(tmp / "cluster"))
        wait_until("the cluster", lambda: sup.saw("Running.") or sup.proc.poll() is not None, 120)
        print(sup.proc.pid, *(row[4] for row in sup.rows().values()), flush=True)
    """))
