"""Plain ACL without a server: address patterns, permissions, files, the §4 checks, codes 50-53 edits."""
from __future__ import annotations

import os
import time

import pytest
import yaml

from mqtool.broker.acl.addresses import compile_pattern, expand_ip
from mqtool.broker.acl.files import Account
from mqtool.broker.acl.manager import PlainPermissionManager
from mqtool.broker.acl.perms import ANY, DENY, PUB, SUB, AclError, check_permission, parse_perm
from mqtool.broker.acl.validator import AclService, needed_resources, parse
from mqtool_remoting.acl import Credentials
from mqtool_remoting.command import RemotingCommand

# ---------------------------------------------------------------- address patterns


@pytest.mark.parametrize("pattern, yes, no", [
    ("*", ["1.2.3.4", "[::1]"], []),
    ("*.*.*.*", ["10.0.0.1"], []),
    ("192.168.0.1", ["192.168.0.1"], ["192.168.0.2"]),
    ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["::2", "[::1]"]),
    ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3"]),
    ("1050::5:600:300c:{1,2}", ["1050:0:0:0:5:600:300c:1", "1050::5:600:300c:2"], ["1050::5:600:300c:3"]),
    ("192.168.1.1,192.168.1.5", ["192.168.1.5"], ["192.168.1.2"]),
    ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.101", "192.168.2.50"]),
    ("192.168.1.*", ["192.168.1.0", "192.168.1.255"], ["192.168.2.1"]),
    ("192.168.*.*", ["192.168.7.7"], ["192.169.0.1"]),
    ("192.*.*.*", ["192.1.2.3"], ["193.1.2.3"]),
    ("192.168.1-10.*", ["192.168.10.200", "192.168.1.0"], ["192.168.11.1"]),
    ("192.168.1-10.5", ["192.168.3.9"], []),                # later octets are ignored
    ("1050::0005:0600:300c:1-200", ["1050::5:600:300c:c9", "1050::5:600:300c:200"], ["1050::5:600:300c:201"]),
    ("1050::0005:0600:300c:*", ["1050::5:600:300c:ffff"], ["1050::5:600:300d:1"]),
    ("", [], ["127.0.0.1"]),
    (None, [], ["127.0.0.1"]),
])
def test_patterns(pattern, yes, no):
    m = compile_pattern(pattern)
    assert all(m(ip) for ip in yes), [ip for ip in yes if not m(ip)]
    assert not any(m(ip) for ip in no), [ip for ip in no if m(ip)]


@pytest.mark.parametrize("pattern", ["192.168.*", "192.168.0", "192.168.0.256", "192.168.1.100-1", "[::1]", "abc",
                                     "192.168.1.1, 192.168.1.5", "192.168.0.01"])
def test_bad_patterns_are_refused(pattern):
    with pytest.raises(AclError):
        compile_pattern(pattern)


def test_expand_ip():
    assert expand_ip("::1", 8) == "0000:0000:0000:0000:0000:0000:0000:0001"
    assert expand_ip("1050::5:600:300c:c9", 8) == "1050:0000:0000:0000:0005:0600:300C:00C9"

# ---------------------------------------------------------------- permissions


def test_perm_parsing_is_trimmed_and_case_sensitive():
    assert [parse_perm(p) for p in ("PUB", " SUB ", "PUB|SUB", "SUB|PUB", "DENY", "pub", None, "ANY")] == \
        [PUB, SUB, PUB | SUB, PUB | SUB, DENY, DENY, DENY, DENY]


def test_check_permission():
    assert check_permission(PUB, PUB | SUB) and not check_permission(PUB, SUB)
    assert not check_permission(SUB, SUB | DENY)
    assert check_permission(ANY, SUB) and not check_permission(ANY, DENY)


def test_account_from_yaml_scalars():
    acc = Account.build(yaml.safe_load("{accessKey: 12345678, secretKey: 012345670, admin: yes, "
                                       "topicPerms: [a=PUB], groupPerms: [g=SUB]}"))
    assert (acc.access_key, acc.secret_key, acc.admin) == ("12345678", "2739128", True)   # octal, YAML 1.1
    with pytest.raises(AclError, match="accessKey=342391 "):         # 01234567 is octal: 6 digits, too short
        Account.build(yaml.safe_load("{accessKey: 01234567, secretKey: 12345678}"))
    assert acc.perms == {"a": PUB, "%RETRY%g": SUB}
    assert Account.build({"accessKey": "abcdefg", "secretKey": "1234567", "admin": "true"}).admin
    with pytest.raises(AclError, match="The accessKey=short and secretKey=1234567 cannot be null"):
        Account.build({"accessKey": "short", "secretKey": "1234567"})
    with pytest.raises(AclError, match="Parse resource permission failed for topic:topicA"):
        Account.build({"accessKey": "abcdefg", "secretKey": "1234567", "topicPerms": ["topicA"]})

# ---------------------------------------------------------------- needed resources


