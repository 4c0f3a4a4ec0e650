"""RemotingCommand and its frame bytes (RemotingCommand.java, RocketMQSerializable.java).

    frame:  int length (= 4 + header + body) | int (serializeType << 24 | headerLength) | header | body

JSON headers are written like Java's fastjson (keys in alphabetical order, nulls omitted,
every extField value a string); they are read tolerantly (numbers and booleans in extFields,
as the C++ client sends, become strings). The binary ROCKETMQ header is read and written too.
"""
from __future__ import annotations

import itertools
import json
import struct
from dataclasses import dataclass, field

from remoting.codes import RPC_ONEWAY, RPC_TYPE, LanguageCode, SerializeType, VERSION_V4_9_8, named
from remoting.errors import FrameError

_INT = struct.Struct(">i")
_TWO_INTS = struct.Struct(">ii")
_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_opaque_counter = itertools.count(1)


def next_opaque() -> int:
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

    @classmethod
    def request(cls, code: int, ext_fields: dict | None = None, body: bytes = b"", oneway: bool = False,
                language: str = "PYTHON") -> "RemotingCommand":
        return cls(int(code), next_opaque(), RPC_ONEWAY if oneway else 0, None,
                   {k: _text(v) for k, v in (ext_fields or {}).items() if v is not None}, body, language)

    def response(self, code: int, remark: str | None = None, ext_fields: dict | None = None,
                 body: bytes = b"") -> "RemotingCommand":
        """A response to this request: same opaque and serialize type, RPC_TYPE set."""
        return RemotingCommand(int(code), self.opaque, RPC_TYPE, remark,
                               {k: _text(v) for k, v in (ext_fields or {}).items() if v is not None},
                               body, "JAVA", VERSION_V4_9_8, self.serialize_type)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def encode(self) -> bytes:
        header = self.encode_header()
        return _TWO_INTS.pack(4 + len(header) + len(self.body), (self.serialize_type << 24) | len(header)) + \
            header + self.body

    def encode_header(self) -> bytes:
        if self.serialize_type == SerializeType.ROCKETMQ:
            return self._encode_binary_header()
        obj: dict = {"code": self.code}
        if self.ext_fields:
            obj["extFields"] = self.ext_fields
        obj["flag"] = self.flag
        obj["language"] = self.language
        obj["opaque"] = self.opaque
        if self.remark is not None:
            obj["remark"] = self.remark
        obj["serializeTypeCurrentRPC"] = "JSON"
        obj["version"] = self.version
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    def _encode_binary_header(self) -> bytes:
        lang = _language_code(self.language)
        remark = self.remark.encode() if self.remark else b""
        ext = b"".join(struct.pack(">h", len(k.encode())) + k.encode() + _INT.pack(len(v.encode())) + v.encode()
                       for k, v in self.ext_fields.items() if k is not None and v is not None)
        return _BIN_FIXED.pack(self.code, lang, self.version, self.opaque, self.flag) + \
            _INT.pack(len(remark)) + remark + _INT.pack(len(ext)) + ext


def _text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _language_code(name: str) -> int:
    try:
        return LanguageCode[name].value
    except KeyError:
        return LanguageCode.OTHER.value


def decode_frame_body(data: bytes) -> RemotingCommand:
    """Decode one frame without its leading length int: header-length int, header, body."""
    if len(data) < 4:
        raise FrameError("frame shorter than its header length field")
    mark = _INT.unpack_from(data, 0)[0]
    stype, hlen = (mark >> 24) & 0xFF, mark & 0xFFFFFF
    if 4 + hlen > len(data):
        raise FrameError(f"header length {hlen} exceeds the frame ({len(data) - 4} bytes)")
    header = data[4:4 + hlen]
    body = bytes(data[4 + hlen:])
    if stype == SerializeType.JSON:
        cmd = _decode_json_header(header)
    elif stype == SerializeType.ROCKETMQ:
        cmd = _decode_binary_header(header)
    else:
        raise FrameError(f"unknown serialize type {stype}")
    cmd.body = body
    cmd.serialize_type = stype
    return cmd


def _decode_json_header(header: bytes) -> RemotingCommand:
    try:
        obj = json.loads(header.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(f"header is not JSON: {exc}") from None
    if not isinstance(obj, dict) or "code" not in obj:
        raise FrameError("header has no code")
    try:
        ext = obj.get("extFields") or {}
        if not isinstance(ext, dict):
            raise FrameError("extFields is not an object")
        return RemotingCommand(
            code=int(obj["code"]), opaque=int(obj.get("opaque", 0)), flag=int(obj.get("flag", 0)),
            remark=obj.get("remark"), ext_fields={str(k): _ext_text(v) for k, v in ext.items() if v is not None},
            language=str(obj.get("language", "JAVA")), version=int(obj.get("version", 0)))
    except (TypeError, ValueError) as exc:
        raise FrameError(f"bad header field: {exc}") from None


def _ext_text(v) -> str:
    """The C++ client sends numbers and booleans; Java reads every value as a string."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def _decode_binary_header(header: bytes) -> RemotingCommand:
    try:
        code, lang, version, opaque, flag = _BIN_FIXED.unpack_from(header, 0)
        p = _BIN_FIXED.size
        rlen = _INT.unpack_from(header, p)[0]
        p += 4
        remark = header[p:p + rlen].decode() if rlen > 0 else None
        p += max(rlen, 0)
        elen = _INT.unpack_from(header, p)[0]
        p += 4
        ext: dict[str, str] = {}
        end = p + elen
        while p < end:
            klen = struct.unpack_from(">h", header, p)[0]
            p += 2
            key = header[p:p + klen].decode()
            p += klen
            vlen = _INT.unpack_from(header, p)[0]
            p += 4
            ext[key] = header[p:p + vlen].decode()
            p += vlen
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"bad ROCKETMQ header: {exc}") from None
    language = named(LanguageCode, lang)
    return RemotingCommand(code, opaque, flag, remark, ext, b"",
                           language.name if hasattr(language, "name") else "OTHER", version)
