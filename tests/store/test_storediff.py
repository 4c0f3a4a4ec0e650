"""compare_commitlogs on real 4.9.8 commitlogs: a master and slave copies damaged in known ways."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mqtool_store.errors import ReplicationError, StoreError, WrongKindError
from mqtool_store.mappedfiles import offset_to_file_name
from mqtool_store.reader import CommitLogReader
from mqtool_store.storediff import CHUNK, compare_commitlogs

FILE = 1048576  # mappedFileSizeCommitLog of the fixture; 3 files


@pytest.fixture(scope="module")
def master_records(basic_store) -> list[tuple[int, object]]:
    """Every record of the fixture, fully decoded: the independent account of what the master holds."""
    with CommitLogReader(basic_store / "commitlog") as r:
        recs = list(r.records())
    assert len(recs) == 2371
    return recs


def master_end(recs) -> int:
    off, rec = recs[-1]
    return off + rec.total_size


def copy_root(src: Path, dst: Path) -> Path:
    shutil.copytree(src / "commitlog", dst / "commitlog")
    return dst


def file_of(root: Path, offset: int) -> Path:
    return root / "commitlog" / offset_to_file_name(offset - offset % FILE)


def zero_from(root: Path, offset: int) -> None:
    """Zero a file's bytes from `offset` to its end, in place: the file keeps its full size."""
    path = file_of(root, offset)
    with open(path, "r+b") as f:
        f.seek(offset % FILE)
        f.write(bytes(FILE - offset % FILE))
    assert path.stat().st_size == FILE


def flip(root: Path, offset: int, mask: int = 0xFF) -> None:
    with open(file_of(root, offset), "r+b") as f:
        f.seek(offset % FILE)
        b = f.read(1)[0]
        f.seek(offset % FILE)
        f.write(bytes([b ^ mask]))


def first_record_after(recs, offset: int, topic: str | None = None):
    return next((o, r) for o, r in recs if o >= offset and (topic is None or r.topic == topic))


def test_identical_copies(basic_store, master_records, tmp_path):
    slave = copy_root(basic_store, tmp_path / "slave")
    d = compare_commitlogs(basic_store, slave)
    end = master_end(master_records)
    assert (d.master_min_offset, d.master_max_offset) == (0, end)
    assert (d.slave_min_offset, d.slave_max_offset) == (0, end)
    assert (d.common_min_offset, d.common_max_offset) == (0, end)
    assert d.first_difference is None
    assert (d.slave_lacks_bytes, d.slave_lacks_messages, d.slave_extra_bytes) == (0, 0, 0)
    assert d.first_lacking_store_timestamp is None
    assert d.files_only_on_master == d.files_only_on_slave == ()
    assert d.mapped_file_size == FILE
    assert d.in_sync
    assert json.loads(json.dumps(d.to_json()))["in_sync"] is True


def test_commitlog_dirs_accepted_and_other_paths_refused(basic_store, tmp_path):
    slave = copy_root(basic_store, tmp_path / "slave")
    d = compare_commitlogs(basic_store / "commitlog", slave / "commitlog")
    assert d.in_sync and d.slave_dir == str(slave / "commitlog")
    with pytest.raises(WrongKindError):
        compare_commitlogs(basic_store, basic_store / "consumequeue")


@pytest.mark.parametrize("where, last_file", [
    ("last", "kept"),      # lag inside the file being written
    ("middle", "deleted"),  # lag across a file boundary: the slave never got the last file
    ("middle", "zeroed"),  # ...or has it pre-allocated but empty
])
def test_slave_tail_missing(basic_store, master_records, tmp_path, where, last_file):
    slave = copy_root(basic_store, tmp_path / "slave")
    cut_at = 2 * FILE + 100_000 if where == "last" else FILE + 300_000
    cut, first_lacking = first_record_after(master_records, cut_at)
    zero_from(slave, cut)
    last = file_of(slave, 2 * FILE)
    if where == "middle" and last_file == "deleted":
        last.unlink()
    elif where == "middle":
        last.write_bytes(bytes(FILE))
    d = compare_commitlogs(basic_store, slave)
    end = master_end(master_records)
    assert d.slave_max_offset == cut and d.master_max_offset == end
    assert d.slave_end == "unwritten"
    assert (d.common_min_offset, d.common_max_offset) == (0, cut)
    assert d.first_difference is None
    assert d.slave_lacks_bytes == end - cut
    assert d.slave_lacks_messages == sum(1 for off, _ in master_records if off >= cut)
    assert d.slave_lacks_messages > (100 if where == "middle" else 0)
    assert d.first_lacking_store_timestamp == first_lacking.store_timestamp
    assert d.slave_extra_bytes == 0
    assert d.files_only_on_master == ((last.name,) if last_file == "deleted" else ())
    assert not d.in_sync


