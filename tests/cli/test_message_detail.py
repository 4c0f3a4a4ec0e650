"""A message looked up by id shows the message (issue 44, item 7): every field mqadmin queryMsgById
prints (topic, tags, keys, queue, offsets, born and store hosts and times, system flag, reconsume
times, properties) and the body, as text when it decodes and as hex otherwise; --json keeps them all."""
from __future__ import annotations

import pytest

from tests.conftest import json_lines, run_cli

TOPIC = "DetailTopic"
BINARY = bytes([0xFF, 0xFE, 0x00, 0x81, 0x41])


@pytest.fixture(scope="module")
def sent(cluster, tmp_path_factory):
    ns = cluster["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", TOPIC, "-r", "1", "-w", "1", check=True)
    text = json_lines(run_cli("send", "-n", ns, "-t", TOPIC, "-k", "order-7 shop-2", "--tags", "TagD",
                              "-p", "color=blue", "--json", "hello, detail", check=True).stdout)[0]
    body_file = tmp_path_factory.mktemp("bodies") / "binary.bin"
    body_file.write_bytes(BINARY)
    binary = json_lines(run_cli("send", "-n", ns, "-t", TOPIC, "-f", body_file, "--json", check=True).stdout)[0]
    got = {g["msg_id"]: g for g in json_lines(run_cli("consume", "-n", ns, "-t", TOPIC, "-e", "--json",
                                                      check=True).stdout)}
    for msg in (text, binary):
        msg["offset_msg_id"] = got[msg["msg_id"]]["offset_msg_id"]      # where the broker stored it
    return {"ns": ns, "text": text, "binary": binary}


def detail(proc) -> dict[str, str]:
    assert proc.returncode == 0, proc.stderr
    fields = {}
    for line in proc.stdout.splitlines():
        label, sep, value = line.partition(":")
        if sep and label and not label.startswith(" "):
            fields[label.strip()] = value.strip()
    return fields


@pytest.mark.parametrize("by", ["unique key", "offset id", "--unique-key"])
def test_a_message_by_id_shows_every_field_and_the_body(sent, by):
    msg = sent["text"]
    args = {"unique key": ("-i", msg["msg_id"], "-t", TOPIC), "offset id": ("-i", msg["offset_msg_id"]),
            "--unique-key": ("--unique-key", msg["msg_id"], "-t", TOPIC)}[by]
    shown = detail(run_cli("message", "query", "-n", sent["ns"], *args))
    assert shown["Topic"] == TOPIC and shown["Tags"] == "[TagD]" and shown["Keys"] == "[order-7 shop-2]"
    assert shown["Queue ID"] == "0" and shown["Queue Offset"] == str(msg["queue_offset"])
    assert shown["OffsetID"] == msg["offset_msg_id"] and shown["Message ID"] == msg["msg_id"]
    assert int(shown["CommitLog Offset"]) >= 0 and shown["Reconsume Times"] == "0"
    assert shown["Born Timestamp"][:2] == "20" and shown["Store Timestamp"][:2] == "20"
    assert shown["Born Host"].count(":") == 1 and shown["Store Host"].startswith("127.0.0.1:")
    assert shown["System Flag"] == "0" and "color=blue" in shown["Properties"]
    assert "UNIQ_KEY=" + msg["msg_id"] in shown["Properties"]
    assert shown["Message Body"] == "hello, detail"


def test_a_body_that_is_not_text_is_shown_in_hex(sent):
    shown = detail(run_cli("message", "query", "-n", sent["ns"], "-i", sent["binary"]["offset_msg_id"]))
    assert shown["Message Body"] == f"{BINARY.hex()} (hex: not UTF-8 text)"


def test_json_keeps_every_field(sent):
    msg = sent["text"]
    [row] = json_lines(run_cli("message", "query", "-n", sent["ns"], "-i", msg["offset_msg_id"], "--json",
                               check=True).stdout)
    assert row["broker"] == "broker-a" and row["msg_id"] == msg["msg_id"]
    assert row["offset_msg_id"] == msg["offset_msg_id"] and row["topic"] == TOPIC
    assert row["keys"] == ["order-7", "shop-2"] and row["tags"] == "TagD"
    assert row["properties"]["color"] == "blue" and row["reconsume_times"] == 0 and row["sys_flag"] == 0
    for field in ("commitlog_offset", "queue_id", "queue_offset", "born_timestamp", "born_host", "store_timestamp",
                  "store_host", "body_crc", "flag", "prepared_transaction_offset", "store_size"):
        assert field in row, field
    assert (row["body"], row["body_encoding"]) == ("hello, detail", "text")
    [binary] = json_lines(run_cli("message", "query", "-n", sent["ns"], "-i", sent["binary"]["offset_msg_id"],
                                  "--json", check=True).stdout)
    assert (binary["body"], binary["body_encoding"]) == (BINARY.hex(), "hex")


def test_save_body_writes_the_body_as_mqadmin_does(sent, tmp_path):
    """mqadmin writes every body to /tmp/rocketmq/msgbodys/<msgId>; here only when asked, to the
    directory given."""
    msg = sent["binary"]
    shown = detail(run_cli("message", "query", "-n", sent["ns"], "-i", msg["offset_msg_id"],
                           "--save-body", tmp_path / "bodies"))
    path = tmp_path / "bodies" / msg["msg_id"]
    assert shown["Message Body Path"] == str(path) and path.read_bytes() == BINARY
