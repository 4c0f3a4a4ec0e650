"""A broker with aclEnable=true (real processes): mqtool's client and the official C++ client signed,
refused as 4.9.8 refuses, whitelists, hot reload, and the admin requests 50-53 through the CLI."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
import yaml

from mqtool.client.admin import Admin
from mqtool.client.consumer import Consumer
from mqtool.client.producer import OutMessage, Producer
from mqtool_remoting.acl import Credentials
from mqtool_remoting.codes import RequestCode
from mqtool_remoting.command import RemotingCommand, decode_frame
from mqtool_remoting.errors import RemotingCommandError
from tests.interop.conftest import HAVE_CPP, run_cpp
from tests.servers import FAST_LEVELS, REPO, Process, cluster, free_port, free_port_pair, wait_until  # noqa: F401

pytestmark = pytest.mark.slow

PLAIN = """\
globalWhiteRemoteAddresses: [127.0.0.2]
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [AclTopic=PUB|SUB, AclSubOnly=SUB, AclPubOnly=PUB, AclCpp=PUB|SUB]
    groupPerms: [GID_DENIED=DENY]
  - {accessKey: rocketmq2, secretKey: "12345678", admin: true}
  - {accessKey: whiteacct, secretKey: "12345678", whiteRemoteAddress: 127.0.0.3}
"""
USER = Credentials("RocketMQ", "12345678")
ADMIN = Credentials("rocketmq2", "12345678")


def start(tmp, ns, home, extra=""):
    port = free_port_pair()
    conf = tmp / f"broker-{port}.conf"
    conf.write_text(f"brokerClusterName=AclCluster\nbrokerName=acl-{port}\nmessageDelayLevel={FAST_LEVELS}\n"
                    f"aclEnable=true\n{extra}")
    env = dict(os.environ, ROCKETMQ_HOME=str(home))
    proc = Process(["broker", "start", "-n", ns, "-c", str(conf), "--listen", f"127.0.0.1:{port}",
                    "--store-dir", str(tmp / f"store-{port}")], "boot success", env=env)
    return proc, f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def acl(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("acl")
    home = tmp / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN)
    ns_port = free_port()
    ns = Process(["namesrv", "start", "--listen", f"127.0.0.1:{ns_port}", "--kv-config", str(tmp / "kv.json")],
                 "boot success")
    ns_addr = f"127.0.0.1:{ns_port}"
    broker, addr = start(tmp, ns_addr, home)
    log: list[str] = []
    threading.Thread(target=_drain, args=(broker.proc.stderr, log), daemon=True).start()
    yield {"namesrv": ns_addr, "broker": addr, "home": home, "tmp": tmp, "log": log}
    assert broker.stop() == 0
    assert ns.stop() == 0


def _drain(stream, into: list[str]) -> None:
    """The broker's log lines, kept for the test (it logs each ACL refusal with Java's message)."""
    try:
        for line in stream:
            into.append(line)
    except (ValueError, OSError):
        pass


def logged(acl, text: str, since: int = 0) -> bool:
    """The broker logged `text` in a line after the first `since` lines."""
    wait_until(f"the broker to log {text!r}", lambda: any(text in line for line in acl["log"][since:]), timeout=10)
    return True


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def send(ns, topic, creds, body=b"hello", group="PID_ACL"):
    p = Producer(ns, group, credentials=creds)
    try:
        return await p.send(OutMessage(topic, body))
    finally:
        await p.close()


async def queues_once_routed(consumer, topic: str, timeout: float = 15.0):
    """The topic's queues, once the broker's registration that follows its auto-creation reached the name server."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await consumer.queues(topic)
        except RemotingCommandError as exc:
            if exc.code != 17 or time.monotonic() > deadline:      # TOPIC_NOT_EXIST
                raise
            await asyncio.sleep(0.1)


