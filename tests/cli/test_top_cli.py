"""Seeing a running cluster (issue 13): `mqtool top`, `--watch`, and the broker's /metrics, against
real name server and broker processes; the live view is driven in tmux."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import REPO, json_lines, run_cli
from tests.servers import Process, die_with_parent, free_port, start_broker, wait_until

pytestmark = pytest.mark.slow
T, G = "TopTopic", "GID_TOP"


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("top")
    ns_port, metrics_port = free_port(), free_port()
    ns = Process(["namesrv", "start", "--listen", f"127.0.0.1:{ns_port}", "--kv-config", str(tmp / "kv.json")],
                 "boot success")
    ns_addr = f"127.0.0.1:{ns_port}"
    broker, broker_addr = start_broker(tmp, ns_addr, extra=f"metricsPort={metrics_port}\n")
    yield {"namesrv": ns_addr, "broker": broker_addr, "metrics": metrics_port}
    assert broker.stop() == 0
    assert ns.stop() == 0


def group_lag_metric(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "rocketmq_group_diff" and s.labels["group"] == G and s.labels["topic"] == T:
                return s.value
    raise AssertionError("no rocketmq_group_diff for the group")


def top_once(ns: str) -> dict:
    [view] = json_lines(run_cli("top", "-n", ns, "--once", "--json", "--interval", "0.5", check=True).stdout)
    return view


def test_top_once_and_metrics_follow_the_group(watched):
    ns = watched["namesrv"]
    day = time.localtime().tm_yday
    run_cli("topic", "create", "-n", ns, "-t", T, "-r", "1", "-w", "1", check=True)
    run_cli("send", "-n", ns, "-t", T, input="".join(f"m{i}\n" for i in range(8)), check=True)
    run_cli("consume", "-n", ns, "-t", T, "-g", G, "-e", "--json", check=True)
    run_cli("send", "-n", ns, "-t", T, input="".join(f"n{i}\n" for i in range(5)), check=True)

    view = top_once(ns)
    [broker] = view["brokers"]
    assert broker["reachable"] and broker["address"] == watched["broker"]
    # today's puts; the broker's day rolls over at local midnight, so a run across it sees fewer
    assert broker["put_today"] == 13 if time.localtime().tm_yday == day else 0 <= broker["put_today"] <= 13
    topic = next(t for t in view["topics"] if t["topic"] == T)
    assert topic["max_offset"] == 13 and topic["put_tps"] == 0          # nothing sent between the two samples
    group = next(g for g in view["groups"] if g["group"] == G and g["topic"] == T)
    assert group["lag"] == 5 and group["consumer_offset"] == 8 and group["trend"] == [5, 5]
    assert group["behind_ms"] >= 0
    assert not any(t["topic"].startswith("%RETRY%") or t["topic"] == "TBW102" for t in view["topics"])
    assert group_lag_metric(watched["metrics"]) == 5

    run_cli("consume", "-n", ns, "-t", T, "-g", G, "-e", "--json", check=True)      # the group catches up
    assert group_lag_metric(watched["metrics"]) == 0
    group = next(g for g in top_once(ns)["groups"] if g["group"] == G and g["topic"] == T)
    assert group["lag"] == 0

    filtered = json_lines(run_cli("top", "-n", ns, "--once", "--json", "--interval", "0.2", "--filter", "nothing-like-it",
                                  check=True).stdout)[0]
    assert filtered["topics"] == [] and filtered["groups"] == [] and filtered["brokers"]
    bad = run_cli("top", "-n", ns, "--once", "--sort", "size")
    assert bad.returncode != 0 and "--sort must be one of" in bad.stderr and "Traceback" not in bad.stderr


def test_top_once_json_at_a_few_hundred_topics(watched):
    """Every topic's max offset and every group's lag as sent, from the broker's GET_ALL_TOPIC_OFFSETS."""
    import asyncio

    from mqtool_remoting import jsonbody
    from mqtool_remoting.codes import RequestCode
    from mqtool_remoting.command import RemotingCommand
    from mqtool_remoting.transport import RemotingClient
    from tests.broker.test_broker_server import send_cmd
    from tests.broker.test_metadata_changes import create_topic_cmd
    ns, addr, n = watched["namesrv"], watched["broker"], 300
    sent = {f"Lots{i:03d}": [i % 4, i % 3] for i in range(n)}          # messages per queue
    done = {f"Lots{j:03d}": [c // 2 for c in sent[f"Lots{j:03d}"]] for j in range(12)}    # group GID_LOTS{j}

    async def fill():
        client = RemotingClient()
        try:
            requests = [create_topic_cmd(t, 2) for t in sent]
            requests += [send_cmd(t, b"x", queue=q) for t, counts in sent.items() for q, c in enumerate(counts)
                         for _ in range(c)]
            for j, (t, offsets) in enumerate(done.items()):
                requests.append(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                                        body=jsonbody.dumps({"groupName": f"GID_LOTS{j}"})))
                requests += [RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "consumerGroup": f"GID_LOTS{j}", "topic": t, "queueId": q, "commitOffset": c})
                    for q, c in enumerate(offsets)]
            for i in range(0, len(requests), 64):
                resps = await asyncio.gather(*(client.invoke(addr, r, 10) for r in requests[i:i + 64]))
                assert all(r.code == 0 for r in resps), [r.remark for r in resps if r.code]
        finally:
            await client.close()
    asyncio.run(fill())
    [view] = json_lines(run_cli("top", "-n", ns, "--once", "--json", "--interval", "0.3", "--limit", "1000",
                                "--filter", "Lots", check=True).stdout)
    assert {t["topic"]: t["max_offset"] for t in view["topics"]} == {t: sum(c) for t, c in sent.items()}
    assert all(t["put_tps"] == 0 for t in view["topics"])               # nothing sent between the samples
    assert {g["group"]: (g["topic"], g["consumer_offset"], g["lag"]) for g in view["groups"]} == {
        f"GID_LOTS{j}": (t, sum(offsets), sum(sent[t]) - sum(offsets)) for j, (t, offsets) in enumerate(done.items())}


