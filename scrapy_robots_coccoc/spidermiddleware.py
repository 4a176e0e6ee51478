"""``RobotsTxtSpiderMiddleware``: drop the spider's requests that robots.txt forbids before they are queued."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import NotConfigured

from .middleware import of_crawler

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self


class RobotsTxtSpiderMiddleware:
    """Drops requests whose origin's rules :class:`~scrapy_robots_coccoc.RobotsTxtMiddleware` already knows
    and which they forbid, so that they never travel the scheduler (nor a shared scrapy-redis queue): same
    stats, DEBUG line and signal as at the downloader, plus ``robotstxt/forbidden/before_queue``. Requests of
    origins not known yet pass untouched, to be decided at the downloader; no errback is called for a
    request dropped here, as it was never scheduled."""

    def __init__(self, crawler: Crawler) -> None:
        if not crawler.settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self._crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: object = None) -> Iterable[Any]:
        for item in result:
            if not self._dropped(item):
                yield item

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: object = None
    ) -> AsyncIterator[Any]:
        async for item in result:
            if not self._dropped(item):
                yield item

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for item in start:
            if not self._dropped(item):
                yield item

    def process_start_requests(self, start: Iterable[Any], spider: object = None) -> Iterable[Any]:
        # Defined beside process_start, so that middlewares with only this one may still be combined with ours.
        yield from self.process_spider_output(None, start)  # type: ignore[arg-type]

    def _dropped(self, item: Any) -> bool:
        if not isinstance(item, Request):
            return False
        middleware = of_crawler(self._crawler)
        return middleware is not None and middleware.drop_if_forbidden(item)
