"""robots.txt bodies as the parser reads them: inflated no further than it reads, cut at a whole line."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable

from .robotstxt import MAX_BYTES

try:
    import brotli
except ImportError:
    brotli = None
try:
    import zstandard
except ImportError:
    zstandard = None  # type: ignore[assignment]

#: Raw bytes downloaded at most: enough for 500 KiB of text, compressed or not.
MAX_DOWNLOAD_BYTES = 2 * MAX_BYTES


def complete_lines(body: bytes, cut: bool) -> bytes:
    """At most ``MAX_BYTES`` of *body*, without its partial last line when cut: a shortened rule is more general."""
    if len(body) > MAX_BYTES:
        body, cut = body[:MAX_BYTES], True
    if cut:
        body = body[: body.rfind(b"\n") + 1]
    return body


def encodings_of(headers: Iterable[bytes]) -> list[bytes]:
    encodings = (e.strip().lower() for e in b",".join(headers).split(b","))
    return [e for e in encodings if e and e != b"identity"]


def decoded(body: bytes, encodings: list[bytes]) -> bytes | None:
    """*body* with its *encodings* undone, one byte past what the parser reads; None if one is unknown or wrong."""
    decoded_body: bytes | None = body
    for encoding in reversed(encodings):
        decoded_body = inflate(decoded_body, encoding, MAX_BYTES + 1) if decoded_body is not None else None
    return decoded_body


def _gunzip(data: bytes, limit: int) -> bytes | None:
    """Each gzip member in turn (RFC 1952 §2.2, as Scrapy); at most _GZIP_MEMBERS, as each copies the input left."""
    inflated = b""
    for _ in range(_GZIP_MEMBERS):
        stream = zlib.decompressobj(31)
        try:
            inflated += stream.decompress(data, limit - len(inflated))
        except zlib.error:
            return inflated or None
        data = stream.unused_data
        if not (stream.eof and data) or len(inflated) >= limit:
            break
    return inflated


def _inflate(data: bytes, limit: int) -> bytes | None:
    """``deflate``: a zlib stream, or the raw deflate data some servers send."""
    for wbits in (15, -15):
        try:
            return zlib.decompressobj(wbits).decompress(data, limit)
        except zlib.error:
            continue
    return None


def _unbrotli(data: bytes, limit: int) -> bytes | None:
    try:
        # The limit stops the output growing, but only a step past it: hence the slice.
        return brotli.Decompressor().process(data, output_buffer_limit=limit)[:limit]
    except brotli.error:
        return None


def _unzstd(data: bytes, limit: int) -> bytes | None:
    try:
        decompressor = zstandard.ZstdDecompressor(max_window_size=_ZSTD_WINDOW)
        with decompressor.stream_reader(data, read_across_frames=True) as reader:
            return reader.read(limit)
    except zstandard.ZstdError:
        return None


_GZIP_MEMBERS = 16
_ZSTD_WINDOW = 8 << 20  # a frame asking for more is refused, not allocated
# The codings Scrapy's HttpCompressionMiddleware reads: br and zstd when Scrapy's library for them is installed.
_DECODERS: dict[bytes, Callable[[bytes, int], bytes | None]] = {
    b"gzip": _gunzip,
    b"x-gzip": _gunzip,
    b"deflate": _inflate,
}
if brotli is not None and hasattr(brotli.Decompressor, "can_accept_more_data"):  # 1.2+: a bounded output
    _DECODERS[b"br"] = _unbrotli
if zstandard is not None:
    _DECODERS[b"zstd"] = _unzstd


def inflate(data: bytes, encoding: bytes, limit: int) -> bytes | None:
    """*data* inflated to at most *limit* bytes (a truncated stream: as far as it goes); None if not in *encoding*."""
    decoder = _DECODERS.get(encoding)
    return None if decoder is None else decoder(data, limit)
