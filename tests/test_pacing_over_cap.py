"""ROBOTSTXT_CRAWL_DELAY_OVER_CAP: what a Crawl-delay above ROBOTSTXT_MAX_CRAWL_DELAY does."""

from __future__ import annotations

import logging

import pytest
import pytest_twisted

from scrapy_robots_coccoc.exceptions import CrawlDelayOverCap, RobotsTxtForbidden

from .crawling import crawl, stat
from .sites import LoopbackSite, robots

CAP = {"ROBOTSTXT_MAX_CRAWL_DELAY": 0.3}


def slow_site() -> LoopbackSite:
    return LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.9\n")})


def origin_line(caplog) -> str:
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("robots.txt of ")]
    return line


@pytest_twisted.ensureDeferred
async def test_clamp_is_the_default(sites, caplog):
    (site,) = sites(slow_site())
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    await crawl(CAP, urls=[site.url(f"/p{i}") for i in range(3)], follow=False)
    assert all(0.28 <= gap < 0.8 for gap in site.gaps()), site.gaps()
    assert "Crawl-delay 0.3 s (asked 0.9 s, capped by ROBOTSTXT_MAX_CRAWL_DELAY)" in origin_line(caplog)


@pytest_twisted.ensureDeferred
async def test_honour_keeps_the_delay_the_site_asks(sites, caplog):
    """Issue 28: a Crawl-delay above the cap was silently clamped; a site asking for 60 s is telling us
    something, and the crawl may choose to honour it."""
    (site,) = sites(slow_site())
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    await crawl({**CAP, "ROBOTSTXT_CRAWL_DELAY_OVER_CAP": "honour"}, urls=[site.url(f"/p{i}") for i in range(3)])
    assert min(site.gaps()) >= 0.85, site.gaps()
    assert "Crawl-delay 0.9 s (over ROBOTSTXT_MAX_CRAWL_DELAY, honoured" in origin_line(caplog)


@pytest_twisted.ensureDeferred
async def test_skip_drops_the_origins_requests_with_a_reason(sites, caplog):
    slow, fast = sites(slow_site(), LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.1\n")}))
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    urls = [slow.url("/a"), slow.url("/b"), fast.url("/a")]
    crawler = await crawl({**CAP, "ROBOTSTXT_CRAWL_DELAY_OVER_CAP": "skip"}, urls=urls, follow=False)
    assert crawler.spider.crawled == [fast.url("/a")]
    failures = crawler.spider.failures
    assert {type(failures[url]) for url in urls[:2]} == {CrawlDelayOverCap}
    assert isinstance(failures[urls[0]], RobotsTxtForbidden), "a skipped origin's requests end like forbidden ones"
    assert stat(crawler, "robotstxt/crawl_delay/skipped") == 2
    assert slow.paths() == ["/robots.txt"]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"robots.txt of {slow.url('')}")]
    assert lines and "asked 0.9 s, over ROBOTSTXT_MAX_CRAWL_DELAY: origin skipped" in lines[0]


@pytest_twisted.ensureDeferred
async def test_another_value_stops_the_crawl_at_start_up(sites):
    (site,) = sites(slow_site())
    with pytest.raises(ValueError, match="ROBOTSTXT_CRAWL_DELAY_OVER_CAP must be one of 'clamp', 'honour', 'skip'"):
        await crawl({"ROBOTSTXT_CRAWL_DELAY_OVER_CAP": "honor"}, urls=[site.url("/")])
