"""Fetching one origin's robots.txt: the only network access of the package.

:class:`RobotsTxtFetcher` runs one request chain (http and https only,
``ROBOTSTXT_MAX_REDIRECTS`` hops, our own retries) and names its result with
one of four outcomes: :class:`Rules`, :class:`Unrestricted`,
:class:`NoAnswer` or :class:`LocalFault`. :class:`RobotsTxtBodyMiddleware`
bounds the body before Scrapy's ``HttpCompressionMiddleware`` (order 590)
can inflate it whole.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured, StopDownload
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import load_object
from scrapy.utils.python import to_unicode
from twisted.internet.threads import deferToThread

from . import _compat, _settings
from ._robotstxt import MAX_BYTES, RobotsTxt
from .origins import DEFAULT_PORTS, InvalidOrigin, origin_of, robots_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

# Optional, as for Scrapy: br and zstd bodies are read when they are installed.
try:
    import brotli
except ImportError:
    brotli = None
try:
    import zstandard
except ImportError:
    zstandard = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Raw bytes downloaded at most: enough for 500 KiB of text, compressed or not.
MAX_DOWNLOAD_BYTES = 2 * MAX_BYTES
#: Meta keys of the page's request that the robots.txt request carries, so it
#: leaves the way its page would.
INHERITED_META = ("proxy", "bindaddress", "download_timeout")

# The site gave no answer (RFC 9309 §2.3.1.4 "unreachable"): what Scrapy's
# handlers raise for DNS failures, refused or reset connections, timeouts.
# Names, since each Scrapy version has its own subset.
_NO_ANSWER_NAMES = (
    "scrapy.exceptions.CannotResolveHostError",
    "scrapy.exceptions.DownloadConnectionRefusedError",
    "scrapy.exceptions.DownloadFailedError",
    "scrapy.exceptions.DownloadTimeoutError",
    "scrapy.exceptions.ResponseDataLossError",
    "scrapy.core.downloader.handlers.http11.TunnelError",
    "twisted.internet.defer.TimeoutError",
    "twisted.internet.error.TimeoutError",
    "twisted.internet.error.DNSLookupError",
    "twisted.internet.error.ConnectError",
    "twisted.internet.error.ConnectionDone",
    "twisted.internet.error.ConnectionLost",
    "twisted.web._newclient.ResponseFailed",
    "twisted.web._newclient.ResponseNeverReceived",
    "OpenSSL.SSL.Error",
)
# Errors of this machine, not of the site: Twisted reports them as a plain
# ConnectError carrying the errno.
_LOCAL_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.EADDRNOTAVAIL})


def _load_classes(names: tuple[str, ...]) -> tuple[type[BaseException], ...]:
    classes = []
    for name in names:
        try:
            classes.append(load_object(name))
        except (ImportError, AttributeError, NameError):
            continue  # not in this Scrapy or Twisted version
    return tuple(classes)


_NO_ANSWER = _load_classes(_NO_ANSWER_NAMES)
# The project's DOWNLOAD_MAXSIZE refused the body (Scrapy 2.14+; without
# RobotsTxtBodyMiddleware, which lifts it): no rules to read, as with
# Scrapy's own middleware, rather than a fault retried every minute.
_REFUSED_HERE = _load_classes(("scrapy.exceptions.DownloadCancelledError",))


@dataclass(frozen=True, slots=True)
class Rules:
    """A 200 answer: the parsed rules and the text they were read from."""

    robots: RobotsTxt
    body: bytes
    url: str


@dataclass(frozen=True, slots=True)
class Unrestricted:
    """Any other answer (``status`` None for a failed redirect or an
    unreadable body): the robot may crawl the whole origin."""

    status: int | None
    reason: str

    @property
    def server_error(self) -> bool:
        return self.status is not None and self.status >= 500


@dataclass(frozen=True, slots=True)
class NoAnswer:
    """The site did not answer: DNS failure, refused or reset connection, timeout."""

    cause: str


@dataclass(frozen=True, slots=True)
class LocalFault:
    """robots.txt could not be fetched for a reason that is not the site's."""

    cause: str


FetchOutcome = Rules | Unrestricted | NoAnswer | LocalFault


def describe(exc: BaseException) -> str:
    """An exception in words, for one log line: its type and message."""
    text = str(exc).strip() or "no details"
    return f"{type(exc).__name__}: {text}"


def is_local(exc: BaseException) -> bool:
    """Whether *exc*, or an error it wraps, is this machine's resource shortage."""
    seen: BaseException | None = exc
    while seen is not None:
        number = getattr(seen, "osError", None) or getattr(seen, "errno", None)
        if number in _LOCAL_ERRNOS:
            return True
        seen = seen.__cause__
    return False


def classify(exc: BaseException) -> NoAnswer | LocalFault:
    """The outcome of a download that raised *exc*."""
    if is_local(exc) or not isinstance(exc, _NO_ANSWER):
        return LocalFault(describe(exc))
    return NoAnswer(describe(exc))


