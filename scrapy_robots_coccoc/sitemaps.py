"""``RobotsSitemapMixin``: crawl the sitemaps that robots.txt files list,
with Scrapy's own ``SitemapSpider`` machinery, and without fetching any
robots.txt a second time."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.spiders import SitemapSpider
from scrapy.utils.sitemap import sitemap_urls_from_robots

from .middleware import origin_of
from .signals import robotstxt_sitemaps_found

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

SCOPES = ("site", "allowed_domains", "any")


class RobotsSitemapMixin:
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

    _robots_sitemaps_seen: set[str]  # every sitemap URL announced so far
    _robots_sitemaps_per_origin: Counter[str]  # sitemaps scheduled per robots.txt

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not issubclass(cls, SitemapSpider):
            raise TypeError(f"{cls.__name__}: RobotsSitemapMixin goes before SitemapSpider in the bases")
        if cls.robots_sitemap_scope not in SCOPES:
            raise ValueError(f"{cls.__name__}.robots_sitemap_scope must be one of {SCOPES}")

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)  # type: ignore[misc]
        spider._robots_sitemaps_seen = set()
        spider._robots_sitemaps_per_origin = Counter()
        crawler.signals.connect(spider.robots_sitemaps_found, signal=robotstxt_sitemaps_found)
        return spider

    async def start(self) -> AsyncIterator[Any]:
        for url in self.sitemap_urls:
            if urlsplit(url).path == "/robots.txt":
                yield self._robots_seed(url)
            else:
                yield Request(url, callback=self._parse_sitemap)
        for url in self.start_urls:
            yield Request(url, dont_filter=True)
        for origin in self.robots_sitemap_origins:
            yield self._robots_seed(f"{origin if '://' in origin else 'https://' + origin}/robots.txt")

    def _robots_seed(self, robots_url: str) -> Request:
        """A request that makes the middleware fetch the site's robots.txt
        (and so announce its sitemaps) without downloading anything itself."""
        return Request(robots_url, callback=self._robots_seeded, meta={"robotstxt_only": True}, dont_filter=True)

    def _robots_seeded(self, response: Response) -> None:
        # With our middleware the sitemaps came through the signal and the
        # body is empty; without it, this is the real robots.txt.
        self.robots_sitemaps_found(
            origin_of(response.request), list(sitemap_urls_from_robots(response.body, base_url=response.url))
        )

    def parse(self, response: Response, **kwargs: Any) -> Any:
        """Route a start page by ``sitemap_rules``, as a listed page would be."""
        for pattern, callback in self._cbs:
            if pattern.search(response.url):
                return None if callback == self.parse else callback(response, **kwargs)
        return None

    def robots_sitemaps_found(self, origin: str, sitemaps: list[str], **kwargs: Any) -> None:
        """Schedule the sitemaps of one robots.txt that are new, in scope and
        under the per-site cap."""
        stats = self.crawler.stats
        for url in self._new_in_scope(origin, sitemaps):
            if self._robots_sitemaps_per_origin[origin] >= self.robots_sitemap_max_per_site:
                stats.inc_value("robotstxt/sitemaps/over_limit")
                continue
            self._robots_sitemaps_per_origin[origin] += 1
            stats.inc_value("robotstxt/sitemaps/scheduled")
            self.crawler.engine.crawl(Request(url, callback=self._parse_sitemap))

    def _new_in_scope(self, origin: str, sitemaps: Iterable[str]) -> Iterable[str]:
        stats = self.crawler.stats
        site = urlsplit(origin).hostname or ""
        for url in sitemaps:
            if url in self._robots_sitemaps_seen:
                continue
            self._robots_sitemaps_seen.add(url)
            stats.inc_value("robotstxt/sitemaps/found")
            if self._in_scope(site, urlsplit(url).hostname or ""):
                yield url
            else:
                stats.inc_value("robotstxt/sitemaps/out_of_scope")
                logger.debug("Sitemap %s of %s is out of scope", url, origin, extra={"spider": self})

    def _in_scope(self, site: str, host: str) -> bool:
        if self.robots_sitemap_scope == "any":
            return True
        if self.robots_sitemap_scope == "allowed_domains":
            domains = getattr(self, "allowed_domains", None) or [site]
            return any(within(host, domain) for domain in domains)
        return within(host, site) or within(site, host)


def within(host: str, domain: str) -> bool:
    """Whether ``host`` is ``domain`` or one of its subdomains, ignoring a
    leading ``www.`` on the domain."""
    host, domain = host.lower(), domain.lower().removeprefix("www.")
    return host == domain or host.endswith("." + domain)
