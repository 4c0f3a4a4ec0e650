"""Which sizes an offline writer takes, and why (issue 44, item 8): given, -c broker.conf, the
store's own files, a broker.conf beside the store that is this store's, RocketMQ's defaults."""
from __future__ import annotations

import shutil

from mqtool.cli.storesizes import choose_sizes

NONE_GIVEN = {"mappedFileSizeConsumeQueue": None, "maxHashSlotNum": None, "maxIndexNum": None}


def test_the_stores_own_files_come_before_a_conf_beside_it_and_the_defaults(basic_store, tmp_path):
    root = tmp_path / "b" / "store"
    shutil.copytree(basic_store, root)
    (root.parent / "broker.conf").write_text("mappedFileSizeConsumeQueue=200\n")
    sizes, why = choose_sizes(root, NONE_GIVEN, None, {})
    assert sizes == {"mappedFileSizeConsumeQueue": "6000", "maxHashSlotNum": "1000", "maxIndexNum": "4000"}
    assert why == {"mappedFileSizeConsumeQueue": "the size of the store's consume queue files",
                   "index": "the size of the store's index files"}


def test_options_and_the_given_conf_come_first(basic_store, tmp_path):
    conf = tmp_path / "broker.conf"
    sizes, why = choose_sizes(basic_store, {**NONE_GIVEN, "maxHashSlotNum": 10}, conf,
                              {"mappedFileSizeConsumeQueue": "600", "maxIndexNum": "40"})
    assert sizes == {"mappedFileSizeConsumeQueue": "600", "maxHashSlotNum": "10", "maxIndexNum": "40"}
    assert why == {"mappedFileSizeConsumeQueue": f"from {conf}", "index": "given with --max-hash-slot-num"}


def test_a_conf_beside_the_store_counts_only_when_it_is_this_stores(basic_store, tmp_path):
    root = tmp_path / "b" / "store"
    shutil.copytree(basic_store, root)
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    conf = root.parent / "broker.conf"
    conf.write_text(f"storePathRootDir={tmp_path / 'elsewhere'}\nmappedFileSizeConsumeQueue=200\n")
    sizes, why = choose_sizes(root, NONE_GIVEN, None, {})
    assert sizes == {"mappedFileSizeConsumeQueue": "6000000", "maxHashSlotNum": "5000000", "maxIndexNum": "20000000"}
    assert why["mappedFileSizeConsumeQueue"].startswith("RocketMQ's default")
    conf.write_text(f"storePathRootDir={root}\nmappedFileSizeConsumeQueue=200\n")
    sizes, why = choose_sizes(root, NONE_GIVEN, None, {})
    assert sizes["mappedFileSizeConsumeQueue"] == "200" and sizes["maxHashSlotNum"] == "5000000"
    assert why == {"mappedFileSizeConsumeQueue": f"from {conf}, beside the store",
                   "index": "RocketMQ's default: no such files in the store, no broker.conf beside it"}
