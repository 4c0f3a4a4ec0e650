"""`mqtool send`, `consume` and the admin commands against real namesrv + broker processes."""
from __future__ import annotations

import pytest

from tests.conftest import json_lines, run_cli

pytestmark = pytest.mark.slow


def test_send_consume_round_trip(cluster):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "CliTopic", "-r", "4", "-w", "4", check=True)
    one = json_lines(run_cli("send", "-n", ns, "-t", "CliTopic", "--keys", "k1 k2", "--tags", "TagA",
                             "-p", "color=red", "hello é", "--json", check=True).stdout)
    assert one[0]["status"] == "SEND_OK" and len(one[0]["msg_id"]) == 32
    lines = json_lines(run_cli("send", "-n", ns, "-t", "CliTopic", "--json", "--tags", "TagB",
                               input="a\nb\nc\n", check=True).stdout)
    assert len(lines) == 3
    batch = json_lines(run_cli("send", "-n", ns, "-t", "CliTopic", "--json", "--batch", "2", "--queue", "3",
                               input="x\ny\nz\n", check=True).stdout)
    assert [b["queue_id"] for b in batch] == [3, 3, 3]
    got = json_lines(run_cli("consume", "-n", ns, "-t", "CliTopic", "-e", "--json", check=True).stdout)
    assert sorted(g["body"] for g in got) == ["a", "b", "c", "hello é", "x", "y", "z"]
    first = next(g for g in got if g["body"] == "hello é")
    assert first["keys"] == ["k1", "k2"] and first["tags"] == "TagA" and first["properties"]["color"] == "red"
    assert first["msg_id"] == one[0]["msg_id"]
    tagged = json_lines(run_cli("consume", "-n", ns, "-t", "CliTopic", "-e", "--json", "--tag", "TagB",
                                check=True).stdout)
    assert sorted(g["body"] for g in tagged) == ["a", "b", "c"]
    fmt = run_cli("consume", "-n", ns, "-t", "CliTopic", "-e", "--queue", "3", "--format", "%q:%o:%b",
                  check=True).stdout.split()
    assert fmt == ["3:0:x", "3:1:y", "3:2:z"]
    last_two = json_lines(run_cli("consume", "-n", ns, "-t", "CliTopic", "-e", "--queue", "3", "--from", "-2",
                                  "--json", check=True).stdout)
    assert [g["body"] for g in last_two] == ["y", "z"]


def test_bench_mode_sends_batches_with_tags_and_keys(cluster):
    """`send --count` takes --batch (SEND_BATCH_MESSAGE; 40 a batch is stored as a run), --tags,
    --keys, --property and --queue, as the plain sends do."""
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "CliBench", "-r", "4", "-w", "4", check=True)
    result = json_lines(run_cli("send", "-n", ns, "-t", "CliBench", "--count", "100", "--batch", "40", "--size", "10",
                                "--tags", "Bulk", "--keys", "b1", "-p", "lot=7", "--queue", "1", "--json",
                                check=True).stdout)[0]
    assert (result["messages"], result["failures"], result["batch"], result["size"]) == (100, 0, 40, 10)
    got = json_lines(run_cli("consume", "-n", ns, "-t", "CliBench", "-e", "--json", check=True).stdout)
    assert len(got) == 100 and {g["queue_id"] for g in got} == {1}
    assert sorted(g["queue_offset"] for g in got) == list(range(100))
    assert all(g["tags"] == "Bulk" and g["keys"] == ["b1"] and g["properties"]["lot"] == "7" and g["body"] == "x" * 10
               for g in got)
    assert len({g["msg_id"] for g in got}) == 100


