"""Transactions: END_TRANSACTION commit/rollback with op messages, and the check-back loop."""
from __future__ import annotations

import asyncio
import logging
import time

from mqtool.broker.background import cancel
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.headers import EndTransactionRequestHeader, from_ext_fields
from mqtool_store.codes import (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANSACTION_TYPE_MASK, Prop,
                         TransactionType)
from mqtool_store.commitlog import encode_record
from mqtool_store.messagestore import Message

log = logging.getLogger("mqtool.broker.tx")
TRANS_GROUP = "CID_RMQ_SYS_TRANS"
COMMIT = TransactionType.TRANSACTION_COMMIT_TYPE
ROLLBACK = TransactionType.TRANSACTION_ROLLBACK_TYPE


def _op_message(ctrl, half_queue_offset: int) -> Message:
    text = "WAIT\x01true\x02TAGS\x01d"
    return Message(TRANS_OP_HALF_TOPIC, 0, str(half_queue_offset).encode(), {"WAIT": "true", "TAGS": "d"}, text,
                   0, 0, int(time.time() * 1000), ctrl.store.store_host)


async def end_transaction(ctrl, conn, cmd):
    h = from_ext_fields(EndTransactionRequestHeader, cmd.ext_fields)
    if ctrl.is_slave:
        return cmd.response(ResponseCode.SLAVE_NOT_AVAILABLE, "Message store is slave mode, so end transaction is forbidden.")
    if h.commitOrRollback not in (COMMIT, ROLLBACK):
        return None
    half = ctrl.store.read(h.commitLogOffset)
    if half is None or half.topic != TRANS_HALF_TOPIC:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
    if half.properties.get(Prop.PGROUP) != h.producerGroup:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
    if half.queue_offset != h.tranStateTableOffset:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
    if h.commitOrRollback == COMMIT:
        try:
            qid = int(half.properties.get(Prop.REAL_QID, "0"))
        except ValueError:
            qid = 0
        msg = Message(half.properties.get(Prop.REAL_TOPIC, ""), qid, half.body, dict(half.properties),
                      half.properties_text, half.flag, (half.sys_flag & ~TRANSACTION_TYPE_MASK) | COMMIT,
                      half.born_timestamp, (half.born_ip, half.born_port), half.reconsume_times,
                      h.commitLogOffset)
        result = await ctrl.put(msg)
        if not result.ok:
            return cmd.response(ResponseCode.SYSTEM_ERROR, result.remark or result.status.value)
    ctrl.topics.create_system(TRANS_OP_HALF_TOPIC, 1)
    await ctrl.put(_op_message(ctrl, half.queue_offset))
    return cmd.response(ResponseCode.SUCCESS)


class TransactionChecker:
    """Every interval: half messages with no op and older than transactionTimeOut are re-put and
    their producer group is asked (CHECK_TRANSACTION_STATE) what became of them."""

    def __init__(self, ctrl):
        self.ctrl = ctrl
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        await cancel(self._task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.ctrl.config.transactionCheckInterval / 1000)
            try:
                await self.check_once()
            except Exception:  # noqa: BLE001
                log.exception("transaction check failed")

    def _done_offsets(self) -> set[int]:
        store = self.ctrl.store
        done, offset = set(), store.min_offset(TRANS_OP_HALF_TOPIC, 0)
        while True:
            res = store.get(TRANS_OP_HALF_TOPIC, 0, offset, 32)
            if not res.messages:
                return done
            from mqtool_store.commitlog import decode_record
            for data in res.messages:
                try:
                    done.add(int(decode_record(data).body))
                except ValueError:
                    pass
            offset = res.next_begin_offset

    async def check_once(self) -> int:
        ctrl, store = self.ctrl, self.ctrl.store
        ctrl.topics.create_system(TRANS_HALF_TOPIC, 1)     # as 4.9.8's check (fetchMessageQueues) creates it
        done = self._done_offsets()
        half_offset = max(ctrl.offsets.query(TRANS_GROUP, TRANS_HALF_TOPIC, 0), store.min_offset(TRANS_HALF_TOPIC, 0))
        end = store.max_offset(TRANS_HALF_TOPIC, 0)
        now = int(time.time() * 1000)
        checked = 0
        offset = half_offset
        while offset < end:
            res = store.get(TRANS_HALF_TOPIC, 0, offset, 1)
            if not res.messages:
                offset = res.next_begin_offset if res.next_begin_offset > offset else offset + 1
                continue
            from mqtool_store.commitlog import decode_record
            half = decode_record(res.messages[0])
            if half.queue_offset in done:
                offset += 1
                continue
            immunity = ctrl.config.transactionTimeOut
            if half.properties.get(Prop.CHECK_IMMUNITY_TIME_IN_SECONDS, "").isdigit():
                immunity = int(half.properties[Prop.CHECK_IMMUNITY_TIME_IN_SECONDS]) * 1000
            if now - half.store_timestamp < immunity:
                break
            times = int(half.properties.get(Prop.TRANSACTION_CHECK_TIMES, "0") or 0)
            if times >= ctrl.config.transactionCheckMax:
                offset += 1
                continue
            props = dict(half.properties)
            props[Prop.TRANSACTION_CHECK_TIMES] = str(times + 1)
            from mqtool_store.properties import format_properties
            copy = Message(TRANS_HALF_TOPIC, 0, half.body, props, format_properties(props), half.flag, half.sys_flag,
                           half.born_timestamp, (half.born_ip, half.born_port), half.reconsume_times)
            put = await ctrl.put(copy)
            if put.ok:
                await self._ask(half, props, put)
                checked += 1
            offset += 1
        ctrl.offsets.commit(TRANS_GROUP, TRANS_HALF_TOPIC, 0, offset)
        return checked

    async def _ask(self, half, props, put) -> None:
        producer = self.ctrl.producers.any_channel(props.get(Prop.PGROUP, ""))
        if producer is None:
            return
        rec = self.ctrl.store.read(put.offset)
        rec.topic = props.get(Prop.REAL_TOPIC, rec.topic)
        try:
            rec.queue_id = int(props.get(Prop.REAL_QID, "0"))
        except ValueError:
            pass
        uniq = props.get(Prop.UNIQ_KEY)
        req = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {
            "tranStateTableOffset": put.queue_offset, "commitLogOffset": put.offset, "msgId": uniq,
            "transactionId": uniq, "offsetMsgId": put.msg_ids[0]}, encode_record(rec), oneway=True, language="JAVA")
        await producer.channel.oneway(req)
