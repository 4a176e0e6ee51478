"""``RobotsSitemapMixin``: crawl the sitemaps robots.txt files list with ``SitemapSpider``'s machinery,
each read as a stream within the sitemaps protocol's bounds and location rule."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import XmlResponse
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.spiders import SitemapSpider
from scrapy.utils.conf import build_component_list
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.misc import load_object

from ._crawl import settings as _settings
from ._crawl.compat import engine_closing, over_download_bound, sitemap_callbacks, sitemap_follow
from ._crawl.loop import in_thread, pause
from ._crawl.origins import InvalidOrigin, origin_of, robots_url
from ._crawl.parse import parsed
from ._crawl.sitemap.ledger import SitemapLedger
from ._crawl.sitemap.listed import MAX_SITEMAPS, listed_sitemaps
from ._crawl.sitemap.location import Location, LocationRule, Sitemap, idna
from ._crawl.sitemap.reader import GZIP_MAGIC, SITEMAP_TYPES, SitemapReader
from ._crawl.sitemap.routing import SitemapRouting
from ._crawl.sitemap.scope import check_scope, declined
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

#: The sitemaps protocol's bounds per sitemap or sitemap index (sitemaps.org): 50,000 URLs, 50 MB uncompressed.
DEFAULT_MAX_URLS = 50_000
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
#: Sitemap indexes followed in a row: the protocol nests none, some large sites one level.
DEFAULT_MAX_DEPTH = 2
# The mixin stops a download at its bound itself; Scrapy cancels it only this far past, as a read may cross it.
_DOWNLOAD_SLACK = 1024 * 1024
# Larger (or gzip) bodies are read in a worker thread, a batch of requests at a time, so the reactor runs on.
_INLINE_BYTES = 64 * 1024
_BATCH = 500
# Scrapy drains a callback's requests without yielding to the reactor: pause every so many.
_PAUSE_EVERY = 50


def middleware_missing(settings: BaseSettings) -> str | None:
    """Why :class:`~scrapy_robots_coccoc.RobotsTxtMiddleware` does not run with *settings*, None if it does."""
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

    _robots_ledger: SitemapLedger
    _robots_max_urls: int
    _robots_max_bytes: int
    _robots_max_depth: int
    # engine.crawl bypasses the spider middlewares: UrlLengthMiddleware's limit is applied here.
    _robots_url_limit: int
    _robots_via_middleware: bool  # known when the spider opens: add-ons change settings until then

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
        # Behind SitemapSpider in the MRO, start() and parse() are shadowed.
        if mro.index(RobotsSitemapMixin) > mro.index(SitemapSpider):
            raise TypeError(
                f"{name}: RobotsSitemapMixin goes before SitemapSpider in the bases "
                f"(class {name}(RobotsSitemapMixin, SitemapSpider)): behind it, its start() and parse() are hidden"
            )
        check_scope(name, cls.robots_sitemap_scope)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        check_scope(cls.__name__, spider.robots_sitemap_scope)  # a spider argument may set it too
        spider.robots_sitemap_location_rule = _flag(spider.robots_sitemap_location_rule)
        spider._robots_ledger = SitemapLedger()
        spider._robots_read_bounds(crawler.settings)
        spider._robots_url_limit = crawler.settings.getint("URLLENGTH_LIMIT")
        spider._robots_via_middleware = True
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
        """Say which way the sitemaps come; without our middleware, request each reached origin's robots.txt."""
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
                self._robots_ledger.mark_seen(url)
                yield self._robots_sitemap_request(url, Sitemap(url, 0, None, url))
        for url in self.start_urls:
            yield Request(url, dont_filter=True)
        for origin in self.robots_sitemap_origins:
            seed = self._robots_seed(origin if "://" in origin else f"https://{origin}")
            if seed is not None and not self._learnt(seed):
                yield seed

    def _learnt(self, seed: Request) -> bool:
        """Have our middleware learn the seed's origin without a request (which would end as a downloader
        exception in the stats); False without it."""
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
        """Without our middleware: schedule the robots.txt of a response's origin, once."""
        if engine_closing(self.crawler.engine):
            return
        try:
            origin = origin_of(request)
        except InvalidOrigin:  # not http(s), say
            return
        if not self._robots_ledger.robots_requested(origin):
            seed = self._robots_seed(robots_url(origin))
            if seed is not None:
                self.crawler.engine.crawl(seed)

    def _robots_seed(self, site_url: str) -> Request | None:
        """A request that gets the site's robots.txt sitemaps to the spider (``robotstxt_only`` through our
        middleware, else a download); None for an invalid URL or a robots.txt the mixin requested already."""
        via_middleware = self._robots_via_middleware
        try:
            request = Request(
                urljoin(site_url, "/robots.txt"),
                callback=self._robots_seeded,
                errback=self._robots_seed_failed,
                meta={"robotstxt_only": True} if via_middleware else {"dont_obey_robotstxt": True},
                dont_filter=True,
            )
            origin = request.cb_kwargs["origin"] = origin_of(request)
        except ValueError as exc:  # InvalidOrigin, or a URL urljoin cannot even split
            self._seed_failed(site_url, exc)
            return None
        if not via_middleware and not self._robots_ledger.claim_robots(origin):
            return None
        return request

    async def _robots_seeded(self, response: Response, origin: str) -> None:
        """Take the sitemaps of a robots.txt the mixin downloaded, as our middleware takes them."""
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
        """``RobotsTxtOnly`` is our middleware's success, an error status lists no sitemap; else nothing seeded."""
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
        """Schedule the sitemaps of one robots.txt that are new, in scope and under the per-site cap."""
        self._take_sitemaps(origin, sitemaps)

    def _take_sitemaps(self, origin: str, sitemaps: Sequence[str]) -> None:
        """Schedule what may be of *sitemaps* (absolute URLs), with one log line per robots.txt."""
        site = idna(urlsplit(origin).hostname or "")
        ledger = self._robots_ledger
        taken = ledger.taken
        counts: Counter[str] = Counter()
        for url in sitemaps:
            if ledger.seen(url):
                ledger.listed_again(url, origin)
                continue
            if ledger.declined(origin, url):
                continue
            counts["found"] += 1
            reason = "over_limit" if taken[origin] >= self.robots_sitemap_max_per_site else self._declined(site, url)
            if reason is None:
                request = self._robots_listed_request(url, origin)
                if request is not None:
                    ledger.mark_seen(url)
                    taken[origin] += 1
                    counts["scheduled"] += 1
                    self.crawler.engine.crawl(request)
                    continue
                reason = "invalid"
            ledger.decline(origin, url)
            counts[reason] += 1
        for name, count in counts.items():
            self.crawler.stats.inc_value(f"robotstxt/sitemaps/{name}", count)
        if counts["found"]:  # a refresh listing nothing new says nothing
            self._log_taken(origin, len(sitemaps), counts)

    def _log_taken(self, origin: str, listed: int, counts: Counter[str]) -> None:
        """What became of one robots.txt's sitemaps, each declined kind with the setting that changes it."""
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
        # Read only for the allowed_domains scope and a URL it compares: a property need not answer otherwise.
        domains = partial(getattr, self, "allowed_domains", None)
        return declined(url, site, self.robots_sitemap_scope, domains, self._robots_url_limit)

    def _robots_listed_request(self, url: str, origin: str) -> Request | None:
        """The request for a sitemap *origin*'s robots.txt lists, None for a URL Scrapy refuses. No
        dont_filter: a shared dupefilter (scrapy-redis) drops one another worker requested."""
        try:
            return self._robots_sitemap_request(url, Sitemap(url, 0, (origin,), url))
        except ValueError:
            return None

    def _robots_sitemap_request(self, url: str, sitemap: Sitemap) -> Request:
        """A sitemap's request, its download bounded whatever DOWNLOAD_MAXSIZE says. Raises ValueError for a URL
        Scrapy refuses."""
        return Request(
            url,
            callback=self._robots_sitemap_read,
            errback=self._robots_sitemap_failed,
            meta={
                "download_maxsize": self._robots_max_bytes + _DOWNLOAD_SLACK,
                "download_warnsize": 0,  # the mixin warns itself
                "_robots_sitemap": sitemap,
            },
        )

    def _robots_headers_received(self, headers: Headers, body_length: object, request: Request, **kwargs: Any) -> None:
        """Count a sitemap's bytes from 0 (a retry starts over). A raw body announced past the bound is let come,
        to be stopped at the bound and read that far, rather than cancelled before its first byte."""
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
        """Warn of a sitemap Scrapy dropped past its download bound; other failures go on as without errback."""
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
        """Read a sitemap or index as ``SitemapSpider`` does, within the bounds and the location rule, a batch at a
        time as Scrapy takes them: the reactor runs on, and memory stays flat."""
        sitemap: Sitemap = response.meta.get("_robots_sitemap") or Sitemap(response.url, 0, None, response.url)
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
        routing = SitemapRouting(
            reader,
            self.sitemap_filter,
            self.sitemap_alternate_links,
            sitemap_callbacks(self),
            sitemap_follow(self),
            allowed,
        )
        threaded = gzipped or len(body) > _INLINE_BYTES
        counts: Counter[str] = Counter()
        while True:
            batch = await in_thread(routing.take, _BATCH) if threaded else routing.take(_BATCH)
            for done, output in enumerate(batch, 1):
                if isinstance(output, Request):
                    yield output
                else:
                    request = self._robots_listed_sitemap(output, sitemap, counts)
                    if request is not None:
                        yield request
                if done % _PAUSE_EVERY == 0:
                    await pause()
            if len(batch) < _BATCH:
                break
        if reader.kind not in SITEMAP_TYPES:
            self._robots_invalid(response)
            return
        counts["off_location"] = routing.off_location
        truncated = reader.truncated or ("bytes" if "download_stopped" in response.flags else None)
        self._robots_report(sitemap, reader.entries, truncated, allowed, counts)

    def _robots_invalid(self, response: Response) -> None:
        logger.warning("Ignoring invalid sitemap: %(response)s", {"response": response}, extra={"spider": self})

    def _robots_location_rule(self, sitemap: Sitemap) -> LocationRule | None:
        """The location rule for *sitemap*'s URLs; None for the spider's own sitemaps, or with the rule off."""
        if sitemap.listers is None or not self.robots_sitemap_location_rule:
            return None
        listers = {*sitemap.listers, *self._robots_ledger.later_listers(sitemap.url, sitemap.root)}
        return LocationRule(Location.of(sitemap.url) or Location("", ""), frozenset(listers))

    def _robots_listed_sitemap(self, loc: str, index: Sitemap, counts: Counter[str]) -> Request | None:
        """The request for a sitemap an index lists; none for one requested before, or past the depth bound."""
        if self._robots_ledger.seen(loc):
            counts["repeated"] += 1
            return None
        if index.depth >= self._robots_max_depth:
            counts["too_deep"] += 1
            return None
        try:
            request = self._robots_sitemap_request(loc, replace(index, url=loc, depth=index.depth + 1))
        except ValueError:  # a URL Scrapy refuses
            logger.debug("Sitemap index %s lists an invalid URL: %r", index.url, loc, extra={"spider": self})
            return None
        self._robots_ledger.mark_seen(loc)
        return request

    def _robots_report(
        self,
        sitemap: Sitemap,
        entries: int,
        truncated: str | None,
        allowed: LocationRule | None,
        counts: Counter[str],
    ) -> None:
        """Count and log what a sitemap's reading left out: a WARNING per bound reached, INFO for off-location."""
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


def _flag(value: object) -> bool:
    """A spider attribute as a boolean; a spider argument (``-a name=false``) comes as a string."""
    if isinstance(value, str):
        return value.strip().lower() not in ("0", "false", "no", "off", "")
    return bool(value)
