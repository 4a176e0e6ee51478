"""The spider closing while requests wait for robots.txt or for their turn:
they go back to the scheduler (and come back with a persistent one, filtered
as before), robots.txt is not tried again, and the close comes about as soon
as under stock Scrapy."""

from __future__ import annotations

import logging
import time

import pytest_twisted
from scrapy import Request, Spider, signals
from scrapy.utils.defer import deferred_from_coro

from scrapy_robots_coccoc._crawl import compat as _compat

from .crawling import RecordingSpider, bounded_crawl, crawl, stat
from .sites import RULES, LoopbackSite, Page, robots, site_with


@pytest_twisted.ensureDeferred
async def test_requests_waiting_at_close_come_back_with_a_persistent_scheduler(sites, tmp_path):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": [robots(RULES, delay=1.5), robots(RULES)]}))
    urls = [site.url(f"/page/{i}") for i in range(6)] + [site.url("/private/x")]
    settings = {"JOBDIR": str(tmp_path / "job"), "CLOSESPIDER_TIMEOUT": 0.5}
    first = await crawl(settings, urls=urls, follow=False)
    # Closed while every request waited for robots.txt: none was lost.
    assert first.spider.crawled == [] and first.spider.failures == {}
    assert stat(first, "robotstxt/rescheduled_on_close") == len(urls)
    second = await crawl({"JOBDIR": settings["JOBDIR"]}, urls=[], follow=False)
    assert sorted(second.spider.crawled) == sorted(urls[:-1])
    assert list(second.spider.failures) == [site.url("/private/x")]


class FilteredSpider(RecordingSpider):
    """Requests as Scrapy makes them by default: through the filters."""

    allowed_domains = ["127.0.0.2"]

    async def start(self):
        for url in self.urls:
            yield Request(url, errback=self.failed)


@pytest_twisted.ensureDeferred
async def test_requests_sent_back_at_close_come_back_filtered_as_before(sites, tmp_path):
    """A request sent back kept the dont_filter=True that let it through the
    scheduler again: after a resume its redirects passed the duplicate and
    offsite filters (a page downloaded 5 times, pages of another site)."""
    site, other = sites(
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.2\n")}),
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow:\n")}),
    )
    for index in range(4):
        site.pages[f"/old/{index}"] = Page(b"", status=301, headers={"Location": "/new"})
        site.pages[f"/out/{index}"] = Page(b"", status=302, headers={"Location": other.url(f"/landing/{index}")})
    urls = [site.url("/new"), *(site.url(f"/{kind}/{i}") for kind in ("old", "out") for i in range(4))]
    settings = {"JOBDIR": str(tmp_path / "job"), "DOWNLOAD_DELAY_JITTER": 0}
    # Closed while most of the 9 requests (1.8 s of turns) wait for theirs.
    first = await crawl({**settings, "CLOSESPIDER_TIMEOUT": 0.5}, spider=FilteredSpider, urls=urls, follow=False)
    assert stat(first, "robotstxt/rescheduled_on_close")
    second = await crawl(settings, spider=FilteredSpider, urls=[], follow=False)
    assert [*first.spider.crawled, *second.spider.crawled] == [site.url("/new")]
    assert other.paths() == []


@pytest_twisted.ensureDeferred
async def test_robotstxt_is_not_tried_again_once_the_spider_closed(sites, caplog):
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES, delay=30)}))
    settings = {"CLOSESPIDER_TIMEOUT": 0.5, "DOWNLOAD_TIMEOUT": 1, "ROBOTSTXT_MAX_RETRIES": 1}
    crawler = await bounded_crawl(settings, urls=[site.url("/a")], follow=False, timeout=10)
    await deferLater(reactor, 1.5, lambda: None)  # a retry would have come and failed by now
    assert site.paths() == ["/robots.txt"]
    assert stat(crawler, "robotstxt/request_count") == 1
    assert stat(crawler, "robotstxt/rescheduled_on_close") == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest_twisted.ensureDeferred
async def test_a_fetch_stopped_by_the_close_sends_its_waiters_back_to_the_scheduler(sites, tmp_path, monkeypatch):
    """The fetch sees the close (its attempt timed out) before the watcher of
    waiting requests does: the waiters got a fault and were lost to JOBDIR."""
    from scrapy_robots_coccoc._crawl.parking import Parking

    monkeypatch.setattr(Parking, "WATCH_SECONDS", 5.0)
    (site,) = sites(LoopbackSite(pages={"/robots.txt": [robots(RULES, delay=3), robots(RULES)]}))
    urls = [site.url(f"/page/{i}") for i in range(3)]
    settings = {
        "JOBDIR": str(tmp_path / "job"),
        "CLOSESPIDER_TIMEOUT": 0.3,
        "DOWNLOAD_TIMEOUT": 0.5,
        "ROBOTSTXT_MAX_RETRIES": 3,
    }
    first = await bounded_crawl(settings, urls=urls, follow=False, timeout=10)
    assert first.spider.failures == {}
    assert stat(first, "robotstxt/rescheduled_on_close") == len(urls)
    assert stat(first, "robotstxt/request_count") == 1
    second = await crawl({"JOBDIR": settings["JOBDIR"]}, urls=[], follow=False)
    assert sorted(second.spider.crawled) == sorted(urls)


