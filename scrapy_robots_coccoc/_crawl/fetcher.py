"""Fetching one origin's robots.txt (the package's only network access), with redirects and retries, and what the
answer means: :class:`Rules`, :class:`Unrestricted`, :class:`NoAnswer` or :class:`LocalFault`."""

from __future__ import annotations

import errno
import logging
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.misc import load_object
from scrapy.utils.python import to_unicode

from .._parser import MAX_BYTES, RobotsTxt
from .._parser.body import MAX_DOWNLOAD_BYTES, complete_lines
from . import compat
from . import settings as _settings
from .origins import DEFAULT_PORTS, InvalidOrigin, origin_of, robots_url
from .parking import SpiderClosing
from .parse import parsed

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http.headers import Headers

    from .record import ComplianceRecord

logger = logging.getLogger(__name__)

_DIGITS = re.compile(r"[0-9]+")

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Meta keys of the page's request that its robots.txt request carries, so it leaves the way the page would.
INHERITED_META = ("proxy", compat.PROXY_AUTH_META, "bindaddress", "download_timeout")
PROXY_AUTHENTICATION_REQUIRED = 407

# The site gave no answer (RFC 9309 §2.3.1.4 "unreachable"); names, as each Scrapy version has its own subset.
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
# This machine's shortages, not the site's fault: Twisted reports them as a ConnectError carrying the errno.
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
# No connection made: through a proxy, the proxy's failure. Not all of ConnectError: its TimeoutError (a download
# timeout before Scrapy 2.15) and SSLError are the site's, through a proxy too.
_NOT_CONNECTED = _load_classes(
    (
        "scrapy.exceptions.CannotResolveHostError",
        "scrapy.exceptions.DownloadConnectionRefusedError",
        "twisted.internet.error.ConnectionRefusedError",
        "twisted.internet.error.DNSLookupError",
        "twisted.internet.error.NoRouteError",
        "twisted.internet.error.TCPTimedOutError",
        "twisted.internet.error.UnknownHostError",
    )
)
# DOWNLOAD_MAXSIZE refused the body (Scrapy 2.15+, no RobotsTxtBodyMiddleware): no rules, as Scrapy's own, not a fault.
_REFUSED_HERE = _load_classes(("scrapy.exceptions.DownloadCancelledError",))


@dataclass(frozen=True, slots=True)
class Rules:
    """A 200 answer: the parsed rules and the text they were read from."""

    robots: RobotsTxt
    body: bytes
    url: str
    max_age: float | None = None  # the lifetime the response asks for (Cache-Control, Expires)


@dataclass(frozen=True, slots=True)
class Unrestricted:
    """Any other answer (``status`` None for a failed redirect or an unreadable body): the whole origin is open."""

    status: int | None
    reason: str
    max_age: float | None = None

    @property
    def server_error(self) -> bool:
        return self.status is not None and self.status >= 500

    @property
    def answer(self) -> str:
        """What decided, as :attr:`OriginState.answer <scrapy_robots_coccoc.stores.OriginState>` names it."""
        return f"status {self.status}" if self.status is not None else f"unrestricted: {self.reason}"


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
    """*exc* in one readable line: the errors a Twisted wrapper holds, not the repr of their Failures."""
    wrapped = _wrapped(exc)
    if wrapped:
        return f"{type(exc).__name__}: {'; '.join(map(describe, wrapped))}"
    return f"{type(exc).__name__}: {_text(exc)}"


def _wrapped(exc: BaseException) -> list[BaseException]:
    """The errors held by a Twisted ``ResponseFailed`` (or by the one Scrapy 2.14+ re-raised as another)."""
    for holder in (exc, exc.__cause__):
        reasons = getattr(holder, "reasons", None)
        if isinstance(reasons, list):
            return [reason.value for reason in reasons if isinstance(getattr(reason, "value", None), BaseException)]
    return []


def _text(exc: BaseException) -> str:
    queue = exc.args[0] if len(exc.args) == 1 else None
    if isinstance(queue, list) and queue and all(isinstance(entry, tuple) and entry for entry in queue):
        # OpenSSL's error queue: (library, function, reason) tuples.
        return ", ".join(str(entry[-1]) for entry in queue)
    return str(exc).strip() or "no details"


