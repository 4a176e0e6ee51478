"""ROBOTSTXT_PREFETCH: an origin's robots.txt is fetched as soon as the spider yields a request for it, once,
and only for requests the crawl will send."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest_twisted
from scrapy import Request
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater

from .crawling import RecordingSpider, crawl, stat
from .sites import RULES, LoopbackSite, Page, robots

ADDON = {"ADDONS": {"scrapy_robots_coccoc.Addon": 0}, "DOWNLOADER_MIDDLEWARES": {}}
PREFETCH = {**ADDON, "ROBOTSTXT_PREFETCH": True}


def linking(*links: str) -> LoopbackSite:
    return LoopbackSite(pages={"/robots.txt": robots(RULES)}, links={"/": list(links)})


class QueueingSpider(RecordingSpider):
    """From its first page, yields a slow page of the same origin (its rules known: it takes the only downloader
    place at once), then a page of another origin, which waits in the queue while the slow one downloads."""

    custom_settings = {"CONCURRENT_REQUESTS": 1}

    async def start(self):
        yield Request(self.urls[0], errback=self.failed)

    async def parse(self, response):
        self.crawled.append(response.url)
        if response.url == self.urls[0]:
            slow, other = self.urls[1:]
            yield Request(slow, errback=self.failed)
            from twisted.internet import reactor

            await maybe_deferred_to_future(deferLater(reactor, 0.1))  # the slow page is being downloaded now
            yield Request(other, errback=self.failed)


def slow_and_other(sites) -> tuple[LoopbackSite, LoopbackSite]:
    slow = LoopbackSite(pages={"/robots.txt": robots(RULES), "/slow": Page(b"<html>slow</html>", delay=0.5)})
    return tuple(sites(slow, linking()))  # type: ignore[return-value]


@pytest_twisted.ensureDeferred
async def test_robots_txt_is_fetched_while_the_request_waits_in_the_queue(sites):
    """The other origin's robots.txt is fetched as soon as its request is yielded, before the request leaves
    the queue: the fetch overlaps the wait instead of following it."""
    slow, other = slow_and_other(sites)
    urls = [slow.url("/"), slow.url("/slow"), other.url("/")]
    crawler = await crawl(PREFETCH, spider=QueueingSpider, urls=urls)
    assert sorted(crawler.spider.crawled) == sorted(urls)
    (robots_at,), (page_at,) = other.requests_for("/robots.txt"), other.requests_for("/")
    (slow_at,) = slow.requests_for("/slow")
    assert robots_at < slow_at + 0.25 < page_at, "robots.txt asked for while the slow page held the place"
    assert stat(crawler, "robotstxt/prefetched") == 2
    assert stat(crawler, "robotstxt/request_count") == 2, "one fetch per origin"


@pytest_twisted.ensureDeferred
async def test_links_the_crawl_will_not_send_fetch_nothing(sites):
    """Offsite links (the downloader's OffsiteMiddleware drops them) and dont_obey_robotstxt ones prefetch
    nothing: no robots.txt of an origin the crawl sends no request to."""
    offsite, ignored = sites(linking(), linking())
    (site,) = sites(linking(offsite.url("/"), "/a", ignored.url("/x")))

    class OneSiteSpider(RecordingSpider):
        allowed_domains = [urlsplit(site.address).hostname]

        def parse(self, response):
            self.crawled.append(response.url)
            for href in response.css("a::attr(href)").getall():
                meta = {"dont_obey_robotstxt": True, "allow_offsite": True} if "/x" in href else {}
                yield response.follow(href, meta=meta, errback=self.failed)

    crawler = await crawl(PREFETCH, spider=OneSiteSpider, urls=[site.url("/")])
    assert sorted(crawler.spider.crawled) == sorted([site.url("/"), site.url("/a"), ignored.url("/x")])
    assert offsite.paths() == [] and ignored.paths() == ["/x"]
    assert stat(crawler, "offsite/filtered") == 1
    assert stat(crawler, "robotstxt/prefetched") == 1


@pytest_twisted.ensureDeferred
async def test_by_default_robots_txt_waits_for_the_first_request(sites):
    slow, other = slow_and_other(sites)
    urls = [slow.url("/"), slow.url("/slow"), other.url("/")]
    crawler = await crawl(ADDON, spider=QueueingSpider, urls=urls)
    assert sorted(crawler.spider.crawled) == sorted(urls)
    assert stat(crawler, "robotstxt/prefetched") is None
    (robots_at,), (slow_at,) = other.requests_for("/robots.txt"), slow.requests_for("/slow")
    assert robots_at > slow_at + 0.25, "fetched once the slow page left the downloader"
