"""RemotingCommand and its frame bytes (RemotingCommand.java, RocketMQSerializable.java).

    frame:  int32 length (= 4 + header + body) | int32 (serializeType << 24 | headerLength) | header | body

JSON headers are written byte-for-byte like Java's fastjson: bean properties alphabetical, nulls
omitted, every extField value a string, extFields in java.util.HashMap iteration order (what Java
emits; the spec's send-response example depends on it). They are read tolerantly: numbers and
booleans in extFields (the C++ client sends them) become strings, unknown keys are ignored,
missing optional keys get Java's defaults. The binary ROCKETMQ header is read and written too.
"""
from __future__ import annotations

import functools
import itertools
import json
import operator
import struct
from dataclasses import dataclass, field

from mqtool_remoting import jsonbody
from mqtool_remoting.codes import RPC_ONEWAY, RPC_TYPE, VERSION_V4_9_8, LanguageCode, SerializeType, named
from mqtool_remoting.errors import BodyError, FrameError

try:                                       # see _plain_header
    from orjson import JSONDecodeError as _FastError, loads as _fast_loads
except ImportError:
    _fast_loads = None
try:                                       # HeaderTemplate.frame_plain in one C pass (csrc/fill.c)
    from mqtool_remoting._header import fill_frame as _fill_frame
except ImportError:
    _fill_frame = None

_INT = struct.Struct(">i")
_TWO_INTS = struct.Struct(">iI")
_BIN_FIXED = struct.Struct(">HBHII")   # code, language, version, opaque, flag (written unsigned)
_BIN_FIXED_IN = struct.Struct(">hbhii")  # read back signed, as Java's readShort/readInt do
_SHORT = struct.Struct(">h")
MAX_HEADER_LENGTH = 0xFFFFFF
_SERIALIZE_TYPES = {t.value: t for t in SerializeType}
_opaque_counter = itertools.count(1)


def next_opaque() -> int:
    """This process's request id counter (Java: RemotingCommand.requestId); never negative."""
    return next(_opaque_counter) & 0x7FFFFFFF


@dataclass
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: str = "JAVA"
    version: int = VERSION_V4_9_8
    serialize_type: int = SerializeType.JSON
    # The JSON header's bytes when the sender wrote them from a template (the producer's sends);
    # they must equal what encode_header() makes of the fields. Whoever changes a field clears it.
    header_json: bytes | None = field(default=None, repr=False, compare=False)

    @classmethod
    def request(cls, code: int, ext_fields: dict | None = None, body: bytes = b"", oneway: bool = False,
                language: str = "PYTHON") -> "RemotingCommand":
        """A new request with the next opaque; `ext_fields` values are turned into Java's strings."""
        return cls(int(code), next_opaque(), RPC_ONEWAY if oneway else 0, None, ext_text(ext_fields),
                   body, language)

    def response(self, code: int, remark: str | None = None, ext_fields: dict | None = None,
                 body: bytes = b"") -> "RemotingCommand":
        """A response to this request: same opaque and serialize type, RPC_TYPE set."""
        return RemotingCommand(int(code), self.opaque, RPC_TYPE, remark, ext_text(ext_fields), body, "JAVA",
                               VERSION_V4_9_8, self.serialize_type)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def encode(self) -> bytes:
        """The whole frame, length prefix included."""
        header = self.encode_header()
        if len(header) > MAX_HEADER_LENGTH:
            raise FrameError(f"header of {len(header)} bytes does not fit the 24-bit header length")
        return _TWO_INTS.pack(4 + len(header) + len(self.body), (int(self.serialize_type) << 24) | len(header)) + \
            header + bytes(self.body)

    def encode_header(self) -> bytes:
        if self.serialize_type == SerializeType.ROCKETMQ:
            return self._encode_binary_header()
        if self.header_json is not None:
            return self.header_json
        # Alphabetical, as fastjson orders bean properties; None-valued properties are left out.
        # Numbers and the fixed names are formatted directly; only text goes through the encoder.
        ext = f'"extFields":{_ext_json(self.ext_fields)},' if self.ext_fields else ""
        remark = f'"remark":{_dumps(self.remark)},' if self.remark is not None else ""
        language = _language_name(self.language)
        if language not in _PLAIN_LANGUAGES:
            language = _dumps(language)[1:-1]
        return _utf8(f'{{"code":{int(self.code)},{ext}"flag":{int(self.flag)},"language":"{language}",'
                     f'"opaque":{int(self.opaque)},{remark}"serializeTypeCurrentRPC":"JSON",'
                     f'"version":{int(self.version)}}}')

    def _encode_binary_header(self) -> bytes:
        remark = _utf8(self.remark) if self.remark else b""
        parts = []
        for k in jsonbody.java_order(self.ext_fields):
            v = self.ext_fields[k]
            if k is None or v is None:
                continue
            kb, vb = _utf8(str(k)), _utf8(str(v))
            if len(kb) > 0x7FFF:
                raise FrameError(f"extFields key of {len(kb)} bytes does not fit the 16-bit key length")
            parts.append(_SHORT.pack(len(kb)) + kb + _INT.pack(len(vb)) + vb)
        ext = b"".join(parts)
        return _BIN_FIXED.pack(self.code & 0xFFFF, _language_code(self.language), self.version & 0xFFFF,
                               self.opaque & 0xFFFFFFFF, self.flag & 0xFFFFFFFF) + \
            _INT.pack(len(remark)) + remark + _INT.pack(len(ext)) + ext


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_json_str = json.encoder.encode_basestring     # what _dumps writes for one str, without its set-up


