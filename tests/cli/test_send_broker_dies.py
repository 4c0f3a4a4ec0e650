"""`mqtool send` when the broker dies under it: the error names the broker, why, and what was acknowledged."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from tests.servers import REPO, die_with_parent, drain, start_broker, start_namesrv, wait_until


@pytest.mark.slow
def test_a_sender_names_the_broker_killed_under_it(tmp_path):
    ns, ns_addr = start_namesrv(tmp_path)
    broker, addr = start_broker(tmp_path, ns_addr, extra="flushDiskType=SYNC_FLUSH\n")
    drain(broker)
    sender = subprocess.Popen([sys.executable, "-m", "mqtool", "send", "-n", ns_addr, "-t", "Dies", "--count",
                               "100000000", "--batch", "8", "--size", "1024"],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=die_with_parent())
    try:
        cq = tmp_path / "store-broker-a" / "consumequeue" / "Dies"

        def units() -> int:          # one sender sends a batch after the last one's answer: a third
            return sum((len(f.read_bytes().rstrip(b"\0")) + 19) // 20 for f in cq.rglob("0*") if f.is_file())
        wait_until("the broker acknowledged sends", lambda: units() >= 3 * 8, timeout=60)   # stored: 2 acked
        os.kill(broker.proc.pid, signal.SIGKILL)
        broker.proc.wait(10)
        _, err = sender.communicate(timeout=90)
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.wait(10)
        broker.stop()
        ns.stop()
    assert sender.returncode == 1
    assert "TBW102" not in err, err
    m = re.search(rf"broker broker-a at {re.escape(addr)} stopped answering \(([^)]*)\) after (\d+) messages? were "
                  r"acknowledged", err)
    assert m, err
    assert re.search(r"refused|reset|closed", m.group(1)), m.group(1)
    assert int(m.group(2)) > 0 and int(m.group(2)) % 8 == 0           # whole batches were acknowledged
    assert err.count("\n") == 1                                       # one line, no traceback
