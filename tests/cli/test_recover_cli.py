"""`mqtool store recover` on damaged copies of the real stores."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import json_lines, run_cli


def test_plan_then_apply_on_crashed_store(crashed_store, store_copy):
    s = store_copy(crashed_store)
    before = {p: p.read_bytes() for p in s.rglob("*") if p.is_file()}
    plan = json_lines(run_cli("store", "recover", s, "--json", check=True).stdout)[0]
    assert plan["abnormal"] and not plan["applied"] and plan["valid_end"] == 2486170
    assert {p: p.read_bytes() for p in s.rglob("*") if p.is_file()} == before   # a plan changes nothing
    human = run_cli("store", "recover", s, check=True).stdout
    assert "would keep index file" in human and "--apply" in human     # Java would drop it and lose its entries
    assert plan["redispatch_from"] == plan["vouched_until"] > 2097152    # the unvouched tail, not the whole file
    done = run_cli("store", "recover", s, "--apply", check=True).stdout
    assert "re-dispatched from commitlog offset" in done
    assert not list(s.glob("recovery-backup-*"))           # nothing cut from the commit log: nothing to keep
    assert not (s / "abort").exists()
    verify = run_cli("store", "verify", s)
    assert verify.returncode == 0, verify.stdout
    assert "2671 records" in verify.stdout


def test_torn_tail_is_cut_and_saved(basic_store, store_copy):
    s = store_copy(basic_store)
    f = s / "commitlog" / "00000000000002097152"
    data = bytearray(f.read_bytes())
    data[238632:238632 + 100] = b"\x42" * 100     # a half-written record after the last good one
    f.write_bytes(bytes(data))
    plan = json_lines(run_cli("store", "recover", s, "--json", check=True).stdout)[0]
    cut = plan["commitlog_cuts"][0]
    assert cut["path"].endswith("00000000000002097152") and (cut["position"], cut["length"]) == (238632, 100)
    json_lines(run_cli("store", "recover", s, "--apply", "--json", check=True).stdout)
    saved = list(s.glob("recovery-backup-*/commitlog/00000000000002097152.at-*"))
    assert len(saved) == 1 and saved[0].stat().st_size == cut["length"]
    assert b"\x42" * 100 in saved[0].read_bytes()
    assert run_cli("store", "verify", s).returncode == 0


def test_refuses_while_locked(basic_store, store_copy):
    s = store_copy(basic_store)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys,time; from mqtool_store.lockfile import StoreLock; l=StoreLock(sys.argv[1]); l.acquire(); "
        "print('locked', flush=True); time.sleep(60)"), str(s)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        proc = run_cli("store", "recover", s, "--apply")
        assert proc.returncode == 3 and "stop the broker first" in proc.stderr
    finally:
        holder.kill()
        holder.wait()


def test_broker_conf_gives_the_plan_the_broker_would_run(crashed_store, store_copy, tmp_path):
    """-c broker.conf: messageIndexSafe=true starts an abnormal recovery early enough for the index's
    checkpoint time (here one long ago: the first file), as the broker would with that config."""
    s = store_copy(crashed_store)
    cp = bytearray((s / "checkpoint").read_bytes())
    cp[16:24] = (1).to_bytes(8, "big")                       # indexMsgTimestamp: long ago
    (s / "checkpoint").write_bytes(bytes(cp))
    plain = json_lines(run_cli("store", "recover", s, "--json", check=True).stdout)[0]
    assert plain["abnormal"] and plain["start_file"] != "00000000000000000000"
    conf = tmp_path / "broker.conf"
    conf.write_text("messageIndexSafe=true\nsendMessageThreadPoolNums=4\n")
    safe = json_lines(run_cli("store", "recover", s, "-c", conf, "--json", check=True).stdout)[0]
    assert safe["start_file"] == "00000000000000000000"
    bad = run_cli("store", "recover", s, "-c", tmp_path / "none.conf")
    assert bad.returncode == 2 and "no such broker config file" in bad.stderr
    half = run_cli("store", "recover", s, "--max-index-num", "4000")          # it was ignored
    assert half.returncode == 2 and "--max-index-num needs --max-hash-slot-num" in half.stderr


def test_the_plan_on_a_store_mqtool_crashed_is_the_one_the_store_runs(tmp_path):
    """A writer killed under SYNC_FLUSH puts: `store recover` plans from the start file, the
    unvouched tail and the backups the store then uses, and says where cut bytes would be kept."""
    from mqtool_store.messagestore import MessageStore
    from tests.store.test_crash import _crash_writer, cfg
    root = tmp_path / "store"
    _crash_writer(root, 1.5)
    last = [f for f in sorted((root / "commitlog").iterdir()) if f.read_bytes().strip(b"\0")][-1]
    data = bytearray(last.read_bytes())
    end = len(data.rstrip(b"\0"))
    data[end:end + 64] = b"\x42" * 64                         # a torn record after the last one
    last.write_bytes(bytes(data))
    plan = json_lines(run_cli("store", "recover", root, "--json", check=True).stdout)[0]
    human = run_cli("store", "recover", root, check=True).stdout
    assert f"would keep 64 bytes cut from the commit log under {root}/recovery-backup-" in human.replace("\n", " ")
    with MessageStore(cfg(root)) as s:
        ran = s.recovery_report
    assert ran.abnormal and plan["abnormal"]
    assert (ran.start_file, ran.vouched_until, ran.redispatch_from, ran.valid_end) == \
        (plan["start_file"], plan["vouched_until"], plan["redispatch_from"], plan["valid_end"])
    assert ran.backup_bytes == plan["backup_bytes"] == 64
    assert list(root.glob("recovery-backup-*/commitlog/*.at-*"))
