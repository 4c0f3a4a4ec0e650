"""The README's tour and then its message-trace example, run in order as written against a real
broker: the consume the example runs gets the message it just sent, so `message trace` shows
its Pub, SubBefore and SubAfter (issue 44: it consumed an older backlog message of the tour's topic,
and the trace showed only the Pub)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import cluster, wait_until  # noqa: F401 - cluster: the namesrv + broker fixture

pytestmark = pytest.mark.slow
REPO = Path(__file__).parent.parent
README = (REPO / "README.md").read_text()


def sh_block(containing: str) -> list[str]:
    """The lines of the README's ```sh block that contains `containing`, comments cut."""
    block = next(b for b in re.findall(r"```sh\n(.*?)```", README, re.DOTALL) if containing in b)
    lines = [re.sub(r"\s+#.*$", "", ln).strip() for ln in block.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def run(line: str, ns: str, tmp: Path) -> subprocess.CompletedProcess:
    """One README line in a shell whose venv is active, its name server the test's (NAMESRV_ADDR)."""
    env = dict(os.environ, NAMESRV_ADDR=ns, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(["bash", "-c", line], cwd=tmp, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"{line}\n{proc.stderr}"
    return proc


def test_the_trace_example_after_the_tour_traces_the_message_it_sent(cluster, tmp_path):  # noqa: F811
    ns = cluster["namesrv"]
    tour = [ln for ln in sh_block("mqtool topic create -t Orders") if "~/store" not in ln]   # the broker's own store
    assert len(tour) >= 6, tour
    for line in tour:
        run(line, ns, tmp_path)
    send, consume, trace = [ln for ln in sh_block("mqtool message trace -i") if ln.startswith("mqtool ")]
    assert "--trace" in send and "--trace" in consume and trace.startswith("mqtool message trace -i 7F000001...")
    msg_id = re.search(r"\b[0-9A-F]{32}\b", run(send, ns, tmp_path).stdout).group()
    run(consume, ns, tmp_path)
    command = trace.replace("7F000001...", msg_id)

    def traced() -> str | None:
        out = run(command, ns, tmp_path).stdout
        return out if "SubAfter" in out else None
    out = wait_until(f"{command} to show the consume", traced, timeout=30, every=0.5)
    assert [ln.split()[0] for ln in out.splitlines()[1:]] == ["Pub", "SubBefore", "SubAfter"], out