def refusal(ns, topic, creds, group="PID_ACL") -> RemotingCommandError:
    with pytest.raises(RemotingCommandError) as info:
        run(send(ns, topic, creds, group=group))
    assert info.value.code == 1                      # SYSTEM_ERROR, never NO_PERMISSION
    return info.value


def raw_request(addr, cmd: RemotingCommand, source: str) -> RemotingCommand:
    """One request from a chosen loopback address (the whitelists match the peer IP)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0)) as s:
        s.sendall(cmd.encode())
        head = _read(s, 4)
        return decode_frame(head + _read(s, int.from_bytes(head, "big")))


def _read(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def send_v2(topic, group="PID_RAW"):
    ext = {"a": group, "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": int(time.time() * 1000), "h": 0,
           "i": "", "j": 0, "k": False, "m": False}
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"raw body")

# ---------------------------------------------------------------- mqtool's client


def test_valid_account_sends_and_consumes(acl):
    ns = acl["namesrv"]
    r = run(send(ns, "AclTopic", USER, b"signed body"))
    assert r.msg_id

    async def consume():
        c = Consumer(ns, "GID_ACL", credentials=USER)
        try:
            for mq in await queues_once_routed(c, "AclTopic"):
                res = await c.pull(mq, 0)
                if res.messages:
                    return [m.body for m in res.messages]
            return []
        finally:
            await c.close()
    assert b"signed body" in run(consume())


def test_refusals_answer_system_error_with_the_java_remark(acl):
    ns = acl["namesrv"]
    e = refusal(ns, "AclTopic", Credentials("RocketMQ", "wrong-secret"))
    assert "org.apache.rocketmq.acl.common.AclException: Check signature failed for accessKey=RocketMQ" in e.remark
    assert "No acl config for nobody12" in refusal(ns, "AclTopic", Credentials("nobody12", "12345678")).remark
    assert "No default permission for topic:AclSubOnly" in refusal(ns, "AclSubOnly", USER).remark
    assert "No default permission for topic:Unlisted" in refusal(ns, "Unlisted", USER).remark
    assert "No accessKey is configured" in refusal(ns, "AclTopic", None).remark

    async def pull_denied():
        run_ok = await send(ns, "AclTopic", USER)
        assert run_ok.msg_id
        c = Consumer(ns, "GID_DENIED", credentials=USER)
        try:
            mq = (await c.queues("AclTopic"))[0]
            with pytest.raises(RemotingCommandError) as info:
                await c.pull(mq, 0)
            return info.value
        finally:
            await c.close()
    e = asyncio.run(pull_denied())
    assert e.code == 1 and "No default permission for group:GID_DENIED" in e.remark


def test_admin_codes_need_an_admin_account(acl):
    ns = acl["namesrv"]

    async def create(creds):
        admin = Admin(ns, credentials=creds)
        try:
            return await admin.create_topic("AclCreated", 2, 2, cluster="AclCluster")
        finally:
            await admin.close()
    with pytest.raises(RemotingCommandError, match="Need admin permission for request code=17, but "
                                                   "accessKey=RocketMQ is not"):
        run(create(USER))
    assert run(create(ADMIN))


def test_whitelists_skip_the_signature(acl):
    addr = acl["broker"]
    unsigned = send_v2("AclTopic")
    assert raw_request(addr, unsigned, "127.0.0.2").code == 0           # global whitelist: no key at all
    resp = raw_request(addr, send_v2("AclTopic"), "127.0.0.3")
    assert resp.code == 1 and "No accessKey is configured" in resp.remark
    wrong = send_v2("Unlisted")
    Credentials("whiteacct", "not-the-secret").sign(wrong)
    assert raw_request(addr, wrong, "127.0.0.3").code == 0               # the account's own whitelist
    again = send_v2("Unlisted")
    Credentials("whiteacct", "not-the-secret").sign(again)
    assert "Check signature failed for accessKey=whiteacct" in raw_request(addr, again, "127.0.0.4").remark


def test_query_by_unique_key_is_signed_so_the_broker_accepts_it(acl):
    ns = acl["namesrv"]
    r = run(send(ns, "AclTopic", USER, b"find me"))

    async def query():
        admin = Admin(ns, credentials=USER)
        try:
            return await wait_for_found(admin, r.msg_id)
        finally:
            await admin.close()

    async def wait_for_found(admin, key):
        for _ in range(50):
            found, _capped = await admin.query_by_key("AclTopic", key, unique=True)
            if found:
                return found
            await asyncio.sleep(0.2)
        return []
    assert run(query())


def test_file_edit_takes_effect_while_running(acl):
    ns = acl["namesrv"]
    path = acl["home"] / "conf" / "plain_acl.yml"
    newbie = Credentials("newUser01", "newSecret01")
    assert "No acl config for newUser01" in refusal(ns, "AclTopic", newbie).remark
    data = yaml.safe_load(path.read_text())
    data["accounts"].append({"accessKey": "newUser01", "secretKey": "newSecret01", "defaultTopicPerm": "PUB"})
    path.write_text(yaml.safe_dump(data))
    start = time.monotonic()

    def accepted():
        try:
            return run(send(ns, "AclTopic", newbie)).msg_id
        except RemotingCommandError:
            return None
    wait_until("the edited plain_acl.yml to be live", accepted, timeout=10, every=0.5)
    assert time.monotonic() - start < 10

# ---------------------------------------------------------------- the CLI and codes 50-53


def mqtool(*args, env=None):
    return subprocess.run([sys.executable, "-m", "mqtool", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, **(env or {})))


def test_cli_manages_accounts_and_whitelist(acl):
    ns, addr, home = acl["namesrv"], acl["broker"], acl["home"]
    admin_opts = ["--access-key", "rocketmq2", "--secret-key", "12345678"]
    r = mqtool("acl", "create", "-n", ns, "-b", addr, "-a", "cliUser01", "-s", "cliSecret01", "-i", "PUB",
               "-t", "CliTopic=PUB|SUB", *admin_opts)
    assert r.returncode == 0, r.stderr
    entry = [a for a in yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())["accounts"]
             if a["accessKey"] == "cliUser01"]
    assert entry == [{"accessKey": "cliUser01", "secretKey": "cliSecret01", "admin": False, "defaultTopicPerm": "PUB",
                      "topicPerms": ["CliTopic=PUB|SUB"]}]
    assert run(send(ns, "CliTopic", Credentials("cliUser01", "cliSecret01"))).msg_id     # live at once
    # send through the CLI with the env credentials
    r = mqtool("send", "-n", ns, "-t", "CliTopic", "from the cli", "--json",
               env={"MQTOOL_ACCESS_KEY": "cliUser01", "MQTOOL_SECRET_KEY": "cliSecret01"})
    assert r.returncode == 0, r.stderr
    r = mqtool("send", "-n", ns, "-t", "CliTopic", "unsigned")
    assert r.returncode != 0 and "No accessKey is configured" in r.stderr and "Traceback" not in r.stderr
    # a short key: 209 with Java's text
    r = mqtool("updateAclConfig", "-n", ns, "-b", addr, "-a", "short", "-s", "1234567", *admin_opts)
    assert r.returncode == 1 and "The accessKey=short and secretKey=1234567 cannot be null" in r.stdout + r.stderr
    failed = [ln for ln in r.stdout.splitlines() if "FAILED" in ln]      # the row says account and broker once
    assert len(failed) == 1 and failed[0].startswith(f"account short on {addr}: FAILED: ") \
        and failed[0].count(addr) == 1, r.stdout
    # versions: the default file's counter went up
    r = mqtool("acl", "list", "-n", ns, "-c", "AclCluster", "--json", *admin_opts)
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout.splitlines()[0])
    assert row["broker_addr"] == addr and row["cluster"] == "AclCluster"
    assert row["files"][str(home / "conf" / "plain_acl.yml")]["counter"] >= 1
    # delete; a second delete fails with Java's remark
    r = mqtool("acl", "delete", "-n", ns, "-b", addr, "-a", "cliUser01", *admin_opts)
    assert r.returncode == 0, r.stderr
    r = mqtool("deleteAccessConfig", "-n", ns, "-b", addr, "-a", "cliUser01", *admin_opts)
    assert r.returncode == 1 and "The accesskey[cliUser01] corresponding to accessConfig has been deleted failed." \
        in r.stdout
    # the global whitelist: written now, live at the next reload (<= 5 s)
    r = mqtool("acl", "whitelist", "-n", ns, "-b", addr, "-g", "127.0.0.2,127.0.0.5", *admin_opts)
    assert r.returncode == 0, r.stderr
    data = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
    assert data["globalWhiteRemoteAddresses"] == ["127.0.0.2", "127.0.0.5"]
    assert any(a["accessKey"] == "whiteacct" for a in data["accounts"])         # the rest of the file stays
    wait_until("127.0.0.5 whitelisted", lambda: raw_request(addr, send_v2("AclTopic"), "127.0.0.5").code == 0,
               timeout=10, every=0.5)


def test_broker_refuses_to_start_with_a_bad_file(tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text("accounts: [{accessKey: short, secretKey: 1234567}]\n")
    conf = tmp_path / "b.conf"
    conf.write_text("aclEnable=true\n")
    r = subprocess.run([sys.executable, "-m", "mqtool", "broker", "start", "-c", str(conf), "--listen",
                        f"127.0.0.1:{free_port_pair()}", "--store-dir", str(tmp_path / "store"), "-n", "127.0.0.1:1"],
                       cwd=REPO, capture_output=True, text=True, timeout=60, env=dict(os.environ, ROCKETMQ_HOME=str(home)))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "plain_acl.yml" in lines[0] and "The accessKey=short and secretKey=1234567" in lines[0]
    r = subprocess.run([sys.executable, "-m", "mqtool", "broker", "start", "-c", str(conf), "-n", "127.0.0.1:1"],
                       cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"})
    assert r.returncode == 2 and "ROCKETMQ_HOME" in r.stderr
    conf.write_text(f"aclEnable=true\nrocketmqHome={home}\n")          # the home from broker.conf
    r = subprocess.run([sys.executable, "-m", "mqtool", "broker", "start", "-c", str(conf), "-n", "127.0.0.1:1"],
                       cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"})
    assert r.returncode == 2 and "The accessKey=short and secretKey=1234567" in r.stderr

# ---------------------------------------------------------------- the official C++ client


cpp = pytest.mark.skipif(not HAVE_CPP, reason="C++ client wheel not loadable here")


def cpp_send(ns, topic, ak, sk, keys="k"):
    msgs = [{"keys": keys, "tags": "T", "body": f"cpp {keys}"}]
    return run_cpp("produce", ns, {"topic": topic, "messages": msgs, "ak": ak, "sk": sk, "report_errors": True,
                                   "group": "PID_CPP_ACL"})


@cpp
def test_cpp_client_valid_account_sends_and_consumes(acl):
    ns = acl["namesrv"]
    sent = cpp_send(ns, "AclCpp", "RocketMQ", "12345678", "ok-1")
    assert sent and "error" not in sent[0] and sent[0]["status"] == 0
    got = run_cpp("pull_status", ns, {"topic": "AclCpp", "group": "GID_CPP", "ak": "RocketMQ", "sk": "12345678"})
    assert "cpp ok-1" in [b for g in got for b in g.get("bodies", [])], got


def stored(acl, topic: str) -> int:
    """Messages the broker holds for `topic` (read with the admin account)."""
    async def count():
        c = Consumer(acl["namesrv"], "GID_COUNT", credentials=ADMIN)
        try:
            total = 0
            for mq in await c.queues(topic):
                total += await c.max_offset(mq)
            return total
        finally:
            await c.close()
    return run(count())


@cpp
def test_cpp_client_refusals(acl):
    """The C++ client (1.x inside rocketmq==0.4.4) reports a refused send as "No route info" after its
    retries; what the broker answered is in the broker's log, with Java's message."""
    ns = acl["namesrv"]
    cpp_send(ns, "AclCpp", "RocketMQ", "12345678", "create")
    before = stored(acl, "AclCpp")
    for ak, sk, topic, text in [("RocketMQ", "wrong-secret", "AclCpp", "Check signature failed for accessKey=RocketMQ"),
                                ("nobody12", "12345678", "AclCpp", "No acl config for nobody12"),
                                ("RocketMQ", "12345678", "AclSubOnly", "No default permission for topic:AclSubOnly")]:
        since = len(acl["log"])
        out = cpp_send(ns, topic, ak, sk)
        assert out and "error" in out[0] and "status" not in out[0], (ak, topic, out)
        assert logged(acl, "ACL refused SEND_MESSAGE from 127.0.0.1:", since)        # the 1.x client sends code 10
        assert logged(acl, text, since)
    assert stored(acl, "AclCpp") == before
    since = len(acl["log"])
    got = run_cpp("pull_status", ns, {"topic": "AclCpp", "group": "GID_DENIED", "ak": "RocketMQ", "sk": "12345678"})
    assert got and all(g.get("status") != "FOUND" for g in got), got
    assert logged(acl, "ACL refused PULL_MESSAGE", since)
    assert logged(acl, "No default permission for group:GID_DENIED", since)


@cpp
def test_cpp_client_without_credentials_is_refused(acl):
    since = len(acl["log"])
    out = run_cpp("produce", acl["namesrv"], {"topic": "AclCpp", "report_errors": True,
                                              "messages": [{"keys": "x", "tags": "T", "body": "unsigned"}]})
    assert out and "error" in out[0], out
    wait_until("the broker to log the empty AccessKey the C++ client sends without credentials",
               lambda: any(line.rstrip("\n").endswith(": No acl config for ") for line in acl["log"][since:]),
               timeout=10)


@cpp
def test_cpp_client_unsigned_passes_once_its_address_is_whitelisted_in_the_running_broker(acl):
    ns, path = acl["namesrv"], acl["home"] / "conf" / "plain_acl.yml"
    original = path.read_text()
    unsigned = {"topic": "AclCpp", "report_errors": True, "messages": [{"keys": "w", "tags": "T", "body": "white"}]}

    def passes():
        out = run_cpp("produce", ns, unsigned)
        return bool(out) and out[0].get("status") == 0
    assert not passes()
    data = yaml.safe_load(original)
    data["globalWhiteRemoteAddresses"] = list(data.get("globalWhiteRemoteAddresses") or []) + ["127.0.0.*"]
    path.write_text(yaml.safe_dump(data))
    try:
        started = time.monotonic()
        wait_until("127.0.0.* in the edited file to be live for the C++ client", passes, timeout=10, every=0.2)
        assert time.monotonic() - started < 10
    finally:
        path.write_text(original)
    wait_until("the restored file to be live", lambda: not passes(), timeout=10, every=0.2)


def test_without_acl_enable_the_acl_requests_fail_as_in_4_9_8(cluster):  # noqa: F811
    addr = cluster["broker"]

    async def scenario():
        from mqtool_remoting.errors import RemotingTimeout
        from mqtool_remoting.transport import connect
        conn = await connect(addr)
        try:
            update = await conn.request(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                "accessKey": "newUser01", "secretKey": "newSecret01", "admin": False}))
            gone = await conn.request(RemotingCommand.request(54))
            with pytest.raises(RemotingTimeout):
                await conn.request(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO), 1.0)
            plain = await conn.request(send_v2("NoAclTopic"))              # unsigned, served as always
            return update, gone, plain
        finally:
            await conn.close()
    update, gone, plain = run(scenario())
    assert update.code == 209 and "accessValidator" in update.remark
    assert (gone.code, gone.remark) == (3, " request type 54 not supported")
    assert plain.code == 0
