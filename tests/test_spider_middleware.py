"""RobotsTxtSpiderMiddleware: requests that rules known here forbid never reach the scheduler."""

from __future__ import annotations

import pytest_twisted

from scrapy_robots_coccoc.signals import robotstxt_request_dropped

from .crawling import RecordingSpider, crawl, stat
from .sites import LoopbackSite, robots

FILTER = {"SPIDER_MIDDLEWARES": {"scrapy_robots_coccoc.RobotsTxtSpiderMiddleware": 100}}


def linking_site(other: str = "") -> LoopbackSite:
    """A home page linking to 50 disallowed URLs (search, cart, session links) and one allowed page."""
    links = [f"/private/{i}" for i in range(50)] + ["/a"] + ([other] if other else [])
    return LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /private\n")}, links={"/": links})


class DroppedSpider(RecordingSpider):
    """Follows links without errbacks (a request with one is decided at the downloader, for its errback)."""

    def parse(self, response):
        self.crawled.append(response.url)
        yield from response.follow_all(css="a")

    async def start(self):
        self.dropped = []
        self.crawler.signals.connect(
            lambda request, kind, reason, **kw: self.dropped.append(kind), signal=robotstxt_request_dropped, weak=False
        )
        async for request in super().start():
            yield request


@pytest_twisted.ensureDeferred
async def test_forbidden_links_are_dropped_before_they_are_queued(sites):
    """Issue 28: a request whose origin's rules were known to forbid it was queued, scheduled and only then
    dropped at the downloader; with scrapy-redis each one was a round trip to the shared queue."""
    (site,) = sites(linking_site())
    crawler = await crawl(FILTER, spider=DroppedSpider, urls=[site.url("/")])
    assert sorted(crawler.spider.crawled) == [site.url("/"), site.url("/a")]
    assert stat(crawler, "robotstxt/forbidden/before_queue") == 50
    assert stat(crawler, "robotstxt/forbidden") == 50, "counted as forbidden requests, as at the downloader"
    assert stat(crawler, "scheduler/enqueued") == 2, "only / and /a travelled the scheduler"
    assert crawler.spider.dropped == ["forbidden"] * 50
    assert not any(path.startswith("/private") for path in site.paths())

    (unfiltered,) = sites(linking_site())
    crawler = await crawl(urls=[unfiltered.url("/")])
    assert stat(crawler, "scheduler/enqueued") == 52, "without it, every forbidden link is queued first"
    assert stat(crawler, "robotstxt/forbidden") == 50 and stat(crawler, "robotstxt/forbidden/before_queue") is None


@pytest_twisted.ensureDeferred
async def test_requests_of_unknown_origins_pass_untouched(sites):
    other = LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /private\n")})
    (other,) = sites(other)
    (site,) = sites(linking_site(other=other.url("/private/x")))
    crawler = await crawl(FILTER, spider=DroppedSpider, urls=[site.url("/")])
    assert stat(crawler, "robotstxt/forbidden/before_queue") == 50
    assert stat(crawler, "robotstxt/forbidden") == 51, "the other origin's link was decided at the downloader"
    assert other.paths() == ["/robots.txt"]


@pytest_twisted.ensureDeferred
async def test_the_addon_enables_it(sites):
    (site,) = sites(linking_site())
    settings = {"ADDONS": {"scrapy_robots_coccoc.Addon": 0}, "ROBOTSTXT_USER_AGENT": "coccocbot-web"}
    crawler = await crawl({**settings, "DOWNLOADER_MIDDLEWARES": {}}, spider=DroppedSpider, urls=[site.url("/")])
    assert stat(crawler, "robotstxt/forbidden/before_queue") == 50


@pytest_twisted.ensureDeferred
async def test_the_middlewares_of_a_finished_crawl_keep_no_crawler_alive(sites):
    """A review: the registry that lets the spider middleware find the downloader middleware held the
    middleware strongly, and through it its crawler: a process running crawl after crawl kept them all."""
    import gc
    import weakref

    (site,) = sites(linking_site())
    crawler = await crawl(FILTER, urls=[site.url("/")])
    gone = weakref.ref(crawler)
    del crawler
    gc.collect()
    assert gone() is None
