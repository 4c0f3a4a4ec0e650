"""Master and slave with aclEnable=true (real processes). The commit log goes over the HA port,
which has no ACL (as in 4.9.8). The slave's metadata requests (topics, offsets, groups) are not
signed, as no 4.x broker signs its requests to another broker, so an ACL master answers them only
from an address in globalWhiteRemoteAddresses: a refused slave says so in one line, once, with the
fix, and picks the metadata up when the whitelist (hot-reloaded) lets it in."""
from __future__ import annotations

import json

import pytest

from tests.conftest import json_lines, run_cli
from tests.ha.test_replication import Group
from tests.servers import drain, wait_until

pytestmark = pytest.mark.slow

PLAIN = """\
globalWhiteRemoteAddresses: [{white}]
accounts:
  - {{accessKey: rocketmq2, secretKey: "12345678", admin: true}}
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [AclHa=PUB|SUB]
"""
ADMIN = ("--access-key", "rocketmq2", "--secret-key", "12345678")
USER = ("--access-key", "RocketMQ", "--secret-key", "12345678")


def _slave_topics(g: Group) -> set[str]:
    path = g.store("slave") / "config" / "topics.json"
    return set(json.loads(path.read_text())["topicConfigTable"]) if path.exists() else set()


def test_an_acl_master_feeds_its_slave_once_the_slave_is_whitelisted(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    acl_file = home / "conf" / "plain_acl.yml"
    acl_file.write_text(PLAIN.format(white="10.255.255.*"))        # not this machine's loopback
    monkeypatch.setenv("ROCKETMQ_HOME", str(home))                # both brokers read it
    g = Group(tmp_path)
    try:
        g.start("master", "ASYNC_MASTER", 0, extra="aclEnable=true\n")
        slave_log = drain(g.start("slave", "SLAVE", 1, extra="aclEnable=true\n"))
        run_cli("send", "-t", "AclHa", "-n", g.ns, *USER, input="".join(f"m{i}\n" for i in range(20)), check=True)

        def slave_copied_the_log():
            [entry] = json_lines(run_cli("ha", "status", "-n", g.ns, "--json", *ADMIN, check=True).stdout)
            return entry["slaves"] and entry["slaves"][0].get("lagBytes") == 0
        wait_until("the commit log on the slave (the HA port has no ACL)", slave_copied_the_log)
        wait_until("the slave to report the refusal", lambda: [ln for ln in slave_log if "metadata sync" in ln])
        refused = [ln for ln in slave_log if "metadata sync" in ln]
        assert len(refused) == 1 and "No accessKey is configured" in refused[0]
        assert "globalWhiteRemoteAddresses" in refused[0]
        assert "AclHa" not in _slave_topics(g)

        acl_file.write_text(PLAIN.format(white="127.0.0.1"))         # hot reload (checked every 5 s)
        wait_until("the slave to copy the topics", lambda: "AclHa" in _slave_topics(g), timeout=40)
        assert [ln for ln in slave_log if "metadata sync" in ln and "refused" in ln] == refused   # once, not every round
        wait_until("the slave to say it works again", lambda: any("works again" in ln for ln in slave_log))
    finally:
        g.close()
