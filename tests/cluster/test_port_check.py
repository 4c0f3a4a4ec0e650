"""`cluster start`'s port check answers what the servers will meet (issue 44): right after a
`cluster stop` the old ports hold only TIME-WAIT connections, which the servers' bind (with
SO_REUSEADDR, as asyncio's servers bind) passes; a port another process listens on is in use."""
from __future__ import annotations

import asyncio
import errno
import socket

import pytest
from mqtool_remoting.errors import RemotingListenError
from mqtool_remoting.transport import Server

from mqtool.cluster.plan import plan_cluster
from mqtool.cluster.supervisor import ClusterStartError, Supervisor
from tests.ports import free_port


def time_wait_port() -> int:
    """A port nothing listens on but a connection of its last server is in TIME-WAIT on, as a stopped
    server that closed its clients' connections leaves (the side that closes first waits there)."""
    for _ in range(5):
        port = free_port()
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind(("127.0.0.1", port))
            except OSError:
                continue
            listener.listen()
            client = socket.create_connection(("127.0.0.1", port))
            conn, _ = listener.accept()
            conn.close()                # the server's end closes first: 127.0.0.1:port goes to TIME-WAIT
            client.recv(1)
            client.close()
        with socket.socket() as plain:              # what the check met: a bind without SO_REUSEADDR fails
            try:
                plain.bind(("127.0.0.1", port))
            except OSError as exc:
                assert exc.errno == errno.EADDRINUSE
                return port
    pytest.skip("could not leave a TIME-WAIT connection on a port")


def one_port_plan(tmp_path, port: int):
    plan = plan_cluster(1, 1, tmp_path)
    for m in plan.members:
        m.host, m.ports = "127.0.0.1", []
    plan.brokers[0].ports = [port]
    return plan


def server_starts(port: int) -> bool:
    """Whether mqtool's server (a broker's or name server's port) listens on 127.0.0.1:port now."""
    async def go():
        server = Server(lambda conn, cmd: None)
        try:
            await server.start("127.0.0.1", port)
        except RemotingListenError:
            return False
        await server.stop()
        return True
    return asyncio.run(go())


def test_a_port_with_only_time_wait_connections_is_free_as_the_servers_find_it(tmp_path):
    port = time_wait_port()
    Supervisor(one_port_plan(tmp_path, port), lambda e: None).check_ports()     # no ClusterStartError
    assert server_starts(port)


def test_a_port_another_process_listens_on_is_in_use(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ClusterStartError, match=f"port {port} on 127.0.0.1 \\(broker-a-0\\) is in use"):
            Supervisor(one_port_plan(tmp_path, port), lambda e: None).check_ports()
        assert not server_starts(port)
