"""The fast port (VIP channel): every 4.9.8 broker also serves its requests on listenPort - 2
(BrokerController's fastRemotingServer), and a 4.9.8 slave copies its master's topics from there
(BrokerOuterAPI.getAllTopicConfig uses MixAll.brokerVIPChannel(true, masterAddr)); offsets, delay
offsets and subscription groups it asks the main port for."""
from __future__ import annotations

import asyncio
import contextlib
import socket

from mqtool.broker.config import BrokerConfig
from mqtool.broker.controller import BrokerController
from mqtool.namesrv.server import NameServer
from mqtool_remoting import jsonbody
from mqtool_remoting.acl import Credentials
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand, decode_frame_body
from mqtool_remoting.transport import RemotingClient
from tests.broker.test_broker_server import pull_cmd, send_cmd
from tests.conftest import run_cli
from tests.servers import free_port, free_port_pair

SLAVE_COPIES = (RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.GET_ALL_CONSUMER_OFFSET,
                RequestCode.GET_ALL_DELAY_OFFSET, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
PLAIN_ACL = """\
globalWhiteRemoteAddresses: [10.255.255.*]
accounts:
  - {accessKey: rocketmq2, secretKey: "12345678", admin: true}
"""


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 60))


async def start_master(tmp, ns_port: int, **cfg) -> BrokerController:
    config = BrokerConfig(brokerName="broker-f", listenPort=free_port_pair(), namesrvAddr=f"127.0.0.1:{ns_port}",
                          storePathRootDir=str(tmp / "master"), **cfg)
    return await BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 20)}).start("127.0.0.1")


@contextlib.asynccontextmanager
async def master_with_data(tmp):
    """A name server and a master holding a topic, a group, a committed offset and a delay offset."""
    ns = await NameServer(tmp / "kv.json").start("127.0.0.1", 0)
    master = await start_master(tmp, ns.port, messageDelayLevel="1s 2s")
    client = RemotingClient()
    try:
        addr = master.config.broker_addr
        for req in (RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                        "topic": "FastTopic", "defaultTopic": "TBW102", "readQueueNums": 2, "writeQueueNums": 2,
                        "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}),
                    RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                            body=jsonbody.dumps({"groupName": "GID_FAST"})),
                    send_cmd("FastTopic", b"now"),
                    send_cmd("FastTopic", b"later", "DELAY\x012"),
                    RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                        "consumerGroup": "GID_FAST", "topic": "FastTopic", "queueId": 0, "commitOffset": 1})):
            assert (await client.invoke(addr, req)).code == ResponseCode.SUCCESS
        yield ns, master, client
    finally:
        await client.close()
        await master.stop()
        await ns.stop()


def fast_addr(ctrl: BrokerController) -> str:
    return f"127.0.0.1:{ctrl.config.listenPort - 2}"


def test_a_4_9_8_slave_gets_the_same_copies_from_the_fast_port(tmp_path):
    async def scenario():
        async with master_with_data(tmp_path) as (_ns, master, client):
            assert master.fast_server.port == master.config.listenPort - 2
            for code in SLAVE_COPIES:       # as SlaveSynchronize asks: no header, language JAVA
                main = await client.invoke(master.config.broker_addr, RemotingCommand.request(code, language="JAVA"))
                fast = await client.invoke(fast_addr(master), RemotingCommand.request(code, language="JAVA"))
                assert (fast.code, fast.remark) == (main.code, main.remark) == (ResponseCode.SUCCESS, None), code
                assert fast.body == main.body and main.body, code
                if code == RequestCode.GET_ALL_TOPIC_CONFIG:
                    assert "FastTopic" in jsonbody.loads(fast.body)["topicConfigTable"]
                elif code == RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
                    assert "GID_FAST" in jsonbody.loads(fast.body)["subscriptionGroupTable"]
    run(scenario())


