"""AutoSwitch HA frames, one field a line, both directions, fed a byte at a time."""
import pytest

from mqtool_store.ha.autoswitch import (MasterFrameReader, MasterHandshake, SlaveFrameReader, SlaveHandshake,
                                        Transfer, master_handshake, slave_handshake, slave_report, transfer_header)
from mqtool_store.ha.protocol import HAProtocolError

GOLDEN_SLAVE_HANDSHAKE = bytes.fromhex(
    "00000001"             # state HANDSHAKE
    "0001"                 # isSyncFromLastFile
    "0000"                 # isAsyncLearner
    "0000000000000002")    # slave controller brokerId
GOLDEN_MASTER_HANDSHAKE = bytes.fromhex(
    "00000001"             # state HANDSHAKE
    "00000018"             # bodySize: 2 entries x 12
    "0000000000001b58"     # master max offset 7000
    "00000004"             # last epoch
    "00000001" "0000000000000000"      # (1, 0)
    "00000004" "0000000000001388")     # (4, 5000)
GOLDEN_TRANSFER = bytes.fromhex(
    "00000002"             # state TRANSFER
    "00000003"             # bodySize
    "0000000000001388"     # offset 5000
    "00000004"             # epoch
    "0000000000001388"     # epoch start 5000
    "0000000000001380"     # confirmOffset 4992
    "616263")              # body


def test_frames_are_the_spec_bytes():
    assert slave_handshake(2, sync_from_last_file=True) == GOLDEN_SLAVE_HANDSHAKE
    assert slave_report(4096) == bytes.fromhex("00000002" "0000000000001000")
    assert master_handshake(7000, [(1, 0), (4, 5000)]) == GOLDEN_MASTER_HANDSHAKE
    assert master_handshake(0, []) == bytes.fromhex("00000001" "00000000" "0000000000000000" "ffffffff")
    assert transfer_header(5000, 3, 4, 5000, 4992) + b"abc" == GOLDEN_TRANSFER


def byte_by_byte(reader, data):
    out = []
    for i in range(len(data)):
        out += reader.feed(data[i:i + 1])
    return out


def test_the_master_reads_handshakes_and_reports_split_anywhere():
    got = byte_by_byte(SlaveFrameReader(), GOLDEN_SLAVE_HANDSHAKE + slave_report(7) + slave_report(9))
    assert got == [SlaveHandshake(2, True, False), 7, 9]


def test_the_slave_reads_the_handshake_and_transfers_split_anywhere():
    got = byte_by_byte(MasterFrameReader(), GOLDEN_MASTER_HANDSHAKE + GOLDEN_TRANSFER + transfer_header(5003, 0, 4, 5000, 5003))
    assert got == [MasterHandshake(7000, 4, ((1, 0), (4, 5000))), Transfer(5000, 4, 5000, 4992, b"abc"),
                   Transfer(5003, 4, 5000, 5003, b"")]


@pytest.mark.parametrize("reader, data", [(SlaveFrameReader(), bytes.fromhex("00000007" "0000000000000000")),
                                          (SlaveFrameReader(), bytes.fromhex("00000002" "ffffffffffffffff")),
                                          (MasterFrameReader(), bytes.fromhex("00000009" "00000000")),
                                          (MasterFrameReader(), bytes.fromhex("00000001" "00000005"))])
def test_bytes_no_peer_sends_are_refused(reader, data):
    with pytest.raises(HAProtocolError):
        reader.feed(data)
