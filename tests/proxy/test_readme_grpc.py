"""The README's RocketMQ 5 example runs as written with the official Python client: its producer
snippet, then its consumer snippet (the endpoint's port is this test's, the push consumer is shut
down at the end)."""
from __future__ import annotations

import re
import subprocess

import pytest

from tests.proxy.conftest import REPO, mqtool

pytestmark = pytest.mark.slow


def readme_python_blocks() -> list[str]:
    section = REPO.joinpath("README.md").read_text().split("## RocketMQ 5 clients over gRPC", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readme_producer_and_consumers_run(rmq5_python, proxy_cluster, tmp_path):
    blocks = readme_python_blocks()
    assert len(blocks) == 2, "a producer and a consumer example"
    mqtool("topic", "create", "-n", proxy_cluster["namesrv"], "-t", "Orders", "-r", "8", "-w", "8",
           "--message-type", "FIFO")
    port = proxy_cluster["grpc"].rpartition(":")[2]
    code = "\n".join(blocks).replace("127.0.0.1:8081", f"127.0.0.1:{port}") + "\npush.shutdown()\n"
    script = tmp_path / "example.py"
    script.write_text(code)
    proc = subprocess.run([rmq5_python, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    sent_id = lines[0]
    assert len(sent_id) == 34 and sent_id.startswith("01")
    assert lines[1].split(" ")[0] == sent_id and "b'paid'" in lines[1] and lines[1].endswith(" 1")
