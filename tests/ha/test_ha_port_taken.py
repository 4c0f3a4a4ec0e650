"""A taken HA port (listenPort + 1) is one clear error, and the broker leaves nothing running: its
ports are free and its store is shut (no abort file), in 4.x mode and in controller mode alike."""
from __future__ import annotations

import asyncio
import socket

import pytest

from mqtool.broker.config import BrokerConfig
from mqtool.broker.controller import BrokerController
from tests.servers import free_port_pair


@pytest.mark.parametrize("controller_mode", [False, True])
def test_a_taken_ha_port_is_one_clear_error_and_nothing_is_left_running(tmp_path, controller_mode):
    port = free_port_pair()
    extra = {"enableControllerMode": True, "controllerAddr": "127.0.0.1:1"} if controller_mode else {}
    config = BrokerConfig(brokerName="b", listenPort=port, storePathRootDir=str(tmp_path / "b"), **extra)

    async def scenario():
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", port + 1))
            taken.listen()
            with pytest.raises(OSError, match=rf"^cannot listen on the HA port {port + 1} \(listenPort \+ 1\): "):
                await BrokerController(config).start("127.0.0.1")
    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert not (tmp_path / "b" / "abort").exists()
    for p in (port - 2, port):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))          # the broker's ports were given back
