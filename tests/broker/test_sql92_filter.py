"""SQL92 subscriptions on the broker (shared/spec/sql92.md sections 1, 3.7, 4): CHECK_CLIENT_CONFIG,
heartbeats registering filters, pulls with and without the subscription flag, the retry topic
with filterSupportRetry, consumerFilter.json, and mqtool's own consumer with sql=."""
from __future__ import annotations

import asyncio
import json
import logging

import pytest

from mqtool.broker.filterbloom import BloomFilter
from mqtool.broker.filters import ConsumerFilterManager
from mqtool.common.subscription import Subscription
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.errors import RemotingCommandError
from tests.broker.test_broker_server import records, run, running_pair, send_cmd

DISABLED = "The broker does not support consumer to filter message by SQL92"
EXPR = "region = 'eu' AND amount > 100"
MESSAGES = [("eu", "250"), ("us", "250"), ("eu", "50"), ("eu", "1.5"), (None, "300"), ("eu", "101")]
WANTED = [0, 5]                      # the ones EXPR delivers ("1.5" is not a Java int: skipped)


def props_text(region, amount, extra=()):
    pairs = [("TAGS", "TagA")] + ([("region", region)] if region else []) + [("amount", amount), *extra]
    return "".join(f"{k}\x01{v}\x02" for k, v in pairs)


def sub_json(topic, expr, version=1000, expression_type="SQL92"):
    return {"classFilterMode": False, "codeSet": [], "expressionType": expression_type, "subString": expr,
            "subVersion": version, "tagsSet": [], "topic": topic}


def check_cmd(sub):
    return RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=jsonbody.dumps(
        {"clientId": "127.0.0.1@1", "group": "G", "subscriptionData": sub}))


def heartbeat_cmd(group, subs, client="127.0.0.1@1"):
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=jsonbody.dumps({
        "clientID": client, "producerDataSet": [], "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": subs, "unitMode": False}]}))


def pull(topic, group="G", expr=None, expression_type="SQL92", version=1000, offset=0):
    """With `expr`: the subscription rides on the pull (sysFlag 0x4); without: the heartbeat's is used."""
    ext = {"consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": offset, "maxMsgNums": 32,
           "sysFlag": 0x4 if expr is not None else 0, "commitOffset": 0, "suspendTimeoutMillis": 0,
           "subVersion": version, "expressionType": expression_type}
    if expr is not None:
        ext["subscription"] = expr
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


async def put_messages(broker, client, topic, extra=()):
    addr = broker.config.broker_addr
    for i, (region, amount) in enumerate(MESSAGES):
        resp = await client.invoke(addr, send_cmd(topic, b"m%d" % i, props_text(region, amount, extra)))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    broker.store.drain_dispatch()


def bodies(resp):
    return [int(r.body[1:]) for r in records(resp.body)] if resp.code == ResponseCode.SUCCESS else []


def test_check_client_config_answers_with_javas_codes_and_remarks(tmp_path):
    async def scenario():
        answers = {}
        for enabled in (False, True):
            async with running_pair(tmp_path / str(enabled), enablePropertyFilter=enabled) as (_ns, broker, c):
                addr = broker.config.broker_addr
                for name, sub in {"good": sub_json("T", EXPR), "tag": sub_json("T", "*", expression_type="TAG"),
                                  "bad": sub_json("T", "a > '5'"), "parse": sub_json("T", "a == 'abc'"),
                                  "unknown": sub_json("T", "a > 5", expression_type="FOO"),
                                  "null": sub_json("T", None)}.items():
                    resp = await c.invoke(addr, check_cmd(sub))
                    answers[enabled, name] = (resp.code, resp.remark)
                resp = await c.invoke(addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG))
                answers[enabled, "no body"] = (resp.code, resp.remark)
        return answers
    answers = asyncio.run(asyncio.wait_for(scenario(), 60))
    for name in ("good", "bad", "parse", "null"):
        assert answers[False, name] == (ResponseCode.SYSTEM_ERROR, DISABLED), name
    assert answers[False, "unknown"] == (ResponseCode.SYSTEM_ERROR, DISABLED.replace("SQL92", "FOO"))   # as sent
    assert answers[False, "tag"] == answers[True, "tag"] == (ResponseCode.SUCCESS, None)
    assert answers[False, "no body"] == answers[True, "no body"] == (ResponseCode.SUCCESS, None)
    assert answers[True, "good"] == (ResponseCode.SUCCESS, None)
    assert answers[True, "bad"] == (ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                    "java.lang.RuntimeException: Value ''5'' cannot be compared.")
    code, remark = answers[True, "parse"]
    assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert remark.startswith('org.apache.rocketmq.filter.parser.ParseException: Encountered " "=" "= "" at line 1, '
                             'column 4.\nWas expecting one of:\n    "NOT" ...\n')              # spec 1.2 [ran]
    code, remark = answers[True, "unknown"]
    assert code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "FilterFactory.get(String)\" is null" in remark
    assert answers[True, "null"] == (ResponseCode.SUBSCRIPTION_PARSE_FAILED, None)


