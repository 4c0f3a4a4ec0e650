"""The pure route table: RouteInfoManager semantics with time passed in."""
from __future__ import annotations

from mqtool.namesrv.routes import RouteTable
from mqtool_remoting.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from mqtool_remoting.codes import RequestCode

A, B, SLAVE = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931"


def wrapper(*topics: str, counter: int = 1, perm: int = 6, sysflag: int = 0) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper({t: TopicConfig(t, 4, 4, perm, topicSysFlag=sysflag) for t in topics},
                                       DataVersion(1000, counter))


def two_brokers() -> RouteTable:
    r = RouteTable()
    r.register("C", A, "broker-a", 0, "127.0.0.1:10912", wrapper("TopicA"), [], "ch-a", 0)
    r.register("C", B, "broker-b", 0, "127.0.0.1:10922", wrapper("TopicA", "OnlyB"), [], "ch-b", 0)
    return r


def test_two_brokers_share_a_topic():
    r = two_brokers()
    route = r.route("TopicA")
    # Java lists them in HashMap order: "broker-b" hashes to an earlier bucket than "broker-a"
    assert [b.brokerName for b in route.brokerDatas] == ["broker-b", "broker-a"]
    assert [(q.brokerName, q.writeQueueNums, q.perm) for q in route.queueDatas] == [("broker-b", 4, 6), ("broker-a", 4, 6)]
    assert [b.brokerName for b in r.route("OnlyB").brokerDatas] == ["broker-b"]
    assert r.route("Nope") is None
    info = r.cluster_info()
    assert info.clusterAddrTable == {"C": ["broker-b", "broker-a"]} and info.brokerAddrTable["broker-a"].brokerAddrs == {0: A}
    assert r.all_topics().topicList == ["OnlyB", "TopicA"]
    assert r.topics_of_cluster("C").topicList == ["OnlyB", "TopicA"] and r.topics_of_cluster("X").topicList == []
    sys = r.system_topics()
    assert sys.topicList == ["C", "broker-a", "broker-b"] and sys.brokerAddr in (A, B)


def test_route_is_a_copy():
    r = two_brokers()
    r.route("TopicA").queueDatas[0].perm = 0
    r.route("TopicA").brokerDatas[0].brokerAddrs.clear()
    assert r.route("TopicA").queueDatas[0].perm == 6 and r.route("TopicA").brokerDatas[0].brokerAddrs == {0: B}


def test_topics_update_only_when_the_data_version_changes_and_are_never_dropped_by_registration():
    r = two_brokers()
    r.register("C", A, "broker-a", 0, "h", wrapper("TopicA", perm=4), [], "ch-a", 10)      # same version: ignored
    assert r.route("TopicA").queueDatas[0].perm == 6
    r.register("C", A, "broker-a", 0, "h", wrapper("New", counter=2), [], "ch-a", 20)      # new version
    assert r.route("New") is not None
    assert "broker-a" in [q.brokerName for q in r.route("TopicA").queueDatas]            # still there, as in Java
    r.delete_topic("TopicA", "C")
    assert r.route("TopicA") is None and r.route("New") is not None
    r.delete_topic("New")
    assert r.route("New") is None


def test_expiry_after_120_seconds_without_registration():
    r = two_brokers()
    r.register("C", B, "broker-b", 0, "h", wrapper("TopicA", "OnlyB"), [], "ch-b", 100_000)
    assert r.expire(120_000) == []                       # exactly 120 s: not yet (Java: last + 120000 < now)
    gone = r.expire(120_001)
    assert [(g.addr, g.channel) for g in gone] == [(A, "ch-a")]
    assert [b.brokerName for b in r.route("TopicA").brokerDatas] == ["broker-b"]
    assert r.cluster_info().clusterAddrTable == {"C": ["broker-b"]}
    r.touch(B, 300_000)
    assert r.expire(400_000) == []
    assert r.channel_closed("ch-b") == [B] and r.route("TopicA") is None
    assert r.cluster_info().clusterAddrTable == {} and r.live == {}


def test_slave_learns_master_and_only_the_master_registers_topics():
    r = RouteTable()
    assert r.register("C", SLAVE, "b", 1, "s:ha", wrapper("Other"), None, "s", 0).masterAddr is None
    r.register("C", A, "b", 0, "m:ha", wrapper("TopicA"), None, "m", 0)
    res = r.register("C", SLAVE, "b", 1, "s:ha", wrapper("Other"), None, "s", 0)
    assert (res.masterAddr, res.haServerAddr) == (A, "m:ha")
    assert r.route("Other") is None and r.route("TopicA").brokerDatas[0].brokerAddrs == {0: A, 1: SLAVE}
    r.channel_closed("m")                                  # master gone: the name stays with its slave
    assert r.route("TopicA") is not None and r.route("TopicA").brokerDatas[0].brokerAddrs == {1: SLAVE}
    r.register("C", SLAVE, "b", 0, "s:ha", wrapper("TopicA"), None, "s", 5)   # promoted: one record per address
    assert r.brokers["b"].brokerAddrs == {0: SLAVE}