def test_group_consume_commits_offsets_and_progress(cluster):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "GroupTopic", "-r", "2", "-w", "2", check=True)
    run_cli("send", "-n", ns, "-t", "GroupTopic", input="\n".join(f"m{i}" for i in range(10)) + "\n", check=True)
    got = json_lines(run_cli("consume", "-n", ns, "-t", "GroupTopic", "-g", "CLI_GROUP", "--from", "beginning",
                             "-c", "10", "--json", check=True).stdout)
    assert sorted(g["body"] for g in got) == sorted(f"m{i}" for i in range(10))
    progress = json_lines(run_cli("group", "progress", "-n", ns, "-g", "CLI_GROUP", "--json", check=True).stdout)
    assert progress and sum(p["lag"] for p in progress) == 0 and sum(p["broker_offset"] for p in progress) == 10
    again = run_cli("consume", "-n", ns, "-t", "GroupTopic", "-g", "CLI_GROUP", "--idle-timeout", "2", "--json")
    assert again.returncode == 0 and json_lines(again.stdout) == []     # committed: nothing left


def test_admin_commands(cluster):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "AdminTopic", "-r", "3", "-w", "3", check=True)
    assert {"topic": "AdminTopic"} in json_lines(run_cli("topic", "list", "-n", ns, "--json", check=True).stdout)
    route = json_lines(run_cli("topic", "route", "-n", ns, "-t", "AdminTopic", "--json", check=True).stdout)[0]
    assert route["queueDatas"][0]["writeQueueNums"] == 3
    sent = json_lines(run_cli("send", "-n", ns, "-t", "AdminTopic", "--keys", "find-me", "x", "--json",
                              check=True).stdout)[0]
    status = json_lines(run_cli("topic", "status", "-n", ns, "-t", "AdminTopic", "--json", check=True).stdout)
    assert sum(s["max_offset"] for s in status) == 1
    found = json_lines(run_cli("message", "query", "-n", ns, "-t", "AdminTopic", "-k", "find-me", "--json",
                               check=True).stdout)
    assert [f["msg_id"] for f in found] == [sent["msg_id"]]
    missing = run_cli("message", "query", "-n", ns, "-t", "AdminTopic", "-k", "no-such-key")
    assert missing.returncode == 1 and "no message found for key no-such-key" in missing.stderr
    clusters = json_lines(run_cli("cluster", "list", "-n", ns, "--json", check=True).stdout)
    assert clusters[0]["address"] == cluster["broker"] and clusters[0]["reachable"]
    assert clusters[0]["version"] and clusters[0]["hours"] > 0 and isinstance(clusters[0]["in_tps"], float)
    table = run_cli("cluster", "list", "-n", ns, check=True).stdout
    assert "InTPS" in table and "SPACE" in table
    runtime = json_lines(run_cli("broker", "status", "-n", ns, "-b", cluster["broker"], "--json", check=True).stdout)[0]
    assert int(runtime["commitLogMaxOffset"]) > 0
    alias = run_cli("topicList", "-n", ns, "--json", check=True)     # mqadmin's name still works
    assert "AdminTopic" in alias.stdout
    deleted = json_lines(run_cli("topic", "delete", "-n", ns, "-t", "AdminTopic", "--json", check=True).stdout)
    assert deleted == [{"topic": "AdminTopic", "broker": "broker-a", "deleted": True}]
    assert {"topic": "AdminTopic"} not in json_lines(run_cli("topic", "list", "-n", ns, "--json", check=True).stdout)
    again = run_cli("topic", "delete", "-n", ns, "-t", "AdminTopic")
    assert (again.returncode, again.stderr) == (1, "mqtool: no broker has topic AdminTopic\n")


