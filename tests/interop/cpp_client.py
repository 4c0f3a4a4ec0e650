"""Scenarios run with the official C++ client (PyPI rocketmq==0.4.4) in a subprocess of the tests.

    python -m tests.interop.cpp_client SCENARIO NAMESRV JSON-ARGS

Prints one JSON object per line: what was sent or received. Each scenario stops by itself.
"""
from __future__ import annotations

import json
import sys
import threading
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer, RecvMessage
from rocketmq.exceptions import ffi_check
from rocketmq.ffi import MessageModel, _CConsumeStatus, dll

# The 0.4.4 wrapper ignores a callback's return value and re-raises exceptions inside the C
# callback (undefined status), so scenarios register their own callback returning the status.
CONSUME_SUCCESS = _CConsumeStatus.CONSUME_SUCCESS.value
RECONSUME_LATER = _CConsumeStatus.RECONSUME_LATER.value


def out(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def message(topic, m) -> Message:
    msg = Message(topic)
    msg.set_keys(m["keys"])
    msg.set_tags(m["tags"])
    msg.set_body(m["body"])
    for k, v in m.get("props", {}).items():
        msg.set_property(k, v)
    if m.get("delay"):
        msg.set_delay_time_level(m["delay"])
    return msg


def credentials(client, a) -> None:
    """Plain ACL: the client signs every request (ClientRPCHook) when the scenario names an account."""
    if a.get("ak"):
        client.set_session_credentials(a["ak"], a["sk"], a.get("channel", "ALIYUN"))


def produce(ns, a) -> None:
    p = Producer(a.get("group", "PID_INTEROP"))
    p.set_namesrv_addr(ns)
    credentials(p, a)
    p.start()
    done = threading.Semaphore(0)
    try:
        for m in a["messages"]:
            if a.get("interval_ms"):              # a steady load, for tests that change the cluster meanwhile
                time.sleep(a["interval_ms"] / 1000)
            mode = m.get("mode", "sync")
            msg = message(a["topic"], m)
            sent_at = int(time.time() * 1000)
            if mode == "sync":
                try:
                    r = p.send_sync(msg)
                except Exception as exc:  # noqa: BLE001 - reported to the test when it asks for failures
                    if not a.get("report_errors"):
                        raise
                    out({"keys": m["keys"], "error": str(exc)})
                    continue
                out({"keys": m["keys"], "status": int(r.status), "msg_id": r.msg_id, "offset": r.offset, "at": sent_at})
            elif mode == "orderly":
                r = p.send_orderly(msg, m["arg"])
                out({"keys": m["keys"], "status": int(r.status), "msg_id": r.msg_id, "offset": r.offset, "at": sent_at})
            elif mode == "async":
                def ok(r, k=m["keys"]):
                    out({"keys": k, "status": int(r.status), "msg_id": r.msg_id, "offset": r.offset})
                    done.release()

                def bad(e, k=m["keys"]):
                    out({"keys": k, "error": str(e)})
                    done.release()
                p.send_async(msg, ok, bad)
                if not done.acquire(timeout=10):
                    out({"keys": m["keys"], "error": "async send timed out"})
            else:
                p.send_oneway(msg)
                out({"keys": m["keys"], "oneway": True})
    finally:
        p.shutdown()


def pull(ns, a) -> None:
    c = PullConsumer(a.get("group", "CID_INTEROP_PULL"))
    c.set_namesrv_addr(ns)
    credentials(c, a)
    c.start()
    got = 0
    deadline = time.time() + a.get("timeout", 20)
    seen = set()
    try:
        while got < a["count"] and time.time() < deadline:
            for msg in c.pull(a["topic"], a.get("expression", "*")):
                key = (msg.queue_id, msg.queue_offset)
                if key in seen:
                    continue
                seen.add(key)
                out(_recv(msg))
                got += 1
    finally:
        c.shutdown()


def _recv(msg, who="") -> dict:
    return {"id": msg.id, "topic": msg.topic, "tags": msg.tags.decode(), "keys": msg.keys.decode(),
            "body": msg.body.decode(), "queue_id": msg.queue_id, "queue_offset": msg.queue_offset,
            "reconsume_times": msg.reconsume_times, "store_timestamp": msg.store_timestamp,
            "prop": (msg.get_property("color") or b"").decode(), "who": who, "at": int(time.time() * 1000)}


def push(ns, a) -> None:
    model = MessageModel.BROADCASTING if a.get("broadcast") else MessageModel.CLUSTERING
    c = PushConsumer(a["group"], orderly=a.get("orderly", False), message_model=model)
    c.set_namesrv_addr(ns)
    credentials(c, a)
    c.set_instance_name(a.get("name", "c1"))
    failed = set()
    lock = threading.Lock()
    state = {"got": 0, "last": time.time()}

    def callback(_consumer, handle):
        msg = RecvMessage(handle)
        body = msg.body.decode()
        with lock:
            if a.get("fail_first") and body not in failed and msg.reconsume_times == 0:
                failed.add(body)
                out(_recv(msg, a.get("name", "")) | {"failed": True})
                return RECONSUME_LATER
            state["got"] += 1
            state["last"] = time.time()
            out(_recv(msg, a.get("name", "")))
        return CONSUME_SUCCESS
    ffi_check(dll.Subscribe(c._handle, a["topic"].encode(), a.get("expression", "*").encode()))
    c._register_callback(callback)
    c.start()
    out({"started": a.get("name", "")})
    deadline = time.time() + a.get("timeout", 30)
    try:
        while time.time() < deadline:
            if a.get("count") and state["got"] >= a["count"] and time.time() - state["last"] > a.get("linger", 1.0):
                break
            time.sleep(0.05)
    finally:
        c.shutdown()
        out({"stopped": a.get("name", "")})


def pull_status(ns, a) -> None:
    """One Pull per queue, each status reported (the wrapper's `pull` loops forever on an error status)."""
    from rocketmq.client import _CMessageQueue
    from rocketmq.ffi import _CPullStatus
    import ctypes
    c = PullConsumer(a.get("group", "CID_INTEROP_PULL"))
    c.set_namesrv_addr(ns)
    credentials(c, a)
    c.start()
    try:
        queues = ctypes.POINTER(_CMessageQueue)()
        size = ctypes.c_int()
        ffi_check(dll.FetchSubscriptionMessageQueues(c._handle, a["topic"].encode(), ctypes.pointer(queues),
                                                     ctypes.pointer(size)))
        for i in range(size.value):
            res = dll.Pull(c._handle, ctypes.pointer(queues[i]), b"*", 0, 32)
            bodies = [RecvMessage(res.msgFoundList[j]).body.decode() for j in range(int(res.size))] \
                if res.pullStatus == _CPullStatus.FOUND else []
            out({"queue": i, "status": _CPullStatus(res.pullStatus).name, "bodies": bodies})
            dll.ReleasePullResult(res)
        ffi_check(dll.ReleaseSubscriptionMessageQueue(queues))
    except Exception as exc:  # noqa: BLE001 - reported to the test
        out({"error": str(exc)})
    finally:
        c.shutdown()


def steady(ns, a) -> None:
    """Sync sends of small keyed messages every `interval_ms` until the file `stop_file` exists (a load
    for a benchmark that changes the cluster meanwhile): one line a send, its key, its SEND_OK status or
    its error, when it began and when it ended (epoch ms)."""
    import os
    p = Producer(a.get("group", "PID_STEADY"))
    p.set_namesrv_addr(ns)
    p.start()
    i = 0
    try:
        while not os.path.exists(a["stop_file"]):
            key = f"{a.get('prefix', 'cpp')}-{i}"
            msg = Message(a["topic"])
            msg.set_keys(key)
            msg.set_body(key + " " + "x" * 100)
            began = int(time.time() * 1000)
            try:
                r = p.send_sync(msg)
                row = {"keys": key, "status": int(r.status)}
            except Exception as exc:  # noqa: BLE001 - a send that failed is a figure, not an end
                row = {"keys": key, "error": str(exc)[:160]}
            out(row | {"at": began, "done": int(time.time() * 1000)})
            i += 1
            time.sleep(a.get("interval_ms", 20) / 1000)
    finally:
        p.shutdown()


SCENARIOS = {"produce": produce, "pull": pull, "push": push, "pull_status": pull_status, "steady": steady}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](sys.argv[2], json.loads(sys.argv[3]))
