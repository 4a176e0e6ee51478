"""``CocCocRobotParser``: our parser as a backend of Scrapy's own middleware
(``ROBOTSTXT_PARSER = "scrapy_robots_coccoc.CocCocRobotParser"``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from weakref import WeakSet

import scrapy
from scrapy.robotstxt import RobotParser
from scrapy.utils.python import to_unicode

from ._crawl import compat
from ._parser import RobotsTxt

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

logger = logging.getLogger(__name__)

# Crawlers told that their Scrapy's middleware lets requests through unchecked.
_warned: WeakSet[Crawler] = WeakSet()


class CocCocRobotParser(RobotParser):
    def __init__(self, robotstxt_body: bytes) -> None:
        self.robots = RobotsTxt.parse(robotstxt_body)

    @classmethod
    def from_crawler(cls, crawler: Crawler | None, robotstxt_body: bytes) -> Self:
        # No crawler: the parser used offline, as Scrapy's parser-interface tests do.
        if crawler is not None and compat.STOCK_MIDDLEWARE_SKIPS_WAITERS and crawler not in _warned:
            _warned.add(crawler)
            logger.warning(
                "Scrapy %s's own RobotsTxtMiddleware lets requests that wait for a robots.txt fetch through "
                "unchecked, whatever ROBOTSTXT_PARSER is: enable scrapy_robots_coccoc.Addon to obey robots.txt",
                scrapy.__version__,
                extra={"spider": crawler.spider},
            )
        return cls(robotstxt_body)

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return self.robots.allowed(to_unicode(url), to_unicode(user_agent))

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        return self.robots.crawl_delay(to_unicode(user_agent))
