"""Message body (de)compression by sysflag: zlib always, LZ4 and ZSTD when installed."""
import zlib

from .codes import COMPRESSION_TYPE_MASK, CompressionType, SysFlag
from .errors import CompressionUnavailable, FormatError


def compression_type(sys_flag: int) -> CompressionType | None:
    """None when the body is not compressed. Type bits 0 with COMPRESSED set mean zlib."""
    if not sys_flag & SysFlag.COMPRESSED_FLAG:
        return None
    bits = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if bits == 0:
        return CompressionType.ZLIB
    try:
        return CompressionType(bits)
    except ValueError:
        raise FormatError(f"unknown compression type {bits} in sysflag {sys_flag:#x}") from None


def decompress(body: bytes, sys_flag: int) -> bytes:
    kind = compression_type(sys_flag)
    if kind is None:
        return body
    try:
        if kind is CompressionType.ZLIB:
            return zlib.decompress(body)
        if kind is CompressionType.LZ4:
            try:
                import lz4.frame
            except ImportError:
                raise CompressionUnavailable("body is LZ4-compressed; install 'lz4' to read it") from None
            return lz4.frame.decompress(body)
        try:
            import zstandard
        except ImportError:
            raise CompressionUnavailable("body is ZSTD-compressed; install 'zstandard' to read it") from None
        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    except CompressionUnavailable:
        raise
    except Exception as exc:  # each codec raises its own error type
        raise FormatError(f"cannot inflate {kind.name} body: {exc}") from None


def compress(body: bytes, kind: CompressionType = CompressionType.ZLIB, level: int = 5) -> bytes:
    if kind is CompressionType.ZLIB:
        return zlib.compress(body, level)
    if kind is CompressionType.LZ4:
        import lz4.frame
        return lz4.frame.compress(body)
    import zstandard
    return zstandard.ZstdCompressor(level=level).compress(body)
