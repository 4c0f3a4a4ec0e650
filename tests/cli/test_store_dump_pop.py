"""`mqtool store dump --pop`: the revive topic's checkpoint and ack records decoded (bodies as 5.3.3
writes them, store/poprecords.py), and `config/consumerOrderInfo.json` as a config file."""
from __future__ import annotations

import asyncio

from mqtool_remoting import extrainfo as ei
from mqtool_remoting.codes import RequestCode
from mqtool_remoting.command import RemotingCommand
from mqtool_remoting.transport import RemotingClient
from mqtool_store.messagestore import Message
from mqtool_store.poprecords import CheckPoint
from mqtool_store.properties import format_properties

from tests.broker.test_broker_server import records, start_pair
from tests.broker.test_pop import G, pop_cmd, send_n
from tests.conftest import json_lines, run_cli


def test_dump_decodes_the_revive_topic_and_the_order_state(tmp_path):
    async def scenario():
        ns, broker = await start_pair(tmp_path)
        client = RemotingClient()
        try:
            addr = broker.config.broker_addr
            await send_n(client, addr, "TDP", 3, queues=1)
            resp = await client.invoke(addr, pop_cmd("TDP", queue=0, invisible=60_000))
            rec = records(resp.body)[1]
            extra = ei.build_extra_info(0, int(resp.ext_fields["popTime"]), 60_000, int(resp.ext_fields["reviveQid"]),
                                        "TDP", "broker-a", 0, rec.queue_offset)
            ack = {"consumerGroup": G, "topic": "TDP", "queueId": 0, "extraInfo": extra, "offset": rec.queue_offset}
            assert (await client.invoke(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, ack))).code == 0
            await send_n(client, addr, "TDO", 2, queues=1)
            assert (await client.invoke(addr, pop_cmd("TDO", order=True, attempt="x"))).code == 0
            # a checkpoint as a 5.x broker first stores it: a timer message in rmq_sys_wheel_timer
            wheel = {"TAGS": "ck", "REAL_TOPIC": "rmq_sys_REVIVE_LOG_DefaultCluster", "REAL_QID": "3",
                     "TIMER_DELIVER_MS": "1700000059000", "UNIQ_KEY": "W@0@7@GW@1700000000000@broker-a@ck"}
            body = CheckPoint(7, 1700000000000, 60_000, 1, 0, "W", "GW", "broker-a", [0]).to_json().encode()
            assert (await broker.put(Message("rmq_sys_wheel_timer", 0, body, wheel, format_properties(wheel)))).ok
            return int(resp.ext_fields["popTime"])
        finally:
            await client.close()
            await broker.stop()
            await ns.stop()
    pop_time = asyncio.run(scenario())
    root = tmp_path / "broker-a"
    rows = json_lines(run_cli("store", "dump", root, "--pop", "--json", check=True).stdout)
    [ck] = [r for r in rows if r["kind"] == "pop_checkpoint" and not r["in_timer_wheel"]]
    assert (ck["topic"], ck["group"], ck["queue_id"], ck["start_offset"], ck["offsets"]) == ("TDP", G, 0, 0, [0, 1, 2])
    assert ck["pop_timestamp"] == pop_time and ck["invisible_time"] == 60_000 and ck["broker_name"] == "broker-a"
    assert ck["revive_topic"] == "rmq_sys_REVIVE_LOG_DefaultCluster"
    assert ck["uniq_key"] == f"TDP@0@0@{G}@{pop_time}@broker-a@ck"
    [in_wheel] = [r for r in rows if r["kind"] == "pop_checkpoint" and r["in_timer_wheel"]]
    assert (in_wheel["topic"], in_wheel["revive_queue"], in_wheel["revive_offset"]) == ("W", 3, None)
    [ack] = [r for r in rows if r["kind"] == "pop_ack"]
    assert ack["offsets"] == [1] and ack["revive_queue"] == ck["revive_queue"]
    table = run_cli("store", "dump", root, "--pop", check=True).stdout
    assert "checkpoint" in table and "TDP" in table
    order = json_lines(run_cli("store", "dump", root / "config" / "consumerOrderInfo.json", "--json",
                               check=True).stdout)
    [info] = order[0]["data"]["table"][f"TDO@{G}"].values()
    assert info["o"] == [0, 1] and info["a"] == "x" and info["cm"] == 0
    refused = run_cli("store", "dump", root / "config" / "consumerOrderInfo.json", "--pop")
    assert refused.returncode == 2 and "--pop goes with a commit log" in refused.stderr
