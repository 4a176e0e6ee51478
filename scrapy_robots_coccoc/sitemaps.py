"""``RobotsSitemapMixin``: crawl the sitemaps robots.txt files list, with
Scrapy's ``SitemapSpider`` machinery and no robots.txt fetched twice."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request
from scrapy.spiders import SitemapSpider

from ._crawl.compat import sitemap_callbacks, sitemap_parser
from ._crawl.origins import origin_of
from ._parser import RobotsTxt
from .exceptions import RobotsTxtOnly
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
#: Declined (origin, sitemap) pairs remembered; one forgotten (oldest first) is only counted again.
MAX_DECLINED = 100_000
#: At most this many sitemaps of one robots.txt are handed to spiders, so that
#: a hostile list cannot hold the reactor; real ones list far fewer.
MAX_SITEMAPS = 1000


def listed_sitemaps(base: str, urls: list[str]) -> list[str]:
    """The first MAX_SITEMAPS of *urls*, resolved against *base*, without duplicates or unparsable ones."""
    resolved = []
    for url in urls[:MAX_SITEMAPS]:
        try:
            resolved.append(urljoin(base, url))
        except ValueError:  # an unclosed IPv6 bracket, say
            continue
    return list(dict.fromkeys(resolved))


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
    # Hashes (small however long the URL) of declined (origin, URL) pairs: a refresh
    # does not count them again, while another origin may still get the URL crawled.
    _robots_sitemaps_declined: dict[int, None]
    _robots_sitemaps_per_origin: Counter[str]  # sitemaps scheduled per robots.txt
    # Sitemap requests are scheduled with engine.crawl, which no spider
    # middleware sees: UrlLengthMiddleware's limit is applied here.
    _robots_url_limit: int

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
        spider._robots_url_limit = crawler.settings.getint("URLLENGTH_LIMIT")
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
        """A request that makes the middleware fetch the site's robots.txt and
        announce its sitemaps, downloading nothing; None for a URL no site can answer."""
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
        """Without our middleware the seed downloads robots.txt itself: read its sitemaps as our middleware would."""
        self._take_sitemaps(origin, listed_sitemaps(response.url, RobotsTxt.parse(response.body).sitemaps))

    def _robots_seed_failed(self, failure: Failure) -> None:
        """``RobotsTxtOnly`` is our middleware's success (the sitemaps were
        announced); anything else means this origin seeded nothing."""
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
        """Schedule the sitemaps of one robots.txt (absolute URLs) that are
        new, in scope and under the per-site cap."""
        self._take_sitemaps(origin, sitemaps)

    def _take_sitemaps(self, origin: str, sitemaps: Iterable[str]) -> None:
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
        declined = {name: count for name, count in counts.items() if name not in ("found", "scheduled")}
        if declined:
            logger.debug(
                "Sitemaps of %s not taken: %s",
                origin,
                ", ".join(f"{count} {reason}" for reason, count in declined.items()),
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
