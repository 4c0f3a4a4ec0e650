"""`mqtool cluster start` as a user runs it: real name server and broker processes on 127.0.0.1,
supervised, restarted after a SIGKILL, stopped cleanly by SIGINT; and bad input in one line."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest

from mqtool.cluster.lifeline import die_with_parent
from mqtool.cluster.state import pid_alive
from tests.conftest import REPO, json_lines, run_cli
from tests.servers import free_port, wait_until


def free_base_port(brokers: int) -> int:
    """A base port whose every broker port (listenPort - 2 .. listenPort + 1, 10 apart) is free."""
    for _ in range(100):
        base = free_port()
        if base + 10 * brokers > 65000:
            continue
        socks = []
        try:
            for i in range(brokers):
                for p in range(base + 10 * i - 2, base + 10 * i + 2):
                    s = socket.socket()
                    socks.append(s)
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free base port")


class Supervised:
    """`mqtool cluster start ...` in a subprocess, its stdout and stderr lines collected on threads."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "mqtool", "cluster", "start", *args], cwd=REPO,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=die_with_parent())   # its servers die with it (SIGTERM)
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, ls=lines: ls.extend(s), daemon=True).start()

    def saw(self, text: str) -> bool:
        return any(text in line for line in list(self.out))

    def rows(self) -> dict[str, list[str]]:
        """The table's rows by name and id: "broker-a 0" -> [role, name, id, address, pid, store]."""
        rows = [line.split() for line in self.out if line.split()[:1] in (["namesrv"], ["master"])]
        return {f"{r[1]} {r[2]}": r for r in rows}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def mqtool(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, check=True)


@pytest.mark.slow
def test_up_kill_restart_and_ctrl_c(tmp_path):
    ns = f"127.0.0.1:{free_port()}"
    base = free_base_port(2)
    store = tmp_path / "cluster"
    template = tmp_path / "broker.conf"
    template.write_text("listenPort=1\nflushIntervalComitLog=500\n")
    cluster = Supervised("--groups", "2", "--replicas", "1", "--namesrv", ns, "--base-port", str(base),
                         "--store-dir", str(store), "-c", str(template))
    pids: list[int] = []
    try:
        wait_until("the cluster's table", lambda: cluster.saw("Running.") or cluster.proc.poll() is not None, 120)
        assert cluster.proc.poll() is None, "".join(cluster.err)
        rows = cluster.rows()
        assert sorted(rows) == ["broker-a 0", "broker-b 0", "namesrv -"]
        assert rows["broker-a 0"][3] == f"127.0.0.1:{base}" and rows["broker-b 0"][3] == f"127.0.0.1:{base + 10}"
        assert rows["broker-a 0"][5] == str(store / "broker-a-0" / "store")
        # the template's listenPort is the cluster's to set; the brokers' own warning (a misspelt key) once
        warned = [line.strip() for line in cluster.err if "warning" in line]
        assert warned[0] == (f"mqtool: warning: {template} sets listenPort: the cluster sets these for every broker "
                             "(the template's values are ignored)")
        assert len(warned) == 2 and "flushIntervalComitLog" in warned[1] and warned[1].endswith("(broker)"), warned
        pids = [int(r[4]) for r in rows.values()]
        assert (store / "broker-a-0" / "store" / "abort").exists()     # a running store has one
        assert all(pid_alive(p) for p in pids)

        # the name server it started serves clients: a topic on both groups, a message through each
        mqtool("topic", "create", "-n", ns, "-t", "Orders", "-c", "DefaultCluster", "-r", "2", "-w", "2")
        for name in ("broker-a", "broker-b"):
            sent = json_lines(mqtool("send", "-n", ns, "-t", "Orders", "-q", f"{name}:0", "--json",
                                     f"to {name}").stdout)
            assert sent[0]["status"] == "SEND_OK", sent
        read = json_lines(mqtool("consume", "-n", ns, "-t", "Orders", "-e", "--json").stdout)
        assert sorted(m["body"] for m in read) == ["to broker-a", "to broker-b"]

        status = json_lines(mqtool("cluster", "status", "--store-dir", str(store), "--json").stdout)[0]
        assert status["running"] and status["supervisor_pid"] == cluster.proc.pid
        assert {(p["name"], p["pid"], p["alive"], p["registered_id"]) for p in status["processes"]} == {
            ("namesrv", int(rows["namesrv -"][4]), True, None), ("broker-a", int(rows["broker-a 0"][4]), True, 0),
            ("broker-b", int(rows["broker-b 0"][4]), True, 0)}

        # SIGKILL one broker: a line says so, it is started again and serves again
        killed = int(rows["broker-a 0"][4])
        os.kill(killed, signal.SIGKILL)
        wait_until("the restart line", lambda: cluster.saw("broker-a-0 is up again"), 60)
        assert cluster.saw(f"broker-a-0 (pid {killed}) killed by SIGKILL; starting it again in 1 s")
        status = json_lines(mqtool("cluster", "status", "--store-dir", str(store), "--json").stdout)[0]
        again = next(p for p in status["processes"] if p["key"] == "broker-a-0")
        assert again["pid"] != killed and again["alive"]
        pids.append(again["pid"])
        wait_until("a send to the restarted broker", lambda: json_lines(run_cli(
            "send", "-n", ns, "-t", "Orders", "-q", "broker-a:1", "--json", "again").stdout or "{}")[0].get(
            "status") == "SEND_OK", 60, every=0.5)

        # Ctrl-C: brokers first, then the name server; every store closed cleanly
        cluster.proc.send_signal(signal.SIGINT)
        assert cluster.proc.wait(90) == 0, "".join(cluster.err)
    finally:
        cluster.kill()
    stopped = [line.split()[0] for line in cluster.out if line.rstrip().endswith(") stopped")]
    assert stopped[-1] == "namesrv" and sorted(stopped[:-1]) == ["broker-a-0", "broker-b-0"]
    assert cluster.saw("Stopped: every process exited cleanly.")
    assert not [p for p in pids if pid_alive(p)]
    for name in ("broker-a-0", "broker-b-0"):
        assert (store / name / "store" / "commitlog").is_dir()
        assert not (store / name / "store" / "abort").exists(), name
    status = run_cli("cluster", "status", "--store-dir", str(store))
    assert status.returncode == 0 and "cluster stopped" in status.stdout


