"""Crawl-delay paces each site, measured by the servers' own clocks."""

from __future__ import annotations

import logging
from itertools import pairwise

import pytest
import pytest_twisted

from scrapy_robots_coccoc._crawl.pacing import CrawlDelays

from .crawling import REACTORLESS_SCRAPY, SETTINGS, crawl, run_reactorless, stat
from .sites import LoopbackSite, Page, robots

PAGES = [f"/p{i}" for i in range(4)]


def paced_site(rules: str) -> LoopbackSite:
    return LoopbackSite(pages={"/robots.txt": robots(rules)})


@pytest_twisted.ensureDeferred
async def test_sites_are_paced_by_their_own_delay_in_parallel(sites):
    one, two, free = sites(
        paced_site("User-agent: *\nCrawl-delay: 0.25\nUser-agent: coccocbot\nCrawl-delay: 0.5\n"),
        paced_site("User-agent: coccocbot-web\nCrawl-delay: 1\n"),
        paced_site("User-agent: *\nDisallow: /nothing\n"),
    )
    urls = [s.url(p) for s in (one, two, free) for p in PAGES[:2]]
    crawler = await crawl({"DOWNLOAD_DELAY_JITTER": 0}, urls=urls, follow=False)
    assert len(crawler.spider.crawled) == 6
    assert min(one.gaps()) >= 0.475 and min(two.gaps()) >= 0.95
    assert max(free.gaps()) < 0.4
    # Each paced site waits its delay after robots.txt and between pages:
    # 2 x 0.5 s and 2 x 1 s, 3 s in series; side by side it takes the
    # longer, by the servers' clocks (the crawl's start-up and close aside).
    starts = [t for s in (one, two, free) for t, _ in s.log]
    assert max(starts) - min(starts) < 2.75
    assert stat(crawler, "robotstxt/crawl_delay/sites") == 2


@pytest_twisted.ensureDeferred
async def test_crawl_delay_is_capped(sites, caplog):
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 100\n"))
    crawler = await crawl({"ROBOTSTXT_MAX_CRAWL_DELAY": 0.5}, urls=[site.url(p) for p in PAGES[:3]], follow=False)
    assert len(crawler.spider.crawled) == 3
    # Capped at 0.5 s, not 100 s; a turn woken late under load is taken again a turn later, and counted.
    gaps, late = site.gaps(), stat(crawler, "robotstxt/crawl_delay/late_turns") or 0
    assert min(gaps) >= 0.475 and sum(gap >= 1 for gap in gaps) <= late and max(gaps) < 2, (gaps, late)
    assert any("capped" in r.getMessage() for r in caplog.records)


@pytest_twisted.ensureDeferred
async def test_autothrottle_and_jitter_never_go_below_the_delay(sites):
    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 0.5\n"))
    settings = {"AUTOTHROTTLE_ENABLED": True, "AUTOTHROTTLE_START_DELAY": 0, "DOWNLOAD_DELAY_JITTER": 0.5}
    crawler = await crawl(settings, urls=[site.url(p) for p in PAGES], follow=False)
    assert len(crawler.spider.crawled) == 4
    assert min(site.gaps()) >= 0.475


@pytest_twisted.ensureDeferred
async def test_autothrottle_lowering_the_delay_after_robotstxt_does_not_squeeze_the_first_gap(sites):
    # The slot schedules its next release by AutoThrottle's start delay when
    # robots.txt leaves; AutoThrottle then lowers the delay, which does not
    # bring that release forward: the first page left 0.29 s after its turn,
    # and the next gap was short by as much (at Crawl-delay 1, start delay 0.8).
    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 0.5\n"))
    settings = {"AUTOTHROTTLE_ENABLED": True, "AUTOTHROTTLE_START_DELAY": 0.4, "DOWNLOAD_DELAY_JITTER": 0}
    crawler = await crawl(settings, urls=[site.url(p) for p in PAGES[:3]], follow=False)
    assert len(crawler.spider.crawled) == 3
    assert min(site.gaps()) >= 0.475, site.gaps()


@pytest_twisted.ensureDeferred
async def test_a_larger_project_delay_stands_and_the_feature_can_be_off(sites):
    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 0.2\n"))
    # No jitter (RANDOMIZE_DOWNLOAD_DELAY says so before Scrapy 2.19).
    exact = {"DOWNLOAD_DELAY": 0.5, "DOWNLOAD_DELAY_JITTER": 0, "RANDOMIZE_DOWNLOAD_DELAY": False}
    await crawl(exact, urls=[site.url(p) for p in PAGES[:3]], follow=False)
    assert min(site.gaps()) >= 0.475
    site.log.clear()
    await crawl({"ROBOTSTXT_CRAWL_DELAY_ENABLED": False}, urls=[site.url(p) for p in PAGES], follow=False)
    assert max(site.gaps()) < 0.2


