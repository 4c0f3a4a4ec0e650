"""Request signing of RocketMQ 4.x plain ACL (AclClientRPCHook, AclUtils, AclSigner), without I/O.

    content   = the extFields' values, sorted by key in Java String order, concatenated with no
                separator (UTF-8), the `Signature` field left out; then the raw body
    Signature = Base64(HmacSHA1(secretKey, content))

Only values are signed, so `{"a": "bc"}` and `{"a": "b", "b": "c"}` sign alike: that is 4.9.8.
The broker computes the same over the fields it received, leaving out `_UNIQUE_KEY_QUERY` too.
The 4.9.8 Java client signs that field anyway, so its QUERY_MESSAGE by unique key is always
refused; `Credentials.sign` leaves it out as the broker does (`java_client=True` signs like Java).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"            # only a key of the client's optional key file, never on the wire
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
CLIENT_SKIP = frozenset({SIGNATURE})
BROKER_SKIP = frozenset({SIGNATURE, UNIQUE_KEY_QUERY})


def java_order(key: str) -> bytes:
    """Java compares strings by UTF-16 code unit; big-endian UTF-16 bytes sort the same way."""
    return key.encode("utf-16-be", "surrogatepass")


def content_to_sign(ext: dict[str, str], body: bytes | None = b"", skip=CLIENT_SKIP) -> bytes:
    """What gets signed: the values of `ext` (not `skip`) in key order, then the body."""
    text = "".join(str(ext[k]) for k in sorted(ext, key=java_order) if k not in skip)
    return text.encode("utf-8") + (bytes(body) if body else b"")


def signature(secret_key: str, content: bytes) -> str:
    """Base64(HmacSHA1): 28 characters. An empty secret is refused, as Java's SecretKeySpec does."""
    if not secret_key:
        raise ValueError("Empty key")
    return base64.b64encode(hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()).decode("ascii")


@dataclass(frozen=True)
class Credentials:
    """SessionCredentials: what a client signs its requests with."""
    access_key: str
    secret_key: str
    security_token: str | None = None
    java_client: bool = False

    def sign(self, cmd) -> None:
        """AclClientRPCHook.doBeforeRequest on a finished request (a RemotingCommand): adds
        AccessKey (and SecurityToken), then Signature over its fields and body."""
        cmd.ext_fields[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            cmd.ext_fields[SECURITY_TOKEN] = self.security_token
        skip = CLIENT_SKIP if self.java_client else BROKER_SKIP
        cmd.ext_fields[SIGNATURE] = signature(self.secret_key, content_to_sign(cmd.ext_fields, cmd.body, skip))

    __call__ = sign


def broker_content(ext: dict[str, str], body: bytes | None) -> bytes:
    """PlainAccessValidator.parse: the content the broker checks a Signature against."""
    return content_to_sign(ext, body, BROKER_SKIP)
