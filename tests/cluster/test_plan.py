"""`mqtool cluster start`'s plan: ports, directories and the config files it writes, before anything runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from mqtool.cluster.plan import ClusterInputError, group_name, plan_cluster, write_files
from mqtool_remoting import javaprops


def conf(plan, member) -> dict[str, str]:
    return javaprops.loads(plan.files[member.conf])


def test_replicas_run_in_controller_mode_with_the_controller_in_the_name_server(tmp_path):
    plan = plan_cluster(2, 3, tmp_path, "127.0.0.1:19876", 20911)
    ns = conf(plan, plan.namesrv)
    assert ns == {"listenPort": "19876", "kvConfigPath": str(tmp_path / "namesrv" / "kvConfig.json"),
                  "enableControllerInNamesrv": "true", "controllerDLegerGroup": "group1",
                  "controllerDLegerPeers": "n0-127.0.0.1:19878", "controllerDLegerSelfId": "n0",
                  "controllerStorePath": str(tmp_path / "namesrv" / "controller")}
    assert plan.controller == "127.0.0.1:19878"
    assert plan.namesrv.ready_ports == [19876, 19878]        # ready once the controller answers too
    assert plan.namesrv.ports == [19876, 19878, 19879]       # and its Raft port is free before it starts
    assert [(b.name, b.ident, b.port) for b in plan.brokers] == [
        ("broker-a", "r0", 20911), ("broker-a", "r1", 20921), ("broker-a", "r2", 20931),
        ("broker-b", "r0", 20941), ("broker-b", "r1", 20951), ("broker-b", "r2", 20961)]
    for b in plan.brokers:
        c = conf(plan, b)
        assert {k: c[k] for k in ("brokerId", "brokerRole", "enableControllerMode", "controllerAddr",
                                  "allAckInSyncStateSet", "namesrvAddr", "brokerClusterName")} == {
            "brokerId": "-1", "brokerRole": "SLAVE", "enableControllerMode": "true",
            "controllerAddr": "127.0.0.1:19878", "allAckInSyncStateSet": "true", "namesrvAddr": "127.0.0.1:19876",
            "brokerClusterName": "DefaultCluster"}
        assert c["brokerName"] == b.name and c["listenPort"] == str(b.port)
        assert c["storePathRootDir"] == str(tmp_path / f"{b.key}" / "store")
        assert b.ports == [b.port - 2, b.port, b.port + 1]     # fast, main, HA: no two brokers share one
    every_port = [p for m in plan.members for p in m.ports]
    assert len(every_port) == len(set(every_port))


def test_one_replica_is_a_plain_async_master_without_controller_keys(tmp_path):
    plan = plan_cluster(3, 1, tmp_path)
    assert plan.controller is None
    assert "enableControllerInNamesrv" not in conf(plan, plan.namesrv)
    assert [b.name for b in plan.brokers] == ["broker-a", "broker-b", "broker-c"]
    for b in plan.brokers:
        c = conf(plan, b)
        assert (c["brokerId"], c["brokerRole"]) == ("0", "ASYNC_MASTER")
        assert not {"enableControllerMode", "controllerAddr", "allAckInSyncStateSet"} & set(c)
    assert [b.port for b in plan.brokers] == [10911, 10921, 10931]
    assert plan.namesrv_addr == "127.0.0.1:9876"


def test_the_template_is_copied_and_the_cluster_keys_win(tmp_path):
    template = {"brokerClusterName": "Mine", "flushDiskType": "SYNC_FLUSH", "listenPort": "1234",
                "brokerName": "x", "storePathCommitLog": "/shared/commitlog", "fastListenPort": "999",
                "enableControllerMode": "true", "metricsPort": "5557", "allAckInSyncStateSet": "false"}
    plan = plan_cluster(2, 2, tmp_path, base_port=30911, template=template)
    assert plan.ignored == ["brokerName", "listenPort", "enableControllerMode", "fastListenPort",
                            "storePathCommitLog"]
    confs = [conf(plan, b) for b in plan.brokers]
    assert [c["listenPort"] for c in confs] == ["30911", "30921", "30931", "30941"]
    assert [c["metricsPort"] for c in confs] == ["5557", "5558", "5559", "5560"]    # one each
    for c in confs:
        assert c["brokerClusterName"] == "Mine" and c["flushDiskType"] == "SYNC_FLUSH"
        assert "storePathCommitLog" not in c and "fastListenPort" not in c
        assert c["allAckInSyncStateSet"] == "false"        # a durability choice the template may make


def test_each_broker_gets_its_own_grpc_port(tmp_path):
    """enableProxy in the template: broker i serves gRPC on grpcServerPort + i (8081 by default), and
    the port is checked free with the others before anything starts."""
    plan = plan_cluster(2, 2, tmp_path, base_port=30911, template={"enableProxy": "true"})
    assert [conf(plan, b)["grpcServerPort"] for b in plan.brokers] == ["8081", "8082", "8083", "8084"]
    assert [8081 + i in b.ports for i, b in enumerate(plan.brokers)] == [True] * 4
    plan = plan_cluster(1, 2, tmp_path, base_port=30911, template={"enableProxy": "true", "grpcServerPort": "28081"})
    assert [conf(plan, b)["grpcServerPort"] for b in plan.brokers] == ["28081", "28082"]
    plain = plan_cluster(1, 1, tmp_path, template={})
    assert "grpcServerPort" not in conf(plain, plain.brokers[0])
    with pytest.raises(ClusterInputError, match="grpcServerPort=65535"):
        plan_cluster(1, 2, tmp_path, template={"enableProxy": "true", "grpcServerPort": "65535"})


def test_written_files_are_the_planned_ones(tmp_path):
    plan = plan_cluster(1, 2, tmp_path / "c")
    write_files(plan)
    for path, text in plan.files.items():
        assert Path(path).read_text() == text
    assert sorted(p.relative_to(tmp_path / "c").as_posix() for p in plan.files) == [
        "broker-a-0/broker.conf", "broker-a-1/broker.conf", "namesrv/namesrv.conf"]


def test_group_names_go_on_past_z():
    assert [group_name(i) for i in (0, 1, 25, 26, 27, 51, 52)] == [
        "broker-a", "broker-b", "broker-z", "broker-aa", "broker-ab", "broker-az", "broker-ba"]


@pytest.mark.parametrize("args, message", [
    ((0, 1), "--groups must be 1 or more, not 0"),
    ((1, 0), "--replicas must be 1 or more, not 0"),
    ((1, 1, "nohost"), "--namesrv must be HOST:PORT, not 'nohost'"),
    ((2, 1, "127.0.0.1:9876", 65530), "--base-port 65530 with 2 brokers needs ports 65528..65541: outside 1..65535"),
    ((1, 2, "127.0.0.1:65533"), "--namesrv port 65533: the controller's ports 65535, 65536 go above 65535"),
])
def test_bad_options_are_one_message(tmp_path, args, message):
    groups, replicas, *rest = args
    with pytest.raises(ClusterInputError) as err:
        plan_cluster(groups, replicas, tmp_path, *rest)
    assert str(err.value) == message
