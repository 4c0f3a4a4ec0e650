"""Every offline command that reads store files exits 1 on bytes it cannot read (issue 44, item 5):
one line on stderr, no traceback, never a quiet 0 beside a "corrupt" in the output."""
from __future__ import annotations

import random

import pytest

from tests.conftest import run_cli

CQ_FILE = "consumequeue/T/0/00000000000000000000"
INDEX_FILE = "index/20260101000000000"
CONFIGS = ("topics.json", "subscriptionGroup.json", "consumerOffset.json", "delayOffset.json")


def _garbage(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def write_garbage_store(root, parts=("commitlog", "consumequeue", "index", "checkpoint", "config")):
    """A store root whose files (those of `parts`) hold random bytes; the others are absent."""
    (root / "commitlog").mkdir(parents=True)
    files = {"commitlog": ["commitlog/00000000000000000000"], "consumequeue": [CQ_FILE], "index": [INDEX_FILE],
             "checkpoint": ["checkpoint"], "config": [f"config/{name}" for name in CONFIGS]}
    sizes = {"commitlog": 65536, "consumequeue": 6000, "index": 8192, "checkpoint": 4096, "config": 300}
    for seed, part in enumerate(parts):
        for name in files[part]:
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_garbage(sizes[part], seed + len(name)))
    return root


@pytest.fixture(scope="module")
def garbage(tmp_path_factory):
    base = tmp_path_factory.mktemp("garbage")
    write_garbage_store(base / "store")
    (base / "garbage.bin").write_bytes(_garbage(4096, 44))
    return base


def assert_unreadable(proc):
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr


STORE_COMMANDS = [
    ("store", "stats", "{s}"),
    ("store", "stats", "{s}", "--json"),
    ("store", "verify", "{s}"),
    ("store", "dump", "{s}"),
    ("store", "dump", "{s}", "--json"),
    ("store", "dump", "{s}/commitlog"),
    ("store", "dump", "{s}/commitlog/00000000000000000000"),
    ("store", "dump", "{s}/consumequeue"),
    ("store", "dump", "{s}/" + CQ_FILE),
    ("store", "dump", "{s}/index"),
    ("store", "dump", "{s}/" + INDEX_FILE),
    ("store", "dump", "{s}/checkpoint"),
    ("store", "dump", "{s}/checkpoint", "--json"),
    ("store", "dump", "{s}/config/topics.json"),
    ("store", "dump", "{s}", "--kind", "root"),
    ("store", "dump", "{s}/commitlog", "--kind", "commitlog-dir"),
    ("store", "dump", "{s}/consumequeue", "--kind", "consumequeue-dir"),
    ("store", "dump", "{s}/index", "--kind", "index-dir"),
    ("store", "query", "{s}", "--offset", "0"),
    ("store", "query", "{s}", "--topic", "T", "--key", "k"),
    ("store", "query", "{s}", "--msg-id", "7F00000100002A9F0000000000000000"),
    ("ha", "status", "--store", "{s}", "--store", "{s}"),
]


@pytest.mark.parametrize("args", STORE_COMMANDS, ids=lambda a: " ".join(a).replace("{s}", "S"))
def test_each_command_exits_1_on_a_garbage_store(garbage, args):
    s = str(garbage / "store")
    assert_unreadable(run_cli(*(a.replace("{s}", s) for a in args)))


# Every --kind that names a file's contents; `abort` and `lock` are markers whose contents no
# broker reads (Java creates both empty or ignores them), so any bytes there are fine: exit 0.
@pytest.mark.parametrize("kind", ["commitlog", "consumequeue", "index", "checkpoint", "config"])
def test_dump_of_a_garbage_file_as_each_kind_exits_1(garbage, kind):
    assert_unreadable(run_cli("store", "dump", garbage / "garbage.bin", "--kind", kind))


@pytest.mark.parametrize("kind", ["abort", "lock"])
def test_marker_kinds_do_not_read_contents(garbage, kind):
    assert run_cli("store", "dump", garbage / "garbage.bin", "--kind", kind).returncode == 0


@pytest.mark.parametrize("part", ["commitlog", "consumequeue", "index", "checkpoint", "config"])
def test_stats_exits_1_when_any_one_part_is_garbage(tmp_path, part):
    """The issue's case first: a commit log of random bytes alone was "corrupt: bad record", exit 0."""
    root = write_garbage_store(tmp_path / "store", parts=(part,))
    proc = run_cli("store", "stats", root)
    assert_unreadable(proc)


def test_stats_names_the_corrupt_commitlog_file(tmp_path):
    root = write_garbage_store(tmp_path / "store", parts=("commitlog",))
    proc = run_cli("store", "stats", root)
    assert "00000000000000000000" in proc.stderr and "offset 0" in proc.stderr


def test_a_clean_store_still_exits_0(basic_store):
    for args in (("store", "stats", basic_store), ("store", "dump", basic_store / "checkpoint"),
                 ("ha", "status", "--store", basic_store, "--store", basic_store)):
        proc = run_cli(*args)
        assert proc.returncode == 0, (args, proc.stderr)


def test_recover_plans_the_cut_of_garbage_and_exits_0(tmp_path):
    """Recovery is the command for unreadable bytes: its plan (what it would cut and keep) is its
    answer, the one the broker's own start would carry out."""
    proc = run_cli("store", "recover", write_garbage_store(tmp_path / "store"), "--json")
    assert proc.returncode == 0 and '"commitlog_cuts": [{' in proc.stdout
