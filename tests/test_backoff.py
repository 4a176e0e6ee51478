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


def test_retry_after_reads_no_digit_float_cannot():
    """A review: '²' is a digit to str.isdigit but not to float(): the signal handler raised, no pause."""
    assert retry_after("²".encode(), 0.0) is None
    assert retry_after(b"1.5", 0.0) == 1.5


@pytest_twisted.ensureDeferred
async def test_requests_waiting_for_their_crawl_delay_turn_wait_out_a_pause_too(sites):
    """A review: the pause was checked before the Crawl-delay turn only, so requests already waiting for
    their turn went out inside it (Crawl-delay 1, Retry-After 4: two requests 1.05 and 2.1 s after)."""
    site = LoopbackSite(
        pages={
            "/robots.txt": robots("User-agent: *\nCrawl-delay: 0.3\n"),
            "/p0": [Page(b"", status=429, headers={"Retry-After": "1.2"}), Page(b"ok")],
        }
    )
    (site,) = sites(site)
    crawler = await crawl(urls=[site.url("/p0"), *(site.url(f"/q{i}") for i in range(3))], follow=False)
    incident = next(t for t, path in site.log if path == "/p0")
    assert min(after(site, incident)) >= 1.15, after(site, incident)
    assert len(crawler.spider.crawled) == 4


@pytest_twisted.ensureDeferred
async def test_a_burst_of_answers_is_one_incident(sites, caplog):
    """A review: 8 concurrent 503s counted as 8 incidents in a row, doubling the pause 7 times (an hour
    with the defaults) and logging 8 lines."""
    pages = {f"/b{i}": [Page(b"", status=503, delay=0.2), Page(b"ok")] for i in range(8)}
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(FREE), **pages}))
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    settings = {"ROBOTSTXT_BACKOFF_BASE_SECONDS": 0.3, "CONCURRENT_REQUESTS_PER_DOMAIN": 8, "RETRY_ENABLED": False}
    crawler = await crawl(settings, urls=[site.url(f"/b{i}") for i in range(8)], follow=False)
    assert stat(crawler, "robotstxt/backoff/incidents") == 1
    assert len([r for r in caplog.records if "answered 503" in r.getMessage()]) == 1


@pytest_twisted.ensureDeferred
async def test_a_paused_sites_backlog_does_not_stall_the_others(sites):
    """A review: past ROBOTSTXT_MAX_PARKED_REQUESTS, the paused site's requests waited holding downloader
    places, and the other site waited out the whole pause."""
    busy, other = sites(
        busy_site(Page(b"", status=429, headers={"Retry-After": "2"})),
        LoopbackSite(pages={"/robots.txt": robots(FREE)}, links={f"/o{i}": [f"/o{i + 1}"] for i in range(3)}),
    )
    settings = {"CONCURRENT_REQUESTS": 4, "ROBOTSTXT_MAX_PARKED_REQUESTS": 2}
    urls = [busy.url("/p0"), *(busy.url(f"/x{i}") for i in range(12))]
    crawler = await crawl(settings, urls=[*urls, other.url("/o0")], follow=False)
    incident = next(t for t, path in busy.log if path == "/p0")
    others = [t - incident for t, path in other.log if path != "/robots.txt"]
    assert others and max(others) < 1.5, others
    assert len(crawler.spider.crawled) == 14


@pytest_twisted.ensureDeferred
async def test_a_robotstxt_answered_429_pauses_its_site(sites):
    """A review: a 429 on robots.txt paused nothing: the pages went out 5-9 ms later."""
    page = robots("")
    page.status, page.headers["Retry-After"] = 429, "1"
    (site,) = sites(LoopbackSite(pages={"/robots.txt": page}))
    await crawl({"ROBOTSTXT_MAX_RETRIES": 0}, urls=[site.url("/a")], follow=False)
    fetched = site.requests_for("/robots.txt")[0]
    assert site.requests_for("/a")[0] - fetched >= 0.95
