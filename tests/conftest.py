"""Shared fixtures: the Apache RocketMQ 4.9.8 stores, extracted once per session."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from mqtool.cluster.lifeline import die_with_parent

# Property tests (tests/*/test_fuzz_*.py): the default run is small and derandomized, so CI stays fast
# and repeatable. MQTOOL_FUZZ=1 selects the "fuzz" profile: random, MQTOOL_FUZZ_EXAMPLES (600) a test,
# over 100,000 inputs in all (README, "Fuzzing"):
#   MQTOOL_FUZZ=1 python -m pytest tests -k fuzz --timeout 0 --hypothesis-show-statistics
settings.register_profile("quick", max_examples=12, deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("fuzz", max_examples=int(os.environ.get("MQTOOL_FUZZ_EXAMPLES", "600")), deadline=None,
                          suppress_health_check=list(HealthCheck))
settings.load_profile("fuzz" if os.environ.get("MQTOOL_FUZZ") else "quick")

DATA = Path(__file__).parent / "data" / "rocketmq-4.9.8"
REPO = Path(__file__).parent.parent


def _extract(tmp_path_factory, name: str) -> Path:
    target = tmp_path_factory.mktemp(name)
    with tarfile.open(DATA / f"{name}.tar.gz") as tar:
        tar.extractall(target, filter="data")
    return target / "store"


@pytest.fixture(scope="session")
def basic_store(tmp_path_factory) -> Path:
    """A pristine extracted copy: tests must not modify it (copy it first; see `store_copy`)."""
    return _extract(tmp_path_factory, "basic")


@pytest.fixture(scope="session")
def crashed_store(tmp_path_factory) -> Path:
    return _extract(tmp_path_factory, "crashed")


@pytest.fixture
def store_copy(tmp_path):
    """Return a function that copies a store root into this test's tmp dir."""
    import shutil

    def copy(src: Path) -> Path:
        dst = tmp_path / "store"
        shutil.copytree(src, dst)
        return dst
    return copy


@pytest.fixture(scope="session")
def basic_truth() -> list[dict]:
    with gzip.open(DATA / "basic.truth.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="session")
def crashed_sent() -> list[dict]:
    with gzip.open(DATA / "crashed.sent.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def run_cli(*args: str, input: str | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run `python -m mqtool ARGS` as a user would; returns the completed process."""
    proc = subprocess.run([sys.executable, "-m", "mqtool", *map(str, args)], capture_output=True,
                          text=True, input=input, cwd=REPO, timeout=120,
                          preexec_fn=die_with_parent())     # a server started here ends with the tests
    if check and proc.returncode != 0:
        raise AssertionError(f"mqtool {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(params=["kernel", "python"])
def store_kernel(request, monkeypatch):
    """Run a store test with the compiled kernel (store/csrc/) and without it: both paths
    must write the same bytes. "kernel" is skipped where it was not built (no C compiler)."""
    from mqtool_store import dispatch, dumpjson, indexwriter, kernel, messagestore, properties, pullbody, recordrun, stats
    if request.param == "kernel" and kernel.kernel is None:
        pytest.skip("the store kernel is not built here")
    chosen = kernel.kernel if request.param == "kernel" else None
    monkeypatch.setattr(recordrun, "kernel", chosen)
    monkeypatch.setattr(indexwriter, "kernel", chosen)
    monkeypatch.setattr(dispatch, "kernel", chosen)
    monkeypatch.setattr(messagestore, "kernel", chosen)
    monkeypatch.setattr(stats, "kernel", chosen)
    monkeypatch.setattr(properties, "kernel", chosen)
    monkeypatch.setattr(pullbody, "kernel", chosen)
    monkeypatch.setattr(dumpjson, "kernel", chosen)
    monkeypatch.setattr(kernel, "kernel", chosen)      # (read at call time by mqtool/broker/send.py)
    return chosen