def _ext_json(ext: dict) -> str:
    """extFields as fastjson writes them: Java's HashMap order; the usual all-strings map is written
    from cached '"key":' prefixes (the same bytes as `_dumps` of the reordered map, tested)."""
    try:
        prefixes = _ext_prefixes(tuple(ext))
        return "{" + ",".join([p + _json_str(ext[k]) for k, p in prefixes]) + "}"
    except TypeError:                  # a value or key that is not a str: the general encoder
        return _dumps(jsonbody.java_map(ext))


@functools.lru_cache(maxsize=1024)
def _ext_prefixes(keys: tuple) -> tuple:
    return tuple((k, _json_str(k) + ":") for k in jsonbody.java_order(keys))
_PLAIN_LANGUAGES = frozenset(lang.name for lang in LanguageCode)


def _utf8(text: str) -> bytes:
    """Java's String.getBytes(UTF_8): a lone surrogate (a JSON header may carry one as an escape)
    becomes '?' instead of failing the answer."""
    return text.encode("utf-8", "replace")


def ext_text(ext: dict | None) -> dict[str, str]:
    """extFields as Java writes them: every value a string (booleans `true`/`false`), None dropped."""
    return {str(k): _text(v) for k, v in (ext or {}).items() if v is not None}


def _text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return str(v)


def _language_name(language) -> str:
    if isinstance(language, LanguageCode):
        return language.name
    return str(language)


def _language_code(language) -> int:
    try:
        return LanguageCode[_language_name(language)].value
    except KeyError:
        return LanguageCode.OTHER.value


