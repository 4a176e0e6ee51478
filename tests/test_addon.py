"""The add-on: one ``ADDONS`` line obeys robots.txt with our middlewares."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import pytest_twisted
from scrapy import Spider, signals
from scrapy.crawler import Crawler, CrawlerRunner
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as StockRobotsTxtMiddleware
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from scrapy_robots_coccoc import Addon, RobotsTxtBodyMiddleware, RobotsTxtMiddleware
from scrapy_robots_coccoc.exceptions import RobotsTxtForbidden

from .crawling import RecordingSpider, stat
from .sites import LoopbackSite, robots

ADDONS = {"ADDONS": {"scrapy_robots_coccoc.Addon": 0}, "TELNETCONSOLE_ENABLED": False}
ROBOTS = "User-agent: *\nDisallow: /private\n"


def shop() -> LoopbackSite:
    return LoopbackSite({"/robots.txt": robots(ROBOTS)}, links={"/": ["/public", "/private"]})


async def crawl(
    settings: dict[str, Any], spider: type[Spider] = RecordingSpider, **kwargs: Any
) -> tuple[Crawler, list[type]]:
    """Crawl with *settings* only, no middleware set by hand; return the
    crawler and the classes of its enabled downloader middlewares, in order."""
    crawler = CrawlerRunner(settings).create_crawler(spider)
    enabled: list[type] = []

    def engine_started() -> None:
        enabled.extend(type(middleware) for middleware in crawler.engine.downloader.middleware.middlewares)

    crawler.signals.connect(engine_started, signal=signals.engine_started)
    await crawler.crawl(**kwargs)
    return crawler, enabled


@pytest_twisted.ensureDeferred
async def test_the_addons_line_alone_obeys_robots_txt_with_our_middlewares(sites):
    (site,) = sites(shop())
    crawler, enabled = await crawl(ADDONS, urls=[site.url("/")])
    spider = crawler.spider
    assert sorted(spider.crawled) == [site.url("/"), site.url("/public")]
    assert stat(crawler, "robotstxt/forbidden") == 1
    # The link has an errback: decided at the downloader, though the rules were known, so the errback sees it.
    assert [type(failure) for failure in spider.failures.values()] == [RobotsTxtForbidden]
    assert stat(crawler, "robotstxt/forbidden/before_queue") is None
    assert site.paths().count("/robots.txt") == 1
    assert StockRobotsTxtMiddleware not in enabled
    assert RobotsTxtMiddleware in enabled
    # The body middleware stands between the downloader and HttpCompressionMiddleware.
    assert enabled.index(HttpCompressionMiddleware) < enabled.index(RobotsTxtBodyMiddleware)
    assert crawler.settings.getpriority("ROBOTSTXT_OBEY") == 15  # "addon": the project's own value would win


class NotObeyingSpider(RecordingSpider):
    custom_settings = {"ROBOTSTXT_OBEY": False}


@pytest.mark.parametrize(
    ("settings", "spider"),
    [({**ADDONS, "ROBOTSTXT_OBEY": False}, RecordingSpider), (ADDONS, NotObeyingSpider)],
    ids=["project", "spider"],
)
@pytest_twisted.ensureDeferred
async def test_explicit_obey_false_leaves_the_addon_inert_with_one_info_line(sites, caplog, settings, spider):
    (site,) = sites(shop())
    caplog.set_level(logging.INFO)
    crawler, enabled = await crawl(settings, spider, urls=[site.url("/")])
    assert sorted(crawler.spider.crawled) == [site.url(p) for p in ("/", "/private", "/public")]
    assert "/robots.txt" not in site.paths()
    assert not {RobotsTxtMiddleware, RobotsTxtBodyMiddleware, StockRobotsTxtMiddleware} & set(enabled)
    ours = [r for r in caplog.records if r.name.startswith("scrapy_robots_coccoc") and r.levelno >= logging.INFO]
    assert [(r.levelno, r.getMessage()) for r in ours] == [
        (logging.INFO, "ROBOTSTXT_OBEY is False: scrapy_robots_coccoc.Addon leaves robots.txt unobeyed")
    ]


def test_priorities_the_project_gave_are_kept_and_the_stock_middleware_is_disabled():
    settings = Settings(
        {
            "DOWNLOADER_MIDDLEWARES": {
                StockRobotsTxtMiddleware: 100,
                "scrapy_robots_coccoc.RobotsTxtMiddleware": 50,
                "scrapy_robots_coccoc.RobotsTxtBodyMiddleware": None,
            },
            "ROBOTSTXT_OBEY": True,
        }
    )
    Addon.from_crawler(get_crawler()).update_settings(settings)
    assert settings.getdict("DOWNLOADER_MIDDLEWARES") == {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy_robots_coccoc.RobotsTxtMiddleware": 50,
        "scrapy_robots_coccoc.RobotsTxtBodyMiddleware": None,
    }
    assert settings.getpriority("ROBOTSTXT_OBEY") == 20  # the project's


@pytest_twisted.ensureDeferred
async def test_scrapys_start_up_lists_name_the_addon_and_our_middlewares(sites, caplog):
    """Issue 27, finding 8: the log read ``Enabled addons: [<scrapy_robots_coccoc.addon.Addon object at
    0x7f…>]``, and our middlewares were listed as ``<class '…'>`` unlike every other entry."""
    (site,) = sites(shop())
    caplog.set_level(logging.INFO, logger="scrapy")
    await crawl(ADDONS, urls=[site.url("/")])
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "[scrapy_robots_coccoc.Addon]" in logged
    assert "'scrapy_robots_coccoc.RobotsTxtMiddleware'" in logged
    assert "'scrapy_robots_coccoc.RobotsTxtBodyMiddleware'" in logged
    assert "<class 'scrapy_robots_coccoc" not in logged
    assert " object at 0x" not in logged


@pytest_twisted.ensureDeferred
async def test_a_disabled_body_middleware_is_reported_without_advice_to_enable_the_enabled_addon(sites, caplog):
    """Issue 27, finding 8: with the add-on on and ``RobotsTxtBodyMiddleware: None`` the warning advised
    enabling the add-on that was enabled."""
    (site,) = sites(shop())
    settings = {**ADDONS, "DOWNLOADER_MIDDLEWARES": {"scrapy_robots_coccoc.RobotsTxtBodyMiddleware": None}}
    await crawl(settings, urls=[site.url("/")])
    (warning,) = [r.getMessage() for r in caplog.records if "bounded only by" in r.getMessage()]
    assert "The project disables it (None in DOWNLOADER_MIDDLEWARES); remove that entry." in warning
    assert "enable scrapy_robots_coccoc.Addon" not in warning

    caplog.clear()
    by_hand = {
        "ROBOTSTXT_OBEY": True,
        "TELNETCONSOLE_ENABLED": False,
        "DOWNLOADER_MIDDLEWARES": {StockRobotsTxtMiddleware: None, RobotsTxtMiddleware: 100},
    }
    await crawl(by_hand, urls=[site.url("/")])
    (warning,) = [r.getMessage() for r in caplog.records if "bounded only by" in r.getMessage()]
    assert "Add DOWNLOADER_MIDDLEWARES['scrapy_robots_coccoc.RobotsTxtBodyMiddleware'] = 595" in warning
