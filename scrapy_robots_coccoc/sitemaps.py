"""``RobotsSitemapMixin``: crawl the sitemaps that robots.txt files list,
with Scrapy's own ``SitemapSpider`` machinery, and without fetching any
robots.txt a second time."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request
from scrapy.spiders import SitemapSpider

from ._compat import sitemap_callbacks, sitemap_parser
from ._robotstxt import RobotsTxt
from .exceptions import RobotsTxtOnly
from .origins import origin_of, robots_url
from .signals import robotstxt_sitemaps_found

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure
    from typing_extensions import Self

    # Type-check the mixin as the SitemapSpider it always runs in front of.
    _MixinBase = SitemapSpider
else:
    _MixinBase = object

logger = logging.getLogger(__name__)

SCOPES = ("site", "allowed_domains", "any")
#: Declined (origin, sitemap) pairs remembered, so that refreshes do not count them again.
MAX_DECLINED = 100_000


class RobotsSitemapMixin(_MixinBase):
    """Feed a ``SitemapSpider`` the sitemaps of the robots.txt files that
    :class:`~scrapy_robots_coccoc.RobotsTxtMiddleware` fetches.

    ``class ShopSpider(RobotsSitemapMixin, SitemapSpider)`` requests its
    ``start_urls`` (callback ``parse``) and, for every site the crawl
    reaches, the sitemaps its robots.txt lists, routed by ``sitemap_rules``,
    ``sitemap_follow``, ``sitemap_alternate_links`` and ``sitemap_filter`` as
    usual. Each sitemap URL is requested once per crawl.
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
    # (origin, sitemap URL) pairs declined (out of scope, over the cap, not
    # http(s)): a refresh of that robots.txt does not count them again, while
    # another origin listing the same URL may still get it crawled.
    # Bounded (oldest forgotten first): a forgotten pair is only counted again.
    _robots_sitemaps_declined: dict[tuple[str, str], None]
    _robots_sitemaps_per_origin: Counter[str]  # sitemaps scheduled per robots.txt

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The position, not issubclass: behind SitemapSpider, the mixin's
        # start() and parse() would be shadowed and it would do nothing.
        mro = cls.__mro__
        if SitemapSpider not in mro or mro.index(RobotsSitemapMixin) > mro.index(SitemapSpider):
            raise TypeError(f"{cls.__name__}: RobotsSitemapMixin goes before SitemapSpider in the bases")
        if cls.robots_sitemap_scope not in SCOPES:
            raise ValueError(f"{cls.__name__}.robots_sitemap_scope must be one of {SCOPES}")

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider._robots_sitemaps_seen = set()
        spider._robots_sitemaps_declined = {}
        spider._robots_sitemaps_per_origin = Counter()
        crawler.signals.connect(spider.robots_sitemaps_found, signal=robotstxt_sitemaps_found)
        return spider

    async def start(self) -> AsyncIterator[Any]:
        for url in self.sitemap_urls:
            if urlsplit(url).path == "/robots.txt":
                seed = self._robots_seed(url)
                if seed is not None:
                    yield seed
            else:
                self._robots_sitemaps_seen.add(url)
                yield Request(url, callback=sitemap_parser(self))
        for url in self.start_urls:
            yield Request(url, dont_filter=True)
        for origin in self.robots_sitemap_origins:
            seed = self._robots_seed(origin if "://" in origin else f"https://{origin}")
            if seed is not None:
                yield seed

    def _robots_seed(self, site_url: str) -> Request | None:
        """A request that makes the middleware fetch the site's robots.txt
        (and so announce its sitemaps) without downloading anything itself;
        None for a URL no site can answer."""
        try:
            request = Request(
                urljoin(site_url, "/robots.txt"),
                callback=self._robots_seeded,
                errback=self._robots_seed_failed,
                meta={"robotstxt_only": True},
                dont_filter=True,
            )
            request.cb_kwargs["origin"] = origin_of(request)
        except ValueError as exc:  # InvalidOrigin, or a URL urljoin cannot even split
            self._seed_failed(site_url, exc)
            return None
        return request

    def _robots_seeded(self, response: Response, origin: str) -> None:
        """Without our middleware, the seed request downloads robots.txt
        itself: take its sitemaps from the body, read as our middleware reads them."""
        self._take_sitemaps(origin, RobotsTxt.parse(response.body).sitemaps, response.url)

    def _robots_seed_failed(self, failure: Failure) -> None:
        """Our middleware ends a seed request with ``RobotsTxtOnly`` once the
        origin's sitemaps are announced: that is success. Anything else
        means this origin seeded nothing."""
        if not failure.check(RobotsTxtOnly):
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
        """Schedule the sitemaps of one robots.txt that are new, in scope and
        under the per-site cap; relative URLs are resolved against that
        robots.txt."""
        self._take_sitemaps(origin, sitemaps, robots_url(origin))

    def _take_sitemaps(self, origin: str, sitemaps: Iterable[str], base_url: str | None = None) -> None:
        stats = self.crawler.stats
        site = urlsplit(origin).hostname or ""
        for listed in sitemaps:
            try:
                url = urljoin(base_url, listed) if base_url else listed
                host = urlsplit(url).hostname or ""
            except ValueError:  # e.g. an unclosed IPv6 bracket
                url, host = listed, ""
            if url in self._robots_sitemaps_seen or (origin, url) in self._robots_sitemaps_declined:
                continue
            stats.inc_value("robotstxt/sitemaps/found")
            request = _request(url, sitemap_parser(self)) if url.startswith(("http://", "https://")) and host else None
            if request is None:
                declined = "invalid"
            elif not self._in_scope(site, host):
                declined = "out_of_scope"
            elif self._robots_sitemaps_per_origin[origin] >= self.robots_sitemap_max_per_site:
                declined = "over_limit"
            else:
                self._robots_sitemaps_seen.add(url)
                self._robots_sitemaps_per_origin[origin] += 1
                stats.inc_value("robotstxt/sitemaps/scheduled")
                self.crawler.engine.crawl(request)
                continue
            self._robots_sitemaps_declined[origin, url] = None
            if len(self._robots_sitemaps_declined) > MAX_DECLINED:
                del self._robots_sitemaps_declined[next(iter(self._robots_sitemaps_declined))]
            stats.inc_value(f"robotstxt/sitemaps/{declined}")
            logger.debug("Sitemap %s of %s not taken: %s", listed, origin, declined, extra={"spider": self})

    def _in_scope(self, site: str, host: str) -> bool:
        if self.robots_sitemap_scope == "any":
            return True
        if self.robots_sitemap_scope == "allowed_domains":
            domains = getattr(self, "allowed_domains", None) or [site]
            return any(within(host, domain) for domain in domains)
        return within(host, site) or within(site, host)


def _request(url: str, callback: Callable[..., Any]) -> Request | None:
    """A request of a listed sitemap, or None for a URL Scrapy refuses (a
    port out of range, say): one bad line must not stop the lines after it.
    No dont_filter: with a shared dupefilter (scrapy-redis) a sitemap
    another worker already requested is dropped."""
    try:
        return Request(url, callback=callback)
    except ValueError:
        return None


def within(host: str, domain: str) -> bool:
    """Whether ``host`` is ``domain`` or one of its subdomains, ignoring a
    leading ``www.`` on the domain."""
    host, domain = host.lower(), domain.lower().removeprefix("www.")
    return host == domain or host.endswith("." + domain)