class RobotsTxtFetcher:
    """Downloads an origin's robots.txt through the engine (so the project's
    proxies, headers, cache and download handlers apply), following only
    http(s) redirects, and tells what the answer means."""

    #: Robots.txt requests go before the pages waiting for them.
    PRIORITY = 1000

    def __init__(self, crawler: Crawler, max_redirects: int, max_retries: int, bounded_body: bool) -> None:
        self._crawler = crawler
        self._stats = crawler.stats
        self._max_redirects = max_redirects
        self._max_retries = max(0, max_retries)
        # Without RobotsTxtBodyMiddleware the project's DOWNLOAD_MAXSIZE must
        # stay in force: it is then the only bound on a compressed body.
        self._bounded_body = bounded_body
        self._agent = _settings.robot_agent(crawler.settings)
        crawler.signals.connect(self._stop_at_bound, signal=signals.bytes_received)

    async def fetch(self, origin: str, trigger: Request) -> FetchOutcome:
        """Fetch and read the robots.txt of *origin*, for the page *trigger*."""
        url = robots_url(origin)
        for hop in range(self._max_redirects + 1):
            answer = await self._download(url, trigger, followed=hop > 0)
            if not isinstance(answer, Response):
                return answer
            if answer.status not in REDIRECT_STATUSES:
                return await self._read(answer)
            if hop == self._max_redirects:
                return Unrestricted(None, f"more than {self._max_redirects} redirects")
            target = redirect_target(answer)
            if isinstance(target, Unrestricted):
                return target
            self._stats.inc_value("robotstxt/redirect_count")
            url = target
        raise AssertionError("unreachable")  # the loop returns on its last hop

    async def _download(self, url: str, trigger: Request, followed: bool) -> Response | FetchOutcome:
        """One hop, retried ``ROBOTSTXT_MAX_RETRIES`` times while the site
        does not answer. A URL that cannot be requested is the site's doing
        when the site chose it (a redirect *followed* to it)."""
        assert self._crawler.engine is not None
        outcome: NoAnswer | LocalFault = LocalFault("not attempted")
        for _ in range(self._max_retries + 1):
            self._stats.inc_value("robotstxt/request_count")
            try:
                response = await _compat.download(self._crawler.engine, self._request(url, trigger))
            except IgnoreRequest as exc:
                # Another middleware refused the fetch (the HTTP cache in
                # offline mode, say): the project's choice, as with Scrapy's
                # own middleware, and no rules to obey.
                return Unrestricted(None, f"robots.txt request ignored ({describe(exc)})")
            except _REFUSED_HERE as exc:
                return Unrestricted(None, f"robots.txt refused by DOWNLOAD_MAXSIZE ({describe(exc)})")
            except Exception as exc:
                self._stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
                outcome = classify(exc)
                if isinstance(outcome, LocalFault):
                    if followed and isinstance(exc, ValueError):
                        # Scrapy cannot request the URL (credentials in
                        # it, say): a failed redirect, not our fault.
                        return Unrestricted(None, f"redirect to {url!r} failed: {outcome.cause}")
                    return outcome
                continue
            self._stats.inc_value("robotstxt/response_count")
            self._stats.inc_value(f"robotstxt/response_status_count/{response.status}")
            return response
        return outcome

    def _request(self, url: str, trigger: Request) -> Request:
        meta: dict[str, Any] = {
            "dont_obey_robotstxt": True,
            "dont_redirect": True,
            "dont_retry": True,  # retried here, and reported once, by us
            "handle_httpstatus_all": True,
            "allow_offsite": True,
            "download_fail_on_dataloss": False,
            "robotstxt_fetch": True,
        }
        if self._bounded_body:
            # RobotsTxtBodyMiddleware bounds the body; a lying Content-Length
            # must not cancel the download before its first byte.
            meta.update(download_maxsize=0, download_warnsize=0)
        meta.update({key: trigger.meta[key] for key in INHERITED_META if key in trigger.meta})
        return Request(
            url,
            priority=self.PRIORITY,
            dont_filter=True,
            callback=NO_CALLBACK,
            # Uncompressed: the 500 KiB cut then applies to the text itself.
            headers={"Accept-Encoding": "identity"},
            meta=meta,
        )

    def _stop_at_bound(self, data: bytes, request: Request, spider: object = None) -> None:
        if not request.meta.get("robotstxt_fetch"):
            return
        received = request.meta.get("robotstxt_received", 0) + len(data)
        request.meta["robotstxt_received"] = received
        if received >= MAX_DOWNLOAD_BYTES:
            raise StopDownload(fail=False)

    async def _read(self, response: Response) -> Rules | Unrestricted:
        if response.status != 200:
            return Unrestricted(response.status, f"status {response.status}")
        if "robotstxt_unreadable" in response.flags:
            return Unrestricted(None, "unreadable body (unsupported or corrupt Content-Encoding)")
        stopped = "dataloss" in response.flags or "download_stopped" in response.flags
        if stopped or len(response.body) > MAX_BYTES:
            self._stats.inc_value("robotstxt/truncated")
        body = complete_lines(response.body, cut=stopped)
        return Rules(await parsed(body, self._agent), body, response.url)


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


def redirect_target(response: Response) -> str | Unrestricted:
    """The http(s) URL a redirect points to, or why it is not followed."""
    location = to_unicode(response.headers.get(b"Location") or b"", errors="replace").strip()
    if not location:
        return Unrestricted(None, "redirect without a Location")
    shown = repr(location[:200])
    try:
        url = urljoin(response.url, location)
        if urlsplit(url).scheme not in DEFAULT_PORTS:
            return Unrestricted(None, f"redirect to {shown} not followed: not an http(s) URL")
        origin_of(Request(url))
    except (ValueError, InvalidOrigin) as exc:
        return Unrestricted(None, f"redirect to {shown} not followed: {exc}")
    return url


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