@pytest_twisted.ensureDeferred
async def test_requests_with_their_own_download_slot_get_the_delay_of_their_origin(sites):
    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 0.5\n"))
    urls = [site.url(p) for p in PAGES[:3]]
    crawler = await crawl({"DOWNLOAD_DELAY_JITTER": 0}, urls=urls, follow=False, meta={"download_slot": "custom"})
    assert len(crawler.spider.crawled) == 3
    assert min(site.gaps()) >= 0.45
    assert not stat(crawler, "robotstxt/crawl_delay/slot_moved")


class SlotMovingMiddleware:
    """Moves every request into one slot, after our middleware (as some
    proxy middlewares do)."""

    def process_request(self, request, spider=None):
        request.meta["download_slot"] = "moved"


@pytest_twisted.ensureDeferred
async def test_requests_moved_to_another_slot_after_pacing_are_counted_and_logged_once(sites, caplog):
    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 0.2\n"))
    middlewares = {**SETTINGS["DOWNLOADER_MIDDLEWARES"], f"{__name__}.SlotMovingMiddleware": 543}
    settings = {"DOWNLOADER_MIDDLEWARES": middlewares, "DOWNLOAD_DELAY_JITTER": 0}
    with caplog.at_level(logging.WARNING):
        crawler = await crawl(settings, urls=[site.url(p) for p in PAGES[:3]], follow=False)
    assert len(crawler.spider.crawled) == 3
    assert stat(crawler, "robotstxt/crawl_delay/slot_moved") == 3
    moved = [r.getMessage() for r in caplog.records if "moved it to slot 'moved'" in r.getMessage()]
    assert len(moved) == 1, moved
    assert "in downloader slot '127.0.0." in moved[0]


@pytest_twisted.ensureDeferred
async def test_refreshes_neither_ratchet_download_slots_nor_touch_the_settings(sites):
    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 0.5\n"))
    site.links = {f"/p{i}": [f"/p{i + 1}"] for i in range(7)}
    host = "127.0.0.2"
    settings = {
        "DOWNLOAD_SLOTS": {host: {"delay": 0.1, "jitter": 0.5}},
        "ROBOTSTXT_CACHE_SECONDS": 0.3,
        "DOWNLOAD_DELAY_JITTER": 0,
    }
    crawler = await crawl(settings, urls=[site.url("/p0")])
    assert len(crawler.spider.crawled) == 8
    assert site.paths().count("/robots.txt") >= 3  # refreshed while crawling
    gaps = site.gaps()
    # Draws between the delay and 1.5 x the delay; a refresh (whose robots.txt
    # takes a turn too) may make two turns between pages: never more.
    assert min(gaps) >= 0.45 and max(gaps) < 1.6, gaps
    assert crawler.settings.getdict("DOWNLOAD_SLOTS") == {host: {"delay": 0.1, "jitter": 0.5}}


@pytest_twisted.ensureDeferred
async def test_a_refresh_that_removes_the_crawl_delay_takes_effect_at_once(sites):
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = [robots("User-agent: *\nCrawl-delay: 0.5\n"), robots("User-agent: *\nAllow: /\n")]
    site.links = {f"/p{i}": [f"/p{i + 1}"] for i in range(7)}
    crawler = await crawl({"ROBOTSTXT_CACHE_SECONDS": 0.75, "DOWNLOAD_DELAY_JITTER": 0}, urls=[site.url("/p0")])
    assert len(crawler.spider.crawled) == 8
    gaps = site.gaps()
    assert gaps[0] >= 0.475  # paced first
    assert min(gaps[-3:]) < 0.3, gaps  # then not, once the refresh removed the delay


@pytest_twisted.ensureDeferred
async def test_spiders_of_one_process_take_turns_at_a_site(sites):
    """The site sees one client: three crawlers of one process (the demo
    runs three spiders) each pacing it alone sent requests 0.0 s apart."""
    from scrapy.crawler import CrawlerRunner
    from twisted.internet import defer

    from .crawling import RecordingSpider

    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 0.3\n"))
    runner = CrawlerRunner({**SETTINGS, "DOWNLOAD_DELAY_JITTER": 0})
    crawls = [
        runner.crawl(RecordingSpider, urls=[site.url(f"/{name}{i}") for i in range(2)], follow=False) for name in "abc"
    ]
    await defer.DeferredList(crawls, fireOnOneErrback=True)
    assert len(site.gaps()) == 5
    assert min(site.gaps()) >= 0.95 * 0.3, site.gaps()