class HeaderTemplate:
    """A JSON header made once with marks in place of the values that change per command (some
    extFields values, and the opaque), then filled per command: the same bytes encode_header writes,
    for a fraction of the work. `make` returns None when a fixed value contains a mark."""

    _OPAQUE = "\x7fopaque\x7f"

    def __init__(self, parts: tuple[str, ...], slots: tuple[int, ...]):
        self.parts, self.slots = parts, slots   # text between slots; each slot: a value's index, -1 the opaque
        fmt = [parts[0].replace("%", "%%")]
        for i, slot in enumerate(slots, 1):
            fmt += ["%d" if slot < 0 else '"%s"', parts[i].replace("%", "%%")]
        self._format = "".join(fmt)
        # fill_plain's arguments (opaque, *values) in the slots' order, picked by one C call
        self._pick = operator.itemgetter(*[0 if slot < 0 else slot + 1 for slot in slots]) if len(slots) > 1 \
            else (lambda args: (args[0 if slots[0] < 0 else slots[0] + 1],)) if slots else (lambda args: ())
        self.byte_parts = tuple(p.encode("utf-8") for p in parts)     # frame_plain's, for the C filler

    @classmethod
    def make(cls, cmd: "RemotingCommand", marks: dict[str, str]) -> "HeaderTemplate | None":
        """`cmd` with opaque 0 and the ext value `marks[key]` (a text no real value holds) in each
        key that changes; fill() then takes the values in `marks`' order."""
        if cmd.opaque != 0 or cmd.serialize_type != SerializeType.JSON:
            raise ValueError("a template is made from a JSON command with opaque 0")
        text = cmd.encode_header().decode("utf-8")
        text = text.replace('"opaque":0,', f'"opaque":{cls._OPAQUE},', 1)
        found = [(text.find(_json_str(m)), _json_str(m), i) for i, m in enumerate(marks.values())]
        found.append((text.find(cls._OPAQUE), cls._OPAQUE, -1))
        if any(at < 0 or text.count(m) != 1 for at, m, _ in found):
            return None
        parts, slots, last = [], [], 0
        for at, m, i in sorted(found):
            parts.append(text[last:at])
            slots.append(i)
            last = at + len(m)
        parts.append(text[last:])
        return cls(tuple(parts), tuple(slots))

    def fill_plain(self, opaque: int, *values) -> bytes:
        """fill() of values JSON writes as they are (ints, hex ids, ASCII letters and digits), in one
        % format: the caller vouches that no value needs an escape."""
        return (self._format % self._pick((opaque, *values))).encode()

    def frame_plain(self, opaque: int, *values) -> bytes:
        """fill_plain's header as a whole frame without a body: its length and header-length ints first."""
        if _fill_frame is not None:
            got = _fill_frame(self.byte_parts, self.slots, opaque, *values)
            if got is not None:
                return got
        header = self.fill_plain(opaque, *values)
        return _TWO_INTS.pack(4 + len(header), len(header)) + header

    def fill(self, opaque: int, *values: str) -> bytes:
        parts = self.parts
        out = [parts[0]]
        for i, slot in enumerate(self.slots, 1):
            out.append(str(opaque) if slot < 0 else _json_str(values[slot]))
            out.append(parts[i])
        return "".join(out).encode("utf-8", "replace")


# ------------------------------------------------------------------ decoding

def decode_frame(frame: bytes) -> RemotingCommand:
    """Decode one whole frame, its length prefix included."""
    if len(frame) < 8:
        raise FrameError("a frame needs at least 8 bytes")
    length = _INT.unpack_from(frame, 0)[0]
    if length != len(frame) - 4:
        raise FrameError(f"frame length field says {length}, but {len(frame) - 4} bytes follow it")
    return decode_frame_body(frame[4:])


def decode_frame_body(data: bytes) -> RemotingCommand:
    """Decode one frame without its leading length int: header-length int, header, body."""
    if len(data) < 4:
        raise FrameError("frame shorter than its header length field")
    mark = _INT.unpack_from(data, 0)[0]
    stype, hlen = (mark >> 24) & 0xFF, mark & 0xFFFFFF
    if 4 + hlen > len(data):
        raise FrameError(f"header length {hlen} exceeds the frame ({len(data) - 4} bytes)")
    header = bytes(data[4:4 + hlen])
    if stype == SerializeType.JSON:
        cmd = _decode_json_header(header)
    elif stype == SerializeType.ROCKETMQ:
        cmd = _decode_binary_header(header)
    else:
        raise FrameError(f"unknown serialize type {stype}")
    cmd.body = bytes(data[4 + hlen:])
    cmd.serialize_type = _SERIALIZE_TYPES[stype]    # (an enum call costs a microsecond)
    return cmd


def _decode_json_header(header: bytes) -> RemotingCommand:
    plain = _plain_header(header)
    if plain is not None:
        return plain
    try:
        obj = jsonbody.loads(header)
    except BodyError as exc:
        raise FrameError(f"header is not JSON: {str(exc).removeprefix('not a JSON body: ')}") from None
    if not isinstance(obj, dict) or obj.get("code") is None:
        raise FrameError("header is not an object with a code")
    ext = obj.get("extFields")
    if ext is None:
        ext = {}
    if not isinstance(ext, dict):
        raise FrameError("extFields is not an object")
    try:
        remark = obj.get("remark")
        return RemotingCommand(
            code=_int(obj["code"]), opaque=_int(obj.get("opaque")), flag=_int(obj.get("flag")),
            remark=None if remark is None else _text(remark),
            ext_fields=ext if all(type(v) is str for v in ext.values()) else  # Java sends strings only
            {str(k): _text(v) for k, v in ext.items() if v is not None},
            language=_json_language(obj.get("language")), version=_int(obj.get("version")))
    except (TypeError, ValueError, OverflowError) as exc:
        raise FrameError(f"bad header field: {exc}") from None


