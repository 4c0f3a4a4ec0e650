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