def test_empty_slave_lacks_everything(basic_store, master_records, tmp_path):
    slave = tmp_path / "slave"
    (slave / "commitlog").mkdir(parents=True)
    d = compare_commitlogs(basic_store, slave)
    assert (d.slave_min_offset, d.slave_max_offset) == (0, 0)
    assert d.slave_lacks_bytes == master_end(master_records)
    assert d.slave_lacks_messages == len(master_records)
    assert d.first_lacking_store_timestamp == master_records[0][1].store_timestamp
    assert len(d.files_only_on_master) == 3 and d.first_difference is None


def test_slave_that_joined_at_the_last_file(basic_store, master_records, tmp_path):
    slave = copy_root(basic_store, tmp_path / "slave")
    file_of(slave, 0).unlink()
    file_of(slave, FILE).unlink()
    d = compare_commitlogs(basic_store, slave)
    end = master_end(master_records)
    assert (d.master_min_offset, d.slave_min_offset) == (0, 2 * FILE)
    assert (d.common_min_offset, d.common_max_offset) == (2 * FILE, end)
    assert d.first_difference is None
    assert (d.slave_lacks_bytes, d.slave_lacks_messages, d.slave_extra_bytes) == (0, 0, 0)
    assert d.files_only_on_master == (offset_to_file_name(0), offset_to_file_name(FILE))
    assert d.files_only_on_slave == ()


@pytest.mark.parametrize("chunk", [CHUNK, 4096, 1000])
@pytest.mark.parametrize("field", ["body", "queue_offset"])
def test_flipped_byte_found_and_described(basic_store, master_records, tmp_path, chunk, field):
    slave = copy_root(basic_store, tmp_path / "slave")
    start, rec = first_record_after(master_records, FILE + 300_000, "TopicB")
    assert rec.sys_flag & 0x30 == 0 and len(rec.body) > 100  # IPv4 hosts: body at +88
    at = start + 88 + 77 if field == "body" else start + 27  # last byte of QUEUEOFFSET
    flip(slave, at, 0xFF if field == "body" else 0x01)
    later, _ = first_record_after(master_records, 2 * FILE + 50_000, "TopicB")
    flip(slave, later + 100)  # a second difference further on must not be the one reported
    d = compare_commitlogs(basic_store, slave, chunk_size=chunk)
    diff = d.first_difference
    assert diff is not None and diff.offset == at
    m = diff.master
    assert (m.offset, m.size, m.topic, m.queue_id, m.queue_offset, m.store_timestamp, m.error) == (
        start, rec.total_size, "TopicB", rec.queue_id, rec.queue_offset, rec.store_timestamp, None)
    s = diff.slave
    assert (s.offset, s.size, s.topic, s.queue_id, s.store_timestamp) == (
        start, rec.total_size, "TopicB", rec.queue_id, rec.store_timestamp)
    assert s.queue_offset == (rec.queue_offset if field == "body" else rec.queue_offset ^ 1)
    assert d.slave_max_offset == d.master_max_offset and d.slave_lacks_bytes == 0
    assert not d.in_sync
    j = json.loads(json.dumps(d.to_json()))
    assert j["first_difference"]["offset"] == at and j["first_difference"]["master"]["offset"] == start