def test_a_pull_carrying_its_expression_gets_only_the_matching_messages(tmp_path):
    async def scenario():
        async with running_pair(tmp_path, enablePropertyFilter=True) as (_ns, broker, c):
            addr = broker.config.broker_addr
            await put_messages(broker, c, "Orders")
            got = await c.invoke(addr, pull("Orders", expr=EXPR))
            none = await c.invoke(addr, pull("Orders", expr="region = 'asia'"))
            empty = await c.invoke(addr, pull("Orders", expr=""))
            broken = await c.invoke(addr, pull("Orders", expr="a > '5'"))       # 4.9.8 filters nothing then
            tags = await c.invoke(addr, pull("Orders", expr="TAGS = 'TagA' AND amount > 200.0"))
            return got, none, empty, broken, tags
    got, none, empty, broken, tags = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert got.code == ResponseCode.SUCCESS and bodies(got) == WANTED
    assert none.code == ResponseCode.PULL_RETRY_IMMEDIATELY                 # NO_MATCHED_MESSAGE
    assert int(none.ext_fields["nextBeginOffset"]) == len(MESSAGES)         # past what was scanned
    assert (empty.code, empty.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                          "parse the consumer's subscription failed")
    assert bodies(broken) == list(range(len(MESSAGES)))
    assert bodies(tags) == [0, 1, 4]                                         # system properties are visible


