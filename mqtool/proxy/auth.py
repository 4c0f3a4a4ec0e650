"""The `authorization` header of a 5.x client: `MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time,
Signature=<hex>`, where Signature = lowercase hex of HMAC-SHA1(secret key, the x-mq-date-time value).
Checked against the broker's plain ACL accounts when aclEnable=true (5.3.3 checks it against its own
authentication users when `authenticationEnabled`; mqtool has one account store, the plain ACL's):
the same validate() as a remoting request (whitelists, the account, the signature, then the
permissions the RPC needs), the signature compared as 5.3.3 does (hex -> base64)."""
from __future__ import annotations

import base64
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


def check_acl(ctx: RequestContext, manager, code: int, needed: dict[str, int]) -> None:
    """The plain ACL's validate() for a gRPC request: UNAUTHORIZED for who it is, FORBIDDEN for what it may do."""
    from mqtool.broker.acl.perms import AclError
    from mqtool.broker.acl.validator import AccessResource, peer_ip
    fields = parse_authorization(ctx.authorization) if ctx.authorization else {}
    if fields and not ctx.date:
        raise ProxyError(Code.UNAUTHORIZED, "x-mq-date-time header is required to check the signature")
    try:
        signed = base64.b64encode(bytes.fromhex(fields.get("Signature", ""))).decode()
    except ValueError:
        signed = fields.get("Signature", "")
    res = AccessResource(peer_ip(ctx.peer_host), code, fields.get("Credential") or None, signed, None, needed,
                         ctx.date.encode())
    try:
        manager.validate(res)
    except AclError as exc:
        forbidden = "checkPerm" in exc.frame
        raise ProxyError(Code.FORBIDDEN if forbidden else Code.UNAUTHORIZED, exc.message) from None
