"""Drop the spider's requests that robots.txt forbids before they are queued, and obey page-level robots."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import HtmlResponse
from scrapy.utils.python import to_unicode

from ._crawl import settings as _settings
from ._crawl.usage import disallowed
from ._crawl.usage import purposes as usage_purposes
from ._parser.pagerobots import page_directives
from ._parser.usage import NO_PREFERENCES, UsagePreferences
from ._parser.useragent import robot_name
from .middleware import of_crawler

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)


class RobotsTxtSpiderMiddleware:
    """Drops requests forbidden by rules :class:`~scrapy_robots_coccoc.RobotsTxtMiddleware` already knows, before they
    reach the scheduler (or a shared queue), with the downloader's stats, log line and signal. A request with an
    errback, or of an origin not known yet, is decided at the downloader, so its errback sees the exception; an
    unknown origin's robots.txt is fetched meanwhile with :confval:`ROBOTSTXT_PREFETCH`.

    With :confval:`ROBOTSTXT_PAGE_ROBOTS`, it reads page-level robots into ``response.meta["robots_directives"]`` and
    drops the requests a ``nofollow`` page yields (:doc:`../usage/page-robots`)."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self._crawler = crawler
        self._stats = crawler.stats
        self._page_robots = settings.getbool("ROBOTSTXT_PAGE_ROBOTS", False)
        self._user_agent = _settings.user_agent(settings)
        self._default_user_agent: str = settings.get("USER_AGENT") or "Scrapy"
        self._purposes = usage_purposes(settings)
        # Read once per response: process_spider_input may not run, and meta may hold the linking page's copy.
        self._directives: WeakKeyDictionary[Response, frozenset[str]] = WeakKeyDictionary()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_spider_input(self, response: Response, spider: object = None) -> None:
        if self._page_robots:
            self._directives_of(response)

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: object = None) -> Iterable[Any]:
        page = self._page(response)
        for item in result:
            if not self._dropped(item, page):
                yield item

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: object = None
    ) -> AsyncIterator[Any]:
        page = self._page(response)
        async for item in result:
            if not self._dropped(item, page):
                yield item

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item in start:
            if isinstance(item, Request):
                # As Scrapy's StartSpiderMiddleware (25) will, which sees start requests after us.
                item.meta.setdefault("is_start_request", True)
            if not self._dropped(item, _Page()):
                yield item

    def process_start_requests(self, start: Iterable[Any], spider: object = None) -> Iterable[Any]:
        # Defined beside process_start, so that middlewares with only this one may still be combined with ours.
        yield from self.process_spider_output(None, start)  # type: ignore[arg-type]

    def _page(self, response: Response | None) -> _Page:
        """What the page whose callback yields the output says of it: nofollow, a usage purpose disallowed."""
        if response is None:
            return _Page()
        # A response built by hand (no request) has no meta, so no preferences.
        preferences: UsagePreferences = (response.request and response.meta.get("usage_preferences")) or NO_PREFERENCES
        label = disallowed(preferences, self._purposes)
        usage = None if label is None else f"{label} disallowed by {preferences.source(label)}"
        return _Page(response.url, self._nofollow_page(response), usage)

    def _dropped(self, item: Any, page: _Page) -> bool:
        if not isinstance(item, Request):
            if page.usage is None:
                return False
            self._stats.inc_value("robotstxt/usage/items_dropped")
            if not page.logged:
                page.logged = True
                logger.debug(
                    "Items of %(page)s dropped: %(usage)s",
                    {"page": page.url, "usage": page.usage},
                    extra={"spider": self._crawler.spider},
                )
            return True
        nofollow = page.nofollow
        if nofollow is not None and not item.meta.get("dont_obey_robotstxt"):
            self._stats.inc_value("robotstxt/page/nofollow_dropped")
            logger.debug(
                "Dropped (nofollow: %(page)s): %(request)s",
                {"page": nofollow, "request": item},
                extra={"spider": self._crawler.spider},
            )
            return True
        middleware = of_crawler(self._crawler)
        return middleware is not None and middleware.before_queue(item)

    def _nofollow_page(self, response: Response | None) -> str | None:
        if not self._page_robots or response is None:
            return None
        return response.url if "nofollow" in self._directives_of(response) else None

    def _directives_of(self, response: Response) -> frozenset[str]:
        directives = self._directives.get(response)
        if directives is None:
            # Meta tags are read from HTML alone: elsewhere "<meta" is no tag.
            body = response.body if isinstance(response, HtmlResponse) else None
            directives = page_directives(response.headers.getlist(b"X-Robots-Tag"), body, self._robot_of(response))
            self._directives[response] = directives
            if response.request is not None:  # response.meta is its request's
                response.meta["robots_directives"] = directives
        return directives

    def _robot_of(self, response: Response) -> str:
        """The name of the robot the response's request obeyed robots.txt as (the downloader middleware's rule)."""
        request = response.request
        agent = (request.meta.get("robotstxt_user_agent") if request is not None else None) or self._user_agent
        if not agent:
            agent = (request.headers.get(b"User-Agent") if request is not None else None) or self._default_user_agent
        return robot_name(to_unicode(agent, errors="replace"))


@dataclass
class _Page:
    """The page whose callback's output is filtered: its URL, that URL again if the page is ``nofollow``, and why
    its usage preferences disallow a purpose of the crawl, if they do (its items are dropped, its links followed)."""

    url: str | None = None
    nofollow: str | None = None
    usage: str | None = None
    logged: bool = False