@pytest.mark.slow
def test_a_broker_that_exits_at_start_is_reported_with_its_last_line(tmp_path):
    template = tmp_path / "broker.conf"
    template.write_text("enableDLegerCommitLog=true\n")            # mqtool's broker refuses it in one line
    store = tmp_path / "cluster"
    proc = run_cli("cluster", "start", "--groups", "1", "--namesrv", f"127.0.0.1:{free_port()}", "--base-port",
                   str(free_base_port(1)), "--store-dir", str(store), "-c", str(template))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mqtool: error: broker-a-0 exited with code 2 at start: "
                                                   "mqtool: error: "), proc.stderr
    assert "enableDLegerCommitLog" in lines[0]
    state = json_lines((store / "cluster.json").read_text().replace("\n", ""))[0]
    assert state["status"] == "stopped"
    assert not [p["pid"] for p in state["processes"] if pid_alive(p["pid"])]     # the name server stopped too


def test_bad_input_is_one_line(tmp_path):
    cases = [
        (["--groups", "0"], 2, "mqtool: error: --groups must be 1 or more, not 0"),
        (["-c", str(tmp_path / "missing.conf")], 2, f"mqtool: error: {tmp_path / 'missing.conf'}: no such config file"),
        (["-c", str(tmp_path)], 2, f"mqtool: error: {tmp_path}: cannot read the broker.conf template: Is a directory"),
    ]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cases.append((["--namesrv", f"127.0.0.1:{port}"], 1, (
            f"mqtool: error: port {port} on 127.0.0.1 (namesrv) is in use: stop what holds it or choose other "
            "ports (--namesrv, --base-port)")))
        for args, code, line in cases:
            store = tmp_path / "store"
            proc = run_cli("cluster", "start", "--groups", "1", "--store-dir", str(store), *args)
            assert (proc.returncode, proc.stderr.strip().splitlines()) == (code, [line]), args
            assert not store.exists()               # nothing written, nothing started


