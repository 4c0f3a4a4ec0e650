"""Who is connected: consumer groups with their subscriptions, producer groups (ConsumerManager,
ProducerManager). Channels are opaque objects from the transport; time is passed in.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from mqtool.common.subscription import Subscription  # noqa: F401 - the heartbeat's wire form, used here

CHANNEL_EXPIRED_MS = 120_000

CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")     # (POP: 5.x)
MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
CONSUME_FROM = ("CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
                "CONSUME_FROM_TIMESTAMP")


def enum_name(value, names: tuple[str, ...]) -> str:
    """Java sends enum names, the C++ client their ordinals."""
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        i = int(value)
        return names[i] if 0 <= i < len(names) else str(value)
    return str(value)


@dataclass
class ClientChannelInfo:
    channel: object
    client_id: str
    language: str
    version: int
    last_update: int


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str
    message_model: str
    consume_from_where: str
    channels: dict[object, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted(c.client_id for c in self.channels.values())


class ConsumerManager:
    def __init__(self):
        self.lock = threading.Lock()
        self.groups: dict[str, ConsumerGroupInfo] = {}

    def register(self, group: str, info: ClientChannelInfo, consume_type: str, message_model: str,
                 consume_from_where: str, subscriptions: list[Subscription]) -> bool:
        """Returns True when the group's set of clients changed (consumers must rebalance)."""
        with self.lock:
            g = self.groups.get(group)
            if g is None:
                g = self.groups[group] = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
            g.consume_type, g.message_model, g.consume_from_where = consume_type, message_model, consume_from_where
            before = set(g.client_ids())
            g.channels[info.channel] = info
            new_subs = {s.topic: s for s in subscriptions}
            for topic, sub in new_subs.items():
                old = g.subscriptions.get(topic)
                if old is None or sub.sub_version > old.sub_version:    # ConsumerGroupInfo.updateSubscription:
                    g.subscriptions[topic] = sub                         # the newer subscription wins, not the last heartbeat
            for topic in [t for t in g.subscriptions if t not in new_subs]:
                del g.subscriptions[topic]
            return set(g.client_ids()) != before

    def unregister(self, group: str, channel) -> bool:
        with self.lock:
            g = self.groups.get(group)
            if g is None or g.channels.pop(channel, None) is None:
                return False
            if not g.channels:
                del self.groups[group]
            return True

    def channel_closed(self, channel) -> list[str]:
        """Groups that lost a client because its connection closed."""
        with self.lock:
            changed = []
            for name, g in list(self.groups.items()):
                if g.channels.pop(channel, None) is not None:
                    changed.append(name)
                    if not g.channels:
                        del self.groups[name]
            return changed

    def expire(self, now_ms: int) -> list[tuple[str, object]]:
        """Drop channels silent for 120 s; returns (group, channel) pairs removed."""
        with self.lock:
            gone = []
            for name, g in list(self.groups.items()):
                for ch, info in list(g.channels.items()):
                    if now_ms - info.last_update > CHANNEL_EXPIRED_MS:
                        del g.channels[ch]
                        gone.append((name, ch))
                if not g.channels:
                    del self.groups[name]
            return gone

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def channels(self, group: str) -> list[ClientChannelInfo]:
        g = self.groups.get(group)
        return list(g.channels.values()) if g else []

    def subscription(self, group: str, topic: str) -> Subscription | None:
        g = self.groups.get(group)
        return g.subscriptions.get(topic) if g else None


class ProducerManager:
    def __init__(self):
        self.lock = threading.Lock()
        self.groups: dict[str, dict[object, ClientChannelInfo]] = {}

    def register(self, group: str, info: ClientChannelInfo) -> None:
        with self.lock:
            self.groups.setdefault(group, {})[info.channel] = info

    def unregister(self, group: str, channel) -> None:
        with self.lock:
            chans = self.groups.get(group)
            if chans and chans.pop(channel, None) is not None and not chans:
                del self.groups[group]

    def channel_closed(self, channel) -> None:
        with self.lock:
            for name in list(self.groups):
                self.groups[name].pop(channel, None)
                if not self.groups[name]:
                    del self.groups[name]

    def expire(self, now_ms: int) -> None:
        with self.lock:
            for name in list(self.groups):
                chans = self.groups[name]
                for ch, info in list(chans.items()):
                    if now_ms - info.last_update > CHANNEL_EXPIRED_MS:
                        del chans[ch]
                if not chans:
                    del self.groups[name]

    def find_client(self, client_id: str) -> ClientChannelInfo | None:
        for chans in self.groups.values():
            for info in chans.values():
                if info.client_id == client_id:
                    return info
        return None

    def any_channel(self, group: str) -> ClientChannelInfo | None:
        """A live producer of the group, for transaction check-back."""
        chans = self.groups.get(group)
        return next(iter(chans.values()), None) if chans else None