def test_needed_resources_per_code():
    assert needed_resources(310, {"a": "PG", "b": "T"}, b"") == {"T": PUB}
    assert needed_resources(310, {"a": "PG", "b": "%RETRY%CG"}, b"") == {"%RETRY%PG": SUB}
    assert needed_resources(10, {"topic": "%RETRY%CG"}, b"") == {}          # no `group` field: nothing
    assert needed_resources(11, {"topic": "T", "consumerGroup": "G"}, b"") == {"T": SUB, "%RETRY%G": SUB}
    body = b'{"clientID":"c","consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T"}]}],' \
           b'"producerDataSet":[{"groupName":"P"}]}'
    assert needed_resources(34, {}, body) == {"%RETRY%G": SUB, "T": SUB}
    assert needed_resources(15, {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "1"}, b"") == \
        {"%RETRY%G": SUB, "T": SUB}
    assert needed_resources(320, {"b": "T"}, b"") == {}                     # batch: signature only
    for pop_code in (200050, 200051, 200052, 200053, 200054, 200055):       # 5.x POP: as a pull
        assert needed_resources(pop_code, {"topic": "T", "consumerGroup": "G"}, b"") == {"T": SUB, "%RETRY%G": SUB}
    assert needed_resources(200151, {}, b"{}") == {}                        # batch ack: signature only
    with pytest.raises(AclError, match="consumerGroup"):
        needed_resources(38, {}, b"")

# ---------------------------------------------------------------- a home with files


PLAIN = """\
# a comment the broker will drop on its first write
globalWhiteRemoteAddresses: [10.10.103.*]
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB]
  - {accessKey: rocketmq2, secretKey: 12345678, whiteRemoteAddress: 192.168.1.*, admin: true}
extraKey: kept
"""


