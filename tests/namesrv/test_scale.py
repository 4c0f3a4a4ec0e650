"""The name server at thousands of topics: a registration body's topics read only when taken, the
topic lists made once per change of the table."""
from __future__ import annotations

import zlib

import pytest

from mqtool.namesrv import registerbody
from mqtool.namesrv.server import NameServer
from mqtool_remoting import jsonbody
from mqtool_remoting.bodies import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, TopicList
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import BodyError
from tests.namesrv.test_server import register_cmd


class Conn:
    peer = "127.0.0.1:1"


def _body(n: int, counter: int = 1) -> RegisterBrokerBody:
    table = {f"T{i}": TopicConfig(f"T{i}", i % 7 + 1, i % 5 + 1, 6 if i % 2 else 2, topicSysFlag=i % 3) for i in range(n)}
    return RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1700000000000, counter)), ["fs:1"])


@pytest.mark.parametrize("compressed", [False, True])
def test_the_lazy_reader_reads_what_the_full_decoder_reads(compressed):
    body = _body(300)
    data = body.encode(compressed)
    view = registerbody.read(data, compressed)
    full = RegisterBrokerBody.decode(data, compressed)
    assert view.dataVersion == full.topicConfigSerializeWrapper.dataVersion
    assert view.filterServerList == full.filterServerList == ["fs:1"]
    assert view.queue_rows() == [(t.topicName, t.readQueueNums, t.writeQueueNums, int(t.perm), t.topicSysFlag)
                                 for t in full.topicConfigSerializeWrapper.topicConfigTable.values()]


def test_fastjson_bare_keys_and_a_bare_wrapper_are_still_read():
    view = registerbody.read(b'{"dataVersion":{"counter":2,"timestamp":5},"topicConfigTable":{"A":{"topicName":"A",'
                             b'"readQueueNums":3,"writeQueueNums":3,"perm":6}},x:1}', False)
    assert view.dataVersion == DataVersion(5, 2) and view.queue_rows() == [("A", 3, 3, 6, 0)]


def test_cut_or_bad_bodies_raise_body_error():
    data = _body(10).encode(True)
    raw = zlib.decompress(data)
    with pytest.raises(BodyError):
        registerbody.read(zlib.compress(raw[:-20]), True)
    bad_line = raw.replace(b"T3 4 4 6 SINGLE_TAG", b"T3 4 4 SINGLE_TAG__")
    view = registerbody.read(zlib.compress(bad_line), True)
    with pytest.raises(BodyError):
        view.queue_rows()
    with pytest.raises(BodyError):
        registerbody.read(b"[1,2]", False)


def _bad_topic_cmd(counter: int) -> RemotingCommand:
    raw = zlib.decompress(register_cmd("broker-a", "127.0.0.1:10911", topics=("TopicTest", "T2"), counter=counter,
                                       compressed=True).body)
    data = zlib.compress(raw.replace(b"T2 4 4 6 SINGLE_TAG", b"T2 x 4 6 SINGLE_TAG"))
    cmd = register_cmd("broker-a", "127.0.0.1:10911", counter=counter, compressed=True)
    cmd.body = data
    cmd.ext_fields["bodyCrc32"] = str(zlib.crc32(data) & 0x7FFFFFFF)
    return cmd


def test_topics_are_read_only_when_the_version_changes_and_a_bad_one_changes_nothing(tmp_path):
    ns = NameServer(tmp_path / "kv.json")
    assert ns.register_broker(Conn(), register_cmd("broker-a", "127.0.0.1:10911", counter=3)).code == 0
    # the same version with a topic entry Java could not read: its topics are not read, as the table keeps them
    assert ns.register_broker(Conn(), _bad_topic_cmd(3)).code == ResponseCode.SUCCESS
    assert ns.routes.route("T2") is None
    # a new version with that entry: refused, and nothing changed
    resp = ns.register_broker(Conn(), _bad_topic_cmd(4))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "RegisterBrokerBody" in resp.remark
    assert ns.routes.data_version("127.0.0.1:10911").counter == 3 and ns.routes.route("T2") is None


