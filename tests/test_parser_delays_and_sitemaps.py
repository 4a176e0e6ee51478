"""Crawl-delay and Sitemap (docs/contract.md, section 1, "Crawl-delay and
Sitemap"), and the extended standard's Request-rate and Visit-time."""

from __future__ import annotations

from datetime import time as clock

from scrapy_robots_coccoc import RequestRate, RobotsTxt, VisitTime

from .parsing import WEB


def test_crawl_delay_as_written_and_invalid():
    assert RobotsTxt.parse("User-agent: *\nCrawl-delay: 0\n").crawl_delay(WEB) == 0.0
    assert RobotsTxt.parse("User-agent: *\nCrawl-delay: 2.5\n").crawl_delay(WEB) == 2.5
    # Python's float() reads "1_0" as 10 and "1e3" as 1000: not as written.
    for bad in ("abc", "-1", "nan", "inf", "", "1_0", "1e3", "0x10", "9" * 400):
        assert RobotsTxt.parse(f"User-agent: *\nCrawl-delay: {bad}\n").crawl_delay(WEB) is None
    for bad in ("1_0/5", "1/1_0", "1/1e3", "-1/5"):
        assert RobotsTxt.parse(f"User-agent: *\nRequest-rate: {bad}\n").request_rate(WEB) is None


def test_request_rate_and_visit_time():
    robots = RobotsTxt.parse("User-agent: *\nRequest-rate: 1/5 # one every 5 s\nVisit-time: 0600-0845\n")
    assert robots.request_rate(WEB) == RequestRate(1, 5.0)
    assert robots.visit_time(WEB) == VisitTime(clock(6, 0), clock(8, 45))
    assert RobotsTxt.parse("User-agent: *\nRequest-rate: 2/1m\n").request_rate(WEB) == RequestRate(2, 60.0)
    assert RobotsTxt.parse("User-agent: *\nRequest-rate: 0/5\n").request_rate(WEB) is None


def test_request_rate_with_window():
    robots = RobotsTxt.parse("User-agent: *\nRequest-rate: 1/10s 0600-0845\n")
    assert robots.request_rate(WEB) == RequestRate(1, 10.0, clock(6, 0), clock(8, 45))
    assert robots.request_rate(WEB).start == clock(6, 0)
    rate = RobotsTxt.parse("User-agent: *\nRequest-rate: 3/1h\n").request_rate(WEB)
    assert rate == RequestRate(3, 3600.0) and rate.start is None and rate.end is None


def test_visit_time_space_separated():
    assert RobotsTxt.parse("User-agent: *\nVisit-time: 0200 0630\n").visit_time(WEB) == VisitTime(
        clock(2, 0), clock(6, 30)
    )
    assert RobotsTxt.parse("User-agent: *\nVisit-time: 2500-0630\n").visit_time(WEB) is None


def test_sitemaps_are_a_fresh_list_in_file_order():
    robots = RobotsTxt.parse("Sitemap: /b.xml\nSitemap: /a.xml\nSitemap: /b.xml\n")
    assert robots.sitemaps == ["/b.xml", "/a.xml"]
    robots.sitemaps.append("/c.xml")
    assert robots.sitemaps == ["/b.xml", "/a.xml"]
    assert RobotsTxt.parse("User-agent: *\nDisallow: /\n").sitemaps == []
