"""The add-on that obeys robots.txt with our middlewares instead of Scrapy's."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as StockRobotsTxtMiddleware
from scrapy.utils.misc import load_object

from ._crawl.compat import STOCK_ROBOTSTXT_MIDDLEWARE
from .body import RobotsTxtBodyMiddleware
from .middleware import RobotsTxtMiddleware
from .spidermiddleware import RobotsTxtSpiderMiddleware

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from typing_extensions import Self

logger = logging.getLogger(__name__)


#: The order of Scrapy's own RobotsTxtMiddleware: before any other downloader middleware.
MIDDLEWARE_PRIORITY = 100
#: Nearer the downloader than HttpCompressionMiddleware (590), so bodies are bounded before anything inflates them.
BODY_MIDDLEWARE_PRIORITY = 595
#: Near the engine, so that it sees the requests other spider middlewares (depth, offsite) let through.
SPIDER_MIDDLEWARE_PRIORITY = 100


class Addon:
    """Replace Scrapy's ``RobotsTxtMiddleware`` with ours and obey robots.txt: ``ROBOTSTXT_OBEY = True`` at add-on
    priority, so a project's or spider's ``False`` wins (said in one INFO line). Priorities given our middlewares
    (``None`` disables one) are kept; Scrapy's is always disabled, as two would fetch robots.txt twice."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    def __repr__(self) -> str:
        # Scrapy lists enabled add-ons by repr: the import path, as for other components.
        return "scrapy_robots_coccoc.Addon"

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        settings.set("ROBOTSTXT_OBEY", True, priority="addon")
        name = "DOWNLOADER_MIDDLEWARES"
        # By DOWNLOADER_MIDDLEWARES_BASE's import path: Scrapy 2.13 merges the base by key, so a class key leaves it on.
        middlewares = settings.getdict(name)
        middlewares.pop(StockRobotsTxtMiddleware, None)
        middlewares[STOCK_ROBOTSTXT_MIDDLEWARE] = None
        settings.set(name, middlewares, priority=settings.getpriority(name) or 0)
        _setdefault(settings, name, RobotsTxtMiddleware, MIDDLEWARE_PRIORITY)
        _setdefault(settings, name, RobotsTxtBodyMiddleware, BODY_MIDDLEWARE_PRIORITY)
        _setdefault(settings, "SPIDER_MIDDLEWARES", RobotsTxtSpiderMiddleware, SPIDER_MIDDLEWARE_PRIORITY)
        if not settings.getbool("ROBOTSTXT_OBEY"):
            logger.info(
                "ROBOTSTXT_OBEY is False: scrapy_robots_coccoc.Addon leaves robots.txt unobeyed",
                extra={"crawler": self.crawler},
            )


def _setdefault(settings: BaseSettings, name: str, component: type, priority: int) -> None:
    """Enable *component* by its import path (so start-up lists name it), unless the project names it or None."""
    components = settings.getdict(name)
    if any(load_object(key) is component for key in components):
        return
    components[f"scrapy_robots_coccoc.{component.__name__}"] = priority
    settings.set(name, components, priority=settings.getpriority(name) or 0)
