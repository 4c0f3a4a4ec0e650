"""A message flagged compressed whose body does not inflate, among good ones, read by `mqtool consume`
from a real broker process: every message is delivered (the bad one as stored) and the bad one is
reported on stderr in one line that names it (msgId, queue, offset), for each way of consuming."""
from __future__ import annotations

import asyncio
import zlib

import pytest

from mqtool_remoting.transport import RemotingClient
from tests.broker.test_broker_server import send_cmd
from tests.conftest import json_lines, run_cli

TOPIC = "UndecodableBody"
BAD_ID = "7F00000100002A9F0000000000000B4D"


@pytest.fixture(scope="module")
def topic(cluster):
    async def send():
        client = RemotingClient()
        try:
            for i, (body, flag) in enumerate(((b"first", 0), (b"not zlib at all", 0x1), (zlib.compress(b"third"), 0x1),
                                              (b"fourth", 0))):
                uniq = BAD_ID if i == 1 else f"7F00000100002A9F00000000000000{i:02X}"
                resp = await client.invoke(cluster["broker"], send_cmd(TOPIC, body, f"UNIQ_KEY\x01{uniq}",
                                                                       sys_flag=flag))
                assert resp.code == 0
        finally:
            await client.close()
    asyncio.run(send())
    return cluster["namesrv"]


@pytest.mark.parametrize("how", [(), ("-g", "GID_UNDECODABLE")])
def test_the_batch_is_delivered_and_the_bad_message_named(topic, how):
    proc = run_cli("consume", "-n", topic, "-t", TOPIC, "-e", "--json", *how, check=True)
    got = json_lines(proc.stdout)
    assert [m["body"] for m in got] == ["first", "not zlib at all", "third", "fourth"]
    [line] = [ln for ln in proc.stderr.splitlines() if "cannot inflate" in ln]
    assert BAD_ID in line and f"{TOPIC} queue 0 offset 1" in line and "as stored" in line
