"""Master/slave replication end to end: real name server and broker processes, the official C++
client and mqtool's own. The tests of this module run in order on one broker group:
SYNC_MASTER + slave -> slave killed -> slave restarted -> master stopped -> slave's store as a master."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mqtool_store.commitlog import decode_record
from mqtool_store.reader import CommitLogReader
from tests.conftest import json_lines, run_cli
from tests.interop.conftest import HAVE_CPP, run_cpp
from tests.ha import groups
from tests.ha.groups import FILE_SIZE
from tests.servers import FAST_LEVELS, Process, die_with_parent, wait_until

pytestmark = pytest.mark.slow
needs_cpp = pytest.mark.skipif(not HAVE_CPP, reason="C++ client wheel not loadable here")
SEND_OK, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE = 0, 2, 3     # the C++ client's SendStatus


class Group(groups.Group):
    """One broker group: a name server, a master and a slave, each restartable on the same store."""

    def start(self, who: str, role: str, broker_id: int, extra: str = "") -> Process:
        return self.launch(who, self.tmp / f"{who}-{role}.conf",
                           f"brokerClusterName=HACluster\nbrokerName=broker-ha\nbrokerId={broker_id}\n"
                           f"brokerRole={role}\nmappedFileSizeCommitLog={FILE_SIZE}\nslaveTimeout=1000\n"
                           f"messageDelayLevel={FAST_LEVELS}\n{extra}")


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    g = Group(tmp_path_factory.mktemp("ha"))
    g.start("master", "SYNC_MASTER", 0)
    g.start("slave", "SLAVE", 1)
    yield g
    g.close()


def ha_status(g: Group) -> dict:
    proc = run_cli("ha", "status", "-n", g.ns, "--json", check=True)
    [entry] = json_lines(proc.stdout)
    return entry


def slave_in_sync(g: Group, count: int = 1):
    entry = ha_status(g)
    slaves = entry["slaves"]
    ok = len(slaves) == count and all(s.get("connected") and s.get("lagBytes") == 0 for s in slaves)
    return entry if ok else None


def msgs(prefix: str, n: int) -> list[dict]:
    return [{"keys": f"{prefix}-{i}", "tags": "T", "body": f"{prefix} body {i} " + "x" * (i * 37 % 200)}
            for i in range(n)]


def record_bytes(root: Path, offset: int) -> bytes:
    with CommitLogReader(root / "commitlog") as reader:
        f = reader.file_at(offset)
        buf, pos = reader.buffer(f), offset - f.start
        return bytes(buf[pos:pos + int.from_bytes(buf[pos:pos + 4], "big")])


@needs_cpp
def test_every_send_ok_message_is_already_on_the_slave(group):
    wait_until("the slave to connect", lambda: slave_in_sync(group))
    sent = run_cpp("produce", group.ns, {"topic": "HATopic", "messages": msgs("a", 400)})
    assert [r["status"] for r in sent] == [SEND_OK] * 400
    # Read straight away: SEND_OK from a SYNC_MASTER means a slave acknowledged the bytes.
    with CommitLogReader(group.store("master") / "commitlog") as reader:
        where = {rec.keys[0]: off for off, rec in reader.records() if rec.keys}
    for r in sent:
        on_master = record_bytes(group.store("master"), where[r["keys"]])
        assert record_bytes(group.store("slave"), where[r["keys"]]) == on_master
        assert decode_record(on_master).uniq_key == r["msg_id"]
    master_files = sorted(p.name for p in (group.store("master") / "commitlog").iterdir())
    assert len(master_files) >= 2                  # the test crossed a file boundary


@needs_cpp
def test_sends_report_the_missing_slave_then_recover_when_it_returns(group):
    group.kill("slave")
    # mqtool's client shows the broker's answer; the message is stored on the master all the same.
    sent = json_lines(run_cli("send", "-t", "HATopic", "-n", group.ns, "--json", input="b0\nb1\n", check=True).stdout)
    assert [r["status"] for r in sent] == ["SLAVE_NOT_AVAILABLE"] * 2
    # The C++ 1.x client retries a non-SEND_OK answer and then gives up ("No route info ..."):
    # whatever it reports, it must not be SEND_OK.
    sent = run_cpp("produce", group.ns, {"topic": "HATopic", "messages": msgs("b", 1), "report_errors": True})
    assert "error" in sent[0] or sent[0]["status"] in (SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT), sent
    group.start("slave", "SLAVE", 1)               # killed mid-stream: abnormal recovery, then catch up
    entry = wait_until("the slave to catch up", lambda: slave_in_sync(group))
    assert entry["slaves"][0]["inSync"] and entry["master"]["role"] == "SYNC_MASTER"
    sent = run_cpp("produce", group.ns, {"topic": "HATopic", "messages": msgs("c", 20)})
    assert [r["status"] for r in sent] == [SEND_OK] * 20


@needs_cpp
def test_with_the_master_stopped_everything_is_read_from_the_slave(group):
    wait_until("the slave to catch up", lambda: slave_in_sync(group))
    group.stop("master")
    route = json.loads(run_cli("topic", "route", "-t", "HATopic", "-n", group.ns, "--json", check=True).stdout)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"1": group.addr("slave")}
    want = {m["keys"] for m in msgs("a", 400) + msgs("b", 1) + msgs("c", 20)}
    got = run_cpp("pull", group.ns, {"topic": "HATopic", "count": len(want) + 2, "timeout": 20}, timeout=90)
    assert {g["keys"] for g in got if g["keys"]} == want and {g["body"] for g in got} >= {"b0", "b1"}
    proc = run_cli("consume", "-t", "HATopic", "-n", group.ns, "-e", "--json", check=True)
    assert {m["body"] for m in json_lines(proc.stdout)} == {g["body"] for g in got}
    refused = run_cli("send", "-t", "HATopic", "-n", group.ns, "nope")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr


def test_a_slave_store_starts_as_a_master(group):
    if "master" in group.procs:
        group.stop("master")
    before = sorted(p.name for p in (group.store("slave") / "commitlog").iterdir())
    group.stop("slave")
    group.ports.pop("slave")
    proc = group.start("slave", "ASYNC_MASTER", 0)
    assert any("role ASYNC_MASTER" in line for line in proc.startup + [proc.proc.stderr.readline()])
    sent = json_lines(run_cli("send", "-t", "HATopic", "-n", group.ns, "--json", input="after\n", check=True).stdout)
    assert sent[0]["status"] == "SEND_OK"
    got = json_lines(run_cli("consume", "-t", "HATopic", "-n", group.ns, "-e", "--json", check=True).stdout)
    assert "after" in {m["body"] for m in got} and len(got) >= 400
    assert sorted(p.name for p in (group.store("slave") / "commitlog").iterdir())[:len(before)] == before


def test_an_empty_slave_starts_at_the_masters_last_file(tmp_path):
    g = Group(tmp_path)
    try:
        g.start("master", "ASYNC_MASTER", 0)
        body = "\n".join(f"m{i} " + "y" * 700 for i in range(1200)) + "\n"
        run_cli("send", "-t", "Fill", "-n", g.ns, "--json", input=body, check=True)
        files = sorted((g.store("master") / "commitlog").iterdir())
        assert len(files) >= 3
        g.start("slave", "SLAVE", 1)
        entry = wait_until("the slave to catch up", lambda: slave_in_sync(g))
        top = entry["master"]["commitLogMaxOffset"]
        slave_files = sorted(p.name for p in (g.store("slave") / "commitlog").iterdir())
        assert slave_files[0] == f"{top - top % FILE_SIZE:020d}"
    finally:
        g.close()


def test_two_slaves_follow_a_master_that_restarts(tmp_path):
    g = Group(tmp_path)
    try:
        g.start("master", "ASYNC_MASTER", 0)
        g.start("s1", "SLAVE", 1)
        g.start("s2", "SLAVE", 2)
        # Both attached before the first send: a slave that attaches later, once the master is in its
        # second file, starts there (as in Java) and would never hold the first file compared below.
        wait_until("both slaves to attach", lambda: slave_in_sync(g, 2))
        run_cli("send", "-t", "Two", "-n", g.ns, "--json", input="".join(f"m{i}\n" for i in range(300)), check=True)
        wait_until("both slaves to catch up", lambda: slave_in_sync(g, 2))
        watch = subprocess.Popen([sys.executable, "-m", "mqtool", "ha", "status", "-n", g.ns, "--watch", "0.3",
                                  "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 preexec_fn=die_with_parent())
        try:
            frames = [json.loads(watch.stdout.readline()) for _ in range(2)]
        finally:
            watch.send_signal(signal.SIGINT)
            assert watch.wait(10) == 0, watch.stderr.read()
        assert frames[1]["time"] > frames[0]["time"]
        assert [len(f["groups"][0]["slaves"]) for f in frames] == [2, 2]
        g.kill("master")                           # the slaves keep reconnecting until it is back
        g.start("master", "ASYNC_MASTER", 0)
        run_cli("send", "-t", "Two", "-n", g.ns, "--json", input="".join(f"n{i}\n" for i in range(300)), check=True)
        # One `ha status` asks the master, then each slave: a slave that reconnects between those questions
        # shows in sync before the master's count includes it, so the count is part of the condition.
        entry = wait_until("both slaves to catch up again and the master to count both",
                           lambda: (e := slave_in_sync(g, 2)) and e["master"]["slaveConnections"] == 2 and e)
        assert [s["lagBytes"] for s in entry["slaves"]] == [0, 0]
        for who in ("s1", "s2", "master"):
            g.stop(who)
        master_log = sorted((g.store("master") / "commitlog").iterdir())
        for who in ("s1", "s2"):
            for f in master_log:
                assert (g.store(who) / "commitlog" / f.name).read_bytes() == f.read_bytes(), (who, f.name)
    finally:
        g.close()


def test_a_slow_reader_is_sent_to_the_slave_with_slave_read_enable(tmp_path):
    """accessMessageInMemoryMaxRatio=0: any reader behind the head counts as slow."""
    import asyncio

    from mqtool.client.base import MessageQueue
    from mqtool.client.consumer import Consumer
    g = Group(tmp_path)
    try:
        g.start("master", "ASYNC_MASTER", 0, "slaveReadEnable=true\naccessMessageInMemoryMaxRatio=0\n")
        g.start("slave", "SLAVE", 1)
        run_cli("send", "-t", "Slow", "-n", g.ns, "-q", "0", "--json", input="a\nb\nc\n", check=True)
        wait_until("the slave to catch up", lambda: slave_in_sync(g))

        async def pulls():
            c = Consumer(g.ns, "CID_SLOW")
            try:
                mq = MessageQueue("Slow", "broker-ha", 0)
                first = await c.pull(mq, 0, max_nums=1)
                suggested, addr = c.pull_from[mq], await c.broker_addr(mq)
                second = await c.pull(mq, first.next_offset, max_nums=1)   # served by the slave
                return first, suggested, addr, second
            finally:
                await c.close()
        first, suggested, addr, second = asyncio.run(pulls())
        assert [m.body for m in first.messages] == [b"a"] and suggested == 1
        assert addr == g.addr("slave") and [m.body for m in second.messages] == [b"b"]
    finally:
        g.close()