@pytest_twisted.ensureDeferred
async def test_two_origins_of_one_host_are_paced_apart(sites):
    from .sites import serve

    # One host (one downloader slot), two ports: only one of them asks for a delay.
    paced = serve(paced_site("User-agent: *\nCrawl-delay: 0.5\n"), "127.0.0.2")
    free = serve(paced_site("User-agent: *\nDisallow: /nothing\n"), "127.0.0.2")
    try:
        urls = [paced.url(p) for p in PAGES[:3]] + [free.url(f"/f{i}") for i in range(6)]
        crawler = await crawl({"DOWNLOAD_DELAY_JITTER": 0}, urls=urls, follow=False)
    finally:
        paced.port.stopListening()
        free.port.stopListening()
    assert len(crawler.spider.crawled) == 9
    assert min(paced.gaps()) >= 0.475
    assert max(free.gaps()) < 0.4  # not slowed by its neighbour's Crawl-delay


@pytest_twisted.ensureDeferred
async def test_request_rate_paces_when_stricter_than_crawl_delay(sites):
    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 0.2\nRequest-rate: 2/1\n"))
    crawler = await crawl({"DOWNLOAD_DELAY_JITTER": 0}, urls=[site.url(p) for p in PAGES[:3]], follow=False)
    assert len(crawler.spider.crawled) == 3
    assert min(site.gaps()) >= 0.475


@pytest_twisted.ensureDeferred
async def test_the_projects_own_delay_is_not_added_to_the_crawl_delay(sites):
    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 0.75\n"))
    exact = {"DOWNLOAD_DELAY": 0.5, "DOWNLOAD_DELAY_JITTER": 0, "RANDOMIZE_DOWNLOAD_DELAY": False}
    crawler = await crawl(exact, urls=[site.url(p) for p in PAGES], follow=False)
    assert len(crawler.spider.crawled) == 4
    gaps = site.gaps()
    # The stricter of the two, not their sum (1.25 s or more) on any turn.
    # Under load a turn woken late is taken again one turn later (one gap
    # took 1.58 s, two turns): each such gap is a late turn counted.
    late = stat(crawler, "robotstxt/crawl_delay/late_turns") or 0
    assert min(gaps) >= 0.71 and sum(gap >= 1.2 for gap in gaps) <= late, (gaps, late)


@pytest_twisted.ensureDeferred
async def test_150_requests_waiting_for_one_origin_all_keep_its_delay(sites):
    """The last of 150 turns at Crawl-delay 0.3 is 45 s ahead: a legitimate
    start, not a store's nonsense to replace by "now". The spider closes
    after 2 s (6 turns, robots.txt's first; 2 pages leave a margin for a
    slow start-up); the waiting requests go back to the scheduler."""
    (site,) = sites(paced_site("User-agent: *\nCrawl-delay: 0.3\n"))
    urls = [site.url(f"/p{i}") for i in range(150)]
    crawler = await crawl({"CLOSESPIDER_TIMEOUT": 2}, urls=urls, follow=False)
    assert 2 <= len(crawler.spider.crawled) <= 7
    assert min(site.gaps()) >= 0.285, site.gaps()
    assert not stat(crawler, "robotstxt/store_errors")
    assert stat(crawler, "robotstxt/rescheduled_on_close") >= 140


@pytest_twisted.ensureDeferred
async def test_delays_too_short_for_the_reactors_timers_are_not_paced(sites):
    # A millionth of a second per request: every turn would count as late
    # and be taken again, for nothing a site could notice.
    (site,) = sites(paced_site("User-agent: *\nRequest-rate: 1000000/1s\nCrawl-delay: 0.001\n"))
    crawler = await crawl(urls=[site.url(p) for p in PAGES], follow=False)
    assert len(crawler.spider.crawled) == 4
    assert stat(crawler, "robotstxt/crawl_delay/sites") is None
    assert stat(crawler, "robotstxt/crawl_delay/late_turns") is None


