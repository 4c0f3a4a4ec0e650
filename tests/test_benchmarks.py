"""Every benchmark runs in quick mode, so none of them can rot (figures are not checked here)."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mqtool.cluster.lifeline import die_with_parent

BENCH = Path(__file__).parent.parent / "benchmarks"
QUICK_TIMEOUT = 240      # under pytest's 300 s, so that this, not pytest, ends a run that hangs


def run_quick(cmd: list[str], timeout: float = QUICK_TIMEOUT) -> subprocess.CompletedProcess:
    """Run a benchmark in its own process group and end the whole group afterwards, timeout
    included: a server it started that outlived it (an orphaned broker ran on for 18 minutes after
    a timeout) is killed with it. The script also dies if this process does (die_with_parent)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=BENCH.parent,
                            start_new_session=True, preexec_fn=die_with_parent())
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd[1:])} took more than {timeout:.0f} s; its process group was killed:\n"
                    f"{err[-2000:]}")
    finally:
        _kill_group(proc.pid)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:      # every process of the group has ended
        pass


@pytest.mark.slow
@pytest.mark.parametrize("script", ["store_scan.py", "store_append.py", "store_verify.py", "broker_produce.py",
                                    "ha_replication.py", "broker_capacity.py", "metrics_scrape.py", "soak.py",
                                    "consumer_drain.py", "spark_live.py", "crash_restart.py", "metadata_scale.py",
                                    "failover.py", "broker_inprocess.py",
                                    "store_open.py", "page_touch.py", "chaos.py", "pop_consume.py", "grpc_send.py", "grpc_tls.py", "grpc_server.py",
                                    "timer_messages.py",
                                    "cli_startup.py"])
def test_benchmark_quick_mode(script):
    proc = run_quick([sys.executable, str(BENCH / script), "--quick", "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "skipped" in result or "baseline" in result


def test_a_benchmark_broker_whose_port_was_taken_starts_on_new_ports(monkeypatch):
    """The quick run of consumer_drain.py failed in CI with "the broker did not start (exit 1)": a
    port chosen free was taken before the broker bound it. broker_process now tries new ports."""
    import socket
    monkeypatch.syspath_prepend(str(BENCH))
    import brokerproc
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    first = taken.getsockname()[1]
    chosen = iter([first - 1])              # the HA port (listenPort + 1) is the taken one
    real = brokerproc.free_port_pair
    monkeypatch.setattr(brokerproc, "free_port_pair", lambda: next(chosen, None) or real())
    try:
        with brokerproc.broker_process() as broker:
            assert broker.port != first - 1
            with socket.create_connection(("127.0.0.1", broker.port), timeout=5):
                pass
    finally:
        taken.close()


def test_a_benchmark_broker_that_cannot_start_says_why(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import brokerproc
    with pytest.raises(SystemExit, match=r"did not start \(exit 2\): .*No such option: --no-such-option"):
        with brokerproc.broker_process("--no-such-option"):
            pass


def test_a_brokers_cpu_per_thread_names_its_store_threads(monkeypatch):
    """broker_capacity's per-thread figures: a running broker's event loop is "main" and the store's
    threads are found under their own names (store/threadname.py); by_thread turns two marks into
    µs a message per name, the smallest ones summed as "others"."""
    monkeypatch.syspath_prepend(str(BENCH))
    import broker_capacity
    import brokerproc
    with brokerproc.broker_process() as broker:
        names = brokerproc.thread_cpu_seconds(broker.pid)
    assert {"main", "commitlog-flush", "dispatch", "commitlog-prewr"} <= set(names), names
    before = {"main": 1.0, "a": 0.0, "b": 0.5}
    after = {"main": 3.0, "a": 0.25, "b": 0.5, "c": 0.1}
    assert broker_capacity.by_thread([before, after], 1_000_000, top=2) == {"main": 2.0, "a": 0.25, "others": 0.1}
    assert broker_capacity.by_thread([before], 10) == {}


def test_a_quick_run_past_its_timeout_ends_with_every_process_it_started(tmp_path):
    """A stand-in benchmark that starts a child which would outlive it (no lifeline) and then
    hangs: the run fails at its timeout, and the child is gone with it."""
    from tests.servers import wait_until
    from tests.test_lifeline import gone
    script, pid_file = tmp_path / "hangs.py", tmp_path / "child.pid"
    script.write_text("import subprocess, sys, time\n"
                      "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                      f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
                      "time.sleep(600)\n")
    with pytest.raises(pytest.fail.Exception, match="took more than 10 s; its process group was killed"):
        run_quick([sys.executable, str(script)], timeout=10)
    assert pid_file.exists(), "the stand-in benchmark never started its child"
    child = int(pid_file.read_text())
    wait_until(f"the hung benchmark's child {child} to end", lambda: gone(child), timeout=10)
