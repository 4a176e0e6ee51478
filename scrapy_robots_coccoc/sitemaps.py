"""``RobotsSitemapMixin``: crawl the sitemaps robots.txt files list, with
Scrapy's ``SitemapSpider`` machinery: through our middleware, which fetches
each robots.txt once, or without it by requesting robots.txt itself."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.spiders import SitemapSpider
from scrapy.utils.conf import build_component_list
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.misc import load_object

from ._crawl.compat import engine_closing, sitemap_callbacks, sitemap_parser
from ._crawl.origins import InvalidOrigin, origin_of, robots_url
from ._crawl.parse import parsed
from ._crawl.sitemaplist import MAX_SITEMAPS, listed_sitemaps
from .exceptions import RobotsTxtOnly
from .middleware import RobotsTxtMiddleware, of_crawler
from .signals import robotstxt_sitemaps_found

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
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
    """

    #: Sites whose robots.txt sitemaps seed the crawl, e.g. ``["https://example.com"]``.
    robots_sitemap_origins: Sequence[str] = ()
    #: Which listed sitemaps to take: ``"site"`` (the robots.txt's host, its
    #: subdomains and parent domains), ``"allowed_domains"`` or ``"any"``.
    robots_sitemap_scope: str = "site"
    #: At most this many sitemaps taken from one origin's robots.txt.
    robots_sitemap_max_per_site: int = 50

    # Sitemap URLs scheduled (or requested through sitemap_urls): never again.
    _robots_sitemaps_seen: set[str]
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
        spider._robots_sitemaps_seen = set()
        spider._robots_sitemaps_declined = {}
        spider._robots_sitemaps_per_origin = Counter()
        spider._robots_url_limit = crawler.settings.getint("URLLENGTH_LIMIT")
        spider._robots_via_middleware = True
        spider._robots_origins_requested = {}
        crawler.signals.connect(spider.robots_sitemaps_found, signal=robotstxt_sitemaps_found)
        crawler.signals.connect(spider._robots_spider_opened, signal=signals.spider_opened)
        return spider

    def _robots_spider_opened(self, **kwargs: Any) -> None:
        """Say which way the sitemaps come. Without our middleware, no robots.txt would reach the spider: the
        mixin then requests the robots.txt of each origin the crawl gets a response from."""
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
                self._robots_sitemaps_seen.add(url)
                yield Request(url, callback=sitemap_parser(self))
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
            if url in self._robots_sitemaps_seen or key in self._robots_sitemaps_declined:
                continue
            counts["found"] += 1
            reason = "over_limit" if taken[origin] >= self.robots_sitemap_max_per_site else self._declined(site, url)
            if reason is None:
                request = _request(url, sitemap_parser(self))
                if request is not None:
                    self._robots_sitemaps_seen.add(url)
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


def _check_scope(spider_name: str, scope: str) -> None:
    if scope not in SCOPES:
        raise ValueError(f"{spider_name}.robots_sitemap_scope must be one of {SCOPES}, not {scope!r}")


def _request(url: str, callback: Callable[..., Any]) -> Request | None:
    """A listed sitemap's request, None for a URL Scrapy refuses: one bad line must not stop the others.
    No dont_filter, so that a shared dupefilter (scrapy-redis) drops a sitemap another worker requested."""
    try:
        return Request(url, callback=callback)
    except ValueError:
        return None


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


def _idna(host: str) -> str:
    """*host* in the IDNA form Scrapy requests it in (``cửa-hàng.vn`` is
    ``xn--ca-hng-lta4562d.vn``). Raises ValueError for a name IDNA refuses."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise ValueError(f"invalid host name {host!r}") from exc
