"""``CocCocRobotParser``: our parser as a backend of Scrapy's own middleware
(``ROBOTSTXT_PARSER = "scrapy_robots_coccoc.CocCocRobotParser"``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.robotstxt import RobotParser
from scrapy.utils.python import to_unicode

from ._robotstxt import RobotsTxt

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self


class CocCocRobotParser(RobotParser):
    def __init__(self, robotstxt_body: bytes) -> None:
        self.robots = RobotsTxt.parse(robotstxt_body)

    @classmethod
    def from_crawler(cls, crawler: Crawler, robotstxt_body: bytes) -> Self:
        return cls(robotstxt_body)

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return self.robots.allowed(to_unicode(url), to_unicode(user_agent))

    def crawl_delay(self, user_agent: str | bytes) -> float | None:
        return self.robots.crawl_delay(to_unicode(user_agent))
