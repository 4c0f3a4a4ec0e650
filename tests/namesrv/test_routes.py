from mqtool.namesrv.routes import RouteTable

TOPICS = {"TopicA": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}


def test_two_brokers_share_a_topic_and_expire():
    r = RouteTable()
    r.register("C", "127.0.0.1:10911", "broker-a", 0, "127.0.0.1:10912", TOPICS, {"counter": 1}, "ch-a", 0)
    r.register("C", "127.0.0.1:10921", "broker-b", 0, "127.0.0.1:10922", TOPICS, {"counter": 1}, "ch-b", 0)
    route = r.route("TopicA")
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-a", "broker-b"]
    assert [q["writeQueueNums"] for q in route["queueDatas"]] == [4, 4]
    assert r.cluster_info()["clusterAddrTable"] == {"C": ["broker-a", "broker-b"]}
    assert r.topics_of_cluster("C") == ["TopicA"]
    assert r.set_write_perm("broker-a", False) == 1 and r.route("TopicA")["queueDatas"][0]["perm"] == 4
    r.register("C", "127.0.0.1:10921", "broker-b", 0, "x", TOPICS, {"counter": 1}, "ch-b", 100_000)
    assert r.expire(121_000) == ["127.0.0.1:10911"]
    assert [b["brokerName"] for b in r.route("TopicA")["brokerDatas"]] == ["broker-b"]
    assert r.channel_closed("ch-b") == ["127.0.0.1:10921"] and r.route("TopicA") is None


def test_slave_learns_master_and_topics_follow_master():
    r = RouteTable()
    r.register("C", "m:1", "b", 0, "m:2", TOPICS, {"counter": 1}, "m", 0)
    res = r.register("C", "s:1", "b", 1, "s:2", {"Other": {}}, {"counter": 1}, "s", 0)
    assert res == {"masterAddr": "m:1", "haServerAddr": "m:2"}
    assert r.route("Other") is None and r.route("TopicA")["brokerDatas"][0]["brokerAddrs"] == {0: "m:1", 1: "s:1"}
    r.register("C", "m:1", "b", 0, "m:2", {"New": {}}, {"counter": 2}, "m", 1)
    assert r.route("TopicA") is None and r.route("New") is not None
    r.delete_topic("New")
    assert r.all_topics() == []
