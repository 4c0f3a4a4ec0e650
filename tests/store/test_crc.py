"""The body CRC: ISA-L's crc32 when installed, zlib's otherwise, the same numbers either way."""
import subprocess
import sys
import zlib

from hypothesis import given, settings, strategies as st

from mqtool_store import crc


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=9000))
def test_the_fast_crc_is_zlibs(data):
    want = zlib.crc32(data)
    assert crc.crc32(data) == want
    assert crc.crc32(memoryview(data)) == want
    assert crc.crc32(bytearray(data)) == want
    assert crc.body_crc(data) == want & 0x7FFFFFFF


def test_isal_is_what_the_store_uses_when_installed():
    import importlib.util
    assert crc.FAST == (importlib.util.find_spec("isal") is not None)


def test_without_isal_the_store_falls_back_to_zlib():
    code = ("import sys; sys.modules['isal'] = None\n"
            "from mqtool_store import crc\n"
            "print(crc.FAST, crc.crc32.__module__, crc.body_crc(b'RocketMQ' * 100))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "zlib", str(zlib.crc32(b"RocketMQ" * 100) & 0x7FFFFFFF)]
