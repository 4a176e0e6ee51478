"""``RobotsSitemapMixin``: crawl the sitemaps robots.txt files list, with
Scrapy's ``SitemapSpider`` machinery: through our middleware, which fetches
each robots.txt once, or without it by requesting robots.txt itself. Every
sitemap the mixin requests is read as a stream within the sitemaps
protocol's bounds, and what sites list is held to the protocol's location
rule."""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urljoin, urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import XmlResponse
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.spiders import SitemapSpider
from scrapy.utils.conf import build_component_list
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.misc import load_object
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread

from ._crawl import settings as _settings
from ._crawl.compat import engine_closing, over_download_bound, sitemap_callbacks, sitemap_follow
from ._crawl.origins import InvalidOrigin, origin_of, robots_url
from ._crawl.parse import parsed
from ._crawl.sitemaplist import MAX_SITEMAPS, listed_sitemaps
from ._crawl.sitemaplocation import Location
from ._crawl.sitemaplocation import idna as _idna
from ._crawl.sitemapreader import GZIP_MAGIC, SITEMAP_TYPES, SitemapReader
from .exceptions import RobotsTxtOnly
from .middleware import RobotsTxtMiddleware, of_crawler
from .signals import robotstxt_sitemaps_found

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.http.headers import Headers
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure
    from typing_extensions import Self

    # Type-check the mixin as the SitemapSpider it always runs in front of.
    _MixinBase = SitemapSpider
else:
    _MixinBase = object

logger = logging.getLogger(__name__)

SCOPES = ("site", "allowed_domains", "any")
#: Declined (origin, sitemap) pairs remembered; one forgotten (oldest first) is only counted again.
MAX_DECLINED = 100_000
#: Without our middleware, origins whose robots.txt the mixin requested are remembered; one forgotten (oldest
#: first) has its robots.txt requested again, and its sitemaps, seen already, are not.
MAX_ORIGINS = 100_000
#: Sitemap URLs requested in the crawl, remembered so that none is requested twice whatever the duplicate filter
#: does; one forgotten (oldest first) is left to the duplicate filter again.
MAX_SITEMAPS_SEEN = 200_000
#: Sitemaps a second robots.txt listed after the first had them requested, and at most this many such origins
#: each: their URLs count as cross-submitted too.
MAX_LATER_LISTED = 10_000
MAX_LISTERS = 100

#: The sitemaps protocol's bounds per sitemap or sitemap index (sitemaps.org): 50,000 URLs, 50 MB uncompressed.
DEFAULT_MAX_URLS = 50_000
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
#: Sitemap indexes followed in a row: the protocol has none nested (1), some large sites nest one more level.
DEFAULT_MAX_DEPTH = 2
# A sitemap download may pass its byte bound by this much before Scrapy cancels it: the mixin stops it at the
# bound itself (keeping what came), and a chunk may cross the bound by a network read.
_DOWNLOAD_SLACK = 1024 * 1024
# A sitemap body up to this size (uncompressed) is read in the reactor's thread, in a millisecond or so; a larger
# or gzip one in a worker thread, so that the reactor runs on, a batch of this many requests at a time.
_INLINE_BYTES = 64 * 1024
_BATCH = 500
# Scrapy takes the requests of a callback a hundred or two at a time before the reactor runs again, each through
# the spider middlewares and the scheduler: the reading pauses every so many, so that the reactor runs meanwhile.
_PAUSE_EVERY = 50

_T = TypeVar("_T")


@dataclass(frozen=True)
class _Sitemap:
    """What a sitemap request carries (request meta, so that it survives redirects and shared queues)."""

    url: str  # as listed: the location its URLs are measured from
    depth: int  # 0 when robots.txt or sitemap_urls lists it; +1 per sitemap index above it
    # Origins whose robots.txt listed it (or the sitemap it descends from); None for the spider's own sitemaps.
    listers: tuple[str, ...] | None
    root: str  # the sitemap robots.txt or sitemap_urls listed, which it descends from


