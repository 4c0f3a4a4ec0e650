"""Transactions over gRPC: what a half message's send left for its EndTransaction (TransactionDataManager:
kept 30 s, taken once), EndTransaction as the broker's END_TRANSACTION, and the broker's
CHECK_TRANSACTION_STATE turned into a recover_orphaned_transaction_command on the producer's Telemetry."""
from __future__ import annotations

import logging
import time

from mqtool.proxy import local
from mqtool.proxy.convert import to_message
from mqtool.proxy.codes import Code, MessageType, TransactionResolution, TransactionSource
from mqtool.proxy.context import ProxyError
from mqtool.proxy.descriptors import pb
from mqtool.proxy.route import validate_topic
from mqtool_remoting.codes import RequestCode
from mqtool_remoting.command import RemotingCommand
from mqtool_store.codes import Prop, TransactionType
from mqtool_store.commitlog import decode_record

log = logging.getLogger("mqtool.proxy")
DATA_EXPIRE_MS = 30_000            # transactionDataExpireMillis
RESOLUTIONS = {TransactionResolution.COMMIT: int(TransactionType.TRANSACTION_COMMIT_TYPE),
               TransactionResolution.ROLLBACK: int(TransactionType.TRANSACTION_ROLLBACK_TYPE)}


class TransactionData:
    def __init__(self):
        self.table: dict[tuple[str, str], list[tuple[int, int, int]]] = {}   # -> [(expire ms, queue offset, cl offset)]

    def add(self, topic: str, tx_id: str, queue_offset: int, commit_log_offset: int) -> None:
        now = int(time.time() * 1000)
        entries = [e for e in self.table.get((topic, tx_id), []) if e[0] > now]
        entries.append((now + DATA_EXPIRE_MS, queue_offset, commit_log_offset))
        self.table[(topic, tx_id)] = entries
        if len(self.table) > 10_000:              # the unresolved ones past their time go
            for key in [k for k, v in self.table.items() if all(e[0] <= now for e in v)]:
                del self.table[key]

    def take(self, topic: str, tx_id: str) -> tuple[int, int] | None:
        """The newest unexpired data of (topic, transaction id), removed (pollNoExpireTransactionData)."""
        now = int(time.time() * 1000)
        entries = [e for e in self.table.pop((topic, tx_id), []) if e[0] > now]
        if not entries:
            return None
        newest = max(entries)
        entries.remove(newest)
        if entries:
            self.table[(topic, tx_id)] = entries
        return newest[1], newest[2]


async def end_transaction(proxy, client, ctx, request):
    topic = request.topic.name
    validate_topic(topic)
    if not request.transaction_id.strip():
        raise ProxyError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
    data = proxy.transactions.take(topic, request.transaction_id)
    if data is None:
        raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"org.apache.rocketmq.proxy.common.ProxyException: cannot found "
                         f"transaction data, topic: {topic}, transactionId: {request.transaction_id}")
    queue_offset, cl_offset = data
    cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, {
        "producerGroup": topic, "tranStateTableOffset": queue_offset, "commitLogOffset": cl_offset,
        "commitOrRollback": RESOLUTIONS.get(request.resolution, int(TransactionType.TRANSACTION_NOT_TYPE)),
        "fromTransactionCheck": request.source == TransactionSource.SOURCE_SERVER_CHECK,
        "msgId": request.message_id, "transactionId": request.transaction_id}, language=client.language)
    resp = await local.call(proxy.ctrl, client.channel, cmd)
    if resp is not None and resp.code != 0:          # Local mode ignores the broker's answer; it is logged
        log.info("END_TRANSACTION of %s (%s): broker answered %s %s", request.transaction_id, topic,
                 resp.code, resp.remark)
    return pb.EndTransactionResponse(status=pb.Status(code=Code.OK, message="OK"))


def recover_command(proxy, cmd):
    """CHECK_TRANSACTION_STATE (header + the half message's record) -> the Telemetry command, and the
    transaction data its EndTransaction will take (GrpcClientChannel.processCheckTransaction)."""
    ext = cmd.ext_fields or {}
    record = decode_record(cmd.body)
    props = record.properties
    topic = props.get(Prop.REAL_TOPIC, record.topic)
    tx_id = ext.get("transactionId") or props.get(Prop.UNIQ_KEY, "")
    proxy.transactions.add(topic, tx_id, int(ext.get("tranStateTableOffset", 0)), int(ext.get("commitLogOffset", 0)))
    command = pb.TelemetryCommand()
    recover = command.recover_orphaned_transaction_command
    recover.message.CopyFrom(to_message(record, topic, kind=MessageType.TRANSACTION))
    recover.transaction_id = tx_id
    return command