def test_the_fast_port_serves_sends_and_heartbeats_but_not_pulls(tmp_path):
    async def scenario():
        async with master_with_data(tmp_path) as (_ns, master, client):
            sent = await client.invoke(fast_addr(master), send_cmd("FastTopic", b"via vip"))
            assert sent.code == ResponseCode.SUCCESS
            beat = await client.invoke(fast_addr(master), RemotingCommand.request(RequestCode.HEART_BEAT, body=jsonbody.dumps(
                {"clientID": "127.0.0.1@vip", "producerDataSet": [{"groupName": "PG_VIP"}], "consumerDataSet": []})))
            assert beat.code == ResponseCode.SUCCESS
            assert master.producers.any_channel("PG_VIP") is not None      # a client on the fast port is known
            pulled = await client.invoke(fast_addr(master), pull_cmd("FastTopic"))
            assert (pulled.code, pulled.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 11 not supported")
            on_main = await client.invoke(master.config.broker_addr, pull_cmd("FastTopic"))
            assert on_main.code == ResponseCode.SUCCESS and b"via vip" in on_main.body
    run(scenario())


def spy_ports(master) -> dict[str, list[int]]:
    """The request codes each port of `master` handles from now on (new connections), by port:
    through its handler, or answered by its send fast path (mqtool/broker/fastsend.py)."""
    seen = {"fast": [], "main": []}
    for side, server in (("fast", master.fast_server), ("main", master.server)):
        inner, inner_fast = server.handler, server.fast

        def spy(conn, cmd, inner=inner, side=side):
            seen[side].append(cmd.code)
            return inner(conn, cmd)

        def fast_spy(conn, body, inner_fast=inner_fast, side=side):
            answer = inner_fast(conn, body)
            if answer is not None:
                seen[side].append(decode_frame_body(body).code)
            return answer
        server.handler, server.fast = spy, fast_spy
    return seen


def test_a_slave_copies_its_masters_topics_through_the_fast_port(tmp_path):
    async def scenario():
        async with master_with_data(tmp_path) as (ns, master, client):
            seen = spy_ports(master)              # the slave's connections are new ones
            config = BrokerConfig(brokerName="broker-f", brokerId=1, brokerRole="SLAVE", listenPort=free_port_pair(),
                                  namesrvAddr=f"127.0.0.1:{ns.port}", storePathRootDir=str(tmp_path / "slave"))
            slave = await BrokerController(config, {"mappedFileSizeCommitLog": str(1 << 20)}).start("127.0.0.1")
            try:
                assert slave.slave_sync.master_addr == master.config.broker_addr      # learned at registration
                assert await slave.slave_sync.sync_all()
                assert slave.topics.get("FastTopic") is not None
                assert slave.groups.table.get("GID_FAST") is not None
                assert slave.offsets.table["FastTopic@GID_FAST"][0] == 1
                master.schedule.persist()
                assert slave.schedule.path.read_bytes() == master.schedule.path.read_bytes()   # verbatim
                assert seen["fast"] == [RequestCode.GET_ALL_TOPIC_CONFIG]        # as 4.9.8: only the topics there
                assert [c for c in seen["main"] if c in SLAVE_COPIES] == list(SLAVE_COPIES[1:])

                # GET_BROKER_HA_STATUS (5.x; 4.9.8 has no such request) names a slave's connection by its
                # HA socket's address, as DefaultHAService.getRuntimeInfo does (getClientAddress()), not
                # by the slave's broker address
                for _ in range(200):
                    if slave.ha_slave.connected and master.ha_master.connections:
                        break
                    await asyncio.sleep(0.05)
                host, port = slave.ha_slave._transport.get_extra_info("sockname")[:2]
                status = await client.invoke(master.config.broker_addr, RemotingCommand.request(
                    RequestCode.GET_BROKER_HA_STATUS))
                [conn] = jsonbody.loads(status.body)["haConnectionInfo"]
                assert conn["addr"] == f"{host}:{port}" != slave.config.broker_addr
            finally:
                await slave.stop()
    run(scenario())


def test_the_fast_port_has_the_same_acl(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)

    async def scenario():
        ns = await NameServer(tmp_path / "kv.json").start("127.0.0.1", 0)
        master = await start_master(tmp_path, ns.port, aclEnable=True, rocketmqHome=str(home))
        unsigned = RemotingClient()
        admin = RemotingClient(signer=Credentials("rocketmq2", "12345678").sign)
        try:
            for addr in (master.config.broker_addr, fast_addr(master)):
                # 4.9.8's slave signs nothing: an ACL master refuses its copies on either port
                refused = await unsigned.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG,
                                                                              language="JAVA"))
                assert refused.code == ResponseCode.SYSTEM_ERROR and "No accessKey is configured" in refused.remark
                ok = await admin.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
                assert ok.code == ResponseCode.SUCCESS
            pulled = await admin.invoke(fast_addr(master), pull_cmd("TBW102"))
            assert pulled.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        finally:
            await unsigned.close()
            await admin.close()
            await master.stop()
            await ns.stop()
    run(scenario())