@pytest.fixture
def home(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(PLAIN)
    return tmp_path


def request(code, ext, body=b"", ak="RocketMQ", sk="12345678"):
    cmd = RemotingCommand.request(code, ext, body)
    if ak is not None:
        Credentials(ak, sk).sign(cmd)
    return cmd


def check(mgr, cmd, ip="127.0.0.1"):
    try:
        mgr.validate(parse(cmd, ip))
        return "ok"
    except AclError as exc:
        return exc.message


def test_validate_steps(home):
    mgr = PlainPermissionManager(str(home))
    send = {"a": "PG", "b": "topicB"}
    assert check(mgr, request(310, send)) == "ok"
    assert check(mgr, request(310, send, ak=None)) == "No accessKey is configured"
    assert check(mgr, request(310, send, ak="nobody12")) == "No acl config for nobody12"
    assert check(mgr, request(310, send, sk="wrong-secret")) == "Check signature failed for accessKey=RocketMQ"
    assert check(mgr, request(310, {"a": "PG", "b": "topicA"})) == "No default permission for topic:topicA"
    assert check(mgr, request(310, {"a": "PG", "b": "other"})) == "No default permission for topic:other"
    assert check(mgr, request(310, {"a": "PG", "b": "topicC"})) == "No default permission for topic:topicC"
    assert check(mgr, request(11, {"topic": "topicC", "consumerGroup": "any"})) == "ok"    # group default SUB
    assert check(mgr, request(11, {"topic": "topicC", "consumerGroup": "groupA"})) == \
        "No default permission for group:groupA"
    assert check(mgr, request(17, {"topic": "x"})) == \
        "Need admin permission for request code=17, but accessKey=RocketMQ is not"
    assert check(mgr, request(17, {"topic": "x"}, ak="rocketmq2")) == "ok"          # admin without perms
    assert check(mgr, request(310, {"a": "PG", "b": "RMQ_SYS_TRACE_TOPIC"})) == "ok"
    assert check(mgr, request(50, {"accessKey": "x"})) == "ok"                       # signature only
    # whitelists: global skips everything, the account's skips signature and perms
    assert check(mgr, request(310, send, ak=None), "10.10.103.7") == "ok"
    assert check(mgr, request(310, {"a": "PG", "b": "topicA"}, sk="wrong-secret"), "192.168.1.9") == \
        "Check signature failed for accessKey=RocketMQ"          # another account's whitelist is no help
    bad = request(310, {"a": "PG", "b": "topicA"}, ak="rocketmq2", sk="wrong-secret")
    assert check(mgr, bad, "192.168.1.9") == "ok"
    assert check(mgr, bad, "192.168.2.9") == "Check signature failed for accessKey=rocketmq2"
    assert check(mgr, request(310, send, ak=None), "::1") == "No accessKey is configured"


def test_remark_and_response_code(home):
    svc = AclService(str(home))

    class Conn:
        peer_host, peer = "127.0.0.1", "127.0.0.1:1"
    resp = svc.check(Conn, request(310, {"a": "PG", "b": "topicB"}, ak=None))
    assert resp.code == 1
    assert resp.remark == ("org.apache.rocketmq.acl.common.AclException: No accessKey is configured, org.apache."
                           "rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:664)")
    assert svc.check(Conn, request(310, {"a": "PG", "b": "topicB"})) is None


def test_first_file_wins_and_default_file_is_created(tmp_path):
    (tmp_path / "conf" / "acl" / "sub").mkdir(parents=True)
    (tmp_path / "conf" / "acl" / "sub" / "x.yml").write_text(
        "accounts: [{accessKey: RocketMQ, secretKey: abcdefgh, defaultTopicPerm: PUB}]\n")
    mgr = PlainPermissionManager(str(tmp_path))
    assert (tmp_path / "conf" / "plain_acl.yml").exists()
    (tmp_path / "conf" / "plain_acl.yml").write_text(PLAIN)
    mgr.load()
    assert mgr.key_file["RocketMQ"].endswith("x.yml")
    assert check(mgr, request(310, {"a": "PG", "b": "topicA"}, sk="abcdefgh")) == "ok"


def test_invalid_file_refused_at_start_and_kept_on_reload(home):
    good = AclService(str(home))
    (home / "conf" / "plain_acl.yml").write_text("globalWhiteRemoteAddresses: [192.168.*]\n")
    with pytest.raises(AclError, match="plain_acl.yml: .*Netaddress examine scope"):
        AclService(str(home))
    time.sleep(0.01)
    os.utime(home / "conf" / "plain_acl.yml")
    good.poll()
    assert "RocketMQ" in good.manager.key_file                   # the old config stays


def test_reload_of_one_file_keeps_removed_keys_in_the_table(home):
    svc = AclService(str(home))
    path = home / "conf" / "plain_acl.yml"
    path.write_text("accounts: [{accessKey: rocketmq2, secretKey: 12345678, admin: true}]\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    svc.poll()
    assert check(svc.manager, request(310, {"a": "PG", "b": "topicB"})) == "No PlainAccessResource for accessKey=RocketMQ"
    (home / "conf" / "acl").mkdir()
    (home / "conf" / "acl" / "new.yml").write_text("accounts: [{accessKey: newUser01, secretKey: 12345678}]\n")
    svc.poll()                                                    # one more file: a full load
    assert check(svc.manager, request(310, {"a": "PG", "b": "topicB"})) == "No acl config for RocketMQ"
    assert "newUser01" in svc.manager.key_file

# ---------------------------------------------------------------- codes 50-53 on the files


def test_update_merges_into_its_file_and_keeps_other_content(home):
    mgr = PlainPermissionManager(str(home))
    mgr.update_account({"accessKey": "RocketMQ", "secretKey": "newsecret", "admin": False, "topicPerms": ["t=PUB"],
                        "groupPerms": None, "defaultTopicPerm": None, "whiteRemoteAddress": None})
    data = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
    assert data["extraKey"] == "kept" and data["globalWhiteRemoteAddresses"] == ["10.10.103.*"]
    assert [a["accessKey"] for a in data["accounts"]] == ["rocketmq2", "RocketMQ"]     # moved to the end
    acc = data["accounts"][1]
    assert acc["secretKey"] == "newsecret" and acc["topicPerms"] == ["t=PUB"] and acc["groupPerms"] == [
        "groupA=DENY", "groupB=PUB|SUB"] and acc["whiteRemoteAddress"] is None and acc["defaultGroupPerm"] == "SUB"
    assert data["dataVersion"][0]["counter"] == 1
    assert mgr.accounts[mgr.default_file]["RocketMQ"].secret_key == "newsecret"
    mgr.update_account({"accessKey": "newUser01", "secretKey": "newSecret01", "admin": True})
    data = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
    assert data["accounts"][-1] == {"accessKey": "newUser01", "secretKey": "newSecret01", "admin": True}
    assert data["dataVersion"][0]["counter"] == 2
    with pytest.raises(AclError, match="Parse Resource format error for x"):
        mgr.update_account({"accessKey": "newUser01", "secretKey": "newSecret01", "topicPerms": ["x"]})
    with pytest.raises(AclError, match="The accessKey=short and secretKey=1234567"):
        mgr.update_account({"accessKey": "short", "secretKey": "1234567"})


def test_delete_and_white_list(home):
    mgr = PlainPermissionManager(str(home))
    assert mgr.delete_account("RocketMQ") and not mgr.delete_account("RocketMQ")
    assert check(mgr, request(310, {"a": "PG", "b": "topicB"})) == "No acl config for RocketMQ"
    assert mgr.update_white_list(["127.0.0.1", "10.*.*.*"])
    data = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
    assert data["globalWhiteRemoteAddresses"] == ["127.0.0.1", "10.*.*.*"] and len(data["accounts"]) == 1
    assert not mgr.update_white_list(["1.1.1.1"], "/etc/passwd")           # outside the home
    assert not mgr.update_white_list(["1.1.1.1"], str(home / "conf" / "none.yml"))