def _watch_lines(args: list[str], count: int) -> list[dict]:
    proc = subprocess.Popen([sys.executable, "-m", "mqtool", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, preexec_fn=die_with_parent())
    try:
        return [json.loads(proc.stdout.readline()) for _ in range(count)]
    finally:
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(20)
        proc.stdout.close()


def test_watch_redraws_progress_and_status(watched):
    ns = watched["namesrv"]
    run_cli("topic", "create", "-n", ns, "-t", "WatchTopic", "-r", "1", "-w", "1", check=True)
    run_cli("send", "-n", ns, "-t", "WatchTopic", input="a\nb\n", check=True)
    frames = _watch_lines(["topic", "status", "-n", ns, "-t", "WatchTopic", "--watch", "0.2", "--json"], 2)
    assert all(f["rows"][0]["max_offset"] == 2 for f in frames) and frames[1]["time"] > frames[0]["time"]
    run_cli("consume", "-n", ns, "-t", "WatchTopic", "-g", "GID_WATCH", "-e", "--json", check=True)
    frames = _watch_lines(["group", "progress", "-n", ns, "-g", "GID_WATCH", "--watch", "0.2", "--json"], 2)
    mine = [r for r in frames[-1]["rows"] if r["topic"] == "WatchTopic"]
    assert [(r["lag"], r["consumer_offset"]) for r in mine] == [(0, 2)]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_live_view_in_tmux(watched, tmp_path):
    ns = watched["namesrv"]
    session = f"mqtool-top-{os.getpid()}"
    socket = str(tmp_path / "tmux.sock")
    tmux = ["tmux", "-S", socket]
    # the pane is 160x60; a COLUMNS/LINES inherited from the test run would override its size for rich
    cmd = f"env -u COLUMNS -u LINES {sys.executable} -m mqtool top -n {ns} --interval 0.5"
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "160", "-y", "60", "-c", str(REPO), cmd],
                   check=True)

    def screen() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout

    def alive() -> bool:
        return subprocess.run([*tmux, "has-session", "-t", session], capture_output=True).returncode == 0
    try:
        try:
            wait_until("the live view", lambda: "Consumer groups" in screen() and watched["broker"] in screen())
        except AssertionError:
            raise AssertionError(f"the live view never showed; the screen:\n{screen()}") from None
        wait_until("the live view", lambda: "Consumer groups" in screen() and watched["broker"] in screen())
        wait_until("the sort key to be shown", lambda: "sort (rate)" in screen())
        subprocess.run([*tmux, "send-keys", "-t", session, "s"], check=True)
        wait_until("sort to change", lambda: "sort (lag)" in screen())
        subprocess.run([*tmux, "send-keys", "-t", session, "/", "TopT", "Enter"], check=True)
        wait_until("the filter", lambda: "[TopT]" in screen() and "WatchTopic" not in screen())
        subprocess.run([*tmux, "send-keys", "-t", session, "q"], check=True)
        wait_until("top to quit", lambda: not alive(), timeout=15)
    finally:
        if alive():
            subprocess.run([*tmux, "kill-session", "-t", session])
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def _piped_lines(args: list[str], enough) -> list[str]:
    """stdout lines of a --watch run into a pipe until `enough(lines)`, then Ctrl-C; fails (not hangs)
    when the frames do not come while it runs."""
    import threading
    proc = subprocess.Popen([sys.executable, "-m", "mqtool", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent())
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    try:
        wait_until("frames in the pipe while the watch runs", lambda: enough(lines), timeout=30)
        return list(lines)
    finally:
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(20) == 0, proc.stderr.read()


def test_a_piped_watch_writes_a_whole_frame_per_interval(watched):
    """Issue 31: `--watch` into a file wrote one frame, at the end, cut at 80 columns. Each refresh is
    now a whole frame, one line per row, never cut."""
    ns = watched["namesrv"]
    topic = "PipedWatch" + "X" * 90                                  # a row far wider than 80 columns
    run_cli("topic", "create", "-n", ns, "-t", topic, "-r", "1", "-w", "1", check=True)
    run_cli("send", "-n", ns, "-t", topic, input="a\nb\n", check=True)
    lines = _piped_lines(["topic", "status", "-n", ns, "-t", topic, "--watch", "0.2"],
                         lambda ls: sum(ln.startswith("Max offset total: 2") for ln in ls) >= 2)
    titles = [ln for ln in lines if ln.startswith("every 0.2s, ")]
    assert len(titles) >= 2
    rows = [ln.split() for ln in lines if ln.startswith("broker-a")]
    assert len(rows) >= 2 and all(r[:4] == ["broker-a", "0", "0", "2"] for r in rows), rows
    lines = _piped_lines(["ha", "status", "-n", ns, "--watch", "0.2"],
                         lambda ls: sum(ln.startswith("Replication (") for ln in ls) >= 2)
    frames = [ln for ln in lines if ln.startswith("DefaultCluster")]
    assert len(frames) >= 2 and all(f.split()[:4] == ["DefaultCluster", "broker-a", "0", watched["broker"]]
                                    for f in frames), frames
