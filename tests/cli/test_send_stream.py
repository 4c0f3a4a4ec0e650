"""`mqtool send` from a pipe sends each line as it arrives, as kcat -P does (issue 44): a line is
stored while the writer still holds the pipe open; `--batch` batches only what is already there;
EOF and Ctrl-C (SIGINT) both send what was read and print the summary."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import run_cli
from tests.servers import REPO, wait_until

pytestmark = pytest.mark.slow


def _admin(ns: str, fn):
    from mqtool.client.admin import Admin

    async def go():
        admin = Admin(ns)
        try:
            return await fn(admin)
        finally:
            await admin.close()
    return asyncio.run(go())


def stored(ns: str, topic: str) -> int:
    """How many messages the broker holds in `topic` (its queues' max offsets)."""
    return sum(r["max_offset"] for r in _admin(ns, lambda a: a.topic_status(topic)))


def producer_online(ns: str, group: str) -> bool:
    from mqtool_remoting.errors import RemotingCommandError
    try:
        return bool(_admin(ns, lambda a: a.connections(group, producer=True)))
    except RemotingCommandError:
        return False


def sender(ns: str, topic: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mqtool", "send", "-n", ns, "-t", topic, *args], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def write(proc: subprocess.Popen, data: bytes) -> None:
    proc.stdin.write(data)
    proc.stdin.flush()


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    """Its exit code and output, its stdin left as the test left it (open: a signal ends the input)."""
    stdin, proc.stdin = proc.stdin, None
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        stdin.close()
    return proc.returncode, out.decode(), err.decode()


def test_each_line_is_sent_as_it_arrives_and_eof_sends_the_rest(cluster):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "StreamEof", "-r", "1", "-w", "1", check=True)
    proc = sender(ns, "StreamEof", "-g", "PID_STREAM_EOF", "--json")
    try:
        # the producer is there before its first message, as a Java producer after start()
        wait_until("the producer group online", lambda: producer_online(ns, "PID_STREAM_EOF"), timeout=20)
        write(proc, b"first\n")
        wait_until("the first line stored", lambda: stored(ns, "StreamEof") == 1, timeout=20)
        write(proc, b"second\n")
        wait_until("the second line stored", lambda: stored(ns, "StreamEof") == 2, timeout=20)
        write(proc, b"third, no newline")
        proc.stdin.close()                                # EOF: the unfinished last line is a message too
    finally:
        code, out, err = finish(proc)
    assert code == 0, err
    rows = [json.loads(ln) for ln in out.splitlines()]
    assert [(r["status"], r["queue_offset"]) for r in rows] == [("SEND_OK", 0), ("SEND_OK", 1), ("SEND_OK", 2)]
    assert stored(ns, "StreamEof") == 3


def test_ctrl_c_sends_what_was_read_and_prints_the_summary(cluster):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "StreamInt", "-r", "1", "-w", "1", check=True)
    proc = sender(ns, "StreamInt")
    try:
        lines = b"".join(b"m%03d\n" % i for i in range(500))       # 2,500 bytes: one atomic pipe write
        write(proc, lines)
        wait_until("the first line stored", lambda: stored(ns, "StreamInt") >= 1, timeout=20)
        os.kill(proc.pid, signal.SIGINT)                  # the rest were read, not yet sent: all go out
    finally:
        code, out, err = finish(proc)
    assert code == 0, err
    assert "Traceback" not in err
    table = out.splitlines()
    assert table[0].split() == ["status", "msgId", "broker", "queue", "queue", "offset"]
    assert [r.split()[-1] for r in table[1:]] == [str(i) for i in range(500)]
    assert stored(ns, "StreamInt") == 500


def test_batch_takes_what_is_already_there_and_does_not_wait_to_fill(cluster):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "StreamBatch", "-r", "4", "-w", "4", check=True)
    proc = sender(ns, "StreamBatch", "--batch", "10", "--json")
    try:
        write(proc, b"a\nb\nc\n")                          # there together: one batch, one queue
        wait_until("the first three stored", lambda: stored(ns, "StreamBatch") == 3, timeout=20)
        write(proc, b"d\n")                                # alone, and sent without 9 more
        wait_until("the fourth stored", lambda: stored(ns, "StreamBatch") == 4, timeout=20)
        proc.stdin.close()
    finally:
        code, out, err = finish(proc)
    assert code == 0, err
    rows = [json.loads(ln) for ln in out.splitlines()]
    assert len(rows) == 4
    first = rows[:3]
    assert len({(r["broker"], r["queue_id"]) for r in first}) == 1
    assert [r["queue_offset"] for r in first] == [first[0]["queue_offset"] + k for k in range(3)]
