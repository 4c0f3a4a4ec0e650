"""`mqtool acl` and the ACL options without a server: signing, where credentials come from, coverage."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import typer.main

from mqtool.cli import ALIASES, build
from tests.conftest import run_cli
from tests.servers import REPO, cluster  # noqa: F401 - the fixture

V3_EXT = json.dumps({"consumerGroup": "groupB", "topic": "topicB", "queueId": 1, "queueOffset": 0, "maxMsgNums": 32,
                     "sysFlag": 2, "commitOffset": 0, "suspendTimeoutMillis": 15000, "subscription": "*",
                     "subVersion": 0, "expressionType": "TAG"})


def mqtool(*args, env=None, drop=()):
    base = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("MQTOOL_")}
    return subprocess.run([sys.executable, "-m", "mqtool", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env=dict(base, **(env or {})))


def test_sign_prints_the_spec_vector():
    r = mqtool("acl", "sign", "--code", "11", "--ext-json", V3_EXT, "--token", "tok1", "--json",
               "--access-key", "RocketMQ", "--secret-key", "12345678")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["content"] == "RocketMQtok10groupBTAG32100*150002topicB"
    assert out["signature"] == "3xmP3y7ScfZvZ1QnTPwQpu9fnc0="
    assert out["keys"][:2] == ["AccessKey", "SecurityToken"]


def test_sign_checks_a_given_signature_and_the_java_unique_key_bug():
    args = ["acl", "sign", "--code", "12", "-e", "topic=T", "-e", "key=k", "-e", "_UNIQUE_KEY_QUERY=true", "--json",
            "--java-client"]
    r = mqtool(*args, env={"MQTOOL_ACCESS_KEY": "RocketMQ", "MQTOOL_SECRET_KEY": "12345678"})
    out = json.loads(r.stdout)
    assert out["content"] == "RocketMQkT" and out["java_client_signature"] != out["signature"]
    r = mqtool(*args, "-e", f"Signature={out['java_client_signature']}",
               env={"MQTOOL_ACCESS_KEY": "RocketMQ", "MQTOOL_SECRET_KEY": "12345678"})
    assert r.returncode == 1 and json.loads(r.stdout)["matches"] is False


def test_credentials_from_tools_yml_under_rocketmq_home(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: RocketMQ\nsecretKey: 12345678\n")
    r = mqtool("acl", "sign", "--code", "34", "--body", '{"clientID":"127.0.0.1@1","consumerDataSet":[],'
               '"producerDataSet":[]}', "--json", env={"ROCKETMQ_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["signature"] == "PN6N7+UPLoRkSyqaEeQMjQZWWew="
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: RocketMQ\nsecretKey: ' '\n")     # blank: unsigned
    r = mqtool("acl", "sign", "--code", "34", env={"ROCKETMQ_HOME": str(tmp_path)})
    assert r.returncode == 2 and "give --access-key and --secret-key" in r.stderr


def test_one_key_alone_is_a_usage_error():
    r = mqtool("topic", "list", "-n", "127.0.0.1:1", "--access-key", "RocketMQ", drop=("ROCKETMQ_HOME",))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "mqtool: error: --access-key and --secret-key go together (or MQTOOL_ACCESS_KEY/MQTOOL_SECRET_KEY)"]


def _commands(group: typer.Typer, prefix: str = ""):
    cli = typer.main.get_command(group)
    stack = [(prefix, cli)]
    while stack:
        name, cmd = stack.pop()
        subs = getattr(cmd, "commands", None)
        if subs:
            stack += [(f"{name} {n}".strip(), c) for n, c in subs.items()]
        else:
            yield name, cmd


def test_every_command_that_talks_to_a_server_takes_the_acl_options():
    """Servers excepted (and `cluster start`, which starts them): a 4.9.8 broker has no credentials of its
    own (its registrations are unsigned)."""
    found = 0
    for name, cmd in _commands(build()):
        params = {p.name for p in cmd.params}
        if "namesrv" in params and name not in ("broker start", "namesrv start", "cluster start"):
            found += 1
            assert {"access_key", "secret_key"} <= params, f"mqtool {name} lacks --access-key/--secret-key"
    assert found > 35


def test_mqadmin_acl_names_are_hidden_aliases():
    assert ALIASES["updateAclConfig"] == ("acl", "acl_update")
    assert ALIASES["clusterAclConfigVersion"] == ("acl", "acl_list")
    assert ALIASES["updateGlobalWhiteAddr"] == ("acl", "acl_whitelist")
    assert ALIASES["deleteAccessConfig"] == ALIASES["deleteAclConfig"] == ("acl", "acl_delete")
    r = mqtool("--help")
    assert "acl" in r.stdout and "updateAclConfig" not in r.stdout


def test_whitelist_refuses_a_brace_pattern_the_broker_would_split():
    r = mqtool("acl", "whitelist", "-n", "127.0.0.1:1", "-b", "127.0.0.1:2", "-g", "192.168.0.{1,2}")
    assert r.returncode == 2 and "splits the list at every comma" in r.stderr


def test_an_account_on_a_broker_without_acl_says_so(cluster):  # noqa: F811
    """4.9.8 answers with its NullPointerException's text; the line adds what it means."""
    proc = run_cli("acl", "create", "-n", cluster["namesrv"], "-b", cluster["broker"], "-a", "RocketMQ",
                   "-s", "12345678")
    assert proc.returncode == 1
    assert proc.stdout.strip().endswith('because "accessValidator" is null (the broker runs without aclEnable=true)')
