"""Backoff: a site answering 429 or 503 (or sending Retry-After) is paused; its requests wait, others go on."""

from __future__ import annotations

import logging

import pytest_twisted

from scrapy_robots_coccoc._crawl.backoff import retry_after

from .crawling import crawl, stat
from .sites import LoopbackSite, Page, robots

FREE = "User-agent: *\nDisallow:\n"


def busy_site(first: Page) -> LoopbackSite:
    """/p0 answers *first* once, then 200; /p0 links to /p1 and /p2."""
    return LoopbackSite(
        pages={"/robots.txt": robots(FREE), "/p0": [first, Page(b'<a href="/p1">1</a><a href="/p2">2</a>')]},
    )


def after(site: LoopbackSite, status_time: float) -> list[float]:
    return [t - status_time for t, path in site.log if t > status_time and path != "/robots.txt"]


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after(b"120", 0.0) == 120.0
    assert retry_after(b"Thu, 01 Jan 1970 00:01:00 GMT", 30.0) == 30.0
    assert retry_after(b"Thu, 01 Jan 1970 00:01:00 GMT", 90.0) == 0.0
    assert retry_after(b"soon", 0.0) is None


@pytest_twisted.ensureDeferred
async def test_a_429_with_retry_after_pauses_the_site_and_not_the_others(sites, caplog):
    """Issue 28: Scrapy retried the one request while every other request of the site went on at full
    speed (scrapy/scrapy#3849, #4424)."""
    busy, other = sites(
        busy_site(Page(b"slow down", status=429, headers={"Retry-After": "1"})),
        LoopbackSite(pages={"/robots.txt": robots(FREE)}, links={f"/o{i}": [f"/o{i + 1}"] for i in range(5)}),
    )
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    crawler = await crawl(urls=[busy.url("/p0"), other.url("/o0")])
    (incident,) = [t for t, path in busy.log if path == "/p0"][:1]
    assert after(busy, incident) and min(after(busy, incident)) >= 0.95, after(busy, incident)
    assert sorted(crawler.spider.crawled) == sorted(
        [busy.url(p) for p in ("/p0", "/p1", "/p2")] + [other.url(f"/o{i}") for i in range(6)]
    )
    assert max(other.gaps()) < 0.5, "the other site went on meanwhile"
    assert stat(crawler, "robotstxt/backoff/incidents") == 1
    assert stat(crawler, "robotstxt/backoff/retry_after") == 1
    assert stat(crawler, "robotstxt/backoff/waited") >= 1
    lines = [r.getMessage() for r in caplog.records if "answered 429" in r.getMessage()]
    assert lines == [f"{busy.url('')} answered 429: its requests wait 1.0 s (Retry-After)"]


@pytest_twisted.ensureDeferred
async def test_a_503_without_retry_after_pauses_for_the_base_doubled_per_incident(sites):
    (busy,) = sites(busy_site(Page(b"down", status=503)))
    busy.pages["/p0"] = [Page(b"down", status=503), Page(b"down", status=503), Page(b"<p>up</p>")]
    crawler = await crawl({"ROBOTSTXT_BACKOFF_BASE_SECONDS": 0.4}, urls=[busy.url("/p0")])
    times = [t for t, path in busy.log if path == "/p0"]
    assert len(times) == 3
    first, second = times[1] - times[0], times[2] - times[1]
    assert 0.35 <= first < 0.8 and second >= 0.7, (first, second)  # 0.4 s, then 0.8 s, each +/- 10 %
    assert stat(crawler, "robotstxt/backoff/incidents") == 2
    assert crawler.spider.crawled == [busy.url("/p0")]


@pytest_twisted.ensureDeferred
async def test_the_pause_is_capped_and_backoff_can_be_off(sites):
    (capped, off) = sites(
        busy_site(Page(b"", status=429, headers={"Retry-After": "3600"})),
        busy_site(Page(b"", status=429, headers={"Retry-After": "3600"})),
    )
    crawler = await crawl({"ROBOTSTXT_BACKOFF_MAX_SECONDS": 0.5}, urls=[capped.url("/p0")])
    assert stat(crawler, "robotstxt/backoff/longest_pause") == 0.5
    assert len(crawler.spider.crawled) == 3

    crawler = await crawl({"ROBOTSTXT_BACKOFF_ENABLED": False}, urls=[off.url("/p0")])
    assert stat(crawler, "robotstxt/backoff/incidents") is None
    assert len(crawler.spider.crawled) == 3