def test_a_store_dir_that_is_a_file_is_one_line(tmp_path):
    a_file = tmp_path / "afile"
    a_file.write_text("not a directory\n")
    proc = run_cli("cluster", "start", "--groups", "1", "--namesrv", f"127.0.0.1:{free_port()}",
                   "--base-port", str(free_base_port(1)), "--store-dir", str(a_file))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [f"mqtool: error: {a_file} is a file, where a directory is needed"]


def test_status_without_a_cluster_is_one_line(tmp_path):
    proc = run_cli("cluster", "status", "--store-dir", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        (f"mqtool: error: no cluster in {tmp_path} ({tmp_path / 'cluster.json'} does not exist): "
         "start one with `mqtool cluster start --store-dir DIR`")]


def both_in_sync(ns: str) -> bool:
    proc = run_cli("ha", "status", "-n", ns, "--json")
    groups = json_lines(proc.stdout) if proc.returncode == 0 else []
    return any(len((g.get("controllerMode") or {}).get("syncStateSet", [])) == 2 for g in groups)


def registered(store) -> dict[str, int | None]:
    """Broker key -> the brokerId the name server routes its address as (cluster status --json)."""
    status = json_lines(run_cli("cluster", "status", "--store-dir", str(store), "--json").stdout)[0]
    return {p["key"]: p["registered_id"] for p in status["processes"] if p["role"] == "replica"}


@pytest.mark.slow
def test_two_replicas_elect_a_master_and_fail_over_after_a_sigkill(tmp_path):
    """--replicas 2: the controller embedded in the name server elects a master; its SIGKILL makes the
    other replica the master, and the killed one, started again by the supervisor, rejoins as a slave."""
    ns = f"127.0.0.1:{free_port()}"
    store = tmp_path / "cluster"
    cluster = Supervised("--groups", "1", "--replicas", "2", "--namesrv", ns, "--base-port",
                         str(free_base_port(2)), "--store-dir", str(store))
    pids: list[int] = []
    try:
        wait_until("the cluster's table", lambda: cluster.saw("Running.") or cluster.proc.poll() is not None, 120)
        assert cluster.proc.poll() is None, "".join(cluster.err)
        def master_and_slave():
            ids = registered(store)
            found = sorted(v for v in ids.values() if v is not None)
            return ids if len(found) == 2 and found[0] == 0 < found[1] else None
        ids = wait_until("a master and a slave", master_and_slave, 60, every=0.5)
        master = next(k for k, v in ids.items() if v == 0)
        other = next(k for k in ids if k != master)
        # only a SyncStateSet member may be elected: a slave that has not caught up yet is not one,
        # and killing the master then leaves the group without one (as 5.3.0 does)
        wait_until("the slave in the SyncStateSet", lambda: both_in_sync(ns), 60, every=0.5)
        status = json_lines(run_cli("cluster", "status", "--store-dir", str(store), "--json").stdout)[0]
        pids = [p["pid"] for p in status["processes"]]
        os.kill(next(p["pid"] for p in status["processes"] if p["key"] == master), signal.SIGKILL)
        wait_until("the other replica routed as the master", lambda: registered(store).get(other) == 0, 60, every=0.5)
        wait_until("the killed one back, as a slave", lambda: (registered(store).get(master) or 0) > 0, 90, every=0.5)
        status = json_lines(run_cli("cluster", "status", "--store-dir", str(store), "--json").stdout)[0]
        pids += [p["pid"] for p in status["processes"]]
        cluster.proc.send_signal(signal.SIGINT)
        assert cluster.proc.wait(90) == 0, "".join(cluster.err)
    finally:
        cluster.kill()
    assert not [p for p in pids if pid_alive(p)]
    for name in ("broker-a-0", "broker-a-1"):
        assert not (store / name / "store" / "abort").exists(), name


