"""HTTP/2 (RFC 9113) for the server side of a gRPC connection, sans-IO: bytes in, events out, bytes to send.

    frame header (9 bytes): length u24 | type u8 | flags u8 | R + stream id u31, then `length` bytes
    DATA 0, HEADERS 1, PRIORITY 2, RST_STREAM 3, SETTINGS 4, PUSH_PROMISE 5, PING 6, GOAWAY 7,
    WINDOW_UPDATE 8, CONTINUATION 9

A client opens with the 24-byte preface and a SETTINGS frame; we answer with our SETTINGS and a connection
WINDOW_UPDATE. Received DATA is credited back as it arrives (the application holds no backlog); sent DATA
waits for the peer's window, per stream and per connection. No server push, no priorities (both ignored).

`receive(data)` returns events, each a tuple:
    (REQUEST, stream_id, headers, end_stream)   headers a list of (name, value) bytes pairs
    (DATA, stream_id, payload, end_stream)
    (RESET, stream_id, error_code)              the peer cancelled the stream
    (GOAWAY, 0, error_code, message)            the peer opens no more streams; those open go on
    (CLOSED, 0, error_code, message)            a connection error: we sent GOAWAY, the connection is done
`take()` gives the bytes to write."""
from __future__ import annotations

import struct
from collections import deque
from enum import IntEnum

from mqtool_remoting.hpack import Decoder, HpackError

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
REQUEST, DATA, RESET, GOAWAY, CLOSED = "request", "data", "reset", "goaway", "closed"
_HEAD = struct.Struct(">HBBBL")         # u24 length as u16 + u8, type, flags, stream id
_U32 = struct.Struct(">L")
DEFAULT_WINDOW = 65_535
RECEIVE_WINDOW = 1 << 24                # what we let a peer send ahead, per stream and per connection
MAX_FRAME = 16_384


class Frame(IntEnum):
    DATA = 0
    HEADERS = 1
    PRIORITY = 2
    RST_STREAM = 3
    SETTINGS = 4
    PUSH_PROMISE = 5
    PING = 6
    GOAWAY = 7
    WINDOW_UPDATE = 8
    CONTINUATION = 9


class Flag:
    END_STREAM = ACK = 0x1
    END_HEADERS = 0x4
    PADDED = 0x8
    PRIORITY = 0x20


class Setting(IntEnum):
    HEADER_TABLE_SIZE = 1
    ENABLE_PUSH = 2
    MAX_CONCURRENT_STREAMS = 3
    INITIAL_WINDOW_SIZE = 4
    MAX_FRAME_SIZE = 5
    MAX_HEADER_LIST_SIZE = 6


class ErrorCode(IntEnum):
    NO_ERROR = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2
    FLOW_CONTROL_ERROR = 3
    SETTINGS_TIMEOUT = 4
    STREAM_CLOSED = 5
    FRAME_SIZE_ERROR = 6
    REFUSED_STREAM = 7
    CANCEL = 8
    COMPRESSION_ERROR = 9


