"""The asyncio transport over real 127.0.0.1 sockets."""
from __future__ import annotations

import asyncio

import pytest

from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingConnectError, RemotingTimeout
from remoting.transport import RemotingClient, Server, connect


async def echo_handler(conn, cmd):
    if cmd.code == 1:
        raise RuntimeError("boom")
    if cmd.code == 2:
        await asyncio.sleep(10)
    if cmd.code == 3:  # the server asks the client something on the same connection
        answer = await conn.request(RemotingCommand.request(40, {"q": "ping"}), 2)
        return cmd.response(0, answer.remark)
    if cmd.code == 4:
        conn.attrs["seen"] = cmd.ext_fields.get("v")
        return None
    return cmd.response(0, None, {"echo": cmd.ext_fields.get("x", "")}, cmd.body)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_request_response_errors_oneway_and_server_requests():
    async def scenario():
        server = await Server(echo_handler).start("127.0.0.1", 0)

        async def client_side(conn, cmd):
            return cmd.response(0, "pong:" + cmd.ext_fields["q"])
        client = RemotingClient(client_side)
        addr = f"127.0.0.1:{server.port}"
        resp = await client.invoke(addr, RemotingCommand.request(10, {"x": 5}, b"payload"))
        assert resp.code == 0 and resp.ext_fields == {"echo": "5"} and resp.body == b"payload"
        many = await asyncio.gather(*(client.invoke(addr, RemotingCommand.request(10, {"x": i})) for i in range(50)))
        assert [r.ext_fields["echo"] for r in many] == [str(i) for i in range(50)]
        bad = await client.invoke(addr, RemotingCommand.request(1))
        assert bad.code == ResponseCode.SYSTEM_ERROR and "boom" in bad.remark
        with pytest.raises(RemotingTimeout):
            await client.invoke(addr, RemotingCommand.request(2), timeout_s=0.2)
        asked = await client.invoke(addr, RemotingCommand.request(3))
        assert asked.remark == "pong:ping"
        await client.invoke_oneway(addr, RemotingCommand.request(4, {"v": "seen-it"}))
        conn = next(iter(server.connections))
        for _ in range(200):
            if conn.attrs.get("seen"):
                break
            await asyncio.sleep(0.01)
        assert conn.attrs["seen"] == "seen-it"
        await client.close()
        await server.stop()
    run(scenario())


def test_garbage_closes_only_that_connection():
    async def scenario():
        closed = []
        server = await Server(echo_handler, on_close=closed.append).start("127.0.0.1", 0)
        good = await connect(f"127.0.0.1:{server.port}")
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"\xff\xff\xff\xffGARBAGE")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""   # server closed it
        assert len(closed) == 1
        resp = await good.request(RemotingCommand.request(10, {"x": "still"}))
        assert resp.ext_fields["echo"] == "still"
        await good.close()
        await server.stop()
    run(scenario())


def test_connect_refused_is_a_clear_error():
    async def scenario():
        server = await Server(echo_handler).start("127.0.0.1", 0)
        port = server.port
        await server.stop()
        with pytest.raises(RemotingConnectError, match=f"127.0.0.1:{port}"):
            await connect(f"127.0.0.1:{port}")
    run(scenario())
