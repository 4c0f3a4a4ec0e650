import pytest

from mqtool_store.errors import NotFoundError, WrongKindError
from mqtool_store.layout import Kind, detect_kind


def test_detects_every_kind(basic_store):
    s = basic_store
    assert detect_kind(s) is Kind.ROOT
    assert detect_kind(s / "commitlog") is Kind.COMMITLOG_DIR
    assert detect_kind(s / "commitlog" / "00000000000000000000") is Kind.COMMITLOG_FILE
    assert detect_kind(s / "consumequeue") is Kind.CONSUMEQUEUE_DIR
    assert detect_kind(s / "consumequeue" / "TopicA") is Kind.CONSUMEQUEUE_DIR
    assert detect_kind(s / "consumequeue" / "TopicA" / "0") is Kind.CONSUMEQUEUE_DIR
    assert detect_kind(s / "consumequeue" / "TopicA" / "0" / "00000000000000000000") is Kind.CONSUMEQUEUE_FILE
    assert detect_kind(s / "index") is Kind.INDEX_DIR
    assert detect_kind(s / "index" / "20261122112332260") is Kind.INDEX_FILE
    assert detect_kind(s / "checkpoint") is Kind.CHECKPOINT
    assert detect_kind(s / "config" / "topics.json") is Kind.CONFIG
    assert detect_kind(s / "config" / "topics.json.bak") is Kind.CONFIG
    assert detect_kind(s / "lock") is Kind.LOCK


def test_sniffs_moved_files(basic_store, tmp_path):
    cl = tmp_path / "00000000000000000000"
    cl.write_bytes((basic_store / "commitlog" / "00000000000000000000").read_bytes()[:4096])
    assert detect_kind(cl) is Kind.COMMITLOG_FILE
    cq = tmp_path / "x" / "00000000000000000000"
    cq.parent.mkdir()
    cq.write_bytes((basic_store / "consumequeue" / "TopicA" / "0" / "00000000000000000000").read_bytes())
    assert detect_kind(cq) is Kind.CONSUMEQUEUE_FILE


def test_bad_paths(tmp_path):
    with pytest.raises(NotFoundError):
        detect_kind(tmp_path / "nope")
    with pytest.raises(WrongKindError):
        detect_kind(tmp_path)
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(WrongKindError):
        detect_kind(tmp_path / "notes.txt")
