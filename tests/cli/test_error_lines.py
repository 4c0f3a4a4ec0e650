"""Error lines that say what is wrong (issue 44, item 6): the file that is not Parquet, the option
whose @file is missing, the id that is no message id. Each fails before any server or Spark."""
from __future__ import annotations

import pytest

from tests.conftest import run_cli


def one_error_line(proc, code: int = 2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_replay_of_a_file_that_is_not_parquet_says_so(tmp_path):
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 16)
    line = one_error_line(run_cli("spark", "replay", garbage, "-t", "X", "-n", "127.0.0.1:1"))
    assert f"{garbage}: not a Parquet file" in line and "body column" not in line


def test_replay_of_a_directory_without_parquet_says_so(tmp_path):
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")
    (tmp_path / "notes.txt").write_text("hello")
    line = one_error_line(run_cli("spark", "replay", tmp_path, "-t", "X", "-n", "127.0.0.1:1"))
    assert f"{tmp_path}: no Parquet files in it" in line


def test_queue_offsets_from_a_missing_file_names_the_option(tmp_path, basic_store):
    missing = tmp_path / "missing.json"
    line = one_error_line(run_cli("spark", "export", basic_store, "-o", tmp_path / "out",
                                  "--queue-offsets", f"@{missing}"))
    assert "--queue-offsets" in line and str(missing) in line and "no such file" in line
    assert "Errno" not in line


@pytest.mark.parametrize("msg_id", ["zzz", "7F000001", "7F00000100002A9F00000000000004DZ"])
@pytest.mark.parametrize("with_topic", [False, True])
def test_message_query_of_what_is_no_message_id(msg_id, with_topic):
    topic = ["-t", "T"] if with_topic else []
    line = one_error_line(run_cli("message", "query", "--id", msg_id, *topic, "-n", "127.0.0.1:1"))
    assert f"{msg_id} is not a message id" in line and "-t TOPIC" not in line


def test_store_query_of_what_is_no_message_id(basic_store):
    line = one_error_line(run_cli("store", "query", basic_store, "--msg-id", "zzz"))
    assert "zzz is not a message id" in line and "give --topic" not in line