@pytest.mark.slow
def test_cluster_stop_from_another_terminal_stops_it_cleanly(tmp_path):
    store = tmp_path / "cluster"
    cluster = Supervised("--groups", "1", "--namesrv", f"127.0.0.1:{free_port()}", "--base-port",
                         str(free_base_port(1)), "--store-dir", str(store))
    try:
        wait_until("the cluster's table", lambda: cluster.saw("Running.") or cluster.proc.poll() is not None, 120)
        assert cluster.proc.poll() is None, "".join(cluster.err)
        pids = [int(r[4]) for r in cluster.rows().values()]
        stop = run_cli("cluster", "stop", "--store-dir", str(store), "--json")
        assert stop.returncode == 0, stop.stderr
        assert json_lines(stop.stdout) == [{"store_dir": str(store), "supervisor_pid": cluster.proc.pid,
                                            "stopped": True, "problems": []}]
        assert cluster.proc.wait(10) == 0                   # it had ended by the time stop answered
    finally:
        cluster.kill()
    assert cluster.saw("Stopped: every process exited cleanly.")
    assert not [p for p in pids if pid_alive(p)]
    assert not (store / "broker-a-0" / "store" / "abort").exists()
    saved = json.loads((store / "cluster.json").read_text())
    assert saved["status"] == "stopped" and saved["problems"] == []      # what `cluster stop` reads
    again = run_cli("cluster", "stop", "--store-dir", str(store))
    assert again.returncode == 1 and again.stderr.strip().splitlines() == [
        f"mqtool: error: no cluster runs from {store} (supervisor pid {cluster.proc.pid} is not running)"]


def test_cluster_stop_leaves_alone_a_pid_that_is_now_another_program(tmp_path):
    other = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "cluster.json").write_text(json.dumps({"status": "running", "supervisor_pid": other.pid,
                                                           "processes": []}))
        proc = run_cli("cluster", "stop", "--store-dir", str(tmp_path))
        assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
            f"mqtool: error: no cluster runs from {tmp_path}: pid {other.pid} is now another program, left alone"]
        assert other.poll() is None
        status = json_lines(run_cli("cluster", "status", "--store-dir", str(tmp_path), "--json").stdout)[0]
        assert status["running"] is False
    finally:
        other.kill()
        other.wait(5)


def test_cluster_stop_without_a_cluster_is_one_line(tmp_path):
    proc = run_cli("cluster", "stop", "--store-dir", str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        (f"mqtool: error: no cluster in {tmp_path} ({tmp_path / 'cluster.json'} does not exist): "
         "start one with `mqtool cluster start --store-dir DIR`")]


def test_cluster_start_refuses_a_store_dir_a_live_cluster_runs_from_but_not_one_whose_pid_was_reused(tmp_path):
    """cluster.json names a supervisor pid; only a process that is `mqtool cluster start` makes start refuse."""
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "mqtool", "cluster", "start"])
    reused = subprocess.Popen(["sleep", "60"])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        ns = f"127.0.0.1:{taken.getsockname()[1]}"        # a busy name server port: a start stops at its check
        try:
            for pid, said in ((running.pid, f"a cluster already runs from {tmp_path} (supervisor pid {running.pid})"),
                              (reused.pid, "(namesrv) is in use")):
                (tmp_path / "cluster.json").write_text(json.dumps({"status": "running", "supervisor_pid": pid,
                                                                   "processes": []}))
                proc = run_cli("cluster", "start", "--groups", "1", "--namesrv", ns, "--base-port",
                               str(free_base_port(1)), "--store-dir", str(tmp_path))
                assert proc.returncode != 0 and said in proc.stderr, proc.stderr
        finally:
            for p in (running, reused):
                p.kill()
                p.wait(5)


def test_cluster_status_counts_a_reused_child_pid_as_down(tmp_path):
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    supervisor = subprocess.Popen([*sleeper, "mqtool", "cluster", "start"])
    broker = subprocess.Popen([*sleeper, "mqtool", "broker", "start"])
    reused = subprocess.Popen(["sleep", "60"])
    try:
        rows = [{"role": "master", "name": n, "id": "0", "address": f"127.0.0.1:{i}", "pid": p.pid, "store": "-",
                 "key": n} for i, (n, p) in enumerate((("broker-a", broker), ("broker-b", reused)), 1)]
        (tmp_path / "cluster.json").write_text(json.dumps({"status": "running", "supervisor_pid": supervisor.pid,
                                                           "processes": rows}))
        status = json_lines(run_cli("cluster", "status", "--store-dir", str(tmp_path), "--json").stdout)[0]
        assert status["running"] is True
        assert {p["name"]: p["alive"] for p in status["processes"]} == {"broker-a": True, "broker-b": False}
    finally:
        for p in (supervisor, broker, reused):
            p.kill()
            p.wait(5)