class ConnectionError_(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    n = len(payload)
    return _HEAD.pack(n >> 8, n & 0xFF, kind, flags, stream_id) + payload


class _Stream:
    __slots__ = ("window", "pending", "received", "ended")

    def __init__(self, window: int):
        self.window = window            # what we may still send on it
        self.pending: deque = deque()   # [data, end_stream] waiting for window
        self.received = 0               # DATA bytes not yet credited back
        self.ended = False              # we sent END_STREAM (or RST)


class Connection:
    def __init__(self, max_header_list: int = 1 << 20):
        self.buf = bytearray()
        self.out = bytearray()
        self.preface = False
        self.decoder = Decoder()
        self.streams: dict[int, _Stream] = {}
        self.last_stream = 0
        self.peer_window = DEFAULT_WINDOW       # SETTINGS_INITIAL_WINDOW_SIZE of the peer
        self.peer_max_frame = MAX_FRAME
        self.window = DEFAULT_WINDOW            # connection send window
        self.received = 0                       # connection DATA not yet credited
        self.max_header_list = max_header_list
        self._block: tuple[int, int, bytearray] | None = None   # (stream, flags, fragments) until END_HEADERS
        self.closed = False                     # a connection error: nothing more is read
        self.draining = False                   # we sent a graceful GOAWAY: no new stream is taken
        settings = struct.pack(">HLHL", Setting.INITIAL_WINDOW_SIZE, RECEIVE_WINDOW,
                               Setting.MAX_HEADER_LIST_SIZE, max_header_list)
        self.out += frame(Frame.SETTINGS, 0, 0, settings)
        self.out += frame(Frame.WINDOW_UPDATE, 0, 0, _U32.pack(RECEIVE_WINDOW - DEFAULT_WINDOW))

    def take(self) -> bytes:
        out = bytes(self.out)
        self.out.clear()
        return out

    # ------------------------------------------------------------------ receiving

    def receive(self, data: bytes) -> list[tuple]:
        buf = self.buf
        buf += data
        events: list[tuple] = []
        if not self.preface:
            if len(buf) < 24:
                if not PREFACE.startswith(bytes(buf)):
                    return self._fail(events, ErrorCode.PROTOCOL_ERROR, "not an HTTP/2 client (no preface)")
                return events
            if buf[:24] != PREFACE:
                return self._fail(events, ErrorCode.PROTOCOL_ERROR, "not an HTTP/2 client (no preface)")
            del buf[:24]
            self.preface = True
        pos, end = 0, len(buf)
        try:
            while end - pos >= 9 and not self.closed:
                hi, lo, kind, flags, sid = _HEAD.unpack_from(buf, pos)
                length = (hi << 8) | lo
                if length > MAX_FRAME:
                    raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, f"a {length}-byte frame is over {MAX_FRAME}")
                if end - pos - 9 < length:
                    break
                payload = bytes(buf[pos + 9:pos + 9 + length])
                pos += 9 + length
                self._frame(events, kind, flags, sid & 0x7FFF_FFFF, payload)
        except ConnectionError_ as exc:
            return self._fail(events, exc.code, str(exc))
        except HpackError as exc:
            return self._fail(events, ErrorCode.COMPRESSION_ERROR, str(exc))
        del buf[:pos]
        return events

    def _fail(self, events: list, code: ErrorCode, message: str) -> list:
        if not self.closed:
            self.out += frame(Frame.GOAWAY, 0, 0, _U32.pack(self.last_stream) + _U32.pack(code) + message.encode())
            self.closed = True
            events.append((CLOSED, 0, code, message))
        return events

    def _frame(self, events: list, kind: int, flags: int, sid: int, payload: bytes) -> None:
        if self._block is not None and kind != Frame.CONTINUATION:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "a header block was interrupted")
        if kind == Frame.DATA:
            self._data(events, flags, sid, payload)
        elif kind == Frame.HEADERS:
            if sid == 0 or sid % 2 == 0:
                raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, f"HEADERS on stream {sid}")
            payload = _unpad(flags, payload)
            if flags & Flag.PRIORITY:
                payload = payload[5:]
            self._block = (sid, flags, bytearray(payload))
            if flags & Flag.END_HEADERS:
                self._headers(events)
        elif kind == Frame.CONTINUATION:
            if self._block is None or self._block[0] != sid:
                raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "CONTINUATION without its HEADERS")
            self._block[2].extend(payload)
            if len(self._block[2]) > self.max_header_list:
                raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "header block too large")
            if flags & Flag.END_HEADERS:
                self._headers(events)
        elif kind == Frame.SETTINGS:
            if not flags & Flag.ACK:
                self._settings(payload)
                self.out += frame(Frame.SETTINGS, Flag.ACK, 0)
        elif kind == Frame.WINDOW_UPDATE:
            self._window_update(sid, payload)
        elif kind == Frame.PING:
            if len(payload) != 8:
                raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, "PING of the wrong size")
            if not flags & Flag.ACK:
                self.out += frame(Frame.PING, Flag.ACK, 0, payload)
        elif kind == Frame.RST_STREAM:
            if self.streams.pop(sid, None) is not None:
                events.append((RESET, sid, _U32.unpack_from(payload)[0] if len(payload) >= 4 else 0))
        elif kind == Frame.GOAWAY:
            code = _U32.unpack_from(payload, 4)[0] if len(payload) >= 8 else 0
            events.append((GOAWAY, 0, code, payload[8:].decode(errors="replace")))
        elif kind == Frame.PUSH_PROMISE:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "a client cannot push")
        # PRIORITY and unknown frame types are ignored, as the RFC requires

    def _headers(self, events: list) -> None:
        sid, flags, block = self._block
        self._block = None
        headers = self.decoder.decode(bytes(block))
        end = bool(flags & Flag.END_STREAM)
        if sid in self.streams:             # trailers from the client end its side
            events.append((DATA, sid, b"", True))
            return
        if sid <= self.last_stream:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, f"stream {sid} reused")
        self.last_stream = sid
        if self.draining:
            self.out += frame(Frame.RST_STREAM, 0, sid, _U32.pack(ErrorCode.REFUSED_STREAM))
            return
        self.streams[sid] = _Stream(self.peer_window)
        events.append((REQUEST, sid, headers, end))

    def _data(self, events: list, flags: int, sid: int, payload: bytes) -> None:
        if sid == 0:
            raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0")
        size = len(payload)
        self.received += size
        if self.received > RECEIVE_WINDOW // 2:
            self.out += frame(Frame.WINDOW_UPDATE, 0, 0, _U32.pack(self.received))
            self.received = 0
        stream = self.streams.get(sid)
        if stream is None:
            if sid > self.last_stream:
                raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, f"DATA on idle stream {sid}")
            return                          # a stream we ended or reset: the peer had not seen that yet
        stream.received += size
        end = bool(flags & Flag.END_STREAM)
        if stream.received > RECEIVE_WINDOW // 2 and not end:
            self.out += frame(Frame.WINDOW_UPDATE, 0, sid, _U32.pack(stream.received))
            stream.received = 0
        events.append((DATA, sid, _unpad(flags, payload), end))

    def _settings(self, payload: bytes) -> None:
        if len(payload) % 6:
            raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS of the wrong size")
        for key, value in struct.iter_unpack(">HL", payload):
            if key == Setting.INITIAL_WINDOW_SIZE:
                if value > 0x7FFF_FFFF:
                    raise ConnectionError_(ErrorCode.FLOW_CONTROL_ERROR, "initial window too large")
                delta, self.peer_window = value - self.peer_window, value
                for stream in self.streams.values():
                    stream.window += delta
                self._flush_all()
            elif key == Setting.MAX_FRAME_SIZE:
                if not MAX_FRAME <= value <= 0xFF_FFFF:
                    raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, f"max frame size {value}")
                self.peer_max_frame = value
            # HEADER_TABLE_SIZE: our encoder never indexes, so any size suits it

    def _window_update(self, sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ConnectionError_(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE of the wrong size")
        increment = _U32.unpack(payload)[0] & 0x7FFF_FFFF
        if sid == 0:
            self.window += increment
            if self.window > 0x7FFF_FFFF:
                raise ConnectionError_(ErrorCode.FLOW_CONTROL_ERROR, "connection window overflow")
            self._flush_all()
        else:
            stream = self.streams.get(sid)
            if stream is not None:
                stream.window += increment
                self._flush(sid, stream)

    # ------------------------------------------------------------------ sending

    def send_headers(self, sid: int, block: bytes, end_stream: bool = False) -> None:
        """A header block (HPACK bytes); with end_stream the stream is done on our side (trailers)."""
        stream = self.streams.get(sid)
        if stream is None or stream.ended:
            return
        if end_stream and stream.pending:
            stream.pending.append([block, True, True])     # trailers wait behind the data
            return
        self._write_headers(sid, block, end_stream)
        if end_stream:
            self._end(sid, stream)

    def _write_headers(self, sid: int, block: bytes, end_stream: bool) -> None:
        flags = Flag.END_STREAM if end_stream else 0
        limit = self.peer_max_frame
        if len(block) <= limit:
            self.out += frame(Frame.HEADERS, flags | Flag.END_HEADERS, sid, block)
            return
        self.out += frame(Frame.HEADERS, flags, sid, block[:limit])
        rest = block[limit:]
        while rest:
            chunk, rest = rest[:limit], rest[limit:]
            self.out += frame(Frame.CONTINUATION, 0 if rest else Flag.END_HEADERS, sid, chunk)

    def send_data(self, sid: int, data: bytes, end_stream: bool = False) -> None:
        stream = self.streams.get(sid)
        if stream is None or stream.ended:
            return
        stream.pending.append([data, end_stream, False])
        self._flush(sid, stream)

    def blocked(self, sid: int) -> int:
        """Bytes of DATA on the stream still waiting for the peer's window."""
        stream = self.streams.get(sid)
        return sum(len(item[0]) for item in stream.pending if not item[2]) if stream else 0

    def _flush(self, sid: int, stream: _Stream) -> None:
        pending = stream.pending
        while pending:
            data, end, is_headers = pending[0]
            if is_headers:
                pending.popleft()
                self._write_headers(sid, data, end)
                self._end(sid, stream)
                return
            room = min(stream.window, self.window, self.peer_max_frame)
            if room <= 0 and data:
                return
            chunk = data[:room]
            last = len(chunk) == len(data)
            self.out += frame(Frame.DATA, Flag.END_STREAM if (last and end) else 0, sid, chunk)
            stream.window -= len(chunk)
            self.window -= len(chunk)
            if not last:
                pending[0][0] = data[room:]
                continue
            pending.popleft()
            if end:
                self._end(sid, stream)
                return

    def _flush_all(self) -> None:
        for sid, stream in list(self.streams.items()):
            if stream.pending:
                self._flush(sid, stream)

    def _end(self, sid: int, stream: _Stream) -> None:
        stream.ended = True
        stream.pending.clear()
        self.streams.pop(sid, None)

    def reset(self, sid: int, code: ErrorCode = ErrorCode.CANCEL) -> None:
        stream = self.streams.pop(sid, None)
        if stream is not None:
            stream.ended = True
            self.out += frame(Frame.RST_STREAM, 0, sid, _U32.pack(code))

    def goaway(self) -> None:
        """A graceful GOAWAY: the streams open now are still served, no new one is taken."""
        if not self.closed and not self.draining:
            self.out += frame(Frame.GOAWAY, 0, 0, _U32.pack(self.last_stream) + _U32.pack(ErrorCode.NO_ERROR))
            self.draining = True


def _unpad(flags: int, payload: bytes) -> bytes:
    if not flags & Flag.PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise ConnectionError_(ErrorCode.PROTOCOL_ERROR, "padding longer than the frame")
    return payload[1:len(payload) - payload[0]]