def test_unregister_removes_by_id_and_drops_the_name_with_its_last_address():
    r = RouteTable()
    r.register("C", A, "b", 0, "h", wrapper("T"), None, "m", 0)
    r.register("C", SLAVE, "b", 1, "h", None, None, "s", 0)
    r.unregister("C", A, "b", 0)
    assert r.brokers["b"].brokerAddrs == {1: SLAVE} and r.route("T") is not None
    r.unregister("C", SLAVE, "b", 1)
    assert r.brokers == {} and r.clusters == {} and r.route("T") is None


def test_write_permission_wipe_and_add():
    r = two_brokers()
    assert r.wipe_write_perm("broker-a") == 1
    assert {q.brokerName: q.perm for q in r.route("TopicA").queueDatas} == {"broker-a": 4, "broker-b": 6}
    assert r.wipe_write_perm("nobody") == 0
    r.topic_queues["TopicA"]["broker-a"].perm = 5          # READ|INHERIT
    assert r.add_write_perm("broker-a") == 1
    assert r.topic_queues["TopicA"]["broker-a"].perm == 6  # Java sets READ|WRITE outright


def test_filter_servers_and_data_versions():
    r = RouteTable()
    r.register("C", A, "b", 0, "h", wrapper("T"), ["10.0.0.1:1"], "m", 0)
    assert r.route("T").filterServerTable == {A: ["10.0.0.1:1"]}
    r.register("C", A, "b", 0, "h", wrapper("T"), [], "m", 0)
    assert r.route("T").filterServerTable == {}
    assert r.data_version(A) == DataVersion(1000, 1) and r.data_version(B) is None
    assert not r.topic_config_changed(A, DataVersion(1000, 1)) and r.topic_config_changed(A, DataVersion(1000, 2))


def test_unit_topic_lists():
    r = RouteTable()
    r.register("C", A, "b", 0, "h", wrapper("Plain"), None, "m", 0)
    r.register("C", A, "b", 0, "h", wrapper("Unit", counter=2, sysflag=1), None, "m", 0)
    r.register("C", A, "b", 0, "h", wrapper("Sub", counter=3, sysflag=2), None, "m", 0)
    r.register("C", A, "b", 0, "h", wrapper("Both", counter=4, sysflag=3), None, "m", 0)
    assert r.unit_topics(RequestCode.GET_UNIT_TOPIC_LIST).topicList == ["Both", "Unit"]
    assert r.unit_topics(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST).topicList == ["Both", "Sub"]
    assert r.unit_topics(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST).topicList == ["Sub"]


def epoch_wrapper(state_version, counter=1):
    return TopicConfigSerializeWrapper({"TopicA": TopicConfig("TopicA", 4, 4, 6)}, DataVersion(1000, counter, state_version))


def test_a_lower_master_epoch_never_takes_broker_id_0_back():
    """Controller mode (5.x RouteInfoManager, apache/rocketmq#6316): the new master registered id 0
    with stateVersion 2; the old master, back with epoch 1, is ignored and dropped from the live table."""
    r = RouteTable()
    r.register("C", A, "broker-a", 0, "127.0.0.1:10912", epoch_wrapper(1), [], "ch-a", 0)
    r.register("C", B, "broker-a", 2, "127.0.0.1:10922", epoch_wrapper(1), [], "ch-b", 0)
    r.unregister("C", A, "broker-a", 0)                                      # A died
    assert r.register("C", B, "broker-a", 0, "127.0.0.1:10922", epoch_wrapper(2), [], "ch-b", 1).masterAddr is None
    assert r.brokers["broker-a"].brokerAddrs == {0: B}
    result = r.register("C", A, "broker-a", 0, "127.0.0.1:10912", epoch_wrapper(1), [], "ch-a2", 2)
    assert r.brokers["broker-a"].brokerAddrs == {0: B} and A not in r.live and result.masterAddr is None
    # demoted, it registers its controller id and learns its master
    result = r.register("C", A, "broker-a", 1, "127.0.0.1:10912", epoch_wrapper(2, counter=2), [], "ch-a2", 3)
    assert r.brokers["broker-a"].brokerAddrs == {0: B, 1: A} and result.haServerAddr == "127.0.0.1:10922"
    # a higher epoch does take id 0 (the old master re-elected later)
    r.register("C", A, "broker-a", 0, "127.0.0.1:10912", epoch_wrapper(3, counter=3), [], "ch-a2", 4)
    assert r.brokers["broker-a"].brokerAddrs == {0: A}


def test_brokers_without_a_state_version_register_as_4_9_8():
    r = RouteTable()
    r.register("C", A, "broker-a", 0, "h", wrapper("TopicA"), [], "ch-a", 0)
    r.register("C", B, "broker-a", 0, "h", wrapper("TopicA", counter=2), [], "ch-b", 0)      # last one wins
    assert r.brokers["broker-a"].brokerAddrs == {0: B}
    assert DataVersion.from_json({"counter": 1, "timestamp": 5}).to_json() == {"counter": 1, "timestamp": 5}
    assert DataVersion.from_json({"counter": 1, "stateVersion": 3, "timestamp": 5}).stateVersion == 3
