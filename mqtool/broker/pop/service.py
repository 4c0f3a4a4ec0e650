"""The broker's POP state (rocketmq5.md 2): queue locks, where a group pops from, the revive topic and
its checkpoint and ack records, held POPs, orderly state, the revive service, and for QUERY_ASSIGNMENT
the request modes and the topics' queues.

Checkpoint and ack records are written straight into the revive queue (5.3.3 writes them as timer
messages due at the invisible time; the revive service here holds a checkpoint in memory until it is
due instead, so they are readable at once: see docs-pop45.md).
"""
from __future__ import annotations

import time

from mqtool_remoting.extrainfo import pop_retry_topic
from mqtool_store.codes import DLQ_GROUP_TOPIC_PREFIX, Perm, Prop
from mqtool_store.messagestore import Message
from mqtool_store.poprecords import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    AckMsg,
    CheckPoint,
    revive_topic,
)
from mqtool_store.properties import format_properties

from mqtool.broker.pop.assignment import SubscribeInfo
from mqtool.broker.pop.orderinfo import ConsumerOrderInfoManager
from mqtool.broker.pop.polling import PopPolling
from mqtool.broker.pop.requestmode import MessageRequestModeManager
from mqtool.broker.pop.revive import ReviveService

CONSUME_INIT_MIN, CONSUME_INIT_MAX = 0, 1       # ConsumeInitMode


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class PopService:
    def __init__(self, ctrl, config_dir):
        self.ctrl = ctrl
        cfg = ctrl.config
        self.revive_topic = revive_topic(cfg.brokerClusterName)
        self.locks: set[str] = set()
        self._ck_number = 0
        self.polling = PopPolling(cfg.popPollingSize, cfg.maxPopPollingSize)
        self.order = ConsumerOrderInfoManager(config_dir)
        self.revive = ReviveService(ctrl, self)
        self.request_modes = MessageRequestModeManager(config_dir)     # PULL or POP per topic/group
        self.subscribe_info = SubscribeInfo(ctrl)                      # topics' queues, for QUERY_ASSIGNMENT

    @property
    def revive_queue_num(self) -> int:
        return max(1, self.ctrl.config.reviveQueueNum)

    def next_revive_qid(self) -> int:
        self._ck_number += 1
        return self._ck_number % self.revive_queue_num

    def retry_topic(self, topic: str, group: str) -> str:
        return pop_retry_topic(topic, group, self.ctrl.config.enableRetryTopicV2)

    def retry_config(self, topic: str, group: str):
        """The group's POP retry topic, if it exists; made again from its replicated queue when a
        promoted slave has its messages but not yet its config."""
        retry = self.retry_topic(topic, group)
        cfg = self.ctrl.topics.get(retry)
        if cfg is None and self.ctrl.store.max_offset(retry, 0) > 0 and not self.ctrl.is_slave:
            cfg = self.ctrl.topics.create_system(retry, 1)
        return cfg

    def ensure_revive_topic(self):
        """Created with the first POP (5.3.3 creates it at start: mqtool keeps a broker nobody pops
        from free of it)."""
        return self.ctrl.topics.create_system(self.revive_topic, self.revive_queue_num)

    # ------------------------------------------------------------------ offsets

    def pop_offset(self, topic: str, group: str, queue_id: int, init_mode: int) -> int:
        """getPopOffset: the committed offset, else the init offset, committed at once."""
        offset = self.ctrl.offsets.query(group, topic, queue_id)
        if offset < 0:
            offset = self.init_offset(topic, queue_id, init_mode)
            if not self.ctrl.is_slave:
                self.ctrl.offsets.commit(group, topic, queue_id, offset)
        return offset

    def init_offset(self, topic: str, queue_id: int, init_mode: int) -> int:
        """getInitOffset: MIN or a retry topic -> the queue's min; MAX -> 0 when the queue starts at 0
        and its first message is in the page cache, else the newest message (max - 1)."""
        store = self.ctrl.store
        if init_mode == CONSUME_INIT_MIN or topic.startswith("%RETRY%"):
            return store.min_offset(topic, queue_id)
        if (self.ctrl.config.initPopOffsetByCheckMsgInMem and store.min_offset(topic, queue_id) <= 0
                and store.in_memory(topic, queue_id, 0)):
            return 0
        return max(store.max_offset(topic, queue_id) - 1, 0)

    def dlq_message(self, rec, group: str, origin_topic: str, reconsume: int, props: dict | None = None) -> Message:
        """A message past the group's retryMaxTimes, for `%DLQ%<group>` (1 queue, perm 6, made now),
        as CONSUMER_SEND_MSG_BACK words it: RETRY_TOPIC the topic it was popped from."""
        ctrl = self.ctrl
        topic = DLQ_GROUP_TOPIC_PREFIX + group
        ctrl.topics.create_system(topic, 1, int(Perm.PERM_WRITE | Perm.PERM_READ))
        props = dict(rec.properties) if props is None else props
        props.setdefault(Prop.RETRY_TOPIC, origin_topic)
        props.setdefault(Prop.ORIGIN_MESSAGE_ID, rec.uniq_key or rec.msg_id)
        props.pop(Prop.WAIT, None)
        return Message(topic, 0, rec.body, props, format_properties(props), rec.flag, rec.sys_flag & ~0x30,
                       rec.born_timestamp, ctrl.store.store_host, reconsume)

    # ------------------------------------------------------------------ revive records

    def _record(self, qid: int, tag: str, body: str, uniq: str) -> Message:
        props = {Prop.TAGS: tag, Prop.UNIQ_KEY: uniq}
        ctrl = self.ctrl
        return Message(self.revive_topic, qid, body.encode(), props, format_properties(props), 0, 0, now_ms(),
                       ctrl.store.store_host)

    async def append_ck(self, ck: CheckPoint, qid: int) -> bool:
        """buildCkMsg + put: True when stored."""
        self.ensure_revive_topic()
        result = await self.ctrl.put(self._record(qid, CK_TAG, ck.to_json(), ck.unique_id()))
        return result.ok

    async def append_ack(self, ack: AckMsg, qid: int) -> bool:
        self.ensure_revive_topic()
        tag = ACK_TAG if ack.aol is None else BATCH_ACK_TAG
        result = await self.ctrl.put(self._record(qid, tag, ack.to_json(), ack.unique_id()))
        return result.ok

    # ------------------------------------------------------------------ life (a master's)

    def start(self) -> None:
        self.revive.start()

    async def stop(self) -> None:
        self.polling.wake_all()
        await self.revive.stop()
        if self.order.dirty:
            self.order.persist()
