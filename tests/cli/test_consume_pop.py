"""`mqtool consume --pop` against real name server and broker processes: every message at least once,
the un-acked ones again after --invisible (through %RETRY%<group>_<topic>), none after their ack; and
the same across a kill -9 of the broker in the middle of reviving."""
from __future__ import annotations

import os
import signal

import pytest

from tests.conftest import json_lines, run_cli
from tests.servers import cluster, drain, start_broker, start_namesrv, wait_until  # noqa: F401 - fixture


def test_pop_needs_a_group_and_takes_no_pull_options():
    for args, text in [(["--pop"], "--pop needs -g GROUP"), (["--no-ack"], "go with --pop"),
                       (["--pop", "-g", "G", "--queue", "0"], "--pop takes none of"),
                       (["--pop", "-g", "G", "--invisible", "soon"], "--invisible must be a duration")]:
        proc = run_cli("consume", "-n", "127.0.0.1:1", "-t", "T", *args)
        assert proc.returncode == 2 and text in proc.stderr, proc.stderr


def pop(ns, topic, group, *extra):
    proc = run_cli("consume", "-n", ns, "-t", topic, "-g", group, "--pop", "--json", *extra, check=True)
    return json_lines(proc.stdout)


def test_consume_pop_acks_and_redelivers(cluster):  # noqa: F811
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "PopCli", "-c", "DefaultCluster", "-r", "2", "-w", "2", check=True)
    for i in range(5):
        run_cli("send", "-n", ns, "-t", "PopCli", f"m{i}", check=True)
    first = pop(ns, "PopCli", "PopG", "-e", "--no-ack", "--invisible", "2s", "--from", "beginning")
    assert sorted(m["body"] for m in first) == [f"m{i}" for i in range(5)]
    assert all(len(m["pop_ck"].split()) == 8 for m in first)
    # hidden for 2 s, then back once through the retry topic (reconsume_times 1), acked this time
    again = pop(ns, "PopCli", "PopG", "--idle-timeout", "6", "-c", "5")
    assert sorted(m["body"] for m in again) == [f"m{i}" for i in range(5)]
    assert {m["reconsume_times"] for m in again} == {1} and {m["topic"] for m in again} == {"PopCli"}
    assert pop(ns, "PopCli", "PopG", "--idle-timeout", "4") == []          # acked: never again


@pytest.mark.slow
def test_a_pop_consumer_across_a_kill_9_during_revive(tmp_path):
    """40 messages popped and not acked are revived; a second consumer pops 20 of the retried ones
    and acks them, a third pops 6 more and does not; the broker is killed (-9) at once, its
    consumerOffset.json (POP offsets, revive offsets) as of its start, 6 messages held by their
    checkpoints and 14 waiting in the retry topic. Started again on its store: every un-acked message
    comes back, no acked one does, and nothing popped from the topic itself is popped from it again."""
    ns_proc, ns = start_namesrv(tmp_path)
    conf = "flushConsumerOffsetInterval=60000\n"
    broker, _ = start_broker(tmp_path, ns, "broker-pop", conf)
    try:
        run_cli("topic", "create", "-n", ns, "-t", "PopK", "-c", "DefaultCluster", "-r", "2", "-w", "2", check=True)
        run_cli("send", "-n", ns, "-t", "PopK", input="".join(f"k{i:02d}\n" for i in range(40)), check=True)
        first = pop(ns, "PopK", "PopKG", "-e", "--no-ack", "--invisible", "2s", "--from", "beginning")
        assert len(first) == 40
        acked = pop(ns, "PopK", "PopKG", "--idle-timeout", "10", "-c", "20", "--invisible", "4s")
        assert len(acked) == 20 and {m["reconsume_times"] for m in acked} == {1}
        held = pop(ns, "PopK", "PopKG", "--idle-timeout", "5", "-c", "6", "--invisible", "4s", "--no-ack")
        assert len(held) == 6
        os.kill(broker.proc.pid, signal.SIGKILL)
        broker.proc.wait(10)
        broker.proc.stderr.close()
        broker, _ = start_broker(tmp_path, ns, "broker-pop", conf)
        drain(broker)
        back = pop(ns, "PopK", "PopKG", "--idle-timeout", "8")
        acked_ids = {m["msg_id"] for m in acked}
        back_ids = {m["msg_id"] for m in back}
        assert not back_ids & acked_ids, "an acked message came back"
        assert back_ids == {m["msg_id"] for m in first} - acked_ids
        assert all(m["reconsume_times"] >= 1 for m in back)       # from the retry topic, not PopK again
    finally:
        broker.stop()
        ns_proc.stop()


@pytest.mark.slow
def test_kill_9_in_the_middle_of_a_revive(tmp_path):
    """3000 messages popped, every other one acked; the broker is killed (-9) while its revive is
    putting the other 1500 back (some in the retry topic, some not yet). Started again: every
    un-acked message comes back at least once, no acked one ever does."""
    import asyncio

    from mqtool_remoting.codes import RequestCode
    from mqtool_remoting.command import RemotingCommand
    from mqtool_remoting.transport import RemotingClient

    from mqtool.client.popconsumer import INIT_MIN, PopConsumer

    ns_proc, ns = start_namesrv(tmp_path)
    conf = "flushConsumerOffsetInterval=60000\n"
    broker, addr = start_broker(tmp_path, ns, "broker-rv", conf)
    retry = "%RETRY%PopRvG_PopRv"
    try:
        run_cli("topic", "create", "-n", ns, "-t", "PopRv", "-c", "DefaultCluster", "-r", "1", "-w", "1", check=True)
        run_cli("send", "-n", ns, "-t", "PopRv", input="".join(f"r{i:04d}\n" for i in range(3000)), check=True)

        async def pop_ack_and_kill():
            c = PopConsumer(ns, "PopRvG", "PopRv", invisible_ms=3000, init_mode=INIT_MIN)
            client = RemotingClient()
            acked, unacked = set(), set()
            try:
                while len(acked) + len(unacked) < 3000:
                    got = await c.pop(poll_ms=1000)
                    half = [m for m in got if int(m.record.body[1:]) % 2 == 0]
                    await c.ack_all(half)
                    acked |= {m.record.uniq_key for m in half}
                    unacked |= {m.record.uniq_key for m in got if m not in half}
                while True:               # the revive under way: part of the 1500 back, not all
                    resp = await client.invoke(addr, RemotingCommand.request(
                        RequestCode.GET_MAX_OFFSET, {"topic": retry, "queueId": 0}))
                    back = int(resp.ext_fields.get("offset", 0)) if resp.code == 0 else 0
                    if back > 0:
                        os.kill(broker.proc.pid, signal.SIGKILL)
                        return acked, unacked, back
                    await asyncio.sleep(0.002)
            finally:
                await client.close()
                await c.close()
        acked, unacked, back_at_kill = asyncio.run(pop_ack_and_kill())
        broker.proc.wait(10)
        broker.proc.stderr.close()
        assert 0 < back_at_kill < 1500, back_at_kill
        broker, _ = start_broker(tmp_path, ns, "broker-rv", conf)
        drain(broker)
        back = pop(ns, "PopRv", "PopRvG", "--idle-timeout", "8")
        back_ids = {m["msg_id"] for m in back}
        assert not back_ids & acked, "an acked message came back"
        assert back_ids == unacked
    finally:
        broker.stop()
        ns_proc.stop()
