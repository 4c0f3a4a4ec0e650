"""A request's metadata (the x-mq-* headers, proxy ContextInitPipeline) and the error type every
handler raises to answer a status."""
from __future__ import annotations

from dataclasses import dataclass

from mqtool.proxy.codes import Code


class ProxyError(Exception):
    """Answered as the response's `status {code, message}`; the gRPC status stays OK."""

    def __init__(self, code: Code, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class RequestContext:
    client_id: str
    language: str
    version: str
    namespace: str
    date: str
    authorization: str
    peer: str                 # "ip:port" of the client

    @property
    def peer_host(self) -> str:
        return self.peer.rpartition(":")[0].strip("[]")

    @property
    def peer_port(self) -> int:
        port = self.peer.rpartition(":")[2]
        return int(port) if port.isdigit() else 0


def peer_address(grpc_peer: str) -> str:
    """grpc's `ipv4:127.0.0.1:5555` / `ipv6:[::1]:5555` as `127.0.0.1:5555` / `[::1]:5555`."""
    kind, _, rest = grpc_peer.partition(":")
    return rest if kind in ("ipv4", "ipv6") else grpc_peer


def from_metadata(metadata, grpc_peer: str) -> RequestContext:
    md = {}
    for key, value in metadata or ():
        md.setdefault(key.lower(), value if isinstance(value, str) else value.decode("utf-8", "replace"))
    return RequestContext(md.get("x-mq-client-id", ""), md.get("x-mq-language", ""),
                          md.get("x-mq-client-version", ""), md.get("x-mq-namespace", ""),
                          md.get("x-mq-date-time", ""), md.get("authorization", ""), peer_address(grpc_peer))


def require_client_id(ctx: RequestContext) -> None:
    if not ctx.client_id.strip():
        raise ProxyError(Code.CLIENT_ID_REQUIRED, "header x-mq-client-id is required")


def version_ordinal(text: str) -> int:
    """MQVersion.Version's ordinal of "5.1.2" (V5_1_2): two entries per release (a SNAPSHOT, then the
    release) from V4_0_0 = 213; V5_0_0 = 413. Unparsable: V5_0_0."""
    parts = text.strip().split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return 413
    major, minor, patch = (int(p) for p in parts)
    if major < 4 or minor > 9 or patch > 9:
        return 413
    return 213 + 2 * ((major - 4) * 100 + minor * 10 + patch)
