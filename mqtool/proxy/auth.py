"""The `authorization` header of a 5.x client: `MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time,
Signature=<hex>`, where Signature = lowercase hex of HMAC-SHA1(secret key, the x-mq-date-time value).
Checked against the broker's plain ACL accounts when aclEnable=true (5.3.3 checks it against its own
authentication users when `authenticationEnabled`; mqtool has one account store, the plain ACL's)."""
from __future__ import annotations

import hashlib
import hmac

from mqtool.proxy.codes import Code
from mqtool.proxy.context import ProxyError, RequestContext

ALGORITHM = "MQv2-HMAC-SHA1"


def signature(secret_key: str, date_time: str) -> str:
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def parse_authorization(value: str) -> dict[str, str]:
    """`MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=hex` -> its fields;
    the credential's text before a `/` is the access key (DefaultAuthenticationContextBuilder)."""
    algorithm, _, rest = value.strip().partition(" ")
    fields = {"algorithm": algorithm}
    for part in rest.split(","):
        key, sep, val = part.strip().partition("=")
        if sep:
            fields[key] = val.strip()
    if "Credential" in fields:
        fields["Credential"] = fields["Credential"].split("/")[0]
    return fields


def check(ctx: RequestContext, secret_of) -> None:
    """secret_of(access_key) -> the account's secret key or None; raises UNAUTHORIZED."""
    if not ctx.authorization:
        raise ProxyError(Code.UNAUTHORIZED, "authorization header is required")
    if not ctx.date:
        raise ProxyError(Code.UNAUTHORIZED, "x-mq-date-time header is required to check the signature")
    fields = parse_authorization(ctx.authorization)
    ak = fields.get("Credential", "")
    secret = secret_of(ak) if ak else None
    if secret is None:
        raise ProxyError(Code.UNAUTHORIZED, f"no account for access key {ak!r}")
    if not hmac.compare_digest(signature(secret, ctx.date), fields.get("Signature", "").lower()):
        raise ProxyError(Code.UNAUTHORIZED, f"check signature failed for access key {ak}")