@pytest_twisted.ensureDeferred
async def test_a_paced_crawl_closes_about_as_fast_as_stock_scrapy(sites):
    ours_site, stock_site = sites(
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.2\n")}),
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /nothing\n")}),
    )
    close = {"CLOSESPIDER_TIMEOUT": 1, "DOWNLOAD_DELAY_JITTER": 0}
    start = time.monotonic()
    await crawl(close, urls=[ours_site.url(f"/p{i}") for i in range(40)], follow=False)
    ours = time.monotonic() - start
    stock = {**close, "DOWNLOADER_MIDDLEWARES": {}, "DOWNLOAD_DELAY": 0.2}
    start = time.monotonic()
    await crawl(stock, urls=[stock_site.url(f"/p{i}") for i in range(40)], follow=False)
    baseline = time.monotonic() - start
    assert ours <= 1.5 * baseline + 0.3, (ours, baseline)
    assert len(ours_site.paths()) < 41  # closed early, not crawled to the end


@pytest_twisted.ensureDeferred
async def test_requests_waiting_in_place_for_their_turn_leave_at_close_too(sites):
    ours_site, stock_site = sites(
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 1\n")}),
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /nothing\n")}),
    )
    # Two places, one parked request at most: the others wait in place.
    close = {"CLOSESPIDER_TIMEOUT": 1, "CONCURRENT_REQUESTS": 2, "DOWNLOAD_DELAY_JITTER": 0}
    start = time.monotonic()
    urls = [ours_site.url(f"/p{i}") for i in range(20)]
    ours = await crawl({**close, "ROBOTSTXT_MAX_PARKED_REQUESTS": 1}, urls=urls, follow=False)
    ours_seconds = time.monotonic() - start
    start = time.monotonic()
    stock = {**close, "DOWNLOADER_MIDDLEWARES": {}, "DOWNLOAD_DELAY": 1}
    await crawl(stock, urls=[stock_site.url(f"/p{i}") for i in range(20)], follow=False)
    assert ours_seconds <= 1.5 * (time.monotonic() - start) + 0.3
    assert stat(ours, "robotstxt/rescheduled_on_close") >= 1


class FileSpider(Spider):
    """Has ``files`` downloaded by Scrapy's FilesPipeline, which downloads
    outside the scheduler (``engine.download``)."""

    name = "files"

    def __init__(self, page: str, files: list[str], **kwargs) -> None:
        super().__init__(**kwargs)
        self.page, self.files = page, files

    async def start(self):
        yield Request(self.page)

    def parse(self, response):
        yield {"file_urls": self.files}


@pytest_twisted.ensureDeferred
async def test_a_crawl_closing_while_a_media_pipeline_waits_for_crawl_delay_ends(sites, tmp_path):
    """A request returned at close comes straight back when it was not the
    scheduler's: returned again and again, it kept the crawl open for ever.
    The close comes at 2.5 s, after the page and the first file: robots.txt
    takes the origin's first turn, the page leaves 1 s after it."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 1\n")}))
    settings = {
        "ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1},
        "FILES_STORE": str(tmp_path),
        "CLOSESPIDER_TIMEOUT": 2.5,
        "DOWNLOAD_DELAY_JITTER": 0,
    }
    files = [site.url(f"/f{i}.bin") for i in range(6)]
    crawler = await bounded_crawl(settings, FileSpider, timeout=10, page=site.url("/index"), files=files)
    dropped = stat(crawler, "robotstxt/dropped_on_close")
    assert dropped and dropped == stat(crawler, "robotstxt/rescheduled_on_close")
    assert dropped + len(site.paths()) == 2 + len(files)  # robots.txt, the page, each file once
    assert min(site.gaps()) >= 0.95


class OpeningDownloadSpider(RecordingSpider):
    """Downloads ``opening_url`` outside the scheduler when the spider opens,
    before the engine runs (as an extension fetching a token would)."""

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.opened, signal=signals.spider_opened)
        return spider

    def opened(self, spider):
        request = Request(self.opening_url, dont_filter=True)
        self.opening = deferred_from_coro(_compat.download(self.crawler.engine, request))
        self.opening.addBoth(lambda result: setattr(self, "opened_with", result))


@pytest_twisted.ensureDeferred
async def test_a_download_started_as_the_spider_opens_is_not_taken_for_a_closing_one(sites):
    (site,) = sites(site_with())
    crawler = await bounded_crawl(
        spider=OpeningDownloadSpider, urls=[site.url("/a")], follow=False, opening_url=site.url("/token")
    )
    assert getattr(crawler.spider.opened_with, "status", None) == 200, crawler.spider.opened_with
    assert stat(crawler, "robotstxt/rescheduled_on_close") is None