def test_message_ids_of_both_kinds(cluster):
    """mqadmin queryMsgById's ids: the unique key send prints (looked up through the index of its
    topic) and the offset id (read at the broker it names, whose name fills the broker column)."""
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "IdTopic", "-r", "1", "-w", "1", check=True)
    sent = json_lines(run_cli("send", "-n", ns, "-t", "IdTopic", "--json", input="first\nsecond\n",
                              check=True).stdout)
    got = json_lines(run_cli("consume", "-n", ns, "-t", "IdTopic", "-e", "--json", check=True).stdout)
    second = next(g for g in got if g["body"] == "second")
    assert second["msg_id"] == sent[1]["msg_id"] != second["offset_msg_id"]
    for args in (("message", "query", "-i"), ("queryMsgById", "--msgId")):
        rows = json_lines(run_cli(*args, sent[1]["msg_id"], "-n", ns, "-t", "IdTopic", "--json", check=True).stdout)
        assert [(r["broker"], r["msg_id"], r["queue_offset"]) for r in rows] == [("broker-a", sent[1]["msg_id"], 1)]
    rows = json_lines(run_cli("message", "query", "-n", ns, "-i", second["offset_msg_id"], "--json",
                              check=True).stdout)
    assert [(r["broker"], r["msg_id"], r["topic"]) for r in rows] == [("broker-a", sent[1]["msg_id"], "IdTopic")]
    no_topic = run_cli("message", "query", "-n", ns, "-i", sent[1]["msg_id"])
    assert no_topic.returncode == 2 and no_topic.stderr.count("\n") == 1
    assert "is not an offset id" in no_topic.stderr and "give -t TOPIC" in no_topic.stderr
    inside = second["offset_msg_id"][:-1] + "%X" % (int(second["offset_msg_id"][-1], 16) ^ 1)   # one byte off
    mid = run_cli("message", "query", "-n", ns, "-i", inside)
    assert mid.returncode == 1 and "no record starts at commitlog offset" in mid.stderr
    assert "bad magic" not in mid.stderr and "Traceback" not in mid.stderr


@pytest.mark.parametrize("args,code,text", [
    (("send", "-n", "127.0.0.1:1", "-t", "T", "x"), 1, "cannot connect"),
    (("send", "-n", "{ns}", "-t", "NoSuchTopicAnywhere", "-f", "/no/such/file"), 2, "no such file"),
    (("consume", "-n", "{ns}", "-t", "NoSuchTopicAnywhere", "-e"), 1, "TOPIC_NOT_EXIST"),
    (("consume", "-n", "{ns}", "-t", "NoSuchTopicAnywhere", "-g", "G_NO_TOPIC", "-e"), 1,       # waited forever
     "mqtool: error: route of topic NoSuchTopicAnywhere: TOPIC_NOT_EXIST (17)"),
    (("consume", "-n", "{ns}", "-t", "T", "--from", "someday"), 2, "--from must be"),
    (("send", "-n", "{ns}", "-t", "T", "-p", "novalue", "x"), 2, "--property must be k=v"),
    (("send", "-n", "{ns}", "-t", "T", "--count", "5", "--delay-level", "2"), 2, "does not take --delay-level"),
    (("consume", "-n", "{ns}", "-t", "T", "--json", "--format", "%b"), 2, "either --format or --json"),
    (("message", "query", "-n", "{ns}", "-i", "7F00000100002A9F0000000000000000", "--begin", "0"), 2,
     "--begin applies to --key and --unique-key lookups only"),
    (("namesrv", "kv", "list", "-n", "{ns}", "-s", "ORDER_TOPIC_CONFIG", "-k", "x"), 2, "kv list does not take --key"),
    (("send", "-n", "{ns}", "-t", "T", "--count", "-5"), 2, "-5 is not in the range x>=0"),      # did nothing, exit 0
    (("send", "-n", "{ns}", "-t", "T", "--count", "5", "--threads", "0"), 2, "0 is not in the range x>=1"),
    (("topic", "create", "-n", "{ns}", "-t", "T", "-p", "-1"), 2, "-1 is not in the range 0<=x<=15"),
    (("message", "print", "-n", "{ns}", "-t", "T", "-q", "0", "--begin-offset", "-5"), 2, "not in the range x>=0"),
    (("send", "-n", "{ns}", "-t", "T", "-q", "broker-a:x", "m"), 2, "--queue takes N or BROKER_NAME:N, not 'broker-a:x'"),
])
def test_bad_input(cluster, args, code, text):
    proc = run_cli(*(a.replace("{ns}", cluster["namesrv"]) for a in args))
    assert proc.returncode == code, proc.stderr
    assert text in proc.stderr and "Traceback" not in proc.stderr