def test_broken_record_on_slave_ends_its_valid_log(basic_store, master_records, tmp_path):
    """A flip that breaks a record (its magic code) makes the slave's valid log end there."""
    slave = copy_root(basic_store, tmp_path / "slave")
    start, _ = first_record_after(master_records, 2 * FILE + 70_000)
    flip(slave, start + 5)
    d = compare_commitlogs(basic_store, slave)
    assert d.slave_max_offset == start and d.slave_end.startswith("corrupt")
    assert d.master_end == "unwritten"
    assert d.slave_lacks_bytes == master_end(master_records) - start
    assert d.slave_lacks_messages == sum(1 for off, _ in master_records if off >= start)
    assert d.first_difference is None  # outside the common range [0, start)


def test_slave_longer_than_master(basic_store, master_records, tmp_path):
    master = copy_root(basic_store, tmp_path / "master")
    cut, _ = first_record_after(master_records, 2 * FILE + 100_000)
    zero_from(master, cut)
    d = compare_commitlogs(master, basic_store)
    end = master_end(master_records)
    assert (d.master_max_offset, d.slave_max_offset) == (cut, end)
    assert d.slave_extra_bytes == end - cut
    assert (d.slave_lacks_bytes, d.slave_lacks_messages) == (0, 0)
    assert d.first_lacking_store_timestamp is None
    assert d.first_difference is None and (d.common_min_offset, d.common_max_offset) == (0, cut)


def test_different_mapped_file_size_is_an_error(basic_store, tmp_path):
    """The same bytes re-cut into 512 KiB files cannot be a replica of 1 MiB files."""
    half = FILE // 2
    slave = tmp_path / "slave" / "commitlog"
    slave.mkdir(parents=True)
    for path in sorted((basic_store / "commitlog").iterdir()):
        data = path.read_bytes()
        for i in (0, 1):
            (slave / offset_to_file_name(int(path.name) + i * half)).write_bytes(data[i * half:(i + 1) * half])
    with pytest.raises(ReplicationError) as info:
        compare_commitlogs(basic_store, slave.parent)
    assert isinstance(info.value, StoreError)
    assert "1048576" in str(info.value) and "524288" in str(info.value)


def five_files(basic_store: Path, dst: Path) -> Path:
    """The fixture's files laid out as 0,1,0,1,2: their max offset is found in the last three,
    so the first two are checked only byte for byte (nothing here reads physical offsets)."""
    src = sorted((basic_store / "commitlog").iterdir())
    (dst / "commitlog").mkdir(parents=True)
    for i, j in enumerate((0, 1, 0, 1, 2)):
        shutil.copyfile(src[j], dst / "commitlog" / offset_to_file_name(i * FILE))
    return dst


@pytest.mark.parametrize("damage", ["missing", "short"])
def test_slave_file_missing_or_short_before_the_last_files(basic_store, master_records, tmp_path, damage):
    master = five_files(basic_store, tmp_path / "master")
    slave = copy_root(master, tmp_path / "slave")
    if damage == "missing":
        file_of(slave, FILE).unlink()
        at = FILE
    else:
        at = FILE + 500_000
        with open(file_of(slave, FILE), "r+b") as f:
            f.truncate(500_000)
    d = compare_commitlogs(master, slave)
    assert d.master_max_offset == d.slave_max_offset == 2 * FILE + master_end(master_records)
    assert d.first_difference is not None and d.first_difference.offset == at
    start, rec = [(o, r) for o, r in master_records if o <= at][-1]
    m = d.first_difference.master
    assert (m.offset, m.topic, m.queue_offset, m.size) == (start, rec.topic, rec.queue_offset, rec.total_size)
    s = d.first_difference.slave
    if damage == "missing":
        assert s is None and d.files_only_on_master == (offset_to_file_name(FILE),)
    else:  # the record runs past the slave file's end
        assert s.offset == start and s.size == rec.total_size and s.topic is None and s.error


def test_a_preallocated_empty_file_is_not_a_file_only_on_one_side(basic_store, master_records, tmp_path):
    """A running broker creates its next commitlog file ahead of time, all zeros: no data, no difference."""
    slave = copy_root(basic_store, tmp_path / "slave")
    last = sorted((slave / "commitlog").iterdir())[-1]
    nxt = slave / "commitlog" / f"{int(last.name) + FILE:020d}"
    nxt.write_bytes(bytes(FILE))
    d = compare_commitlogs(basic_store, slave)
    assert d.files_only_on_slave == () and d.in_sync