def test_topic_lists_follow_every_change_and_match_the_general_encoder(tmp_path):
    ns = NameServer(tmp_path / "kv.json")
    ns.register_broker(Conn(), register_cmd("broker-a", "127.0.0.1:10911", topics=("A", "B")))
    all_cmd = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    by_cluster = RemotingCommand.request(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"})
    assert ns.all_topics(Conn(), all_cmd).body == jsonbody.dumps(TopicList(["A", "B"]).to_json())
    ns.register_broker(Conn(), register_cmd("broker-b", "127.0.0.1:10931", topics=("C",), cluster="Other"))
    assert jsonbody.loads(ns.all_topics(Conn(), all_cmd).body)["topicList"] == ["A", "B", "C"]
    assert jsonbody.loads(ns.topics_by_cluster(Conn(), by_cluster).body)["topicList"] == ["A", "B"]
    # a registration with an unchanged version changes nothing; a new version adds its topics
    ns.register_broker(Conn(), register_cmd("broker-a", "127.0.0.1:10911", topics=("A", "B", "D"), counter=4))
    assert jsonbody.loads(ns.topics_by_cluster(Conn(), by_cluster).body)["topicList"] == ["A", "B", "D"]
    ns.all_topics(Conn(), all_cmd)
    made = ns._lists[("all",)]
    ns.register_broker(Conn(), register_cmd("broker-a", "127.0.0.1:10911", topics=("A", "B", "D"), counter=5))
    ns.all_topics(Conn(), all_cmd)
    assert ns._lists[("all",)] is made          # the same topics again (a new version): the list is not made again
    ns.delete_topic(Conn(), RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "A"}))
    assert jsonbody.loads(ns.all_topics(Conn(), all_cmd).body)["topicList"] == ["B", "C", "D"]
    ns.routes.unregister("Other", "127.0.0.1:10931", "broker-b", 0)
    assert jsonbody.loads(ns.all_topics(Conn(), all_cmd).body)["topicList"] == ["B", "D"]


def test_a_large_registration_is_read_in_steps_and_look_ups_are_answered_between_them(tmp_path):
    import asyncio

    async def scenario():
        ns = NameServer(tmp_path / "kv.json")
        ns.register_broker(Conn(), register_cmd("broker-b", "127.0.0.1:10931", topics=("Old",)))
        topics = tuple(f"Big{i}" for i in range(3500))
        for compressed, counter in ((True, 5), (False, 6)):
            big = register_cmd("broker-a", "127.0.0.1:10911", topics=topics, counter=counter, compressed=compressed)
            task = asyncio.ensure_future(ns.handle(Conn(), big))
            await asyncio.sleep(0)                       # the registration has read its first step
            lookup = await ns.handle(Conn(), RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                     {"topic": "Old"}))
            assert lookup.code == ResponseCode.SUCCESS and not task.done()
            assert (await task).code == ResponseCode.SUCCESS
            assert ns.routes.data_version("127.0.0.1:10911").counter == counter
            assert all(ns.routes.route(t) is not None for t in topics)
        many = register_cmd("broker-a", "127.0.0.1:10911", topics=topics + ("T2",), counter=9, compressed=True)
        many.body = zlib.compress(zlib.decompress(many.body).replace(b"T2 4 4 6 SINGLE_TAG", b"T2 x 4 6 SINGLE_TAG"))
        many.ext_fields["bodyCrc32"] = str(zlib.crc32(many.body) & 0x7FFFFFFF)
        assert (await ns.handle(Conn(), many)).code == ResponseCode.SYSTEM_ERROR     # bad in a later step
        assert ns.routes.data_version("127.0.0.1:10911").counter == 6
    asyncio.run(asyncio.wait_for(scenario(), 30))