def test_a_broker_without_enable_property_filter_refuses_sql92_pulls(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (_ns, broker, c):
            addr = broker.config.broker_addr
            await put_messages(broker, c, "Orders")
            with_expr = await c.invoke(addr, pull("Orders", expr=EXPR))
            await c.invoke(addr, heartbeat_cmd("G", [sub_json("Orders", EXPR)]))
            await c.invoke(addr, heartbeat_cmd("BAD", [sub_json("Orders", "a > '5'")]))
            registered = await c.invoke(addr, pull("Orders"))
            bad = await c.invoke(addr, pull("Orders", group="BAD"))
            tag = await c.invoke(addr, pull("Orders", expr="*", expression_type="TAG"))
            return with_expr, registered, bad, tag
    with_expr, registered, bad, tag = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert (with_expr.code, with_expr.remark) == (ResponseCode.SYSTEM_ERROR, DISABLED)
    assert (registered.code, registered.remark) == (ResponseCode.SYSTEM_ERROR, DISABLED)
    assert bad.code == ResponseCode.FILTER_DATA_NOT_EXIST         # the filter check comes before the flag's
    assert tag.code == ResponseCode.SUCCESS and len(bodies(tag)) == len(MESSAGES)


def test_heartbeats_register_the_filter_that_pulls_without_the_expression_use(tmp_path, caplog):
    async def scenario():
        async with running_pair(tmp_path, enablePropertyFilter=True) as (_ns, broker, c):
            addr = broker.config.broker_addr
            await put_messages(broker, c, "Orders")
            assert (await c.invoke(addr, heartbeat_cmd("G", [sub_json("Orders", EXPR, 1000)]))).code == 0
            got = await c.invoke(addr, pull("Orders", version=1000))
            newer = await c.invoke(addr, pull("Orders", version=2000))
            await c.invoke(addr, heartbeat_cmd("BAD", [sub_json("Orders", "a > '5'")]))
            bad = await c.invoke(addr, pull("Orders", group="BAD"))
            with caplog.at_level(logging.WARNING, logger="mqtool.broker"):
                await c.invoke(addr, heartbeat_cmd("Q", [sub_json("Orders", "region = 'eu' amount > 100")]))
                quirk = await c.invoke(addr, pull("Orders", group="Q"))
            return got, newer, bad, quirk
    got, newer, bad, quirk = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert got.code == ResponseCode.SUCCESS and bodies(got) == WANTED
    assert (newer.code, newer.remark) == (ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
    assert (bad.code, bad.remark) == (ResponseCode.FILTER_DATA_NOT_EXIST,
                                      "The broker's consumer filter data is not exist!Your expression may be wrong!")
    assert bodies(quirk) == [0, 2, 3, 5]                        # the tail is ignored: region = 'eu' only
    lines = [r.getMessage() for r in caplog.records if "group Q" in r.getMessage()]
    assert len(lines) == 1
    assert "region = 'eu' amount > 100" in lines[0] and "read as \"region = 'eu'\"" in lines[0]
    assert "'amount > 100') is ignored" in lines[0]


def test_a_pull_newer_than_the_registered_filter_gets_filter_data_not_latest(tmp_path):
    """PullMessageProcessor (no 0x4): the group's subscription is as new as the pull's subVersion,
    but the filter registered for it is older, so 28 with 4.9.8's remark. On the wire: a heartbeat
    with the SQL92 text empty updates the group's subscription (ConsumerGroupInfo takes any newer
    version) while ConsumerFilterManager.register ignores an empty expression and keeps the old
    filter at the old version."""
    async def scenario():
        async with running_pair(tmp_path, enablePropertyFilter=True) as (_ns, broker, c):
            addr = broker.config.broker_addr
            await put_messages(broker, c, "Orders")
            assert (await c.invoke(addr, heartbeat_cmd("G", [sub_json("Orders", EXPR, 1000)]))).code == 0
            assert (await c.invoke(addr, heartbeat_cmd("G", [sub_json("Orders", "", 2000)]))).code == 0
            assert broker.consumers.get("G").subscriptions["Orders"].sub_version == 2000
            assert broker.filters.get("Orders", "G").clientVersion == 1000
            return [await c.invoke(addr, pull("Orders", version=v)) for v in (2000, 1500, 1000, 2001)]
    not_latest, between, same, newer = asyncio.run(asyncio.wait_for(scenario(), 60))
    for resp in (not_latest, between):
        assert (resp.code, resp.remark) == (ResponseCode.FILTER_DATA_NOT_LATEST,
                                            "the consumer's consumer filter data not latest")
        assert resp.body in (None, b"")
    assert same.code == ResponseCode.SUCCESS and bodies(same) == WANTED      # the old filter still filters
    assert (newer.code, newer.remark) == (ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                          "the consumer's subscription not latest")     # checked before


def test_filter_registration_follows_consumer_filter_manager(tmp_path):
    """Versions, a changed expression that no longer compiles (the old filter goes too), dead
    marks, revival, and the clean after filterDataCleanTimeSpan."""
    mgr = ConsumerFilterManager(tmp_path, now_ms=0)
    subs = [Subscription.parse("T", "a > 5", 100, "SQL92")]
    mgr.register("G", subs, 1)
    assert mgr.get("T", "G").clientVersion == 100
    mgr.register("G", [Subscription.parse("T", "b > 5", 50, "SQL92")], 2)         # older: ignored
    assert mgr.get("T", "G").expression == "a > 5"
    mgr.register("G", [Subscription.parse("T", "a > 5", 200, "SQL92")], 3)        # same text: version bumped
    assert (mgr.get("T", "G").clientVersion, mgr.get("T", "G").bornTime) == (200, 1)
    notes = mgr.register("G", [Subscription.parse("T", "a > '5'", 300, "SQL92")], 4)
    assert mgr.get("T", "G") is None and "refused" in notes[0] and "Value ''5''" in notes[0]
    assert mgr.register("G", [Subscription.parse("T", "a > '5'", 301, "SQL92")], 4) == []      # said once
    mgr.register("G", [Subscription.parse("T", "a > 5", 400, "SQL92")], 5)
    mgr.register("G", [Subscription.parse("Other", "*", 500)], 6)                # T left the heartbeat
    assert mgr.get("T", "G").dead and mgr.get("T", "G").deadTime == 6
    mgr.register("G", [Subscription.parse("T", "a > 5", 400, "SQL92")], 7)        # same version: revived
    assert not mgr.get("T", "G").dead
    mgr.unregister("G", 8)
    mgr.clean(8 + 86_400_000)
    assert mgr.get("T", "G") is not None
    mgr.clean(9 + 86_400_000)
    assert mgr.get("T", "G") is None and mgr.table == {}


def test_retry_topic_is_filtered_only_with_filter_support_retry(tmp_path):
    async def scenario():
        out = {}
        for support in (False, True):
            async with running_pair(tmp_path / str(support), enablePropertyFilter=True,
                                    filterSupportRetry=support) as (_ns, broker, c):
                addr = broker.config.broker_addr
                await c.invoke(addr, heartbeat_cmd("G", [sub_json("Orders", EXPR), sub_json("%RETRY%G", "*", 1,
                                                                                         "TAG")]))
                await put_messages(broker, c, "%RETRY%G", extra=[("RETRY_TOPIC", "Orders")])
                await c.invoke(addr, heartbeat_cmd("H", [sub_json("%RETRY%H", "*", 1, "TAG")]))
                await put_messages(broker, c, "%RETRY%H", extra=[("RETRY_TOPIC", "Orders")])
                retry = await c.invoke(addr, pull("%RETRY%G", expr="*", expression_type="TAG"))
                registered = await c.invoke(addr, pull("%RETRY%G", version=1, expression_type="TAG"))
                no_filter = await c.invoke(addr, pull("%RETRY%H", group="H", version=1, expression_type="TAG"))
                out[support] = (bodies(retry), bodies(registered), bodies(no_filter))
        return out
    out = asyncio.run(asyncio.wait_for(scenario(), 60))
    everything = list(range(len(MESSAGES)))
    assert out[False] == (everything, everything, everything)
    assert out[True] == (WANTED, WANTED, everything)           # no filter for (Orders, H): all delivered


def test_consumer_filter_json_is_written_as_java_writes_it_and_read_back(tmp_path):
    assert BloomFilter(20, 32).data("G#TopicTest") == {"bitNum": 112, "bitPos": [38, 57, 102]}   # spec 4.4 [ran]

    async def scenario():
        async with running_pair(tmp_path, enablePropertyFilter=True) as (_ns, broker, c):
            addr = broker.config.broker_addr
            await c.invoke(addr, heartbeat_cmd("G", [sub_json("TopicTest", "a BETWEEN 0 AND 3", 1700000000000)]))
            return broker.store_config.root / "config" / "consumerFilter.json"
    path = asyncio.run(asyncio.wait_for(scenario(), 60))
    data = json.loads(path.read_text())
    g = data["filterDataByTopic"]["TopicTest"]["groupFilterData"]["G"]
    assert data["filterDataByTopic"]["TopicTest"]["topic"] == "TopicTest"
    assert list(g) == ["bloomFilterData", "bornTime", "clientVersion", "consumerGroup", "dead", "deadTime",
                       "expression", "expressionType", "topic"]          # fastjson's order
    assert g["bloomFilterData"] == {"bitNum": 112, "bitPos": [38, 57, 102]}
    assert (g["clientVersion"], g["consumerGroup"], g["expression"], g["expressionType"]) == (
        1700000000000, "G", "a BETWEEN 0 AND 3", "SQL92")
    assert g["deadTime"] >= g["bornTime"] > 0 and g["dead"] is True       # its client left at shutdown
    again = ConsumerFilterManager(path.parent, now_ms=g["bornTime"] + 60_000)
    loaded = again.get("TopicTest", "G")
    assert loaded.compiled.matches({"a": "2"}) and not loaded.compiled.matches({"a": "7"})
    again.register("G", [Subscription.parse("TopicTest", "a BETWEEN 0 AND 3", 1700000000000, "SQL92")],
                   g["bornTime"] + 61_000)
    assert not again.get("TopicTest", "G").dead                        # revived by the same version
    other = ConsumerFilterManager(path.parent, error_rate=10, now_ms=0)      # other bloom sizes: all ignored
    assert other.table == {}


def test_mqtool_group_consumer_with_sql(tmp_path):
    from mqtool.client.consumer import GroupConsumer

    async def consume(ns, sql):
        c = GroupConsumer(f"127.0.0.1:{ns.port}", "SqlGroup", "Orders", start="first", sql=sql)
        got = []
        try:
            async with asyncio.timeout(20):
                async for mq, rec in c.messages(100, until_end=True):
                    got.append(int(rec.body[1:]))
                    c.state.assigned[mq] = rec.queue_offset + 1
        finally:
            await c.close()
        return got

    async def scenario():
        async with running_pair(tmp_path / "on", enablePropertyFilter=True) as (ns, broker, c):
            await put_messages(broker, c, "Orders")
            await broker.register_all()
            got = await consume(ns, EXPR)
            with pytest.raises(RemotingCommandError) as bad:
                await consume(ns, "a > '5'")
        async with running_pair(tmp_path / "off") as (ns, broker, c):
            await put_messages(broker, c, "Orders")
            await broker.register_all()
            with pytest.raises(RemotingCommandError) as off:
                await consume(ns, EXPR)
        return got, bad.value, off.value
    got, bad, off = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert sorted(got) == WANTED
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "Value ''5'' cannot be compared." in bad.remark
    assert (off.code, off.remark) == (ResponseCode.SYSTEM_ERROR, DISABLED)


def test_sub_string_of_sql92_is_kept_whole():
    sub = Subscription.parse("T", "a = 'x' || b", 5, "SQL92")
    assert (sub.sub_string, sub.tags, sub.codes) == ("a = 'x' || b", (), frozenset())


run  # noqa: B018 - the module's scenarios use asyncio.run with their own timeout


def test_a_held_pull_waits_past_messages_its_filter_skips(tmp_path):
    """PullRequestHoldService wakes a held SQL92 pull only for a message that matches: one that
    does not keeps it waiting; at the timeout the skipped ones are stepped over (code 20)."""
    async def wait_hold(broker, topic, offset):
        async with asyncio.timeout(10):
            while not any(h.offset == offset for h in broker.pull_holds.holds.get((topic, 0), [])):
                await asyncio.sleep(0.01)

    async def scenario():
        async with running_pair(tmp_path, enablePropertyFilter=True) as (_ns, broker, c):
            addr = broker.config.broker_addr
            await c.invoke(addr, send_cmd("Held", b"m0", props_text("us", "1")))      # creates the topic
            broker.store.drain_dispatch()
            held = pull("Held", expr=EXPR, offset=1)
            held.ext_fields.update({"sysFlag": "6", "suspendTimeoutMillis": "8000"})
            task = asyncio.create_task(c.invoke(addr, held, 15))
            await wait_hold(broker, "Held", 1)
            await c.invoke(addr, send_cmd("Held", b"m1", props_text("us", "250")))
            await wait_hold(broker, "Held", 2)                      # still held, now past the skipped one
            assert not task.done()
            await c.invoke(addr, send_cmd("Held", b"m2", props_text("eu", "250")))
            got = await task
            short = pull("Held", expr="region = 'asia'", offset=3)
            short.ext_fields.update({"sysFlag": "6", "suspendTimeoutMillis": "300"})
            later = asyncio.create_task(c.invoke(addr, short, 15))
            await wait_hold(broker, "Held", 3)
            await c.invoke(addr, send_cmd("Held", b"m3", props_text("us", "250")))
            return got, await later
    got, timed_out = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert got.code == ResponseCode.SUCCESS and bodies(got) == [2]
    assert int(got.ext_fields["nextBeginOffset"]) == 3
    assert timed_out.code == ResponseCode.PULL_RETRY_IMMEDIATELY and int(timed_out.ext_fields["nextBeginOffset"]) == 4


def test_enable_property_filter_can_be_turned_on_while_the_broker_runs(tmp_path):
    async def scenario():
        async with running_pair(tmp_path) as (_ns, broker, c):
            addr = broker.config.broker_addr
            before = await c.invoke(addr, check_cmd(sub_json("T", EXPR)))
            assert broker.update_properties({"enablePropertyFilter": "true", "filterSupportRetry": "true"}) == [
                "applied until the broker restarts: it was started without -c, so no config file keeps them"]
            after = await c.invoke(addr, check_cmd(sub_json("T", EXPR)))
            return before, after, broker.config.filterSupportRetry
    before, after, retry = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert (before.code, after.code, retry) == (ResponseCode.SYSTEM_ERROR, ResponseCode.SUCCESS, True)