def middleware_missing(settings: BaseSettings) -> str | None:
    """Why :class:`~scrapy_robots_coccoc.RobotsTxtMiddleware` does not run in a crawl with *settings*, None if
    it does: read as Scrapy builds downloader middlewares, whichever import path names it."""
    if not settings.getbool("ROBOTSTXT_OBEY"):
        return "ROBOTSTXT_OBEY is False"
    enabled = build_component_list(settings.getwithbase("DOWNLOADER_MIDDLEWARES"))
    if any(load_object(name) is RobotsTxtMiddleware for name in enabled):
        return None
    return "scrapy_robots_coccoc.RobotsTxtMiddleware is not in DOWNLOADER_MIDDLEWARES"


class RobotsSitemapMixin(_MixinBase):
    """Feed a ``SitemapSpider`` the sitemaps that robots.txt files list.

    ``class ShopSpider(RobotsSitemapMixin, SitemapSpider)`` requests its
    ``start_urls`` (callback ``parse``) and, for every site the crawl
    reaches, the sitemaps its robots.txt lists, routed by ``sitemap_rules``,
    ``sitemap_follow``, ``sitemap_alternate_links`` and ``sitemap_filter`` as
    usual. Each sitemap URL is requested once per crawl. The sitemaps come
    from the robots.txt files :class:`~scrapy_robots_coccoc.RobotsTxtMiddleware`
    fetches; without that middleware, the mixin requests robots.txt itself.

    Every sitemap it requests (``sitemap_urls`` too) is read as a stream,
    within ``ROBOTSTXT_SITEMAP_MAX_URLS`` entries and
    ``ROBOTSTXT_SITEMAP_MAX_BYTES`` uncompressed, through at most
    ``ROBOTSTXT_SITEMAP_MAX_DEPTH`` sitemap indexes; the URLs of a sitemap
    robots.txt led to are used only within its location
    (``robots_sitemap_location_rule``).
    """

    #: Sites whose robots.txt sitemaps seed the crawl, e.g. ``["https://example.com"]``.
    robots_sitemap_origins: Sequence[str] = ()
    #: Which listed sitemaps to take: ``"site"`` (the robots.txt's host, its
    #: subdomains and parent domains), ``"allowed_domains"`` or ``"any"``.
    robots_sitemap_scope: str = "site"
    #: At most this many sitemaps taken from one origin's robots.txt.
    robots_sitemap_max_per_site: int = 50
    #: Whether the URLs of a sitemap robots.txt led to (directly or through
    #: indexes) are held to the sitemaps protocol's location rule: under the
    #: sitemap's own directory, or of a site whose robots.txt lists it.
    robots_sitemap_location_rule: bool = True

    # Hashes (small however long the URL) of the sitemap URLs requested: never again, whatever the dupefilter.
    _robots_sitemaps_seen: dict[int, None]
    # Origins whose robots.txt listed a sitemap after it was requested for another: cross-submitters too.
    _robots_later_listers: dict[str, set[str]]
    # The bounds of each sitemap read, from the settings.
    _robots_max_urls: int
    _robots_max_bytes: int
    _robots_max_depth: int
    # Hashes (small however long the URL) of declined (origin, URL) pairs: a refresh
    # does not count them again, while another origin may still get the URL crawled.
    _robots_sitemaps_declined: dict[int, None]
    _robots_sitemaps_per_origin: Counter[str]  # sitemaps scheduled per robots.txt
    # Sitemap requests are scheduled with engine.crawl, which no spider
    # middleware sees: UrlLengthMiddleware's limit is applied here.
    _robots_url_limit: int
    # Whether our middleware runs: known when the spider opens, as add-ons change the settings until then.
    _robots_via_middleware: bool
    # Without it, the origins whose robots.txt the mixin requested.
    _robots_origins_requested: dict[str, None]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name, mro = cls.__name__, cls.__mro__
        if SitemapSpider not in mro:
            others = [base.__name__ for base in cls.__bases__ if base is not RobotsSitemapMixin]
            not_enough = f"; {' and '.join(others)} {'is' if len(others) == 1 else 'are'} not enough" if others else ""
            raise TypeError(
                f"{name}: RobotsSitemapMixin needs SitemapSpider among the bases, and goes before SitemapSpider "
                f"(class {name}(RobotsSitemapMixin, SitemapSpider)){not_enough}"
            )
        # The position, not issubclass: behind SitemapSpider, the mixin's
        # start() and parse() would be shadowed and it would do nothing.
        if mro.index(RobotsSitemapMixin) > mro.index(SitemapSpider):
            raise TypeError(
                f"{name}: RobotsSitemapMixin goes before SitemapSpider in the bases "
                f"(class {name}(RobotsSitemapMixin, SitemapSpider)): behind it, its start() and parse() are hidden"
            )
        _check_scope(name, cls.robots_sitemap_scope)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        _check_scope(cls.__name__, spider.robots_sitemap_scope)  # a spider argument may set it too
        spider.robots_sitemap_location_rule = _flag(spider.robots_sitemap_location_rule)
        spider._robots_sitemaps_seen = {}
        spider._robots_later_listers = {}
        spider._robots_read_bounds(crawler.settings)
        spider._robots_sitemaps_declined = {}
        spider._robots_sitemaps_per_origin = Counter()
        spider._robots_url_limit = crawler.settings.getint("URLLENGTH_LIMIT")
        spider._robots_via_middleware = True
        spider._robots_origins_requested = {}
        crawler.signals.connect(spider.robots_sitemaps_found, signal=robotstxt_sitemaps_found)
        crawler.signals.connect(spider._robots_spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(spider._robots_headers_received, signal=signals.headers_received)
        crawler.signals.connect(spider._robots_bytes_received, signal=signals.bytes_received)
        return spider

    def _robots_read_bounds(self, settings: BaseSettings) -> None:
        self._robots_max_urls = _settings.count(settings, "ROBOTSTXT_SITEMAP_MAX_URLS", DEFAULT_MAX_URLS, minimum=1)
        self._robots_max_bytes = _settings.count(settings, "ROBOTSTXT_SITEMAP_MAX_BYTES", DEFAULT_MAX_BYTES, minimum=1)
        self._robots_max_depth = _settings.count(settings, "ROBOTSTXT_SITEMAP_MAX_DEPTH", DEFAULT_MAX_DEPTH)

    def _robots_spider_opened(self, **kwargs: Any) -> None:
        """Say which way the sitemaps come. Without our middleware, no robots.txt would reach the spider: the
        mixin then requests the robots.txt of each origin the crawl gets a response from."""
        self._robots_read_bounds(self.crawler.settings)  # an add-on may have set them since from_crawler
        missing = middleware_missing(self.crawler.settings)
        self._robots_via_middleware = missing is None
        if missing is None:
            logger.info("Sitemaps from robots.txt: through scrapy_robots_coccoc's middleware", extra={"spider": self})
            return
        logger.info(
            "Sitemaps from robots.txt: the mixin requests robots.txt itself (our middleware is not enabled: %s)",
            missing,
            extra={"spider": self},
        )
        self.crawler.signals.connect(self._robots_origin_reached, signal=signals.response_received)

    async def start(self) -> AsyncIterator[Any]:
        for url in self.sitemap_urls:
            if urlsplit(url).path == "/robots.txt":
                seed = self._robots_seed(url)
                if seed is not None and not self._learnt(seed):
                    yield seed
            else:
                self._robots_mark_seen(url)
                yield self._robots_sitemap_request(url, _Sitemap(url, 0, None, url))
        for url in self.start_urls:
            yield Request(url, dont_filter=True)
        for origin in self.robots_sitemap_origins:
            seed = self._robots_seed(origin if "://" in origin else f"https://{origin}")
            if seed is not None and not self._learnt(seed):
                yield seed

    def _learnt(self, seed: Request) -> bool:
        """Through our middleware, have it make the seed's origin known without a download (a seed sent as a
        ``robotstxt_only`` request would end as an exception in Scrapy's downloader stats); False without it."""
        middleware = of_crawler(self.crawler) if self._robots_via_middleware else None
        if middleware is None:
            return False

        async def learn() -> None:
            try:
                await middleware.learn(seed)
            except IgnoreRequest as exc:
                self._seed_failed(seed.url, exc)

        deferred_from_coro(learn())
        return True

    def _robots_origin_reached(self, request: Request, **kwargs: Any) -> None:
        """Without our middleware: schedule the robots.txt of a response's origin, the first time one comes."""
        if engine_closing(self.crawler.engine):
            return
        try:
            origin = origin_of(request)
        except InvalidOrigin:  # not http(s), say
            return
        if origin not in self._robots_origins_requested:
            seed = self._robots_seed(robots_url(origin))
            if seed is not None:
                self.crawler.engine.crawl(seed)

    def _robots_seed(self, site_url: str) -> Request | None:
        """A request that gets the site's robots.txt sitemaps to the spider; None for a URL no site can answer,
        or, without our middleware, for a site whose robots.txt is requested already.

        Through our middleware it downloads nothing (``robotstxt_only``: the middleware fetches robots.txt, once
        for the crawl, and announces its sitemaps); without it, it downloads robots.txt."""
        via_middleware = self._robots_via_middleware
        try:
            request = Request(
                urljoin(site_url, "/robots.txt"),
                callback=self._robots_seeded,
                errback=self._robots_seed_failed,
                # Without ours, robots.txt is no page of its own rules: Scrapy's middleware must not refuse it.
                meta={"robotstxt_only": True} if via_middleware else {"dont_obey_robotstxt": True},
                dont_filter=True,
            )
            origin = request.cb_kwargs["origin"] = origin_of(request)
        except ValueError as exc:  # InvalidOrigin, or a URL urljoin cannot even split
            self._seed_failed(site_url, exc)
            return None
        if not via_middleware:
            requested = self._robots_origins_requested
            if origin in requested:
                return None
            requested[origin] = None
            if len(requested) > MAX_ORIGINS:
                del requested[next(iter(requested))]
        return request

    async def _robots_seeded(self, response: Response, origin: str) -> None:
        """Without our middleware the seed downloads robots.txt: its sitemaps are read as our middleware reads
        them (a large body parsed off the reactor, the first MAX_SITEMAPS taken, relative ones resolved)."""
        listed = (await parsed(response.body, "*")).sitemaps
        if len(listed) > MAX_SITEMAPS:
            self.crawler.stats.inc_value("robotstxt/sitemaps/not_handed_over", len(listed) - MAX_SITEMAPS)
            logger.info(
                "robots.txt of %s lists %d sitemaps: the first %d are handed over",
                origin,
                len(listed),
                MAX_SITEMAPS,
                extra={"spider": self},
            )
        self._take_sitemaps(origin, listed_sitemaps(robots_url(origin), listed))

    def _robots_seed_failed(self, failure: Failure) -> None:
        """``RobotsTxtOnly`` is our middleware's success (the sitemaps were announced), and a robots.txt
        answered with an error status lists none, as our middleware reads it; anything else means this origin
        seeded nothing."""
        if not failure.check(RobotsTxtOnly, HttpError):
            self._seed_failed(failure.request.url, failure.value)  # type: ignore[attr-defined]

    def _seed_failed(self, robots_url: str, reason: object) -> None:
        self.crawler.stats.inc_value("robotstxt/sitemaps/seed_failed")
        logger.info("No sitemaps seeded from %s: %s", robots_url, reason, extra={"spider": self})

    def parse(self, response: Response, **kwargs: Any) -> Any:
        """Route a start page by ``sitemap_rules``, as a listed page would be."""
        for pattern, callback in sitemap_callbacks(self):
            if pattern.search(response.url):
                return None if callback == self.parse else callback(response, **kwargs)
        return None

    def robots_sitemaps_found(self, origin: str, sitemaps: list[str], **kwargs: Any) -> None:
        """Schedule the sitemaps of one robots.txt (absolute URLs) that are
        new, in scope and under the per-site cap."""
        self._take_sitemaps(origin, sitemaps)

    def _take_sitemaps(self, origin: str, sitemaps: Sequence[str]) -> None:
        """Schedule what may be of *sitemaps* (absolute URLs): a list may hold
        a thousand, so cheap checks per URL and one log line per robots.txt."""
        site = _idna(urlsplit(origin).hostname or "")
        taken = self._robots_sitemaps_per_origin
        counts: Counter[str] = Counter()
        for url in sitemaps:
            key = hash((origin, url))
            if self._robots_seen(url):
                self._robots_listed_again(url, origin)
                continue
            if key in self._robots_sitemaps_declined:
                continue
            counts["found"] += 1
            reason = "over_limit" if taken[origin] >= self.robots_sitemap_max_per_site else self._declined(site, url)
            if reason is None:
                request = self._robots_listed_request(url, origin)
                if request is not None:
                    self._robots_mark_seen(url)
                    taken[origin] += 1
                    counts["scheduled"] += 1
                    self.crawler.engine.crawl(request)
                    continue
                reason = "invalid"
            self._robots_sitemaps_declined[key] = None
            if len(self._robots_sitemaps_declined) > MAX_DECLINED:
                del self._robots_sitemaps_declined[next(iter(self._robots_sitemaps_declined))]
            counts[reason] += 1
        for name, count in counts.items():
            self.crawler.stats.inc_value(f"robotstxt/sitemaps/{name}", count)
        if counts["found"]:  # a refresh listing nothing new says nothing
            self._log_taken(origin, len(sitemaps), counts)

    def _log_taken(self, origin: str, listed: int, counts: Counter[str]) -> None:
        """What became of one robots.txt's sitemaps, the declined ones by their stats name and what changes it."""
        fates = [f"{counts['scheduled']} scheduled"]
        if listed > counts["found"]:
            fates.append(f"{listed - counts['found']} seen before")
        hints = {
            "out_of_scope": f"robots_sitemap_scope = {self.robots_sitemap_scope!r}; set it to 'any' to follow them",
            "over_limit": f"robots_sitemap_max_per_site = {self.robots_sitemap_max_per_site}",
            "invalid": "not http(s), with a user name, longer than URLLENGTH_LIMIT, or refused by Scrapy",
        }
        declined = [f"{counts[reason]} {reason} ({hint})" for reason, hint in hints.items() if counts[reason]]
        logger.info(
            "%d sitemap%s from robots.txt of %s: %s%s",
            listed,
            "" if listed == 1 else "s",
            origin,
            ", ".join(fates),
            f"; not taken: {', '.join(declined)}" if declined else "",
            extra={"spider": self},
        )

    def _declined(self, site: str, url: str) -> str | None:
        """Why *url* is not taken from the robots.txt of *site*, None when it may be."""
        try:
            parts = urlsplit(url)
            host = _idna(parts.hostname or "")
        except ValueError:  # an unclosed IPv6 bracket, a bad port, a host IDNA refuses
            return "invalid"
        if parts.scheme not in ("http", "https") or not host or parts.username is not None:
            return "invalid"
        if 0 < self._robots_url_limit < len(url):
            return "invalid"
        return None if self._in_scope(site, host) else "out_of_scope"

    def _in_scope(self, site: str, host: str) -> bool:
        if self.robots_sitemap_scope == "any":
            return True
        if self.robots_sitemap_scope == "allowed_domains":
            domains = getattr(self, "allowed_domains", None) or [site]
            return any(within(host, domain) for domain in map(_domain, domains) if domain)
        return within(host, site) or within(site, host)

    # -- the sitemaps requested, and how each is read ----------------------------------------------------------

    def _robots_seen(self, url: str) -> bool:
        return hash(url) in self._robots_sitemaps_seen

    def _robots_mark_seen(self, url: str) -> None:
        seen = self._robots_sitemaps_seen
        seen[hash(url)] = None
        if len(seen) > MAX_SITEMAPS_SEEN:
            del seen[next(iter(seen))]

    def _robots_listed_again(self, url: str, origin: str) -> None:
        """A robots.txt lists a sitemap requested already: it cross-submits that sitemap for its origin too."""
        later = self._robots_later_listers
        listers = later.get(url)
        if listers is None:
            if len(later) >= MAX_LATER_LISTED:
                del later[next(iter(later))]
            listers = later[url] = set()
        if len(listers) < MAX_LISTERS:
            listers.add(origin)

    def _robots_listed_request(self, url: str, origin: str) -> Request | None:
        """The request for a sitemap *origin*'s robots.txt lists, None for a URL Scrapy refuses: one bad line
        must not stop the others. No dont_filter, so that a shared dupefilter (scrapy-redis) drops a sitemap
        another worker requested."""
        try:
            return self._robots_sitemap_request(url, _Sitemap(url, 0, (origin,), url))
        except ValueError:
            return None

    def _robots_sitemap_request(self, url: str, sitemap: _Sitemap) -> Request:
        """A sitemap's request, read by the mixin. Its download is bounded whatever DOWNLOAD_MAXSIZE says:
        Scrapy inflates a Content-Encoding no further, and a raw body the mixin stops at the bound itself.
        Raises ValueError for a URL Scrapy refuses."""
        return Request(
            url,
            callback=self._robots_sitemap_read,
            errback=self._robots_sitemap_failed,
            meta={
                "download_maxsize": self._robots_max_bytes + _DOWNLOAD_SLACK,
                "download_warnsize": 0,  # the mixin's own WARNING says when a sitemap passes its bound
                "_robots_sitemap": sitemap,
            },
        )

    def _robots_headers_received(self, headers: Headers, body_length: object, request: Request, **kwargs: Any) -> None:
        """A sitemap download starts: its bytes are counted from 0 (a retry starts over). A raw body announced
        past the bound would be cancelled before its first byte: it is let come instead, to be stopped at the
        bound and read that far."""
        meta = request.meta
        if "_robots_sitemap" not in meta:
            return
        meta["_robots_sitemap_bytes"] = 0
        announced = body_length if isinstance(body_length, int) else -1
        if announced > self._robots_max_bytes and not headers.get(b"Content-Encoding"):
            meta["download_maxsize"] = 0

    def _robots_bytes_received(self, data: bytes, request: Request, **kwargs: Any) -> None:
        """Stop a sitemap download past the byte bound, keeping what came: the entries in it are read."""
        meta = request.meta
        if "_robots_sitemap" not in meta:
            return
        received = meta.get("_robots_sitemap_bytes", 0) + len(data)
        meta["_robots_sitemap_bytes"] = received
        if received > self._robots_max_bytes:
            raise StopDownload(fail=False)

    def _robots_sitemap_failed(self, failure: Failure) -> Failure | None:
        """A sitemap Scrapy dropped past its download bound (its Content-Encoding inflated past it, or a
        compressed size announced past it) is told as one cut short; other failures go on as without errback."""
        if failure.value is None or not over_download_bound(failure.value):
            return failure
        self.crawler.stats.inc_value("robotstxt/sitemaps/truncated")
        logger.warning(
            "Sitemap %s is larger than %d bytes uncompressed (ROBOTSTXT_SITEMAP_MAX_BYTES): Scrapy dropped it "
            "while inflating or downloading it, so none of its entries is used",
            failure.request.url,  # type: ignore[attr-defined]
            self._robots_max_bytes,
            extra={"spider": self},
        )
        return None

    async def _robots_sitemap_read(self, response: Response) -> AsyncIterator[Request]:
        """Read a sitemap or sitemap index the mixin requested, as ``SitemapSpider`` reads one
        (``sitemap_filter``, ``sitemap_follow``, ``sitemap_rules``, ``sitemap_alternate_links``), within the
        bounds and the location rule. A large body is read in a worker thread, a batch of requests at a time,
        each batch taken when Scrapy has taken the last: the reactor runs on, and memory stays flat."""
        sitemap: _Sitemap = response.meta.get("_robots_sitemap") or _Sitemap(response.url, 0, None, response.url)
        body = response.body
        gzipped = body[:3] == GZIP_MAGIC
        # As SitemapSpider: XML by its type or its URL, or gzip whatever the type says.
        if not body or not (gzipped or isinstance(response, XmlResponse) or response.url.endswith((".xml", ".xml.gz"))):
            self._robots_invalid(response)
            return
        reader = SitemapReader(
            body, gzipped=gzipped, max_entries=self._robots_max_urls, max_bytes=self._robots_max_bytes
        )
        allowed = self._robots_location_rule(sitemap)
        reading = _Reading(
            reader,
            self.sitemap_filter,
            self.sitemap_alternate_links,
            sitemap_callbacks(self),
            sitemap_follow(self),
            allowed,
        )
        in_thread = gzipped or len(body) > _INLINE_BYTES
        counts: Counter[str] = Counter()
        while True:
            batch = await _in_thread(reading.take, _BATCH) if in_thread else reading.take(_BATCH)
            for done, output in enumerate(batch, 1):
                if isinstance(output, Request):
                    yield output
                else:
                    request = self._robots_listed_sitemap(output, sitemap, counts)
                    if request is not None:
                        yield request
                if done % _PAUSE_EVERY == 0:
                    await _pause()
            if len(batch) < _BATCH:
                break
        if reader.kind not in SITEMAP_TYPES:
            self._robots_invalid(response)
            return
        counts["off_location"] = reading.off_location
        truncated = reader.truncated or ("bytes" if "download_stopped" in response.flags else None)
        self._robots_report(sitemap, reader.entries, truncated, allowed, counts)

    def _robots_invalid(self, response: Response) -> None:
        logger.warning("Ignoring invalid sitemap: %(response)s", {"response": response}, extra={"spider": self})

    def _robots_location_rule(self, sitemap: _Sitemap) -> _LocationRule | None:
        """The location rule for the URLs *sitemap* lists; None for a sitemap of the spider's own, or the rule
        turned off."""
        if sitemap.listers is None or not self.robots_sitemap_location_rule:
            return None
        later = self._robots_later_listers
        listers = {*sitemap.listers, *later.get(sitemap.url, ()), *later.get(sitemap.root, ())}
        return _LocationRule(Location.of(sitemap.url) or Location("", ""), frozenset(listers))

    def _robots_listed_sitemap(self, loc: str, index: _Sitemap, counts: Counter[str]) -> Request | None:
        """The request for a sitemap an index lists (``sitemap_follow`` and the location rule passed): none for
        one requested before in the crawl, or past the depth bound."""
        if self._robots_seen(loc):
            counts["repeated"] += 1
            return None
        if index.depth >= self._robots_max_depth:
            counts["too_deep"] += 1
            return None
        try:
            request = self._robots_sitemap_request(loc, replace(index, url=loc, depth=index.depth + 1))
        except ValueError:  # a URL Scrapy refuses: the index's other lines still count
            logger.debug("Sitemap index %s lists an invalid URL: %r", index.url, loc, extra={"spider": self})
            return None
        self._robots_mark_seen(loc)
        return request

    def _robots_report(
        self,
        sitemap: _Sitemap,
        entries: int,
        truncated: str | None,
        allowed: _LocationRule | None,
        counts: Counter[str],
    ) -> None:
        """Count and say what one sitemap's reading left out: a WARNING per bound reached, an INFO line for
        URLs outside its location."""
        stats = self.crawler.stats
        extra = {"spider": self}
        if truncated is not None:
            stats.inc_value("robotstxt/sitemaps/truncated")
            if truncated == "entries":
                logger.warning(
                    "Sitemap %s lists more than %d entries (ROBOTSTXT_SITEMAP_MAX_URLS): the first %d are used",
                    sitemap.url,
                    self._robots_max_urls,
                    entries,
                    extra=extra,
                )
            else:
                logger.warning(
                    "Sitemap %s is larger than %d bytes uncompressed (ROBOTSTXT_SITEMAP_MAX_BYTES): the entries "
                    "within them are used (%d)",
                    sitemap.url,
                    self._robots_max_bytes,
                    entries,
                    extra=extra,
                )
        if counts["too_deep"]:
            stats.inc_value("robotstxt/sitemaps/too_deep", counts["too_deep"])
            logger.warning(
                "Sitemap index %s lies under %d others (ROBOTSTXT_SITEMAP_MAX_DEPTH = %d): the sitemaps it "
                "lists are not requested (%d)",
                sitemap.url,
                sitemap.depth,
                self._robots_max_depth,
                counts["too_deep"],
                extra=extra,
            )
        if counts["repeated"]:
            stats.inc_value("robotstxt/sitemaps/repeated", counts["repeated"])
        if counts["off_location"] and allowed is not None:
            stats.inc_value("robotstxt/sitemaps/off_location", counts["off_location"])
            logger.info(
                "Sitemap %s: %d URL%s outside its location dropped (the sitemaps protocol: under %s, or of a site "
                "whose robots.txt lists the sitemap; robots_sitemap_location_rule = False keeps them)",
                sitemap.url,
                counts["off_location"],
                "" if counts["off_location"] == 1 else "s",
                allowed.location.origin + allowed.location.directory,
                extra=extra,
            )


@dataclass(frozen=True)
class _LocationRule:
    """The URLs one sitemap may list: under its location, or of the origins whose robots.txt lists it."""

    location: Location
    listers: frozenset[str]

    def __call__(self, url: str) -> bool:
        return self.location.allows(url, self.listers)


class _Reading:
    """One sitemap's reading, taken a batch at a time: its entries, through ``sitemap_filter``, their URLs, and
    what ``sitemap_rules`` (a urlset) or ``sitemap_follow`` (an index) takes of them, within the location rule.
    Gives the requests of a urlset's pages, and the URLs of an index's sitemaps (whether those are requested
    depends on what the crawl requested already: the spider decides, in the reactor's thread)."""

    def __init__(
        self,
        reader: SitemapReader,
        entry_filter: Callable[[Iterable[dict[str, Any]]], Iterable[dict[str, Any]]],
        alternates: bool,
        rules: list[tuple[re.Pattern[str], Callable[..., Any]]],
        follow: list[re.Pattern[str]],
        allowed: _LocationRule | None,
    ) -> None:
        self.reader = reader
        self.allowed = allowed
        self.off_location = 0
        self._outputs = self._run(entry_filter, alternates, rules, follow)

    def take(self, count: int) -> list[Request | str]:
        return list(islice(self._outputs, count))

    def _run(
        self,
        entry_filter: Callable[[Iterable[dict[str, Any]]], Iterable[dict[str, Any]]],
        alternates: bool,
        rules: list[tuple[re.Pattern[str], Callable[..., Any]]],
        follow: list[re.Pattern[str]],
    ) -> Iterator[Request | str]:
        entries = iter(self.reader)
        first = next(entries, None)  # the root's name comes with it
        if self.reader.kind not in SITEMAP_TYPES:
            return
        urls = _iterloc(entry_filter(entries if first is None else chain([first], entries)), alternates)
        allowed = self.allowed
        if self.reader.kind == "sitemapindex":
            for loc in urls:
                if not any(pattern.search(loc) for pattern in follow):
                    continue
                if allowed is None or allowed(loc):
                    yield loc
                else:
                    self.off_location += 1
            return
        for loc in urls:
            for pattern, callback in rules:
                if pattern.search(loc):
                    if allowed is None or allowed(loc):
                        yield from _requests(loc, callback)
                    else:
                        self.off_location += 1
                    break


async def _pause() -> None:
    """Let the reactor run what is due: a turn of asyncio's loop, else a call of Twisted's reactor."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a coroutine driven by Twisted, not by asyncio
        from twisted.internet import reactor

        await deferLater(reactor, 0, lambda: None)
        return
    await asyncio.sleep(0)


async def _in_thread(function: Callable[[int], _T], argument: int) -> _T:
    """*function* called in a worker thread: asyncio's executor, else Twisted's thread pool."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a coroutine driven by Twisted, not by asyncio
        return await maybe_deferred_to_future(deferToThread(function, argument))
    return await loop.run_in_executor(None, function, argument)


def _iterloc(entries: Iterable[dict[str, Any]], alternates: bool) -> Iterator[str]:
    """The URLs of sitemap *entries* as ``SitemapSpider`` takes them: each ``loc`` (an empty one skipped), then
    its alternates when ``sitemap_alternate_links`` asks for them."""
    for entry in entries:
        if loc := entry["loc"]:
            yield loc
        if alternates and (links := entry.get("alternate")):
            yield from links


def _requests(url: str, callback: Callable[..., Any]) -> Iterator[Request]:
    """The request for a listed page, none for a URL Scrapy refuses: one bad entry must not end the reading."""
    try:
        yield Request(url, callback=callback)
    except ValueError:
        logger.debug("A sitemap lists an invalid URL: %r", url)


def _flag(value: object) -> bool:
    """A spider attribute as a boolean; a spider argument (``-a name=false``) comes as a string."""
    if isinstance(value, str):
        return value.strip().lower() not in ("0", "false", "no", "off", "")
    return bool(value)


def _check_scope(spider_name: str, scope: str) -> None:
    if scope not in SCOPES:
        raise ValueError(f"{spider_name}.robots_sitemap_scope must be one of {SCOPES}, not {scope!r}")


def within(host: str, domain: str) -> bool:
    """Whether ``host`` is ``domain`` (less a leading ``www.``) or its subdomain;
    an IP address has none (``127.127.0.1`` is not under ``127.0.1``)."""
    host, domain = host.lower(), domain.lower().removeprefix("www.")
    return host == domain or (host.endswith("." + domain) and not _is_address(host))


def _is_address(host: str) -> bool:
    """Whether *host* is an IP address in any form a resolver takes
    (``127.0.1``, ``0x7f.1``, ``2130706433``, IPv6): no top-level domain is numeric."""
    last = host.rstrip(".").rsplit(".", 1)[-1]
    return ":" in host or last.isdigit() or last.startswith("0x")


def _domain(entry: str) -> str | None:
    """An ``allowed_domains`` entry as hosts are compared; None, matching nothing, if IDNA refuses it."""
    try:
        return _idna(entry)
    except ValueError:
        return None
