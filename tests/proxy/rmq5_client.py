"""Scenarios for the official RocketMQ 5 Python client (PyPI rocketmq-python-client 5.1.2), run by
tests/proxy in a venv of their own: `python rmq5_client.py SCENARIO ENDPOINT '{json args}'`. One JSON
line per result on stdout. This file imports nothing from mqtool (the client's `rocketmq` package
would clash with the C++ client's in the test venv)."""
from __future__ import annotations

import json
import sys
import threading
import time

from rocketmq import (ClientConfiguration, Credentials, Message, Producer, TransactionChecker,
                      TransactionResolution)


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def message(args: dict, i: int = 0) -> Message:
    msg = Message()
    msg.topic = args["topic"]
    msg.body = (args.get("body") or f"grpc-{i}").encode()
    if args.get("tag"):
        msg.tag = args["tag"]
    for key in args.get("keys", []):
        msg.keys = key                   # (the setter adds one key a call)
    if args.get("group"):
        msg.message_group = args["group"]
    if args.get("delay_s"):
        msg.delivery_timestamp = int(time.time() + args["delay_s"])     # seconds, as 5.1.2 sends them
    for key, value in (args.get("props") or {}).items():
        msg.add_property(key, value)
    return msg


def producer(endpoint: str, args: dict, checker=None) -> Producer:
    config = ClientConfiguration(endpoint, Credentials(args.get("ak", ""), args.get("sk", "")))
    p = Producer(config, args.get("topics", [args["topic"]]), checker, tls_enable=args.get("tls", False))
    p.startup()
    return p


def receipt(r) -> dict:
    return {"message_id": r.message_id, "transaction_id": r.transaction_id, "offset": r.offset}


def send(endpoint: str, args: dict) -> None:
    p = producer(endpoint, args)
    try:
        for i in range(args.get("count", 1)):
            try:
                emit(ok=True, **receipt(p.send(message(args, i))))
            except Exception as exc:  # noqa: BLE001 - the test reads what the client raised
                emit(ok=False, error=type(exc).__name__, text=str(exc))
    finally:
        p.shutdown()


class Checker(TransactionChecker):
    def __init__(self, answer):
        self.answer = answer
        self.checked = threading.Event()
        self.ids: list[str] = []

    def check(self, msg: Message) -> TransactionResolution:
        self.ids.append(msg.message_id)
        self.checked.set()
        return self.answer


def transaction(endpoint: str, args: dict) -> None:
    """Half message, then commit / rollback (args["end"]) or nothing ("none": the checker answers)."""
    end = args.get("end", "commit")
    checker = Checker(TransactionResolution.COMMIT if args.get("check") == "commit" else TransactionResolution.ROLLBACK)
    p = producer(endpoint, args, checker)
    try:
        tx = p.begin_transaction()
        r = p.send(message(args), tx)
        emit(ok=True, **receipt(r))
        if end == "commit":
            tx.commit()
            emit(ended="commit")
        elif end == "rollback":
            tx.rollback()
            emit(ended="rollback")
        else:
            emit(checked=checker.checked.wait(args.get("wait_s", 60)), ids=checker.ids)
            time.sleep(1.0)              # the checker's EndTransaction goes out on the client's own thread
    finally:
        p.shutdown()


def hold(endpoint: str, args: dict) -> None:
    """A producer that stays up (heartbeats) until the file args["until"] exists."""
    from pathlib import Path
    p = producer(endpoint, args)
    try:
        emit(ok=True, **receipt(p.send(message(args))))
        deadline = time.time() + args.get("timeout", 60)
        while not Path(args["until"]).exists() and time.time() < deadline:
            time.sleep(0.05)
    finally:
        p.shutdown()


def bench(endpoint: str, args: dict) -> None:
    """`count` synchronous sends of `size` bytes: a line before them, one after with the time they took."""
    p = producer(endpoint, args)
    try:
        body = b"x" * args.get("size", 100)
        msgs = []
        for _ in range(args["count"]):
            m = Message()
            m.topic, m.body = args["topic"], body
            msgs.append(m)
        p.send(msgs[0])                 # routes and channels warm
        emit(phase="start")             # (the benchmark reads the broker's CPU time at these lines)
        start = time.perf_counter()
        for m in msgs[1:]:
            p.send(m)
        emit(phase="done", sent=len(msgs) - 1, seconds=time.perf_counter() - start)
    finally:
        p.shutdown()


SCENARIOS = {"send": send, "transaction": transaction, "hold": hold, "bench": bench}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](sys.argv[2], json.loads(sys.argv[3]))