def _plain_header(header: bytes) -> RemotingCommand | None:
    """The header every peer sends (int code, opaque, flag and version, string remark, language and
    extFields values), read by orjson (about 3x faster than json); None for anything else, which
    the json module then reads (orjson turns integers past 64 bits into floats, and refuses
    fastjson's bare keys)."""
    if _fast_loads is None:
        return None
    try:
        obj = _fast_loads(header)
    except _FastError:
        return None
    if type(obj) is not dict:
        return None
    code, opaque, flag, version = obj.get("code"), obj.get("opaque", 0), obj.get("flag", 0), obj.get("version", 0)
    remark, language, ext = obj.get("remark"), obj.get("language", "JAVA"), obj.get("extFields")
    if type(code) is not int or type(opaque) is not int or type(flag) is not int or type(version) is not int \
            or (remark is not None and type(remark) is not str) or type(language) is not str:
        return None
    if ext is None:
        ext = {}
    elif type(ext) is not dict:
        return None
    else:
        try:
            "".join(ext.values())          # every value a str (the fastest way to ask)
        except TypeError:
            return None
    return RemotingCommand(code, opaque, flag, remark, ext, b"", language, version)


def _int(v) -> int:
    """fastjson's int coercion: numbers, numeric strings; null is 0 (Java's primitive default)."""
    if type(v) is int:
        return v
    if v is None:
        return 0
    if isinstance(v, bool):
        raise ValueError(f"{v!r} is not a number")
    if isinstance(v, float):
        return int(v)
    return int(str(v).strip())


def _json_language(v) -> str:
    if v is None:
        return "JAVA"                      # RemotingCommand's field default
    if isinstance(v, int) and not isinstance(v, bool):   # fastjson also takes an enum ordinal
        lang = named(LanguageCode, v)
        return lang.name if isinstance(lang, LanguageCode) else "OTHER"
    return str(v)


def _decode_binary_header(header: bytes) -> RemotingCommand:
    try:
        code, lang, version, opaque, flag = _BIN_FIXED_IN.unpack_from(header, 0)
        p = _BIN_FIXED_IN.size
        remark, p = _read_str(header, p, _INT)
        elen = _INT.unpack_from(header, p)[0]
        p += 4
        if elen < 0 or p + elen > len(header):
            raise FrameError(f"extFields length {elen} exceeds the header")
        ext: dict[str, str] = {}
        end = p + elen
        while p < end:
            key, p = _read_str(header, p, _SHORT, end)
            value, p = _read_str(header, p, _INT, end)
            if key is not None and value is not None:   # Java keeps null entries; they mean "absent"
                ext[key] = value
    except struct.error as exc:
        raise FrameError(f"truncated ROCKETMQ header: {exc}") from None
    except UnicodeDecodeError as exc:
        raise FrameError(f"ROCKETMQ header text is not UTF-8: {exc}") from None
    language = named(LanguageCode, lang)
    return RemotingCommand(code, opaque, flag, remark, ext, b"",
                           language.name if isinstance(language, LanguageCode) else "OTHER", version)


def _read_str(buf: bytes, p: int, length: struct.Struct, limit: int | None = None) -> tuple[str | None, int]:
    """A length-prefixed UTF-8 string; length 0 is null, as in RocketMQSerializable.readStr."""
    n = length.unpack_from(buf, p)[0]
    p += length.size
    limit = len(buf) if limit is None else limit
    if n < 0 or p + n > limit:
        raise FrameError(f"string length {n} runs past the header")
    if n == 0:
        return None, p
    return buf[p:p + n].decode("utf-8"), p + n