def test_a_group_waiting_for_a_topic_says_so(cluster):
    """Without -e a group waits for its topic to be created, as Java's push consumer does; one line
    says so (it used to wait in silence and then print "no messages")."""
    proc = run_cli("consume", "-n", cluster["namesrv"], "-t", "NotCreatedYet", "-g", "G_WAITS", "--idle-timeout", "1.5")
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "consumer group G_WAITS: topic NotCreatedYet does not exist (no route at the name server); waiting for it",
        "mqtool: no messages"]


def test_group_config_kv_perm_and_print_commands(cluster):
    ns, broker = cluster["namesrv"], cluster["broker"]
    run_cli("group", "create", "-n", ns, "-g", "ADMIN_G", "--retry-max-times", "3", check=True)
    groups = json_lines(run_cli("group", "list", "-n", ns, "--json", check=True).stdout)
    assert {"group": "ADMIN_G", "brokers": "broker-a", "retry_max_times": 3, "consume_enable": True} in groups
    run_cli("topic", "create", "-n", ns, "-t", "PrintTopic", "-r", "1", "-w", "1", check=True)
    sent = json_lines(run_cli("send", "-n", ns, "-t", "PrintTopic", "--json", input="p0\np1\np2\np3\n",
                              check=True).stdout)
    printed = json_lines(run_cli("message", "print", "-n", ns, "-t", "PrintTopic", "-q", "0", "--begin-offset", "1",
                                 "--end-offset", "3", "--json", check=True).stdout)
    assert [p["body"] for p in printed] == ["p1", "p2"] and printed[0]["msg_id"] == sent[1]["msg_id"]
    named = json_lines(run_cli("message", "print", "-n", ns, "-t", "PrintTopic", "-q", "0", "-b", "broker-a",
                               "--json", check=True).stdout)
    assert [p["body"] for p in named] == ["p0", "p1", "p2", "p3"]
    elsewhere = run_cli("message", "print", "-n", ns, "-t", "PrintTopic", "-q", "0", "-b", "broker-z")
    assert (elsewhere.returncode, elsewhere.stderr) == (2, "mqtool: error: topic PrintTopic has no queue 0 on "
                                                           "broker broker-z\n")
    reset = json_lines(run_cli("group", "reset-offset", "-n", ns, "-g", "ADMIN_G", "-t", "PrintTopic",
                               "--to-time", "0", "--json", check=True).stdout)
    assert reset == [{"topic": "PrintTopic", "broker": "broker-a", "queue_id": 0, "offset": 0, "pushed": False}]
    progress = json_lines(run_cli("group", "progress", "-n", ns, "-g", "ADMIN_G", "-t", "PrintTopic", "--json",
                                  check=True).stdout)
    assert progress[0]["lag"] == 4
    run_cli("group", "delete", "-n", ns, "-g", "ADMIN_G", check=True)
    assert "ADMIN_G" not in run_cli("group", "list", "-n", ns, "--json", check=True).stdout
    again = run_cli("group", "delete", "-n", ns, "-g", "ADMIN_G")
    assert (again.returncode, again.stderr) == (1, "mqtool: no broker has subscription group ADMIN_G\n")
    missing = run_cli("group", "connections", "-n", ns, "-g", "NOBODY")
    assert missing.returncode == 1 and "CONSUMER_NOT_ONLINE" in missing.stderr
    cfg = json_lines(run_cli("broker", "config", "get", "-n", ns, "-b", broker, "--json", check=True).stdout)[0]
    assert cfg["brokerName"] == "broker-a"
    run_cli("broker", "config", "set", "-n", ns, "-b", broker, "defaultTopicQueueNums=3", check=True)
    cfg = json_lines(run_cli("broker", "config", "get", "-n", ns, "-b", broker, "--json", check=True).stdout)[0]
    assert cfg["defaultTopicQueueNums"] == "3"
    run_cli("namesrv", "kv", "put", "-n", ns, "-s", "ORDER_TOPIC_CONFIG", "-k", "T", "-v", "broker-a:4", check=True)
    got = json_lines(run_cli("namesrv", "kv", "get", "-n", ns, "-s", "ORDER_TOPIC_CONFIG", "-k", "T", "--json",
                             check=True).stdout)[0]
    assert got == {"T": "broker-a:4"}
    assert json_lines(run_cli("namesrv", "config", "-n", ns, "--json", check=True).stdout)[0]
    run_cli("topic", "perm", "-n", ns, "-t", "PrintTopic", "-p", "4", check=True)
    denied = run_cli("send", "-n", ns, "-t", "PrintTopic", "x")
    assert denied.returncode == 1 and "NO_PERMISSION" in denied.stderr


