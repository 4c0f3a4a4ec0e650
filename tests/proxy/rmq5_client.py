"""Scenarios for the official RocketMQ 5 Python client (PyPI rocketmq-python-client 5.1.2), run by
tests/proxy in a venv of their own: `python rmq5_client.py SCENARIO ENDPOINT '{json args}'`. One JSON
line per result on stdout. This file imports nothing from mqtool (the client's `rocketmq` package
would clash with the C++ client's in the test venv)."""
from __future__ import annotations

import json
import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Message, Producer,
                      PushConsumer, SimpleConsumer, TransactionChecker, TransactionResolution)


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


def received(msg) -> dict:
    return {"message_id": msg.message_id, "body": msg.body.decode(errors="replace"), "tag": msg.tag,
            "topic": msg.topic, "keys": list(msg.keys or []), "properties": dict(msg.properties or {}),
            "attempt": msg.delivery_attempt, "type": str(msg.message_type), "group": msg.message_group,
            "handle": msg.receipt_handle, "delivery_ms": msg.delivery_timestamp, "corrupted": msg.corrupted,
            "at": time.time()}


def subscription(args: dict) -> dict:
    return {args["topic"]: FilterExpression(args.get("expression", "*"))}


def simple(endpoint: str, args: dict) -> None:
    """A SimpleConsumer: receive until `count` messages came (or `seconds` passed), each acked unless
    args["ack"] is false; args["change_s"]: change its invisible duration first (then ack)."""
    config = ClientConfiguration(endpoint, Credentials(args.get("ak", ""), args.get("sk", "")))
    c = SimpleConsumer(config, args["consumer_group"], subscription(args), await_duration=args.get("await_s", 5))
    c.startup()
    try:
        got, deadline = 0, time.time() + args.get("seconds", 30)
        while got < args.get("count", 1) and time.time() < deadline:
            try:
                msgs = c.receive(args.get("batch", 16), args.get("invisible_s", 15))
            except Exception as exc:  # noqa: BLE001 - the test reads what the client raised
                emit(error=type(exc).__name__, text=str(exc))
                if args.get("stop_on_error", True):
                    return
                continue
            for msg in msgs:
                got += 1
                emit(**received(msg))
                try:
                    if args.get("change_s"):
                        c.change_invisible_duration(msg, args["change_s"])
                        emit(changed=msg.message_id, handle=msg.receipt_handle)
                    if args.get("ack", True):
                        c.ack(msg)
                        emit(acked=msg.message_id)
                        if args.get("ack_twice"):
                            c.ack(msg)
                            emit(acked_again=msg.message_id)
                except Exception as exc:  # noqa: BLE001
                    emit(ack_error=type(exc).__name__, text=str(exc), message_id=msg.message_id)
        if args.get("until"):             # stay up (heartbeats) until the file exists
            from pathlib import Path
            deadline = time.time() + args.get("timeout", 60)
            while not Path(args["until"]).exists() and time.time() < deadline:
                time.sleep(0.05)
    finally:
        c.shutdown()


class Listener:
    """Fails each message's first `fail` calls, then succeeds (a FIFO consumer retries a message
    locally, with its delivery_attempt unchanged; others get it back from the server)."""

    def __init__(self, fail: int):
        self.fail = fail
        self.lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.successes: set[str] = set()

    def consume(self, msg) -> ConsumeResult:
        with self.lock:
            calls = self.calls[msg.message_id] = self.calls.get(msg.message_id, 0) + 1
            emit(call=calls, **received(msg))
            if calls <= self.fail:
                return ConsumeResult.FAILURE
            self.successes.add(msg.message_id)
            emit(success=msg.message_id)
            return ConsumeResult.SUCCESS


def push(endpoint: str, args: dict) -> None:
    """A PushConsumer until `count` distinct messages were consumed successfully (or `seconds` passed)."""
    from rocketmq.v5.consumer.push.message_listener import MessageListener
    listener = Listener(args.get("fail", 0))
    MessageListener.register(Listener)
    config = ClientConfiguration(endpoint, Credentials(args.get("ak", ""), args.get("sk", "")))
    c = PushConsumer(config, args["consumer_group"], listener, subscription(args))
    c.startup()
    try:
        deadline = time.time() + args.get("seconds", 60)
        while len(listener.successes) < args.get("count", 1) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(args.get("linger_s", 0.5))       # the last acks go out on the client's own threads
        emit(done=len(listener.successes))
    finally:
        c.shutdown()


def bench_receive(endpoint: str, args: dict) -> None:
    """A SimpleConsumer receiving (batches of 32) and acking `count` messages: a line when it has
    started, one when the last ack is through, with the time in between."""
    config = ClientConfiguration(endpoint, Credentials())
    c = SimpleConsumer(config, args["consumer_group"], subscription(args), await_duration=5)
    c.startup()
    try:
        emit(phase="start")
        start, got = time.perf_counter(), 0
        deadline = time.time() + args.get("seconds", 120)
        while got < args["count"] and time.time() < deadline:
            for msg in c.receive(32, 30):
                c.ack(msg)
                got += 1
        emit(phase="done", received=got, seconds=time.perf_counter() - start)
    finally:
        c.shutdown()


SCENARIOS = {"bench_receive": bench_receive, "send": send, "transaction": transaction, "hold": hold, "bench": bench, "simple": simple,
             "push": push}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](sys.argv[2], json.loads(sys.argv[3]))
