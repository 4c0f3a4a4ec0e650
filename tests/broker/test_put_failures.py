"""putMessageFailedTimes (GET_BROKER_RUNTIME_INFO): counted as 4.9.8's DefaultMessageStore counts it, for
a put the commit log refused (the record over maxMessageSize, properties over 32767 bytes), not for one
refused by the checks before it (checkMessage: a properties text over 32767 characters)."""
from __future__ import annotations

import asyncio

from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RequestCode, ResponseCode
from mqtool_remoting.command import RemotingCommand
from tests.broker.test_broker_server import running_pair, send_cmd


def test_put_message_failed_times_counts_what_the_commit_log_refused(tmp_path):
    async def scenario():
        async with running_pair(tmp_path, maxMessageSize=1024) as (_ns, broker, client):
            addr = broker.config.broker_addr

            async def failed_times() -> int:
                resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
                return int(jsonbody.loads(resp.body)["table"]["putMessageFailedTimes"])

            async def send(body=b"ok", props="KEYS\x01k"):
                return (await client.invoke(addr, send_cmd("FailTopic", body, props))).code
            assert await send() == ResponseCode.SUCCESS and await failed_times() == 0
            assert await send(body=b"x" * 2000) == ResponseCode.MESSAGE_ILLEGAL       # over maxMessageSize
            assert await failed_times() == 1
            assert await send(props="K\x01" + "v" * 40_000) == ResponseCode.MESSAGE_ILLEGAL   # checkMessage's
            assert await failed_times() == 1
            assert await send(props="K\x01" + "é" * 20_000) == ResponseCode.MESSAGE_ILLEGAL   # 40,000 bytes
            assert await failed_times() == 2
            assert await send() == ResponseCode.SUCCESS and await failed_times() == 2
    asyncio.run(asyncio.wait_for(scenario(), 60))