@pytest_twisted.ensureDeferred
async def test_turns_keep_the_delay_while_other_sites_fill_the_downloader(sites, monkeypatch):
    """A parked request comes back only when the downloader has room: with
    slow pages elsewhere taking every place, turns came back late, and after
    MAX_TURNS late turns (one here, to see it in a short crawl) the request
    went unpaced. Now it waits in place for its next turn."""
    monkeypatch.setattr(CrawlDelays, "MAX_TURNS", 1)
    paced, slow = sites(
        paced_site("User-agent: *\nCrawl-delay: 0.3\n"),
        LoopbackSite(pages={f"/s{i}": Page(b"<html></html>", delay=0.5) for i in range(12)}),
    )
    urls = [url for i in range(12) for url in (slow.url(f"/s{i}"), *([paced.url(f"/p{i}")] if i < 8 else []))]
    crawler = await crawl({"CONCURRENT_REQUESTS": 2, "DOWNLOAD_DELAY_JITTER": 0}, urls=urls, follow=False)
    assert len(crawler.spider.crawled) == len(urls)
    assert min(paced.gaps()) >= 0.285, paced.gaps()
    assert stat(crawler, "robotstxt/crawl_delay/late_turns")


@pytest_twisted.ensureDeferred
async def test_turns_keep_the_delay_when_the_slot_is_busy_with_a_slow_page(sites):
    """With one transfer at a time per site, turns that came while a slow page
    transferred were queued in Scrapy's slot and then sent back to back."""
    (site,) = sites(
        LoopbackSite(
            pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.3\n"), "/p0": Page(b"<html></html>", delay=1)}
        )
    )
    settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1, "DOWNLOAD_DELAY_JITTER": 0}
    crawler = await crawl(settings, urls=[site.url(f"/p{i}") for i in range(5)], follow=False)
    assert len(crawler.spider.crawled) == 5
    assert min(site.gaps()) >= 0.285, site.gaps()


@pytest_twisted.ensureDeferred
async def test_pages_slower_than_the_delay_one_at_a_time_lose_no_turns(sites):
    """Requests that took turns together found the slot taken by the first
    when their turns came, and every turn after was lost: a page every two
    delays instead of one per page."""
    pages = {f"/p{i}": Page(b"<html></html>", delay=0.4) for i in range(8)}
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.3\n"), **pages}))
    settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": 1, "DOWNLOAD_DELAY_JITTER": 0}
    crawler = await crawl(settings, urls=[site.url(p) for p in pages], follow=False)
    assert len(crawler.spider.crawled) == 8
    gaps = site.gaps()
    assert min(gaps) >= 0.285 and sum(gaps) / len(gaps) < 0.5, gaps  # a page every 0.4 s, not 0.63
    assert not stat(crawler, "robotstxt/crawl_delay/late_turns")
    # Requests, not waits: each waited for room and for its turn, some several times.
    assert 0 < stat(crawler, "robotstxt/parked") <= 8


@pytest_twisted.ensureDeferred
async def test_two_paced_origins_sharing_a_delayed_slot_each_keep_their_delay(sites):
    """A turn reserved while the slot's own delay had run out came while the
    other origin's start had set it going again: the slot held the request,
    which started late, 0.7 s after the one before at Crawl-delay 1."""
    from .sites import serve

    one = serve(paced_site("User-agent: *\nCrawl-delay: 0.5\n"), "127.0.0.2")
    two = serve(paced_site("User-agent: *\nCrawl-delay: 0.5\n"), "127.0.0.2")
    try:
        urls = [url for i in range(5) for url in (one.url(f"/a{i}"), two.url(f"/b{i}"))]
        crawler = await crawl({"DOWNLOAD_DELAY": 0.35, "DOWNLOAD_DELAY_JITTER": 0}, urls=urls, follow=False)
    finally:
        one.port.stopListening()
        two.port.stopListening()
    assert len(crawler.spider.crawled) == 10
    assert min(one.gaps() + two.gaps()) >= 0.475, (one.gaps(), two.gaps())


@pytest.mark.skipif(not REACTORLESS_SCRAPY, reason="TWISTED_REACTOR_ENABLED arrived in Scrapy 2.15")
def test_a_crawl_without_a_reactor_is_decided_and_paced():
    """With ``TWISTED_REACTOR_ENABLED = False`` our timers were the reactor's:
    importing it failed where Scrapy forbids it (``scrapy crawl``: the
    middlewares could not be built), and elsewhere installed a reactor that
    never ran (the first Crawl-delay turn never came: the crawl hung)."""
    result = run_reactorless("0")
    assert result["crawled"] == ["/a", "/b", "/c"]
    assert result["stats"]["robotstxt/forbidden"] == 1
    assert result["stats"]["robotstxt/request_count"] == 1
    pages = [at for at, path in result["served"] if path != "/robots.txt"]
    gaps = [b - a for a, b in pairwise(pages)]
    assert min(gaps) >= 0.285 and max(gaps) < 1.0, gaps
    assert result["warnings"] == []
