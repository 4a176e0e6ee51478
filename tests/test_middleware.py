"""RobotsTxtMiddleware in real crawls against loopback sites: robots.txt
fetched once per origin, before its requests, its rules deciding; the agent
of each request; the parser backend under Scrapy's own middleware; settings
checked at start; one WARNING where a project enables both middlewares."""

from __future__ import annotations

import logging

import pytest
import pytest_twisted
from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from scrapy_robots_coccoc.exceptions import RobotsTxtForbidden

from .crawling import SETTINGS, RecordingSpider, bounded_crawl, crawl, ours, stat
from .sites import RULES, LoopbackSite, robots, site_with


@pytest_twisted.ensureDeferred
async def test_rules_decide_and_robotstxt_is_fetched_once(sites):
    (site,) = sites(site_with())
    crawler = await crawl(urls=[site.url("/")])
    spider = crawler.spider
    assert sorted(spider.crawled) == sorted(site.url(p) for p in ("/", "/a", "/b", "/img/1.png"))
    assert isinstance(spider.failures[site.url("/private/x")], IgnoreRequest)
    assert site.paths().count("/robots.txt") == 1
    assert site.paths()[0] == "/robots.txt"
    assert stat(crawler, "robotstxt/forbidden") == 1
    assert stat(crawler, "robotstxt/response_status_count/200") == 1


@pytest_twisted.ensureDeferred
async def test_thirty_requests_in_flight_share_one_fetch_and_all_get_the_rules(sites):
    (site,) = sites(site_with(delay=0.5))
    urls = [site.url(f"/private/{i}") for i in range(15)] + [site.url(f"/page/{i}") for i in range(15)]
    crawler = await crawl({"CONCURRENT_REQUESTS": 32, "CONCURRENT_REQUESTS_PER_DOMAIN": 32}, urls=urls, follow=False)
    assert site.paths().count("/robots.txt") == 1
    assert len(crawler.spider.failures) == 15
    assert all("/private/" in url for url in crawler.spider.failures)
    assert len(crawler.spider.crawled) == 15
    assert stat(crawler, "robotstxt/request_count") == 1


@pytest_twisted.ensureDeferred
async def test_slow_robotstxt_does_not_block_other_sites(sites):
    slow, *fast = sites(site_with(delay=2), *(site_with() for _ in range(3)))
    urls = [slow.url(f"/s{i}") for i in range(8)] + [s.url(f"/f{i}") for s in fast for i in range(4)]
    crawler = await crawl({"CONCURRENT_REQUESTS": 4}, urls=urls, follow=False)
    assert len(crawler.spider.crawled) == len(urls)
    slow_answered = slow.requests_for("/robots.txt")[0] + 2
    assert all(t < slow_answered for s in fast for t, _ in s.log)


@pytest_twisted.ensureDeferred
async def test_dont_obey_robotstxt_skips_the_fetch(sites):
    (site,) = sites(site_with())
    crawler = await crawl(urls=[site.url("/private/x")], follow=False, meta={"dont_obey_robotstxt": True})
    assert crawler.spider.crawled == [site.url("/private/x")]
    assert "/robots.txt" not in site.paths()


@pytest_twisted.ensureDeferred
async def test_request_meta_agent_overrides(sites):
    (site,) = sites(site_with())
    crawler = await crawl(urls=[site.url("/img/1.png"), site.url("/img/2.png")], follow=False)
    assert len(crawler.spider.crawled) == 2
    crawler = await crawl(urls=[site.url("/img/1.png")], follow=False, meta={"robotstxt_user_agent": "coccocbot-image"})
    assert crawler.spider.crawled == [] and stat(crawler, "robotstxt/forbidden") == 1


class LatinAgentSpider(RecordingSpider):
    async def start(self):
        for url in self.urls:
            yield Request(url, headers={"User-Agent": b"caf\xe9bot/1.0"}, errback=self.failed)


