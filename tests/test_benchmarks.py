"""Every benchmark runs in quick mode, so none of them can rot (figures are not checked here)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parent.parent / "benchmarks"


@pytest.mark.slow
@pytest.mark.parametrize("script", ["store_scan.py", "store_append.py", "store_verify.py", "broker_produce.py",
                                    "ha_replication.py", "broker_capacity.py", "metrics_scrape.py", "soak.py",
                                    "consumer_drain.py", "spark_live.py", "crash_restart.py", "metadata_scale.py",
                                    "failover.py", "broker_inprocess.py",
                                    "store_open.py", "page_touch.py", "cli_startup.py"])
def test_benchmark_quick_mode(script):
    proc = subprocess.run([sys.executable, str(BENCH / script), "--quick", "--json"], capture_output=True, text=True,
                          timeout=300, cwd=BENCH.parent)
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
