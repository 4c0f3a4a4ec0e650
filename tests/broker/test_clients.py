from mqtool.broker.clients import (ClientChannelInfo, ConsumerManager, ProducerManager, Subscription,
                                   enum_name, CONSUME_FROM)
from mqtool_store.javahash import tags_code


def info(ch, cid, t=0):
    return ClientChannelInfo(ch, cid, "CPP", 63, t)


def test_subscription_filter():
    s = Subscription.parse("T", "TagA || TagB ")
    assert s.tags == ("TagA", "TagB") and s.matches(tags_code("TagA")) and not s.matches(tags_code("TagC"))
    assert Subscription.parse("T", "*").matches(12345) and Subscription.parse("T", "").matches(1)
    neg = "x" * 7   # a tag whose hash is negative is matched through the unit's sign-extended long
    code = tags_code(neg)
    assert s.matches(code) is False and Subscription.parse("T", neg).matches(code & 0xFFFFFFFFFFFFFFFF)


def test_consumer_group_changes_and_expiry():
    m = ConsumerManager()
    subs = [Subscription.parse("T", "*")]
    assert m.register("G", info("c1", "a@1", 0), "CONSUME_PASSIVELY", "CLUSTERING", CONSUME_FROM[0], subs)
    assert not m.register("G", info("c1", "a@1", 10), "CONSUME_PASSIVELY", "CLUSTERING", CONSUME_FROM[0], subs)
    assert m.register("G", info("c2", "b@1", 10), "CONSUME_PASSIVELY", "CLUSTERING", CONSUME_FROM[0], subs)
    assert m.get("G").client_ids() == ["a@1", "b@1"]
    assert m.channel_closed("c1") == ["G"] and m.get("G").client_ids() == ["b@1"]
    assert m.expire(10 + 120_001) == [("G", "c2")] and m.get("G") is None


def test_producers_and_enums():
    p = ProducerManager()
    p.register("PG", info("c1", "a@1", 0))
    assert p.any_channel("PG").client_id == "a@1"
    p.channel_closed("c1")
    assert p.any_channel("PG") is None
    assert enum_name(1, ("A", "B")) == "B" and enum_name("CLUSTERING", ("A",)) == "CLUSTERING"


def test_a_group_keeps_the_newer_subscription_not_the_last_heartbeat():
    """ConsumerGroupInfo.updateSubscription: a topic's subscription is replaced only by a greater
    subVersion; two clients of one group with different expressions agree on the newer one."""
    m = ConsumerManager()
    older = Subscription.parse("T", "region = 'eu'", 100, "SQL92")
    newer = Subscription.parse("T", "region = 'us'", 200, "SQL92")
    m.register("G", info("c1", "a@1"), "CONSUME_PASSIVELY", "CLUSTERING", CONSUME_FROM[0], [newer])
    m.register("G", info("c2", "b@1"), "CONSUME_PASSIVELY", "CLUSTERING", CONSUME_FROM[0], [older])
    assert m.get("G").subscriptions["T"].sub_string == "region = 'us'"
    same = Subscription.parse("T", "region = 'asia'", 200, "SQL92")         # an equal version keeps what is there
    m.register("G", info("c2", "b@1"), "CONSUME_PASSIVELY", "CLUSTERING", CONSUME_FROM[0], [same])
    assert m.get("G").subscriptions["T"].sub_string == "region = 'us'"
    later = Subscription.parse("T", "region = 'asia'", 201, "SQL92")
    m.register("G", info("c2", "b@1"), "CONSUME_PASSIVELY", "CLUSTERING", CONSUME_FROM[0], [later])
    assert m.get("G").subscriptions["T"].sub_string == "region = 'asia'"