def test_group_consume_exits_at_the_end_and_honours_numeric_from(cluster):
    """Issue 10: `consume -g G --from beginning -e` used to print everything and never exit."""
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "CliEnd", "-r", "2", "-w", "2", check=True)
    run_cli("send", "-n", ns, "-t", "CliEnd", "--json", "--queue", "0", input="".join(f"m{i}\n" for i in range(6)),
            check=True)
    got = json_lines(run_cli("consume", "-n", ns, "-t", "CliEnd", "-g", "GID_END", "--from", "beginning", "-e",
                             "--json", check=True).stdout)
    assert sorted(g["body"] for g in got) == [f"m{i}" for i in range(6)]
    again = run_cli("consume", "-n", ns, "-t", "CliEnd", "-g", "GID_END", "-e", "--json", check=True)
    assert again.stdout == ""                               # offsets were committed: nothing left
    later = json_lines(run_cli("consume", "-n", ns, "-t", "CliEnd", "-g", "GID_FROM4", "--from", "4", "-e", "--json",
                               check=True).stdout)
    assert [g["body"] for g in later] == ["m4", "m5"]


def test_topic_and_group_updates_keep_what_is_not_given(cluster):
    """mqadmin's updateTopic / updateSubGroup reset what is not given to the defaults (8 queues,
    perm 6, 16 retries); here an update changes only what it names, and --order writes (and
    --no-order takes out) the name server's ORDER_TOPIC_CONFIG entry as mqadmin writes it."""
    ns = cluster["namesrv"]

    def route():
        return json_lines(run_cli("topic", "route", "-n", ns, "-t", "KeepTopic", "--json", check=True).stdout)[0]

    def order_conf():
        return json_lines(run_cli("namesrv", "kv", "list", "-n", ns, "-s", "ORDER_TOPIC_CONFIG", "--json",
                                  check=True).stdout)[0].get("KeepTopic")

    new = json_lines(run_cli("topic", "create", "-n", ns, "-t", "KeepTopic", "-w", "3", "--json", check=True).stdout)
    assert [(r["read"], r["write"], r["perm"], r["order"]) for r in new] == [(8, 3, 6, False)]    # defaults for a new one
    run_cli("topic", "update", "-n", ns, "-t", "KeepTopic", "-p", "4", check=True)
    q = route()["queueDatas"][0]
    assert (q["readQueueNums"], q["writeQueueNums"], q["perm"]) == (8, 3, 4)
    assert order_conf() is None
    run_cli("topic", "update", "-n", ns, "-t", "KeepTopic", "--order", check=True)
    assert order_conf() == "broker-a:3"
    run_cli("topic", "update", "-n", ns, "-t", "KeepTopic", "-w", "2", check=True)     # still ordered: entry follows
    assert order_conf() == "broker-a:2"
    q = route()["queueDatas"][0]
    assert (q["readQueueNums"], q["writeQueueNums"], q["perm"]) == (8, 2, 4)
    run_cli("topic", "update", "-n", ns, "-t", "KeepTopic", "--no-order", check=True)
    assert order_conf() is None

    run_cli("group", "create", "-n", ns, "-g", "KEEP_G", "--retry-max-times", "5", "-q", "2", check=True)
    changed = json_lines(run_cli("group", "update", "-n", ns, "-g", "KEEP_G", "--consume-disable", "--json",
                                 check=True).stdout)
    assert [(c["retry_max_times"], c["retry_queue_nums"], c["consume_enable"]) for c in changed] == [(5, 2, False)]
    listed = json_lines(run_cli("group", "list", "-n", ns, "--json", check=True).stdout)
    assert {"group": "KEEP_G", "brokers": "broker-a", "retry_max_times": 5, "consume_enable": False} in listed


