"""TLS on the gRPC port, named as 5.3.3's proxy names it (`tls.server.mode`, TlsMode): `permissive` takes
plaintext and TLS on the one port (the server looks at each connection's first bytes, as
ProxyAndTlsProtocolNegotiator does), `enforcing` TLS only, `disabled` plaintext only."""
from __future__ import annotations

import ssl

MODES = ("permissive", "enforcing", "disabled")     # TlsMode's names (tls.server.mode)


def tls_mode(cfg) -> str:
    """The gRPC port's mode from tlsServerMode (5.3.3's `tls.server.mode`): unset, `permissive` when a
    certificate and key are configured (5.3.3's default), else `disabled`. ValueError for what the
    broker cannot honour: another value, or TLS without both PEM files (mqtool has no test
    certificate, 5.3.3's tlsTestModeEnable)."""
    mode = cfg.tlsServerMode.strip().lower()
    if mode and mode not in MODES:
        raise ValueError(f"tlsServerMode must be permissive, enforcing or disabled, not {cfg.tlsServerMode!r}")
    if mode == "disabled":
        return mode
    cert, key = cfg.grpcTlsCertPath, cfg.grpcTlsKeyPath
    if (cert or key) and not (cert and key):
        raise ValueError("TLS on the gRPC port needs both grpcTlsCertPath and grpcTlsKeyPath")
    if not cert:
        if mode:
            raise ValueError(f"tlsServerMode={mode} needs grpcTlsCertPath and grpcTlsKeyPath (PEM files)")
        return "disabled"
    return mode or "permissive"


def tls_context(cfg) -> ssl.SSLContext:
    """grpcTlsCertPath + grpcTlsKeyPath (PEM), offering HTTP/2 by ALPN as gRPC clients require."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(cfg.grpcTlsCertPath, cfg.grpcTlsKeyPath)
    except (OSError, ssl.SSLError) as exc:
        raise OSError(f"cannot read the gRPC TLS key or certificate: {exc}") from None
    ctx.set_alpn_protocols(["h2"])
    return ctx
