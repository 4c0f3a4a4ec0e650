"""A REGISTER_BROKER body read the name server's way at scale: the data version and the filter
servers at once, the topics only when the route table takes them (a new broker or a new data
version). A broker with 10,000 topics re-registers every 30 s with an unchanged version; reading
its topics every time cost ~0.2 s of the name server's loop per registration.

Plain bodies are parsed by orjson (the json module's reader, which also takes fastjson's bare keys,
when orjson refuses); compressed ones (RegisterBrokerBody.encode(true)) are inflated and their
length-prefixed parts walked, the topic lines split only when needed. Anything Java could not
decode either raises BodyError, from `read` or from `queue_rows`, before the table changes.
"""
from __future__ import annotations

import asyncio
import struct
import zlib
from itertools import islice

from mqtool_remoting import jsonbody
from mqtool_remoting.bodies import MAX_INFLATED_REGISTER_BODY, DataVersion, body_errors

try:
    from orjson import JSONDecodeError as _FastError, loads as _fast_loads
except ImportError:          # pragma: no cover - orjson is a dependency; the json module is the fallback
    _fast_loads, _FastError = None, ValueError

_LEN = struct.Struct(">i")
QueueRow = tuple[str, int, int, int, int]     # topic, readQueueNums, writeQueueNums, perm, topicSysFlag


def _loads(data: bytes):
    if _fast_loads is not None:
        try:
            return _fast_loads(data)
        except _FastError:
            pass
    return jsonbody.loads(data)


def _int(v, default: int) -> int:
    if type(v) is int:
        return v
    if v is None or v == "":
        return default
    if isinstance(v, dict):            # an AtomicLong some writers spell {"value": n}
        v = v.get("value", default)
    return int(v)


class RegisterView:
    """What REGISTER_BROKER carries: `dataVersion`, `filterServerList`, and `queue_rows()`."""

    def __init__(self, version: DataVersion, filter_servers: list[str], count: int, rows):
        self.dataVersion = version
        self.filterServerList = filter_servers
        self.count = count              # topics in the body
        self._rows = rows               # () -> iterator of QueueRow
        self._cached: list[QueueRow] | None = None

    def queue_rows(self) -> list[QueueRow]:
        if self._cached is None:
            with body_errors("RegisterBrokerBody"):
                self._cached = list(self._rows())
        return self._cached

    def mark_applied(self) -> None:
        """The rows are in the route table already (put in steps): register() has none left to put."""
        self._cached = []

    async def read_rows_in_steps(self, step: int) -> None:
        """queue_rows, `step` rows per turn of the event loop: 10,000 topics take ~40 ms to read,
        which route look-ups should not wait for in one piece."""
        out: list[QueueRow] = []
        rows = self._rows()
        while True:
            with body_errors("RegisterBrokerBody"):
                chunk = list(islice(rows, step))
            out += chunk
            if len(chunk) < step:
                break
            await asyncio.sleep(0)
        self._cached = out


def read(data: bytes, compressed: bool) -> RegisterView:
    with body_errors("compressed RegisterBrokerBody" if compressed else "RegisterBrokerBody"):
        return _read_compressed(data) if compressed else _read_plain(data)


def _read_plain(data: bytes) -> RegisterView:
    obj = _loads(data) or {}
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    if "topicConfigSerializeWrapper" not in obj and "topicConfigTable" in obj:
        wrapper = obj            # brokers older than V3_0_11 send a bare TopicConfigSerializeWrapper
    else:
        wrapper = obj.get("topicConfigSerializeWrapper") or {}
    if not isinstance(wrapper, dict):
        raise ValueError("topicConfigSerializeWrapper is not an object")
    version = DataVersion.from_json(wrapper.get("dataVersion"))
    servers = [str(s) for s in obj.get("filterServerList") or []]
    table = wrapper.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        raise ValueError("topicConfigTable is not an object")

    def rows():
        for key, tc in table.items():
            tc = tc or {}
            yield (str(tc.get("topicName") or key), _int(tc.get("readQueueNums"), 16),
                   _int(tc.get("writeQueueNums"), 16), _int(tc.get("perm"), 6), _int(tc.get("topicSysFlag"), 0))
    return RegisterView(version, servers, len(table), rows)


def _read_compressed(data: bytes) -> RegisterView:
    inflater = zlib.decompressobj()
    raw = inflater.decompress(data, MAX_INFLATED_REGISTER_BODY)
    if inflater.unconsumed_tail:      # a 16 MiB frame must not inflate into gigabytes
        raise ValueError(f"compressed register body inflates past {MAX_INFLATED_REGISTER_BODY} bytes")
    size = len(raw)
    unpack = _LEN.unpack_from

    def chunk(p: int) -> tuple[int, int]:
        (n,) = unpack(raw, p)
        if n < 0 or p + 4 + n > size:
            raise ValueError("compressed register body ends early")
        return p + 4, p + 4 + n
    start, p = chunk(0)
    version = DataVersion.from_json(_loads(raw[start:p]))
    (count,) = unpack(raw, p)
    p += 4
    first = p
    for _ in range(max(count, 0)):          # the topics' lengths only: their text waits for queue_rows
        (n,) = unpack(raw, p)
        if n < 0:
            raise ValueError("compressed register body has a negative length")
        p += 4 + n
    if p > size:
        raise ValueError("compressed register body ends early")
    last = p
    start, p = chunk(p)
    servers = [str(s) for s in _loads(raw[start:p]) or []]

    def rows():
        q = first
        while q < last:
            s, q = chunk(q)
            parts = raw[s:q].decode().split(" ")
            if len(parts) != 5:
                raise ValueError(f"topic config line needs 5 fields: {raw[s:q][:100]!r}")
            yield (parts[0], int(parts[1]), int(parts[2]), int(parts[3]), 0)   # no sysflag in this form
    return RegisterView(version, servers, max(count, 0), rows)