def test_consume_says_no_messages_only_when_it_ended_normally(cluster):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "EmptyTopic", "-r", "1", "-w", "1", check=True)
    plain = run_cli("consume", "-n", ns, "-t", "EmptyTopic", "-e")
    grouped = run_cli("consume", "-n", ns, "-t", "EmptyTopic", "-g", "EMPTY_G", "-e")
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, "", "mqtool: no messages\n")
    assert (grouped.returncode, grouped.stdout, grouped.stderr) == (0, "", "mqtool: no messages\n")
    refused = run_cli("consume", "-n", "127.0.0.1:1", "-t", "EmptyTopic", "-e")
    assert refused.returncode == 1
    assert refused.stderr == "mqtool: error: cannot connect to 127.0.0.1:1: connection refused\n"


def test_asked_for_queue_or_group_that_is_not_there_is_said(cluster):
    """--queue names a queue: one the topic does not have is refused, not swapped for another; a
    benchmark whose sends failed exits 1 with the first reason; progress of a group with no
    committed offset is said (mqadmin consumerProgress fails there too), not an empty table."""
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "TwoQueues", "-r", "2", "-w", "2", check=True)
    assert json_lines(run_cli("send", "-n", ns, "-t", "TwoQueues", "--queue", "1", "x", "--json",
                              check=True).stdout)[0]["queue_id"] == 1
    wrong = run_cli("send", "-n", ns, "-t", "TwoQueues", "--queue", "5", "x")
    assert wrong.returncode == 1 and wrong.stdout == ""
    assert wrong.stderr == ("mqtool: error: send: SYSTEM_ERROR (1): topic TwoQueues has no write queue 5 "
                            "(its write queues are 0..1)\n")
    bench = run_cli("send", "-n", ns, "-t", "TwoQueues", "--count", "3", "--queue", "5", "--json")
    assert bench.returncode == 1 and json_lines(bench.stdout)[0]["failures"] == 3
    assert bench.stderr.startswith("mqtool: 3 of 3 messages not sent; the first failure: send: SYSTEM_ERROR")
    none = run_cli("group", "progress", "-n", ns, "-g", "NEVER_CONSUMED")
    assert none.returncode == 1 and none.stderr.startswith("mqtool: no consume progress for group NEVER_CONSUMED:")


def test_kv_list_of_an_empty_namespace_is_an_empty_list(cluster):
    """The name server answers QUERY_NOT_FOUND for a namespace with nothing in it; a list of it is empty."""
    ns = cluster["namesrv"]
    listed = run_cli("namesrv", "kv", "list", "-n", ns, "-s", "NO_SUCH_NAMESPACE", "--json", check=True)
    assert json_lines(listed.stdout) == [{}]
    missing = run_cli("namesrv", "kv", "get", "-n", ns, "-s", "NO_SUCH_NAMESPACE", "-k", "x")
    assert missing.returncode == 1 and "QUERY_NOT_FOUND" in missing.stderr        # a get still names what is missing
