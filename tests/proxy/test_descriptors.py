"""mqtool/proxy/descriptors.py FILES is what protoc makes of mqtool/proxy/protos: compiled again here
(grpcio-tools) and compared. `python -m tests.proxy.test_descriptors` prints a new FILES."""
from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

PROTOS = Path(__file__).parents[2] / "mqtool" / "proxy" / "protos"
NAMES = ["apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto"]


def compiled() -> dict[str, bytes]:
    from google.protobuf import descriptor_pb2
    import grpc_tools
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTOS}", f"-I{include}",
                        f"--descriptor_set_out={out}", *NAMES], check=True, capture_output=True)
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return {f.name: f.SerializeToString() for f in files}


def test_committed_descriptors_are_the_protos():
    pytest.importorskip("grpc_tools")
    from mqtool.proxy.descriptors import FILES
    assert {name: base64.b64decode("".join(chunks)) for name, chunks in FILES.items()} == compiled()


def test_field_numbers_are_upstream_ones():
    """A few numbers 2.0.4 fixes, read back from the loaded descriptors (a typo in the .proto shows here too)."""
    from mqtool.proxy.descriptors import pb
    sp = pb.SystemProperties.DESCRIPTOR.fields_by_name
    assert (sp["message_id"].number, sp["delivery_timestamp"].number, sp["message_group"].number,
            sp["orphaned_transaction_recovery_duration"].number) == (3, 11, 17, 19)
    tc = pb.TelemetryCommand.DESCRIPTOR.fields_by_name
    assert (tc["settings"].number, tc["recover_orphaned_transaction_command"].number) == (2, 5)
    assert pb.SendResultEntry.DESCRIPTOR.fields_by_name["recall_handle"].number == 5
    assert pb.pool.FindEnumTypeByName("apache.rocketmq.v2.Code").values_by_name["CLIENT_ID_REQUIRED"].number == 40017


if __name__ == "__main__":
    for name, data in compiled().items():
        lines = textwrap.wrap(base64.b64encode(data).decode(), 100)
        print(f'    "{name}": (\n' + "\n".join(f'        "{line}"' for line in lines) + "),")