@pytest_twisted.ensureDeferred
async def test_a_user_agent_header_of_any_bytes_is_decided(sites):
    """Not UTF-8, it failed every request with a UnicodeDecodeError."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /private\n")}))
    urls = [site.url("/a"), site.url("/private/x")]
    crawler = await crawl({"ROBOTSTXT_USER_AGENT": None}, spider=LatinAgentSpider, urls=urls, follow=False)
    assert crawler.spider.crawled == [urls[0]]
    assert isinstance(crawler.spider.failures[urls[1]], RobotsTxtForbidden)


@pytest_twisted.ensureDeferred
async def test_parser_backend_works_with_scrapys_own_middleware(sites):
    (site,) = sites(site_with("User-agent: coccocbot\nDisallow: /private\nAllow: /private/ok\n"))
    settings = {
        "DOWNLOADER_MIDDLEWARES": {},
        "ROBOTSTXT_PARSER": "scrapy_robots_coccoc.CocCocRobotParser",
    }
    urls = [site.url("/private/x"), site.url("/private/ok/1"), site.url("/a")]
    crawler = await crawl(settings, urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls[1:])
    assert stat(crawler, "robotstxt/forbidden") == 1


@pytest_twisted.ensureDeferred
async def test_the_parser_backend_warns_where_scrapys_middleware_lets_waiting_requests_through(sites, caplog):
    """Scrapy 2.14-2.19's own middleware gives the parser to the first request
    waiting for robots.txt only: the warning is logged exactly where a
    Disallow: / site's pages get through."""
    (site,) = sites(site_with("User-agent: *\nDisallow: /\n"))
    settings = {"DOWNLOADER_MIDDLEWARES": {}, "ROBOTSTXT_PARSER": "scrapy_robots_coccoc.CocCocRobotParser"}
    crawler = await crawl(settings, urls=[site.url(f"/d{i}") for i in range(6)], follow=False)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "unchecked" in r.getMessage()]
    assert len(warned) == (1 if crawler.spider.crawled else 0), crawler.spider.crawled


@pytest_twisted.ensureDeferred
async def test_stock_middleware_beside_ours_warns_once(sites, caplog):
    caplog.set_level(logging.INFO)
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES)}))
    settings = {
        "DOWNLOADER_MIDDLEWARES": {
            **SETTINGS["DOWNLOADER_MIDDLEWARES"],
            "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": 100,
        }
    }
    crawler = await bounded_crawl(settings, urls=[site.url("/private/x"), site.url("/a")], follow=False)
    assert crawler.spider.crawled == [site.url("/a")]
    warnings = [m for m in ours(caplog, logging.WARNING) if "RobotsTxtMiddleware" in m]
    assert len(warnings) == 1, warnings
    assert "DOWNLOADER_MIDDLEWARES" in warnings[0]
    assert "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware" in warnings[0]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ROBOTSTXT_MAX_REDIRECTS", -1),
        ("ROBOTSTXT_MAX_RETRIES", 1.5),
        ("ROBOTSTXT_MAX_CRAWL_DELAY", "nan"),
        ("ROBOTSTXT_MAX_CRAWL_DELAY", -1),
        ("ROBOTSTXT_CACHE_SECONDS", "a day"),
        ("ROBOTSTXT_STORE_TIMEOUT", 0),
        ("ROBOTSTXT_MAX_ORIGINS", 0),
        ("ROBOTSTXT_MAX_ORIGINS_MB", "nan"),
        ("ROBOTSTXT_MAX_PARKED_REQUESTS", "many"),
        ("ROBOTSTXT_CACHE_SECONDS", True),
        # Not a name: to_unicode() failed on every request of the crawl.
        ("ROBOTSTXT_USER_AGENT", 2024),
    ],
)
@pytest_twisted.ensureDeferred
async def test_a_setting_that_makes_no_sense_stops_the_crawl_at_start(sites, name, value):
    (site,) = sites(site_with())
    with pytest.raises(ValueError, match=name):
        await crawl({name: value}, urls=[site.url("/")])
    assert site.paths() == []


def test_a_number_beyond_any_float_is_unbounded_not_an_overflow():
    from scrapy.settings import Settings

    from scrapy_robots_coccoc._crawl import settings as _settings

    assert _settings.number(Settings({"X": 10**400}), "X", 1) == _settings.UNBOUNDED
