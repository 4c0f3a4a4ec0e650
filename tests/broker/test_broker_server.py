"""The broker over real 127.0.0.1 sockets, driven with frames built from the spec."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import zlib


from mqtool.broker.config import BrokerConfig
from mqtool.broker.controller import BrokerController
from mqtool_remoting.batch import encode_batch
from mqtool.namesrv.server import NameServer
from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.headers import SendMessageRequestHeader, send_header_to_v2, to_ext_fields
from mqtool_remoting.transport import RemotingClient
from mqtool_store.commitlog import decode_record


def send_cmd(topic, body=b"hello", props="TAGS\x01TagA\x02KEYS\x01k1", queue=0, batch=False, sys_flag=0,
             group="PG", code=RequestCode.SEND_MESSAGE_V2):
    h = SendMessageRequestHeader(group, topic, "TBW102", 4, queue, sys_flag, 1700000000000, 0, props, 0, False, batch)
    ext = send_header_to_v2(h) if code != RequestCode.SEND_MESSAGE else to_ext_fields(h)
    return RemotingCommand.request(code, ext, body)


def pull_cmd(topic, queue=0, offset=0, group="CG", sub="*"):
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": queue, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": 0x4, "commitOffset": 0, "suspendTimeoutMillis": 1000, "subscription": sub, "subVersion": 0})


def records(body: bytes):
    out, p = [], 0
    while p < len(body):
        rec = decode_record(body, p)
        out.append(rec)
        p += rec.total_size
    return out


async def start_pair(tmp_path, name="broker-a", **cfg):
    ns = await NameServer(tmp_path / "kv.json").start("127.0.0.1", 0)
    config = BrokerConfig(brokerName=name, listenPort=0, namesrvAddr=f"127.0.0.1:{ns.port}",
                          storePathRootDir=str(tmp_path / name), **cfg)
    broker = await BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 20),
                                             "mappedFileSizeConsumeQueue": "6000"}).start("127.0.0.1")
    return ns, broker


@contextlib.asynccontextmanager
async def running_pair(tmp_path, name="broker-a", **cfg):
    """(name server, broker, a client) for one scenario, all stopped after it."""
    ns, broker = await start_pair(tmp_path, name, **cfg)
    client = RemotingClient()
    try:
        yield ns, broker, client
    finally:
        await client.close()
        await broker.stop()
        await ns.stop()


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 60))


def test_batch_send_and_bad_requests(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        addr = broker.config.broker_addr
        c = RemotingClient()
        batch = encode_batch([(0, b"m%d" % i, f"KEYS\x01b{i}\x02UNIQ_KEY\x01U{i:031d}") for i in range(3)])
        resp = await c.invoke(addr, send_cmd("BatchTopic", batch, "WAIT\x01true", batch=True,
                                             code=RequestCode.SEND_BATCH_MESSAGE))
        assert resp.code == 0 and len(resp.ext_fields["msgId"].split(",")) == 3
        got = await c.invoke(addr, pull_cmd("BatchTopic"))
        recs = records(got.body)
        assert [r.body for r in recs] == [b"m0", b"m1", b"m2"] and [r.queue_offset for r in recs] == [0, 1, 2]
        assert recs[0].properties["CLUSTER"] == "DefaultCluster" and recs[1].keys == ["b1"]
        # bad input: each gets RocketMQ's answer and the broker keeps serving
        assert (await c.invoke(addr, RemotingCommand.request(777))).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        missing = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T"}, b"x")
        resp = await c.invoke(addr, missing)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "defaultTopic" in resp.remark
        big = await c.invoke(addr, send_cmd("BigTopic", b"x" * (4 * 1024 * 1024 + 1)), timeout_s=10)
        assert big.code == ResponseCode.MESSAGE_ILLEGAL
        bad_topic = await c.invoke(addr, send_cmd("bad topic!"))
        assert bad_topic.code == ResponseCode.SYSTEM_ERROR and "characters" in bad_topic.remark
        long_topic = await c.invoke(addr, send_cmd("t" * 128))
        assert long_topic.code == ResponseCode.SYSTEM_ERROR
        forbidden = await c.invoke(addr, send_cmd("SCHEDULE_TOPIC_XXXX"))
        assert forbidden.code == ResponseCode.NO_PERMISSION
        bad_batch = await c.invoke(addr, send_cmd("BatchTopic", b"\x00\x00\x00\x05junk", batch=True))
        assert bad_batch.code == ResponseCode.MESSAGE_ILLEGAL
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.config.listenPort)
        writer.write(b"\x7f\x00\x00\x00" + b"\x00" * 16)    # a frame over 16 MiB: connection closed
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""
        ok = await c.invoke(addr, send_cmd("BatchTopic"))
        assert ok.code == 0 and ok.ext_fields["queueOffset"] == "3"
        # a batch of 32: stored as one run (store/recordrun.py), read back record by record
        batch = encode_batch([(i, b"r%d" % i, f"KEYS\x01r{i}\x02UNIQ_KEY\x01R{i:031d}") for i in range(32)])
        resp = await c.invoke(addr, send_cmd("BatchTopic", batch, "WAIT\x01true", batch=True,
                                             code=RequestCode.SEND_BATCH_MESSAGE))
        assert resp.code == 0 and resp.ext_fields["queueOffset"] == "4"
        recs = records((await c.invoke(addr, pull_cmd("BatchTopic", offset=4))).body)
        assert [(r.body, r.flag, r.queue_offset) for r in recs] == [(b"r%d" % i, i, 4 + i) for i in range(32)]
        assert [r.msg_id for r in recs] == resp.ext_fields["msgId"].split(",")
        assert all(r.crc_ok and r.properties["CLUSTER"] == "DefaultCluster" for r in recs)
        assert recs[7].keys == ["r7"] and recs[7].uniq_key == f"R{7:031d}"
        await c.close()
        await broker.stop()
        await ns.stop()
        assert not (tmp_path / "broker-a" / "abort").exists()
    run(scenario())


def test_transactions_commit_rollback_and_check_back(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path, transactionCheckInterval=200, transactionTimeOut=100)
        addr = broker.config.broker_addr
        checks = []

        async def producer_side(conn, cmd):
            if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
                checks.append(cmd)
                end = RemotingCommand.request(RequestCode.END_TRANSACTION, {
                    "producerGroup": "TXG", "tranStateTableOffset": cmd.ext_fields["tranStateTableOffset"],
                    "commitLogOffset": cmd.ext_fields["commitLogOffset"], "commitOrRollback": 8,
                    "fromTransactionCheck": True, "msgId": cmd.ext_fields.get("msgId", "")}, oneway=True)
                await conn.oneway(end)
            return None
        c = RemotingClient(producer_side)
        hb = {"clientID": "127.0.0.1@tx", "producerDataSet": [{"groupName": "TXG"}], "consumerDataSet": []}
        assert (await c.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps(hb).encode()))).code == 0
        half_props = "TRAN_MSG\x01true\x02PGROUP\x01TXG\x02UNIQ_KEY\x01{}"
        results = []
        for i in range(3):
            r = await c.invoke(addr, send_cmd("TxTopic", b"tx%d" % i, half_props.format(f"TX{i:030d}"), group="TXG",
                                              sys_flag=0x4))
            assert r.code == 0
            results.append(r)
        pulled = await c.invoke(addr, pull_cmd("TxTopic"))
        assert not pulled.body                                   # half messages are invisible

        async def end(r, how):
            from mqtool_store.msgid import decode_offset_msg_id
            await c.invoke_oneway(addr, RemotingCommand.request(RequestCode.END_TRANSACTION, {
                "producerGroup": "TXG", "tranStateTableOffset": r.ext_fields["queueOffset"],
                "commitLogOffset": decode_offset_msg_id(r.ext_fields["msgId"])[2], "commitOrRollback": how,
                "msgId": "x"}))
        await end(results[0], 8)      # commit
        await end(results[1], 12)     # rollback; results[2] is left to the check-back
        bodies = set()
        for _ in range(100):
            got = await c.invoke(addr, pull_cmd("TxTopic"))
            bodies = {r.body for r in records(got.body)} if got.code == 0 else set()
            if bodies == {b"tx0", b"tx2"}:
                break
            await asyncio.sleep(0.1)
        assert bodies == {b"tx0", b"tx2"} and checks
        # The check created the half topic's config (1 queue), as 4.9.8's does; the end created the op topic's.
        half, op = broker.topics.get("RMQ_SYS_TRANS_HALF_TOPIC"), broker.topics.get("RMQ_SYS_TRANS_OP_HALF_TOPIC")
        assert (half.readQueueNums, half.writeQueueNums, op.readQueueNums) == (1, 1, 1)
        await c.close()
        await broker.stop()
        await ns.stop()
    run(scenario())


def test_second_broker_shares_routes(tmp_path):
    async def scenario():
        ns, a = await start_pair(tmp_path)
        b_cfg = BrokerConfig(brokerName="broker-b", listenPort=0, namesrvAddr=f"127.0.0.1:{ns.port}",
                             storePathRootDir=str(tmp_path / "broker-b"))
        b = await BrokerController(b_cfg, {"mappedFileSizeCommitLog": str(1 << 20)}).start("127.0.0.1")
        c = RemotingClient()
        for broker in (a, b):
            await c.invoke(broker.config.broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "Shared", "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                "topicFilterType": "SINGLE_TAG"}))
        for _ in range(100):
            route = await c.invoke(f"127.0.0.1:{ns.port}", RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Shared"}))
            names = sorted(d["brokerName"] for d in jsonbody.loads(route.body)["brokerDatas"]) if route.code == 0 else []
            if names == ["broker-a", "broker-b"]:
                break
            await asyncio.sleep(0.05)
        assert names == ["broker-a", "broker-b"]
        await b.stop()
        route = await c.invoke(f"127.0.0.1:{ns.port}", RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Shared"}))
        assert [d["brokerName"] for d in jsonbody.loads(route.body)["brokerDatas"]] == ["broker-a"]
        await c.close()
        await a.stop()
        await ns.stop()
    run(scenario())


def test_a_body_flagged_compressed_that_does_not_inflate_reaches_the_consumer_as_stored(tmp_path, caplog):
    from mqtool.client.consumer import Consumer
    from mqtool.client.base import MessageQueue

    async def scenario():
        ns, broker = await start_pair(tmp_path)
        c = RemotingClient()
        addr = broker.config.broker_addr
        zlib_flag = 0x1 | (3 << 8)
        for body, flag in ((b"not zlib at all", zlib_flag), (zlib.compress(b"inflated"), zlib_flag), (b"plain", 0)):
            assert (await c.invoke(addr, send_cmd("Odd", body, sys_flag=flag))).code == 0
        consumer = Consumer(f"127.0.0.1:{ns.port}", "CG")
        with caplog.at_level(logging.WARNING, "mqtool.client"):
            res = await consumer.pull(MessageQueue("Odd", broker.config.brokerName, 0), 0, 32)
        assert [m.body for m in res.messages] == [b"not zlib at all", b"inflated", b"plain"]
        assert res.next_offset == 3
        assert any("given as stored" in r.getMessage() for r in caplog.records)
        await consumer.close()
        await c.close()
        await broker.stop()
        await ns.stop()
    run(scenario())


async def start_sync_flush_pair(tmp_path, **store):
    ns = await NameServer(tmp_path / "kv.json").start("127.0.0.1", 0)
    config = BrokerConfig(brokerName="broker-sync", listenPort=0, namesrvAddr=f"127.0.0.1:{ns.port}",
                          storePathRootDir=str(tmp_path / "broker-sync"))
    broker = await BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 20), "flushDiskType": "SYNC_FLUSH",
                                             **store}).start("127.0.0.1")
    return ns, broker


def test_sync_flush_sends_wait_on_the_loop_and_share_fsyncs(tmp_path):
    """Under SYNC_FLUSH every SEND_OK comes after the fsync covering it; 200 sends in flight share
    rounds (before, each waiting put held one of a handful of executor threads)."""
    async def scenario():
        ns, broker = await start_sync_flush_pair(tmp_path)
        c = RemotingClient()
        addr = broker.config.broker_addr
        flusher = broker.store.flusher
        seen = []

        async def one(i):
            resp = await c.invoke(addr, send_cmd("SyncT", b"s%d" % i, props="WAIT\x01true", queue=i % 4))
            offset = int(resp.ext_fields["msgId"][-16:], 16)
            seen.append((resp.code, flusher.flushed > offset))      # its bytes were synced when it was answered
        await asyncio.gather(*(one(i) for i in range(200)))
        assert seen == [(ResponseCode.SUCCESS, True)] * 200
        assert flusher.rounds < 200 and not broker.flush_waiters._heap
        no_wait = await c.invoke(addr, send_cmd("SyncT", b"w", props="WAIT\x01false"))
        assert no_wait.code == ResponseCode.SUCCESS
        await c.close()
        await broker.stop()
        await ns.stop()
    run(scenario())


def test_a_sync_flush_send_whose_fsync_does_not_come_is_answered_flush_disk_timeout(tmp_path):
    async def scenario():
        ns, broker = await start_sync_flush_pair(tmp_path, syncFlushTimeout="300")
        flusher, gate = broker.store.flusher, threading.Event()
        real_sync = flusher._sync
        flusher._sync = lambda work: (gate.wait(10), real_sync(work))     # the disk hangs until the gate opens
        c = RemotingClient()
        resp = await c.invoke(broker.config.broker_addr, send_cmd("SyncT", b"late", props="WAIT\x01true"))
        assert resp.code == ResponseCode.FLUSH_DISK_TIMEOUT
        gate.set()
        await c.close()
        await broker.stop()
        await ns.stop()
    run(scenario())
