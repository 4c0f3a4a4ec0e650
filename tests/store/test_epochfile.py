"""The controller-mode epoch file: text, CRC vectors from the spec, Java's append rules, the consistent point."""
import pytest

from mqtool_store.epochfile import OPEN_END, EpochEntry, EpochFile, decode, encode, find_consistent_point, with_ends


@pytest.mark.parametrize("pairs, crc", [([(7, 7000), (8, 8000)], 773307083), ([(1, 0), (3, 4096)], 1131518206)])
def test_the_crc_covers_the_entry_lines_as_javas_checkpoint_file(pairs, crc):
    text = encode(with_ends(pairs))
    assert text.split("\n")[:2] == [str(len(pairs)), str(crc)]
    assert decode(text) == pairs


def test_a_damaged_file_falls_back_to_the_backup(tmp_path):
    f = EpochFile(tmp_path / "epochFileCheckpoint")
    assert f.append(1, 0) and f.append(2, 1000)
    assert not (tmp_path / "epochFileCheckpoint.bak").read_text().count("2-1000")   # the copy before the change
    (tmp_path / "epochFileCheckpoint").write_text("2\n5\n1-0\n2-1000\n")             # wrong CRC
    assert [(e.epoch, e.start) for e in EpochFile(f.path).load().entries] == [(1, 0)]
    (tmp_path / "epochFileCheckpoint").write_text("")
    assert EpochFile(f.path).load().last_epoch == 1
    assert decode("3\n0\n1-0\n2-5\n") is None                                       # count does not match


def test_a_zero_crc_is_not_checked():
    assert decode("2\n0\n1-0\n2-5\n") == [(1, 0), (2, 5)]


def test_append_needs_a_larger_epoch_and_a_larger_start(tmp_path):
    f = EpochFile(tmp_path / "e")
    assert f.append(1, 0)
    assert not f.append(1, 100)          # same epoch
    assert not f.append(2, 0)            # same start: an election with no data between keeps the old entry
    assert f.append(3, 100)
    assert [(e.epoch, e.start, e.end) for e in f.entries] == [(1, 0, 100), (3, 100, OPEN_END)]
    assert f.last_epoch == 3 and f.find_by_offset(99).epoch == 1 and f.find_by_offset(10 ** 12).epoch == 3


def test_truncations_rewrite_the_file_but_never_to_empty(tmp_path):
    f = EpochFile(tmp_path / "e")
    f.append(1, 0), f.append(2, 1000), f.append(4, 5000)
    f.truncate_suffix_by_offset(5000)
    assert [e.epoch for e in EpochFile(f.path).load().entries] == [1, 2]
    assert f.entries[-1].end == OPEN_END                 # the new last entry is open (Java meant to)
    f.truncate_suffix_by_epoch(2)
    assert [e.epoch for e in f.entries] == [1]
    f.truncate_prefix_by_offset(10 ** 6)             # the last entry is open: it stays
    assert [e.epoch for e in f.entries] == [1]
    f.truncate_suffix_by_epoch(1)
    assert f.entries == [] and EpochFile(f.path).load().last_epoch == 1      # an empty list is not written


def test_the_consistent_point_is_the_spec_example():
    master = with_ends([(1, 0), (2, 1000), (4, 5000)])
    old_master = with_ends([(1, 0), (2, 1000), (3, 4000)])
    assert find_consistent_point(old_master, 4600, master, 7000) == 4000
    # the same history: the shorter side's end
    assert find_consistent_point(with_ends([(1, 0)]), 300, with_ends([(1, 0)]), 900) == 300
    # nothing in common
    assert find_consistent_point(with_ends([(2, 10)]), 20, with_ends([(1, 0)]), 900) == -1
    assert find_consistent_point([EpochEntry(1, 0, 50)], 40, with_ends([(1, 0)]), 900) == 50
