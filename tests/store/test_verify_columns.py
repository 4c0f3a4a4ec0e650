"""`store verify` on columns gives the reports the record-by-record verify gave (its code is kept
as tests/store/verify_reference.py): same findings, same order, same suppressed counts, on real
stores, engine-written stores and stores damaged in every way the generator below knows."""
from __future__ import annotations

import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mqtool_store.codes import SCHEDULE_TOPIC
from mqtool_store.messagestore import Message, MessageStore
from mqtool_store.storeconfig import MessageStoreConfig
from mqtool_store.verify import verify_store

from . import verify_reference
from .varied import damage, varied_records, write_commitlog

SMALL = dict(mappedFileSizeCommitLog=48 * 1024, mappedFileSizeConsumeQueue=400, maxHashSlotNum=50, maxIndexNum=200)


def same_report(root) -> dict:
    got = verify_store(root).to_dict()
    want = verify_reference.verify_store(root).to_dict()
    assert got == want
    return got


@pytest.fixture(scope="module")
def engine_store(tmp_path_factory):
    """Several topics and queues, keys of every shape, delayed and transactional records."""
    root = tmp_path_factory.mktemp("engine") / "store"
    rng = random.Random(5)
    with MessageStore(MessageStoreConfig(storePathRootDir=str(root), **SMALL)) as s:
        for i in range(400):
            props = {"TAGS": rng.choice(["A", "B", "C"])}
            if i % 3:
                props["KEYS"] = rng.choice([f"k{i}", f"a{i} b{i}", "shared"])
            if i % 4 == 0:
                props["UNIQ_KEY"] = f"{i:032X}"
            topic, queue, sys_flag = rng.choice(["T1", "T2", "Other"]), rng.randrange(3), 0
            if i % 37 == 0:
                topic, queue, props["DELAY"] = SCHEDULE_TOPIC, 2, "3"
            elif i % 41 == 0:
                sys_flag = 4          # a prepared transaction message: no consume queue unit
            elif i % 43 == 0:
                sys_flag = 12         # rolled back: no unit and no index entry
            s.put(Message(topic, queue, rng.randbytes(rng.randrange(200)), props, sys_flag=sys_flag))
    return root


def test_real_stores(basic_store, crashed_store):
    assert same_report(basic_store)["ok"]
    same_report(crashed_store)


def test_engine_store_is_clean(engine_store):
    got = same_report(engine_store)
    assert got["ok"] and got["records"] == 400 and got["index_entries"] > 300


def test_varied_records_and_damaged_commitlogs(tmp_path):
    reports = []
    for k, how in enumerate([None, "garbage", "size", "magic", "zeros", "body_len"]):
        root = tmp_path / f"s{k}"
        paths = write_commitlog(root / "commitlog", varied_records(120, seed=k))
        if how:
            damage(paths[0], how)
        reports.append(same_report(root))
    assert all(not r["ok"] for r in reports[1:])


def _damage_store(root, rng: random.Random, count: int) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name not in ("lock", "abort"))
    for _ in range(count):
        path = rng.choice(files)
        data = bytearray(path.read_bytes())
        if not data:
            continue
        how = rng.randrange(6)
        at = rng.randrange(len(data))
        if how == 0:                              # a flipped byte
            data[at] ^= 1 << rng.randrange(8)
        elif how == 1:                            # zeros over a range
            n = len(data[at:at + rng.randrange(1, 64)])
            data[at:at + n] = bytes(n)
        elif how == 2 and "consumequeue" in path.parts:   # two units swapped
            n = len(data) // 20
            if n > 1:
                i, j = rng.randrange(n), rng.randrange(n)
                data[i * 20:i * 20 + 20], data[j * 20:j * 20 + 20] = data[j * 20:j * 20 + 20], data[i * 20:i * 20 + 20]
        elif how == 3 and "consumequeue" in path.parts:   # a unit dropped, the rest moved up
            i = rng.randrange(len(data) // 20) * 20
            data[i:] = data[i + 20:] + bytes(20)
        elif how == 4:                            # a random 4-byte value
            data[at:at + 4] = rng.randbytes(len(data[at:at + 4]))
        else:                                     # a file cut short
            data = data[:at]
        path.write_bytes(bytes(data))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32), st.integers(1, 8))
def test_damaged_engine_stores(engine_store, tmp_path_factory, seed, count):
    root = tmp_path_factory.mktemp("damaged") / "store"
    shutil.copytree(engine_store, root)
    _damage_store(root, random.Random(seed), count)
    same_report(root)


def test_suppressed_counts_match(engine_store, tmp_path):
    """Past 50 findings an area only counts them: the counts agree too."""
    root = tmp_path / "store"
    shutil.copytree(engine_store, root)
    for path in (p for p in (root / "consumequeue").rglob("0*") if p.is_file()):
        data = bytearray(path.read_bytes())
        for i in range(0, len(data) - 20, 20):
            data[i + 11] ^= 0x10                  # every unit's size is off
        path.write_bytes(bytes(data))
    for path in (root / "index").iterdir():
        data = bytearray(path.read_bytes())
        data[-20 * 150:] = bytes(20 * 150)
        path.write_bytes(bytes(data))
    got = same_report(root)
    assert got["suppressed"]["consumequeue"] > 100


@pytest.mark.parametrize("seed", range(6))
def test_small_chunks_give_the_same_reports(engine_store, tmp_path, monkeypatch, seed):
    """Index entries and keys are taken in chunks: chunk edges do not change a finding."""
    from mqtool_store import verify
    monkeypatch.setattr(verify, "INDEX_CHUNK", 7)
    monkeypatch.setattr(verify, "KEY_BATCH", 5)
    root = tmp_path / "store"
    shutil.copytree(engine_store, root)
    if seed:
        _damage_store(root, random.Random(seed), 4)
    same_report(root)


@pytest.mark.parametrize("seed", range(4))
def test_the_record_by_record_pass_gives_the_same_reports(engine_store, tmp_path, monkeypatch, seed):
    """Where the header scan and a full decode would part ways, a file is decoded record by
    record (no store tried so far needs it): that pass reports the same too."""
    from mqtool_store import verify
    monkeypatch.setattr(verify, "_fast_end", lambda buf, ranges=None: None)
    root = tmp_path / "store"
    shutil.copytree(engine_store, root)
    if seed:
        _damage_store(root, random.Random(100 + seed), 4)
    same_report(root)
    paths = write_commitlog(tmp_path / "varied" / "commitlog", varied_records(120, seed=seed))
    damage(paths[0], ["garbage", "size", "magic", "zeros"][seed])
    same_report(tmp_path / "varied")


def test_progress_covers_every_commitlog_byte(engine_store, monkeypatch):
    from mqtool_store import logscan
    monkeypatch.setattr(logscan, "_TABLE_CHUNK", 50)        # several header tables per file
    told = []
    assert verify_store(engine_store, progress=told.append).ok
    files = sorted((engine_store / "commitlog").iterdir())
    assert sum(told) == sum(p.stat().st_size for p in files) and len(told) > len(files)
    assert all(n >= 0 for n in told)
