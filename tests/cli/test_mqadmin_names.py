"""mqadmin's names and words where mqtool takes them (issue 31): sendMessage's -p is the body,
queryCq finds the broker from the route, a producer group's connections are a producer's answer,
`group status` of a group nobody consumes says so in one line; `consume --from earliest|latest`."""
from __future__ import annotations

from tests.conftest import json_lines, run_cli


def test_send_message_takes_mqadmin_s_options(cluster):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "AliasSend", "-r", "2", "-w", "2", check=True)
    sent = json_lines(run_cli("sendMessage", "-n", ns, "-t", "AliasSend", "-p", "hello body", "-k", "k1",
                              "-c", "TagA", "--json", check=True).stdout)
    assert sent[0]["status"] == "SEND_OK"
    placed = json_lines(run_cli("sendMessage", "-n", ns, "-t", "AliasSend", "-p", "to queue 1", "-b", "broker-a",
                                "-i", "1", "--json", check=True).stdout)
    assert (placed[0]["broker"], placed[0]["queue_id"]) == ("broker-a", 1)
    got = {m["body"]: m for m in json_lines(run_cli("consume", "-n", ns, "-t", "AliasSend", "-e", "--json",
                                                    check=True).stdout)}
    assert set(got) == {"hello body", "to queue 1"}
    assert (got["hello body"]["keys"], got["hello body"]["tags"]) == (["k1"], "TagA")
    assert got["hello body"]["properties"].get("p") is None and got["to queue 1"]["queue_id"] == 1
    lonely = run_cli("sendMessage", "-n", ns, "-t", "AliasSend", "-p", "x", "-i", "1")
    assert (lonely.returncode, lonely.stderr) == (2, "mqtool: error: -i (queue id) needs -b BROKER_NAME, as mqadmin "
                                                     "sendMessage\n")


def test_query_cq_finds_the_broker_from_the_route(cluster):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "AliasCq", "-r", "1", "-w", "1", check=True)
    run_cli("send", "-n", ns, "-t", "AliasCq", input="a\nb\nc\n", check=True)
    for extra in ([], ["-b", "broker-a"], ["-b", cluster["broker"]]):
        units = json_lines(run_cli("queryCq", "-n", ns, "-t", "AliasCq", "-q", "0", "--json", *extra,
                                   check=True).stdout)
        assert [u["queue_offset"] for u in units] == [0, 1, 2], extra
    missing = run_cli("queryCq", "-n", ns, "-t", "AliasCq", "-q", "5")
    assert (missing.returncode, missing.stderr) == (2, "mqtool: error: topic AliasCq has no queue 5\n")


def test_connections_of_a_group_nobody_runs_are_said_in_the_group_s_words(cluster):
    ns = cluster["namesrv"]
    producer = run_cli("producer", "connections", "-n", ns, "-g", "PID_NOBODY")
    assert producer.returncode == 1
    assert producer.stderr == ("mqtool: error: producer connections: SYSTEM_ERROR (1): the producer group[PID_NOBODY] "
                               "not exist\n")
    consumer = run_cli("group", "connections", "-n", ns, "-g", "CID_NOBODY")
    assert consumer.returncode == 1
    assert consumer.stderr == ("mqtool: error: consumer connections: CONSUMER_NOT_ONLINE (206): the consumer "
                               "group[CID_NOBODY] not online\n")
    status = run_cli("group", "status", "-n", ns, "-g", "CID_NOBODY")
    assert (status.returncode, status.stdout, status.stderr) == (1, "", "mqtool: no consumer of group CID_NOBODY is "
                                                                        "online\n")


def test_consume_from_earliest_and_latest(cluster):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "AliasFrom", "-r", "1", "-w", "1", check=True)
    run_cli("send", "-n", ns, "-t", "AliasFrom", input="m0\nm1\n", check=True)
    earliest = json_lines(run_cli("consume", "-n", ns, "-t", "AliasFrom", "-e", "--json", "--from", "earliest",
                                  check=True).stdout)
    assert [m["body"] for m in earliest] == ["m0", "m1"]
    latest = run_cli("consume", "-n", ns, "-t", "AliasFrom", "-e", "--json", "--from", "latest", check=True)
    assert json_lines(latest.stdout) == []
    bad = run_cli("consume", "-n", ns, "-t", "AliasFrom", "-e", "--from", "oldest")
    assert bad.returncode == 2 and "earliest" in bad.stderr