def is_local(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        number = getattr(seen, "osError", None) or getattr(seen, "errno", None)
        if number in _LOCAL_ERRNOS:
            return True
        seen = seen.__cause__
    return False


def classify(exc: BaseException, proxy: str | None = None) -> NoAnswer | LocalFault:
    """The outcome of a download through *proxy* that raised *exc*. An unreachable proxy is a local fault: it
    says nothing of the site, which must not be marked unavailable for it."""
    if is_local(exc) or not isinstance(exc, _NO_ANSWER) or compat.proxy_refused(exc):
        return LocalFault(describe(exc))
    if proxy and isinstance(exc, _NOT_CONNECTED):
        return LocalFault(f"proxy {proxy} unreachable: {describe(exc)}")
    return NoAnswer(describe(exc))


class RobotsTxtFetcher:
    """Downloads robots.txt through the engine, so the project's proxies, headers, cache and handlers apply."""

    #: Robots.txt requests go before the pages waiting for them.
    PRIORITY = 1000

    def __init__(
        self,
        crawler: Crawler,
        max_redirects: int,
        max_retries: int,
        bounded_body: bool,
        record: ComplianceRecord | None = None,
    ) -> None:
        self._crawler = crawler
        self._record = record  # told of every answer and failed attempt
        self._stats = crawler.stats
        self._max_redirects = max_redirects
        self._max_retries = max(0, max_retries)
        # Without RobotsTxtBodyMiddleware, DOWNLOAD_MAXSIZE stays: the only bound on a compressed body.
        self._bounded_body = bounded_body
        self._agent = _settings.robot_agent(crawler.settings)
        self._download_timeout = _settings.number(crawler.settings, "DOWNLOAD_TIMEOUT", 180)
        crawler.signals.connect(self._stop_at_bound, signal=signals.bytes_received)

    async def fetch(self, origin: str, trigger: Request) -> FetchOutcome:
        url = robots_url(origin)
        outcome = await self._follow(origin, url, trigger)
        if self._record is not None:
            self._record.outcome(origin, url, outcome)
        return outcome

    async def _follow(self, origin: str, url: str, trigger: Request) -> FetchOutcome:
        """The outcome of *url*'s request and the redirects it leads to."""
        for hop in range(self._max_redirects + 1):
            answer = await self._download(url, trigger, followed=hop > 0)
            if not isinstance(answer, Response):
                return answer
            if self._record is not None:
                self._record.answer(origin, answer)
            if answer.status == PROXY_AUTHENTICATION_REQUIRED and answer.meta.get("proxy"):
                return LocalFault(f"the proxy refused the request without credentials (status {answer.status})")
            if answer.status not in REDIRECT_STATUSES:
                return await self._read(answer)
            if hop == self._max_redirects:
                return Unrestricted(None, f"more than {self._max_redirects} redirects")
            target = redirect_target(answer)
            if isinstance(target, Unrestricted):
                return target
            self._stats.inc_value("robotstxt/redirect_count")
            url = target
        raise AssertionError("unreachable")

    async def _download(self, url: str, trigger: Request, followed: bool) -> Response | FetchOutcome:
        """One hop, retried while the site does not answer; a URL Scrapy refuses is the site's doing if *followed*."""
        engine = self._crawler.engine
        assert engine is not None
        outcome: NoAnswer | LocalFault = LocalFault("not attempted")
        for _ in range(self._max_retries + 1):
            if self._record is not None and self._record.failed:
                return LocalFault("the compliance record cannot be written: nothing more is downloaded")
            if compat.engine_closing(engine):
                # No retry or hop once the spider closes: the waiting requests go back to the scheduler.
                raise SpiderClosing(f"{url}: fetch interrupted, the spider is closing")
            self._stats.inc_value("robotstxt/request_count")
            request = self._request(url, trigger)
            try:
                response = await compat.download(engine, request)
            except IgnoreRequest as exc:
                # Another middleware refused it (say the offline HTTP cache): no rules, as with Scrapy's own.
                return Unrestricted(None, f"robots.txt request ignored ({describe(exc)})")
            except _REFUSED_HERE as exc:
                return Unrestricted(None, f"robots.txt refused by DOWNLOAD_MAXSIZE ({describe(exc)})")
            except Exception as exc:
                self._stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
                # The proxy as sent: HttpProxyMiddleware may have set the project's.
                outcome = classify(exc, request.meta.get("proxy"))
                if isinstance(outcome, LocalFault):
                    if followed and isinstance(exc, ValueError):
                        # Scrapy cannot request the URL (credentials in it): a failed redirect.
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
            # RobotsTxtBodyMiddleware bounds the body; a lying Content-Length must not cancel the download.
            meta.update(download_maxsize=0, download_warnsize=0)
        meta.update({key: trigger.meta[key] for key in INHERITED_META if key in trigger.meta})
        if "download_timeout" in meta:
            # One page's short timeout must not decide that the whole origin does not answer.
            meta["download_timeout"] = max(meta["download_timeout"], self._download_timeout)
        # Uncompressed: the 500 KiB cut then applies to the text itself.
        headers = {b"Accept-Encoding": b"identity"}
        credentials = trigger.headers.get(b"Proxy-Authorization")
        if credentials and meta.get("proxy"):
            # The proxy wants them for robots.txt too; HttpProxyMiddleware drops another proxy's.
            headers[b"Proxy-Authorization"] = credentials
        return Request(url, priority=self.PRIORITY, dont_filter=True, callback=NO_CALLBACK, headers=headers, meta=meta)

    def _stop_at_bound(self, data: bytes, request: Request, spider: object = None) -> None:
        if not request.meta.get("robotstxt_fetch"):
            return
        received = request.meta.get("robotstxt_received", 0) + len(data)
        request.meta["robotstxt_received"] = received
        if received >= MAX_DOWNLOAD_BYTES:
            raise StopDownload(fail=False)

    async def _read(self, response: Response) -> Rules | Unrestricted:
        max_age = cache_lifetime(response.headers)
        if response.status != 200:
            return Unrestricted(response.status, f"status {response.status}", max_age)
        if "robotstxt_unreadable" in response.flags:
            return Unrestricted(None, "unreadable body (unsupported or corrupt Content-Encoding)")
        stopped = "dataloss" in response.flags or "download_stopped" in response.flags
        if was_cut(response):
            self._stats.inc_value("robotstxt/truncated")
        body = complete_lines(response.body, cut=stopped)
        return Rules(await parsed(body, self._agent), body, response.url, max_age)


def was_cut(response: Response) -> bool:
    """Whether the body is not all the site sent: stopped at the download bound, or longer than the parser reads."""
    stopped = "dataloss" in response.flags or "download_stopped" in response.flags
    return stopped or len(response.body) > MAX_BYTES


def cache_lifetime(headers: Headers) -> float | None:
    """Seconds to keep the response: ``max-age``, else ``Expires`` less ``Date`` (RFC 9111 §4.2.1), None if unusable.
    As Google does, ``no-cache``, ``no-store`` and a past ``Expires`` are ignored: frameworks send them everywhere."""
    directives: dict[str, str] = {}
    for value in headers.getlist(b"Cache-Control"):
        for directive in to_unicode(value, errors="replace").split(","):
            name, _, argument = directive.strip().partition("=")
            directives[name.strip().lower()] = argument.strip().strip('"')
    if "max-age" in directives:
        return float(directives["max-age"]) if _DIGITS.fullmatch(directives["max-age"]) else None
    expires = headers.get(b"Expires")
    expires_at = None if expires is None else _http_date(expires)
    if expires_at is None:
        return None
    date = _http_date(headers.get(b"Date") or b"")
    lifetime = expires_at - (date if date is not None else time.time())
    return lifetime if lifetime > 0 else None


def _http_date(value: bytes) -> float | None:
    try:
        return parsedate_to_datetime(to_unicode(value, errors="replace")).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


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