def test_a_fast_port_already_taken_is_one_error_line(tmp_path):
    port = free_port_pair()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port - 2))
        taken.listen()
        proc = run_cli("broker", "start", "--listen", f"127.0.0.1:{port}", "--store-dir", tmp_path / "store",
                       "--embedded-namesrv", f"127.0.0.1:{free_port()}")
    assert proc.returncode == 1                 # as a taken main port: the start failed, the arguments were fine
    errors = [ln for ln in proc.stderr.splitlines() if "mqtool: error" in ln]
    assert len(errors) == 1 and f"fast port {port - 2} (listenPort - 2)" in errors[0], proc.stderr
    assert "in use" in errors[0] and "Traceback" not in proc.stderr


def test_a_taken_ha_port_exits_as_a_taken_main_port(tmp_path):
    port = free_port_pair()
    with socket.socket() as taken_ha, socket.socket() as taken_main:
        taken_ha.bind(("127.0.0.1", port + 1))
        taken_ha.listen()
        ha = run_cli("broker", "start", "--listen", f"127.0.0.1:{port}", "--store-dir", tmp_path / "a",
                     "--embedded-namesrv", f"127.0.0.1:{free_port()}")
        taken_main.bind(("127.0.0.1", 0))
        taken_main.listen()
        main = run_cli("broker", "start", "--listen", f"127.0.0.1:{taken_main.getsockname()[1]}", "--store-dir",
                       tmp_path / "b", "--embedded-namesrv", f"127.0.0.1:{free_port()}")
    assert (ha.returncode, main.returncode) == (1, 1), (ha.stderr, main.stderr)
    errors = [ln for ln in ha.stderr.splitlines() if "mqtool: error" in ln]
    assert len(errors) == 1 and f"HA port {port + 1} (listenPort + 1)" in errors[0], ha.stderr


def test_a_taken_port_starts_nothing(tmp_path):
    """The ports are looked at before anything starts: a taken main port leaves no embedded name
    server started (no line of it) and no store made, one error line, exit 1."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("broker", "start", "--listen", f"127.0.0.1:{port}", "--store-dir", tmp_path / "store",
                       "--embedded-namesrv", f"127.0.0.1:{free_port()}")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"mqtool: error: broker could not start: cannot listen on 127.0.0.1:{port}: address already in use"]
    assert "name server" not in proc.stdout + proc.stderr and not (tmp_path / "store").exists()


def test_fast_listen_port_moves_it_and_the_start_line_names_it(tmp_path, caplog):
    caplog.set_level("INFO", logger="mqtool.broker")

    async def scenario():
        ns = await NameServer(tmp_path / "kv.json").start("127.0.0.1", 0)
        fast = free_port()
        master = await start_master(tmp_path, ns.port, fastListenPort=fast)
        client = RemotingClient()
        try:
            assert master.fast_server.port == fast
            assert any("fastListenPort" in n for n in master.notes)
            [boot] = [r.getMessage() for r in caplog.records if "boot success" in r.getMessage()]
            assert boot.endswith(f"fast port {fast}")
            resp = await client.invoke(f"127.0.0.1:{fast}", RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
            assert resp.code == ResponseCode.SUCCESS
        finally:
            await client.close()
            await master.stop()
            await ns.stop()
    run(scenario())


def test_a_producer_with_the_vip_channel_sends_to_the_fast_port(tmp_path):
    from mqtool.client.producer import OutMessage, Producer

    async def scenario():
        async with master_with_data(tmp_path) as (ns, master, _client):
            seen = spy_ports(master)
            producer = Producer(f"127.0.0.1:{ns.port}", vip_channel=True)
            try:
                result = await producer.send(OutMessage("FastTopic", b"vip"))
                assert result.status == "SEND_OK"
            finally:
                await producer.close()
            assert seen["fast"] == [RequestCode.SEND_MESSAGE_V2]            # as sendKernelImpl with VIP on
            assert seen["main"] == [RequestCode.HEART_BEAT]                  # heartbeats stay on the main port
    run(scenario())
