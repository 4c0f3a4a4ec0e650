"""`mqtool store dump|stats|verify|query` as a user runs them, on the fixture stores and damaged copies."""
from __future__ import annotations

import hashlib

import pytest

from tests.conftest import json_lines, run_cli

README_COUNTS = {
    "TopicA": {0: 376, 1: 375, 2: 375, 3: 374},
    "TopicB": {0: 160, 1: 160, 3: 160, 5: 160, 7: 160},
    "TopicC": {0: 6, 1: 5, 2: 5, 3: 5},
    "TopicDelay": {0: 3, 1: 3, 2: 2, 3: 2},
    "%RETRY%GID_FIXTURE": {0: 15},
    "SCHEDULE_TOPIC_XXXX": {0: 10, 2: 15},
}


def no_traceback(proc):
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout


def tree_digest(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_version_and_grouped_help():
    proc = run_cli("--version", check=True)
    assert proc.stdout.startswith("mqtool ")
    proc = run_cli("--help", check=True)
    assert "Store" in proc.stdout and "store" in proc.stdout


def test_dump_root_json_matches_truth(basic_store, basic_truth):
    rows = json_lines(run_cli("store", "dump", basic_store, "--json", check=True).stdout)
    msgs = [r for r in rows if r["kind"] == "message"]
    assert len(msgs) == 2371
    truth = {t["commit_log_offset"]: t for t in basic_truth}
    for r in msgs:
        t = truth[r["commitlog_offset"]]
        assert (r["topic"], r["queue_id"], r["queue_offset"], r["tags"] or "") == (
            t["topic"], t["queue_id"], t["queue_offset"], t["tags"])
        if not t["raw"].get("body_truncated_by_client"):
            assert r["body"] == t["body"]          # compressed bodies shown inflated
        assert r["crc_ok"] and r["properties"] == t["properties"]


@pytest.mark.parametrize("args,expect", [
    (("--topic", "TopicB", "--queue", "3"), 160),
    (("--topic", "TopicA", "--key", "A-10"), 1),
    (("--tag", "Step1"), 267),
    (("--limit", "5"), 5),
    (("--topic", "TopicA", "--tag", "TagB", "--limit", "7"), 7),
])
def test_dump_filters(basic_store, args, expect):
    rows = json_lines(run_cli("store", "dump", basic_store, "--json", *args, check=True).stdout)
    assert len(rows) == expect


def test_dump_offset_and_time_ranges(basic_store, basic_truth):
    offs = sorted(t["commit_log_offset"] for t in basic_truth)
    rows = json_lines(run_cli("store", "dump", basic_store, "--json", "--from-offset", offs[10],
                              "--to-offset", offs[20], check=True).stdout)
    assert [r["commitlog_offset"] for r in rows] == offs[10:20]
    times = sorted(t["store_timestamp"] for t in basic_truth)
    lo, hi = times[100], times[200]
    rows = json_lines(run_cli("store", "dump", basic_store, "--json", "--since", lo, "--until", hi,
                              check=True).stdout)
    assert len(rows) == sum(lo <= t <= hi for t in times)


def test_dump_body_modes(basic_store):
    rows = json_lines(run_cli("store", "dump", basic_store, "--json", "--limit", "1", "--body", "hex",
                              "--body-max", "4", check=True).stdout)
    assert rows[0]["body"] == b"Topi".hex() and rows[0]["body_truncated"]
    rows = json_lines(run_cli("store", "dump", basic_store, "--json", "--limit", "1", "--body", "none",
                              check=True).stdout)
    assert rows[0]["body"] is None
    proc = run_cli("store", "dump", basic_store, "--body", "rot13")
    assert proc.returncode == 2 and "--body" in proc.stderr
    no_traceback(proc)


def test_dump_human_output(basic_store):
    proc = run_cli("store", "dump", basic_store, "--topic", "TopicDelay", check=True)
    assert "TopicDelay" in proc.stdout and "10 messages" in proc.stdout


def test_dump_other_kinds(basic_store):
    q = basic_store / "consumequeue" / "TopicB" / "5"
    units = json_lines(run_cli("store", "dump", q, "--json", check=True).stdout)
    assert len(units) == 160 and [u["queue_offset"] for u in units] == list(range(160))
    one = json_lines(run_cli("store", "dump", q / "00000000000000000000", "--json", "--from-offset", "150",
                             check=True).stdout)
    assert [u["queue_offset"] for u in one] == list(range(150, 160))
    idx = sorted((basic_store / "index").iterdir())[0]
    rows = json_lines(run_cli("store", "dump", idx, "--json", check=True).stdout)
    assert rows[0]["kind"] == "index_header" and len(rows) == 1 + 3999
    rows = json_lines(run_cli("store", "dump", idx, "--json", "--topic", "TopicA", "--key", "A-3",
                              check=True).stdout)
    assert len([r for r in rows if r["kind"] == "index_entry"]) >= 1
    cp = json_lines(run_cli("store", "dump", basic_store / "checkpoint", "--json", check=True).stdout)
    assert cp[0]["physic_msg_timestamp"] == 1795346630912
    cfg = json_lines(run_cli("store", "dump", basic_store / "config" / "consumerOffset.json", "--json",
                             check=True).stdout)
    assert cfg[0]["data"]["offsetTable"]["TopicA@GID_FIXTURE"] == {"0": 376, "1": 375, "2": 375, "3": 374}
    for path in (q, idx, basic_store / "checkpoint", basic_store / "config" / "topics.json"):
        run_cli("store", "dump", path, check=True)  # human form works for every kind


def test_stats(basic_store):
    stats = json_lines(run_cli("store", "stats", basic_store, "--json", check=True).stdout)[0]
    got = {}
    for q in stats["commitlog"]["queues"]:
        got.setdefault(q["topic"], {})[q["queue_id"]] = q["messages"]
        assert q["max_queue_offset"] - q["min_queue_offset"] + 1 == q["messages"]
    assert got == README_COUNTS
    assert [f["end"] for f in stats["commitlog"]["files"]] == ["blank", "blank", "unwritten"]
    assert stats["checkpoint"]["index_msg_timestamp"] == 1795346619882
    assert stats["config"]["delay_offsets"]["levels"] == {"1": 10, "3": 15}
    human = run_cli("store", "stats", basic_store, check=True).stdout
    assert "2371" in human and "physicMsgTimestamp" in human


def test_verify_clean_stores(basic_store, crashed_store):
    for s in (basic_store, crashed_store):
        proc = run_cli("store", "verify", s)
        assert proc.returncode == 0, proc.stdout
        assert "clean" in proc.stdout
        assert proc.stderr == ""            # no progress bar remains (not even a newline) on a piped stderr
    report = json_lines(run_cli("store", "verify", basic_store, "--json", check=True).stdout)[0]
    assert report["ok"] and report["records"] == 2371 and report["queue_units"] == 2371


def test_verify_finds_flipped_body_byte(basic_store, basic_truth, store_copy):
    s = store_copy(basic_store)
    t = next(t for t in basic_truth if t["topic"] == "TopicA")
    f = s / "commitlog" / "00000000000000000000"
    data = bytearray(f.read_bytes())
    data[t["commit_log_offset"] + t["store_size"] - 200] ^= 0xFF  # inside the body
    f.write_bytes(bytes(data))
    proc = run_cli("store", "verify", s, "--json")
    assert proc.returncode == 1
    report = json_lines(proc.stdout)[0]
    assert any("CRC" in p["message"] and p["offset"] == t["commit_log_offset"] for p in report["problems"])
    human = run_cli("store", "verify", s).stdout.splitlines()[-1]
    n = len(report["problems"]) + sum(report.get("suppressed", {}).values())
    assert human.endswith(f": {n} problem" + ("" if n == 1 else "s")), human


def test_verify_and_dump_torn_tail(basic_store, store_copy):
    s = store_copy(basic_store)
    f = s / "commitlog" / "00000000000002097152"
    last = json_lines(run_cli("store", "dump", f, "--json", check=True).stdout)[-1]
    start = last["commitlog_offset"] - 2097152
    assert start + last["store_size"] == 238632
    data = bytearray(f.read_bytes())
    data[start + 4:238632 + 50] = b"\xAB" * (238632 + 46 - start)   # tear the last record
    f.write_bytes(bytes(data))
    proc = run_cli("store", "verify", s)
    assert proc.returncode == 1
    assert "invalid bytes at the end of 00000000000002097152 from offset" in proc.stdout
    proc = run_cli("store", "dump", f, "--json")
    assert proc.returncode == 1
    no_traceback(proc)
    rows = json_lines(proc.stdout)
    assert len([r for r in rows if r["kind"] == "message"]) == 240   # every good record before the tear
    assert "stopped reading" in proc.stderr


def test_query(basic_store, basic_truth):
    t = next(t for t in basic_truth if t["keys"].startswith("A-42 ") or t["keys"] == "A-42")
    rows = json_lines(run_cli("store", "query", basic_store, "--topic", "TopicA", "--key", "A-42", "--json",
                              check=True).stdout)
    assert [r["commitlog_offset"] for r in rows] == [t["commit_log_offset"]]
    rows = json_lines(run_cli("store", "query", basic_store, "--topic", "TopicA", "--key",
                              t["properties"]["UNIQ_KEY"], "--json", check=True).stdout)
    assert [r["commitlog_offset"] for r in rows] == [t["commit_log_offset"]]
    msg_id = rows[0]["msg_id"]
    rows = json_lines(run_cli("store", "query", basic_store, "--msg-id", msg_id, "--json", check=True).stdout)
    assert rows[0]["commitlog_offset"] == t["commit_log_offset"]
    rows = json_lines(run_cli("store", "query", basic_store, "--offset", t["commit_log_offset"], "--json",
                              check=True).stdout)
    assert rows[0]["keys"] == t["keys"].split()
    proc = run_cli("store", "query", basic_store, "--topic", "TopicA", "--key", "shared-1", "--max", "5")
    assert proc.returncode == 0 and "more than 5 messages match" in proc.stderr


def test_query_by_either_kind_of_message_id(basic_store, basic_truth):
    """--msg-id takes the unique key a producer prints (through the index, with --topic) as well as
    an offset id (read where it points), as mqadmin queryMsgById does."""
    t = next(t for t in basic_truth if t["keys"] == "A-42" or t["keys"].startswith("A-42 "))
    uniq = t["properties"]["UNIQ_KEY"]
    rows = json_lines(run_cli("store", "query", basic_store, "--msg-id", uniq, "--topic", "TopicA", "--json",
                              check=True).stdout)
    assert [(r["commitlog_offset"], r["uniq_key"]) for r in rows] == [(t["commit_log_offset"], uniq)]
    no_topic = run_cli("store", "query", basic_store, "--msg-id", uniq)      # the C++ client's: it could be either
    assert no_topic.returncode != 0 and no_topic.stderr.count("\n") == 1
    assert "is outside every file" in no_topic.stderr and "is a unique key (UNIQ_KEY), give --topic" in no_topic.stderr
    java_uniq = "0A000001" "1F3A" "2B2B2B2B" "0012D687" "0001"               # IP, pid, hash, ms, counter
    not_offset = run_cli("store", "query", basic_store, "--msg-id", java_uniq)
    assert not_offset.returncode == 2 and not_offset.stderr.count("\n") == 1
    assert "is not an offset id" in not_offset.stderr and "give --topic" in not_offset.stderr
    offset_id = rows[0]["msg_id"]
    inside = offset_id[:-1] + "%X" % (int(offset_id[-1], 16) ^ 1)                  # one byte into the record
    mid = run_cli("store", "query", basic_store, "--msg-id", inside)
    assert mid.returncode == 1 and f"no record starts at commitlog offset {t['commit_log_offset'] ^ 1}" in mid.stderr
    assert "bad magic" not in mid.stderr
    no_traceback(mid)


@pytest.mark.parametrize("args,code,text", [
    (("store", "dump", "/no/such/path"), 2, "no such file"),
    (("store", "stats", "/no/such/dir"), 2, "no such directory"),
    (("store", "dump", "{root}", "--since", "yesterday-ish"), 2, "cannot read time"),
    (("store", "query", "{root}", "--key", "A-1"), 2, "--key needs --topic"),
    (("store", "query", "{root}", "--offset", "12345"), 1, "no record starts at commitlog offset 12345"),
    (("store", "query", "{root}", "--msg-id", "nothex"), 2, "nothex is not a message id"),
    (("store", "dump", "{root}", "--kind", "bogus"), 2, "--kind must be one of"),
    (("store", "stats", "{root}/commitlog"), 2, "not a store root"),
    # a filter the kind's dump would not apply is refused, not ignored
    (("store", "dump", "{root}/consumequeue/TopicB/5", "--tag", "TagA"), 2,
     "--tag does not apply to a dump of kind consumequeue-dir"),
    (("store", "dump", "{root}/index", "--since", "0", "--topic", "TopicA"), 2,
     "--topic, --since do not apply to a dump of kind index-dir without --key"),
    (("store", "dump", "{root}/checkpoint", "--limit", "1"), 2, "--limit does not apply to a dump of kind checkpoint"),
    (("store", "query", "{root}", "--offset", "0", "--topic", "TopicA"), 2, "--topic applies to --key lookups only"),
])
def test_bad_input_one_line(basic_store, args, code, text):
    proc = run_cli(*(a.replace("{root}", str(basic_store)) for a in args))
    assert proc.returncode == code, proc.stderr
    assert text in proc.stderr
    no_traceback(proc)


def test_garbage_and_wrong_kind_files(tmp_path):
    junk = tmp_path / "00000000000000000000"
    junk.write_bytes(b"\x13" * 1000)
    proc = run_cli("store", "dump", junk, "--kind", "commitlog")
    assert proc.returncode == 1 and "stopped reading" in proc.stderr
    no_traceback(proc)
    cp = tmp_path / "checkpoint"
    cp.write_bytes(b"abc")
    proc = run_cli("store", "dump", cp)
    assert proc.returncode == 1 and "checkpoint is 3 bytes" in proc.stderr
    no_traceback(proc)
    idx = tmp_path / "index"
    idx.mkdir()
    (idx / "20260101000000000").write_bytes(b"\0" * 123)
    proc = run_cli("store", "dump", idx / "20260101000000000")
    assert proc.returncode == 1 and "maxHashSlotNum" in proc.stderr
    no_traceback(proc)
    bad = tmp_path / "topics.json"
    bad.write_text("{not json")
    proc = run_cli("store", "dump", bad)
    assert proc.returncode == 1 and "not valid JSON" in proc.stderr
    no_traceback(proc)


def test_commands_never_write(basic_store, store_copy):
    s = store_copy(basic_store)
    before = tree_digest(s)
    for args in (("dump", s), ("stats", s), ("verify", s), ("query", s, "--offset", "0")):
        run_cli("store", *args, "--json", check=True)
    assert tree_digest(s) == before


def test_verify_takes_the_delay_levels_of_a_broker_conf(basic_store, store_copy, tmp_path):
    """SCHEDULE_TOPIC_XXXX units carry the due time (store time + the level's delay): with another
    broker's messageDelayLevel they no longer match, with this broker's (the default) they do."""
    s = store_copy(basic_store)
    other = tmp_path / "other.conf"
    other.write_text("messageDelayLevel=2s 6s 11s 31s\nbrokerName=x\n")
    same = tmp_path / "same.conf"
    same.write_text("brokerName=broker-a\n")
    mismatched = run_cli("store", "verify", s, "-c", other, "--json")
    assert mismatched.returncode == 1
    areas = {p["area"] for p in json_lines(mismatched.stdout)[0]["problems"]}
    assert areas == {"consumequeue"}
    assert run_cli("store", "verify", s, "-c", same).returncode == 0


def test_counts_are_said_in_english(basic_store):
    """Issue 31: "3999 index entrys", "more than 1 messages match"."""
    from mqtool.cli.output import count
    assert [count(1, "index entry"), count(4, "index entry"), count(2, "message"), count(0, "key")] == \
        ["1 index entry", "4 index entries", "2 messages", "0 keys"]
    idx = sorted((basic_store / "index").iterdir())[0]
    summary = run_cli("store", "dump", idx, check=True).stdout.splitlines()[-1]
    assert summary.endswith(": 1 index header, 3999 index entries"), summary
    one = run_cli("store", "query", basic_store, "--topic", "TopicA", "--key", "shared-1", "--max", "1")
    assert one.returncode == 0 and "more than 1 message matches;" in one.stderr, one.stderr


@pytest.mark.parametrize("args", [("store", "dump"), ("store", "dump", "--json")])
def test_output_piped_into_head_exits_0_quietly(basic_store, args):
    """`mqtool store dump ROOT | head -1`: the reader closes the pipe early; rich and typer's click
    each caught that and exited 1 (a failure under `set -o pipefail`), and a table could leave
    a traceback."""
    import subprocess
    import sys

    from tests.conftest import REPO
    proc = subprocess.Popen([sys.executable, "-m", "mqtool", *args, str(basic_store)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()                                  # as `head -1` does after its line
    assert proc.wait(60) == 0
    assert proc.stderr.read() == b""
