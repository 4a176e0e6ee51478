"""robots.txt bodies: bounded whatever ``DOWNLOAD_MAXSIZE`` says, inflated no
further than the parser reads, cut to whole lines, and parsed off the reactor.

:class:`RobotsTxtBodyMiddleware` sees robots.txt responses before Scrapy's
``HttpCompressionMiddleware`` (order 590) could inflate them whole.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from ._robotstxt import MAX_BYTES, RobotsTxt

# Optional, as for Scrapy: br and zstd bodies are read when they are installed.
try:
    import brotli
except ImportError:
    brotli = None
try:
    import zstandard
except ImportError:
    zstandard = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

#: Raw bytes downloaded at most: enough for 500 KiB of text, compressed or not.
MAX_DOWNLOAD_BYTES = 2 * MAX_BYTES
#: Bodies larger than this are parsed in a thread: a hostile one may take a
#: tenth of a second, which the reactor (every download of the crawl) must
#: not wait for; the interpreter hands it the GIL every few milliseconds.
PARSE_IN_THREAD_BYTES = 64 * 1024


async def parsed(body: bytes, agent: str) -> RobotsTxt:
    """*body* parsed, with the rules *agent* obeys built, without holding
    the reactor for long: in the asyncio loop's own executor, or in
    Twisted's thread pool under another reactor."""
    if len(body) <= PARSE_IN_THREAD_BYTES:
        return parse_for(body, agent)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a coroutine driven by Twisted, not by asyncio
        return await maybe_deferred_to_future(deferToThread(parse_for, body, agent))
    return await loop.run_in_executor(None, parse_for, body, agent)


def parse_for(body: bytes, agent: str) -> RobotsTxt:
    """*body* parsed, and the rules *agent* obeys built (wildcards split):
    on a hostile body that takes longer than the parse itself, and would
    otherwise fall on the reactor at the first request decided. A store
    then also counts the bytes of what the crawl uses."""
    robots = RobotsTxt.parse(body)
    robots.allowed("/", agent)
    return robots


def complete_lines(body: bytes, cut: bool) -> bytes:
    """The part of *body* the parser may read: at most ``MAX_BYTES`` and,
    when the text was cut (by that limit or by a lost connection), without
    its partial last line, which could be a shortened, more general rule."""
    if len(body) > MAX_BYTES:
        body, cut = body[:MAX_BYTES], True
    if cut:
        body = body[: body.rfind(b"\n") + 1]
    return body


class RobotsTxtBodyMiddleware:
    """Bounds robots.txt bodies, whatever ``DOWNLOAD_MAXSIZE`` says.

    Enabled above ``HttpCompressionMiddleware`` (at 595; the add-on does it),
    it sees robots.txt responses before they are inflated: a body compressed
    despite our ``Accept-Encoding: identity`` is inflated as a stream, no
    further than the 500 KiB the parser reads. Other responses pass untouched.
    """

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self._crawler = crawler
        self._stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_response(self, request: Request, response: Response, spider: object = None) -> Response:
        if not request.meta.get("robotstxt_fetch"):
            return response
        encodings = [e.strip().lower() for e in b",".join(response.headers.getlist(b"Content-Encoding")).split(b",")]
        encodings = [e for e in encodings if e and e != b"identity"]
        if not encodings:
            return response
        headers = response.headers.copy()
        del headers[b"Content-Encoding"]
        body: bytes | None = response.body
        for encoding in reversed(encodings):
            body = inflate(body, encoding, MAX_BYTES + 1) if body is not None else None
        if body is None:
            # The site sent rules we cannot read: worth a look, not silence.
            self._stats.inc_value("robotstxt/unreadable")
            logger.warning(
                "robots.txt at %s is unreadable (Content-Encoding %r: not supported here, or corrupt): "
                "its rules are ignored, the site is unrestricted",
                response.url,
                b", ".join(encodings)[:100].decode("latin-1"),
                extra={"spider": self._crawler.spider},
            )
            return response.replace(body=b"", headers=headers, flags=[*response.flags, "robotstxt_unreadable"])
        self._stats.inc_value("robotstxt/compressed")
        return response.replace(body=body, headers=headers)


def _gunzip(data: bytes, limit: int) -> bytes | None:
    """Every member of a gzip body in turn (RFC 1952 §2.2, as Scrapy's own
    gunzip reads them), up to ``_GZIP_MEMBERS``: each member's leftover input
    is a copy, so a body of thousands of empty members would cost a
    quadratic number of bytes copied."""
    inflated = b""
    for _ in range(_GZIP_MEMBERS):
        stream = zlib.decompressobj(31)
        try:
            inflated += stream.decompress(data, limit - len(inflated))
        except zlib.error:
            # Not gzip at all, or garbage after a complete member.
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
        # The limit stops the output buffer growing, a step past it at most.
        return brotli.Decompressor().process(data, output_buffer_limit=limit)[:limit]
    except brotli.error:
        return None


def _unzstd(data: bytes, limit: int) -> bytes | None:
    try:
        # A frame asking for a larger window than 8 MiB is refused, not allocated.
        decompressor = zstandard.ZstdDecompressor(max_window_size=_ZSTD_WINDOW)
        with decompressor.stream_reader(data, read_across_frames=True) as reader:
            return reader.read(limit)
    except zstandard.ZstdError:
        return None


_GZIP_MEMBERS = 16
_ZSTD_WINDOW = 8 << 20
#: Each Content-Encoding we read, as Scrapy's HttpCompressionMiddleware
#: does: br and zstd when the library Scrapy uses for it is installed.
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
    """Inflate *data* as a stream, keeping at most *limit* bytes of output;
    None when the encoding is unknown or the data is not in it. A truncated
    stream gives what it inflated."""
    decoder = _DECODERS.get(encoding)
    return None if decoder is None else decoder(data, limit)
