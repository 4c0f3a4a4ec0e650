"""`mqtool send --vip-channel`: the sends go to the broker's fast port, listenPort - 2, as a 4.9.8
producer with sendMessageWithVIPChannel=true does (sendKernelImpl uses MixAll.brokerVIPChannel);
heartbeats stay on the main port. The broker runs in the test's loop, its two servers watched."""
from __future__ import annotations

import asyncio
import sys

from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient
from tests.broker.test_fast_port import master_with_data, run, spy_ports, start_master
from tests.conftest import REPO, json_lines

SENDS = {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}


def watch(master) -> dict[str, list[int]]:
    """The request codes each of the master's servers handles from now on (its handler's, and the
    sends its fast path answers)."""
    return spy_ports(master)


async def mqtool(*args: str) -> tuple[int, str, str]:
    """`python -m mqtool ARGS` without blocking the loop the broker runs in."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "mqtool", *args, cwd=REPO,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 50)
    return proc.returncode, out.decode(), err.decode()


def test_send_with_vip_channel_arrives_through_the_fast_port(tmp_path):
    async def scenario():
        async with master_with_data(tmp_path) as (ns, master, _client):
            seen = watch(master)
            namesrv = f"127.0.0.1:{ns.port}"
            code, out, err = await mqtool("send", "-n", namesrv, "-t", "FastTopic", "--vip-channel", "--json", "one")
            assert code == 0, err
            assert [r["status"] for r in json_lines(out)] == ["SEND_OK"]
            assert [c for c in seen["fast"] if c in SENDS] == [RequestCode.SEND_MESSAGE_V2]
            assert not [c for c in seen["main"] if c in SENDS]
            assert RequestCode.HEART_BEAT in seen["main"] and RequestCode.HEART_BEAT not in seen["fast"]

            seen["fast"].clear()
            code, out, err = await mqtool("send", "-n", namesrv, "-t", "FastTopic", "--vip-channel", "--batch", "2",
                                          "--json", "--file", str(_file(tmp_path, "a")), "--file",
                                          str(_file(tmp_path, "b")))
            assert code == 0, err
            assert len(json_lines(out)) == 2
            assert [c for c in seen["fast"] if c in SENDS] == [RequestCode.SEND_BATCH_MESSAGE]

            seen["fast"].clear()
            code, out, err = await mqtool("send", "-n", namesrv, "-t", "FastTopic", "--count", "3", "--vip-channel",
                                          "--json")
            assert code == 0, err
            assert json_lines(out)[0]["messages"] == 3
            assert [c for c in seen["fast"] if c in SENDS] == [RequestCode.SEND_MESSAGE_V2] * 3

            # without the flag the fast port sees no send: the test above does not pass by accident
            seen["fast"].clear()
            seen["main"].clear()
            code, _out, err = await mqtool("send", "-n", namesrv, "-t", "FastTopic", "two")
            assert code == 0, err
            assert [c for c in seen["main"] if c in SENDS] == [RequestCode.SEND_MESSAGE_V2]
            assert not [c for c in seen["fast"] if c in SENDS]
    run(scenario())


def _file(tmp_path, name: str):
    path = tmp_path / f"{name}.txt"
    path.write_text(name)
    return path


def test_a_broker_without_a_fast_port_at_listen_port_minus_2_is_one_error_naming_it(tmp_path):
    from mqtool.namesrv.server import NameServer
    from tests.servers import free_port

    async def scenario():
        ns = await NameServer(tmp_path / "kv.json").start("127.0.0.1", 0)
        master = await start_master(tmp_path, ns.port, fastListenPort=free_port())  # listenPort - 2 is not served
        client = RemotingClient()
        try:
            created = await client.invoke(master.config.broker_addr, RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "VipTopic", "defaultTopic": "TBW102", "readQueueNums": 1,
                                                      "writeQueueNums": 1, "perm": 6, "topicFilterType": "SINGLE_TAG",
                                                      "topicSysFlag": 0, "order": False}))
            assert created.code == ResponseCode.SUCCESS
            vip = f"127.0.0.1:{master.config.listenPort - 2}"
            code, _out, err = await mqtool("send", "-n", f"127.0.0.1:{ns.port}", "-t", "VipTopic", "--vip-channel",
                                           "hello")
            assert code == 1, err
            assert err.count("\n") == 1 and "Traceback" not in err, err
            assert f"broker broker-f at {vip} stopped answering (connection refused" in err, err
        finally:
            await client.close()
            await master.stop()
            await ns.stop()
    run(scenario())
