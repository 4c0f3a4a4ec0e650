"""`mqtool send` from stdin, as kcat -P produces: each message is sent as it arrives (`tail -f app.log |
mqtool send` sends every line when it is written); `--batch N` batches only what has already arrived,
waiting at most LINGER_S for more. EOF, Ctrl-C (SIGINT) or SIGTERM end the input: what was read is
sent, then the caller prints its summary."""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import BinaryIO

LINGER_S = 0.005          # --batch: how long a batch waits to fill (as librdkafka's linger.ms, 5 ms)
HEARTBEAT_S = 30.0        # a Java producer's heartbeatBrokerInterval: the group stays online while idle
READ_SIZE = 65536
_END = None               # in the queue: no more input
log = logging.getLogger("mqtool.send")


class StdinMessages:
    """Message bodies cut from `stream` at `delimiter` by a reader thread and handed to the event loop
    as each read returns, empty ones skipped. At EOF the unfinished last part is a message too; a stop
    (a signal) ends the input at once, and an unfinished part then is dropped, as it was never ended."""

    def __init__(self, stream: BinaryIO, delimiter: bytes):
        self.delimiter = delimiter
        self.queue: asyncio.Queue[list[bytes] | None] = asyncio.Queue()
        self.ended = False
        self._pending: list[bytes] = []         # taken from the queue, not yet given out
        self._loop = asyncio.get_running_loop()
        self._read = _reader_of(stream)
        threading.Thread(target=self._reader, name="stdin-reader", daemon=True).start()

    def stop(self) -> None:
        """No more input: what is already queued is still taken, then the end."""
        self.queue.put_nowait(_END)

    def _reader(self) -> None:
        d = self.delimiter
        part = bytearray()
        while True:
            try:
                chunk = self._read(READ_SIZE)
            except (OSError, ValueError):        # stdin closed under us: an end like EOF
                chunk = b""
            if not chunk:
                break
            seen = max(0, len(part) - len(d) + 1)      # a delimiter may straddle the two reads
            part += chunk
            cut = part.rfind(d, seen)
            if cut != -1:
                bodies = [b for b in bytes(part[:cut]).split(d) if b]
                del part[:cut + len(d)]
                if bodies and not self._hand(bodies):
                    return
        if part:
            self._hand([bytes(part)])
        self._hand(_END)

    def _hand(self, item) -> bool:
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)
            return True
        except RuntimeError:                     # the loop is gone: nobody takes more
            return False

    async def take(self, at_most: int, linger_s: float = 0.0) -> list[bytes]:
        """At least one body (waiting for it), at most `at_most` of what has arrived, waiting up to
        `linger_s` for more while short; [] once the input has ended and everything was taken."""
        out: list[bytes] = []
        deadline = None
        while len(out) < at_most:
            if self._pending:
                n = at_most - len(out)
                out += self._pending[:n]
                del self._pending[:n]
                continue
            if self.ended:
                break
            if not out or not self.queue.empty():
                item = await self.queue.get()
            else:
                if deadline is None:
                    deadline = self._loop.time() + linger_s
                try:
                    async with asyncio.timeout_at(deadline):
                        item = await self.queue.get()
                except TimeoutError:
                    break
            if item is _END:
                self.ended = True
            else:
                self._pending += item
        return out


def _reader_of(stream) -> Callable[[int], bytes]:
    """A read that returns what one read of the pipe gives. A file descriptor's is os.read: a thread
    blocked in a buffered reader would hold its lock when the interpreter exits (after a signal)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):     # not a file (a test's stdin): its own reads
        return getattr(stream, "read1", stream.read)
    return functools.partial(os.read, fd)


async def send_stream(producer, source: StdinMessages, make, queue, sharding_key, oneway: bool, batch: int,
                      each: Callable[[dict], None], topic: str) -> None:
    """Send what `source` gives until it ends, `each` called with every result row as it comes."""
    loop = asyncio.get_running_loop()

    def on_signal():        # the input ends; the handlers go, so a second Ctrl-C interrupts sends stuck
        source.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    beat = loop.create_task(_heartbeats(producer, topic))
    try:
        await producer.heartbeat(topic)
        while True:
            bodies = await source.take(batch or 1, LINGER_S if batch else 0.0)
            if not bodies:
                return
            if batch:
                r = await producer.send_batch([make(b) for b in bodies], queue)
                for k, msg_id in enumerate(r.msg_id.split(",")):
                    each({"status": r.status, "msg_id": msg_id, "broker": r.broker, "queue_id": r.queue_id,
                          "queue_offset": r.queue_offset + k})
                continue
            r = await producer.send(make(bodies[0]), queue, sharding_key, oneway)
            if r is None:
                each({"status": "ONEWAY", "msg_id": "", "broker": "", "queue_id": -1, "queue_offset": -1})
            else:
                each({"status": r.status, "msg_id": r.msg_id, "broker": r.broker, "queue_id": r.queue_id,
                      "queue_offset": r.queue_offset, **({"recall_handle": r.recall_handle}
                                                         if r.recall_handle else {})})
    finally:
        beat.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _heartbeats(producer, topic: str) -> None:
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        try:
            await producer.heartbeat(topic)
        except Exception as exc:  # noqa: BLE001 - a missed heartbeat is retried; the sends say what is wrong
            log.debug("heartbeat failed: %s", exc)
