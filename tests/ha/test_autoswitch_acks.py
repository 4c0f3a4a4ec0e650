"""What a controller-mode master takes as a replica's acknowledgement, over a real socket: a
report past the master's own end (a replica that holds data this master never had, such as the
promoted replica of a newer term still reporting to a master that was paused) is no ack of
anything here. The connection closes with the reason logged, and a put stays unacknowledged."""
from __future__ import annotations

import asyncio
import logging

from mqtool.ha.autoswitch import AutoSwitchHA
from mqtool_store.epochfile import EpochFile
from mqtool_store.ha.autoswitch import slave_handshake, slave_report
from mqtool_store.storeconfig import MessageStoreConfig
from tests.ha.test_autoswitch_rules import FakeStore


async def _master_with_replica(tmp_path, report: int):
    ha = AutoSwitchHA(FakeStore(), MessageStoreConfig(storePathRootDir=str(tmp_path), slaveTimeout=300,
                                                    allAckInSyncStateSet=True),
                      EpochFile(tmp_path / "epochs"), my_id=lambda: 1)
    ha.epochs.append(1, 0)
    ha.is_master = True
    ha.set_sync_state_set(frozenset({1, 2}), 2)
    await ha.start("127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", ha.port)
    writer.write(slave_handshake(2) + slave_report(report))
    await writer.drain()
    return ha, reader, writer


def test_a_report_past_the_masters_end_closes_the_connection_and_acks_nothing(tmp_path, caplog):
    async def run():
        ha, reader, writer = await _master_with_replica(tmp_path, 1000 + 500)
        try:
            async with asyncio.timeout(5):
                while await reader.read(1 << 16):        # the handshake, then the master's close
                    pass
            assert not ha.connections
            assert await ha.wait_replicated(1000) is False      # the put ending at the master's end
        finally:
            writer.close()
            await ha.stop()
    with caplog.at_level(logging.WARNING, logger="mqtool.ha"):
        asyncio.run(run())
    assert any("reported offset 1500 beyond the master's max offset 1000" in r.getMessage() for r in caplog.records)


def test_a_report_at_the_masters_end_acknowledges_the_put(tmp_path):
    async def run():
        ha, reader, writer = await _master_with_replica(tmp_path, 1000)
        try:
            async with asyncio.timeout(5):
                assert await ha.wait_replicated(1000) is True
            assert [c.ack_offset for c in ha.connections] == [1000]
        finally:
            writer.close()
            await ha.stop()
    asyncio.run(run())
