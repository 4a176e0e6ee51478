"""What each answer to the robots.txt fetch means (docs/contract.md, section
3, "Fetching robots.txt"): another status than 200 leaves the robot
unrestricted; no answer makes the origin unavailable for a while, with one
WARNING; rules are fetched again after ROBOTSTXT_CACHE_SECONDS, and a failed
refresh keeps them."""

from __future__ import annotations

import logging
import time

import pytest
import pytest_twisted
from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from .crawling import RecordingSpider, bad_records, bounded_crawl, crawl, ours, stat
from .sites import RULES, LoopbackSite, Page, robots, site_with


@pytest_twisted.ensureDeferred
async def test_non_200_answers_mean_unrestricted(sites):
    missing, broken = sites(site_with(), site_with())
    missing.pages["/robots.txt"] = Page(b"nope", status=404)
    broken.pages["/robots.txt"] = Page(b"oops", status=503)
    urls = [missing.url("/private/x"), broken.url("/private/x")]
    crawler = await crawl(urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls)
    assert stat(crawler, "robotstxt/response_status_count/404") == 1


@pytest.mark.parametrize("status", [500, 503])
@pytest_twisted.ensureDeferred
async def test_first_fetch_with_server_error_is_unrestricted(sites, status):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": Page(b"User-agent: *\nDisallow: /\n", status=status)}))
    urls = [site.url("/private/x"), site.url("/a")]
    crawler = await bounded_crawl(urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls), crawler.spider.failures
    assert stat(crawler, f"robotstxt/response_status_count/{status}") == 1


@pytest_twisted.ensureDeferred
async def test_no_answer_makes_the_origin_unavailable(sites, caplog):
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    (slow,) = sites(site_with(delay=3))
    from twisted.internet import reactor
    from twisted.web.server import Site

    closed = reactor.listenTCP(0, Site(LoopbackSite()), interface="127.0.0.9")
    refused = f"http://127.0.0.9:{closed.getHost().port}"
    await closed.stopListening()
    urls = [f"{refused}/a", f"{refused}/b", slow.url("/a"), slow.url("/b")]
    start = time.monotonic()
    crawler = await crawl({"DOWNLOAD_TIMEOUT": 1, "ROBOTSTXT_MAX_RETRIES": 0}, urls=urls, follow=False)
    assert time.monotonic() - start < 2.9
    assert crawler.spider.crawled == []
    assert sorted(crawler.spider.failures) == sorted(urls)
    assert all(isinstance(e, IgnoreRequest) for e in crawler.spider.failures.values())
    assert stat(crawler, "robotstxt/unavailable/origins") == 2
    assert stat(crawler, "robotstxt/unavailable/dropped") == 4
    assert slow.paths() == ["/robots.txt"]
    assert sum("did not answer" in r.getMessage() for r in caplog.records) == 2


@pytest_twisted.ensureDeferred
async def test_silent_robotstxt_logs_one_warning_and_no_error(sites, caplog):
    caplog.set_level(logging.INFO)
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES, delay=3)}))
    origin = site.address
    urls = [site.url(f"/p{i}") for i in range(3)]
    crawler = await bounded_crawl({"DOWNLOAD_TIMEOUT": 1}, urls=urls, follow=False, timeout=15)
    assert bad_records(caplog) == []
    assert crawler.spider.crawled == []
    assert sorted(crawler.spider.failures) == sorted(urls)
    assert all(isinstance(e, IgnoreRequest) for e in crawler.spider.failures.values())
    warnings = ours(caplog, logging.WARNING)
    assert len(warnings) == 1, warnings
    assert origin in warnings[0]
    assert any(word in warnings[0].lower() for word in ("took longer", "timeout", "timed out")), warnings[0]
    assert stat(crawler, "robotstxt/unavailable/origins") == 1
    assert not [m for m in ours(caplog, logging.INFO) if "Failure" in m]


@pytest_twisted.ensureDeferred
async def test_unavailable_origin_is_fetched_again_after_its_period(sites):
    origin, clock = sites(site_with(), LoopbackSite())
    origin.pages["/robots.txt"] = [robots(RULES, delay=2), robots(RULES)]
    # Two slow pages are the clock: the links of the second are followed
    # after the unavailable period has ended.
    clock.pages["/tick"] = Page(b'<a href="/tock">tock</a>', delay=0.9)
    links = f'<a href="{origin.url("/private/b")}">b</a><a href="{origin.url("/ok")}">ok</a>'
    clock.pages["/tock"] = Page(links.encode(), delay=0.9)
    settings = {"DOWNLOAD_TIMEOUT": 1, "ROBOTSTXT_MAX_RETRIES": 0, "ROBOTSTXT_UNAVAILABLE_SECONDS": 0.5}
    crawler = await crawl(settings, urls=[origin.url("/a"), clock.url("/tick")])
    assert isinstance(crawler.spider.failures[origin.url("/a")], IgnoreRequest)
    assert origin.url("/ok") in crawler.spider.crawled
    assert isinstance(crawler.spider.failures[origin.url("/private/b")], IgnoreRequest)
    assert origin.paths().count("/robots.txt") == 2
    assert stat(crawler, "robotstxt/unavailable/dropped") == 1
    assert stat(crawler, "robotstxt/forbidden") == 1


@pytest_twisted.ensureDeferred
async def test_origin_silent_twice_is_counted_once(sites, caplog):
    caplog.set_level(logging.INFO)
    silent, clock = sites(LoopbackSite(pages={"/robots.txt": robots(RULES, delay=3)}), LoopbackSite())
    # The clock's slow pages bring a second request to the silent origin
    # after its unavailable period has ended.
    clock.pages["/tick"] = Page(b'<a href="/tock">tock</a>', delay=0.8)
    clock.pages["/tock"] = Page(b'<a href="/tack">tack</a>', delay=0.8)
    clock.pages["/tack"] = Page(f'<a href="{silent.url("/b")}">b</a>'.encode(), delay=0.8)
    settings = {"DOWNLOAD_TIMEOUT": 1, "ROBOTSTXT_MAX_RETRIES": 0, "ROBOTSTXT_UNAVAILABLE_SECONDS": 0.5}
    crawler = await bounded_crawl(settings, urls=[silent.url("/a"), clock.url("/tick")], timeout=15)
    assert silent.paths().count("/robots.txt") == 2  # fetched again after the period
    assert sorted(crawler.spider.failures) == [silent.url("/a"), silent.url("/b")]
    assert stat(crawler, "robotstxt/unavailable/events") == 2
    assert stat(crawler, "robotstxt/unavailable/origins") == 1  # counts origins, not events
    assert bad_records(caplog) == []


class QuickProbeFirstSpider(RecordingSpider):
    """The first request is a quick probe, with a short download_timeout."""

    async def start(self):
        for index, url in enumerate(self.urls):
            yield Request(url, meta={"download_timeout": 0.3} if index == 0 else {}, errback=self.failed)


@pytest_twisted.ensureDeferred
async def test_one_pages_short_timeout_does_not_decide_for_the_origin(sites):
    """robots.txt inherited the probe's 0.3 s: a site answering in 0.6 s was
    unavailable for an hour, every page dropped."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES, delay=0.6)}))
    urls = [site.url(f"/page/{index}") for index in range(3)] + [site.url("/private/x")]
    crawler = await bounded_crawl(spider=QuickProbeFirstSpider, urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls[:-1])
    assert list(crawler.spider.failures) == [urls[-1]]
    assert stat(crawler, "robotstxt/request_count") == 1


@pytest_twisted.ensureDeferred
async def test_rules_are_refetched_after_cache_seconds(sites):
    (site,) = sites(site_with())
    site.links = {f"/p{i}": [f"/p{i + 1}"] for i in range(6)}
    crawler = await crawl({"ROBOTSTXT_CACHE_SECONDS": 0.3, "DOWNLOAD_DELAY": 0.2}, urls=[site.url("/p0")])
    assert len(crawler.spider.crawled) == 7
    assert site.paths().count("/robots.txt") >= 2
    assert stat(crawler, "robotstxt/refresh_count") >= 1


@pytest.mark.parametrize("failure", ["503", "silence"])
@pytest_twisted.ensureDeferred
async def test_failed_refresh_keeps_the_rules(sites, caplog, failure):
    caplog.set_level(logging.INFO)
    broken = Page(b"down", status=503) if failure == "503" else robots("User-agent: *\nAllow: /\n", delay=3)
    (site,) = sites(LoopbackSite(pages={"/robots.txt": [robots(RULES), broken]}))
    chain = 10
    site.links = {f"/p{i}": [f"/p{i + 1}", f"/private/{i}"] for i in range(chain)}
    settings = {
        "ROBOTSTXT_CACHE_SECONDS": 0.3,
        "DOWNLOAD_DELAY": 0.2,
        "DOWNLOAD_TIMEOUT": 1,
        "ROBOTSTXT_MAX_RETRIES": 0,
    }
    crawler = await bounded_crawl(settings, urls=[site.url("/p0")], timeout=20)
    spider = crawler.spider
    assert sorted(spider.crawled) == sorted(site.url(f"/p{i}") for i in range(chain + 1)), spider.failures
    assert sorted(spider.failures) == sorted(site.url(f"/private/{i}") for i in range(chain))
    assert all(isinstance(e, IgnoreRequest) for e in spider.failures.values())
    assert stat(crawler, "robotstxt/forbidden") == chain
    assert stat(crawler, "robotstxt/refresh_failed") == 1
    # The failed refresh is tried again after ROBOTSTXT_UNAVAILABLE_SECONDS, not at once.
    assert site.paths().count("/robots.txt") == 2
    # Pages were still requested after the failed refresh ended.
    refresh_started = site.requests_for("/robots.txt")[1]
    assert site.requests_for(f"/p{chain}")[0] > refresh_started + (1.0 if failure == "silence" else 0)
    assert stat(crawler, "robotstxt/unavailable/origins") is None
    assert bad_records(caplog) == []


@pytest_twisted.ensureDeferred
async def test_infinite_periods_mean_never_again(sites):
    (site,) = sites(site_with())
    from twisted.internet import reactor
    from twisted.web.server import Site

    closed = reactor.listenTCP(0, Site(LoopbackSite()), interface="127.0.0.9")
    refused = f"http://127.0.0.9:{closed.getHost().port}"
    await closed.stopListening()
    settings = {"ROBOTSTXT_CACHE_SECONDS": "inf", "ROBOTSTXT_UNAVAILABLE_SECONDS": "inf", "ROBOTSTXT_MAX_RETRIES": 0}
    # One at a time: each asks the store what the one before left there.
    one_by_one = {**settings, "CONCURRENT_REQUESTS": 1}
    urls = [site.url(f"/p{i}") for i in range(5)] + [f"{refused}/p{i}" for i in range(5)]
    crawler = await crawl(one_by_one, urls=urls, follow=False)
    assert len(crawler.spider.crawled) == 5
    assert site.paths().count("/robots.txt") == 1
    assert stat(crawler, "robotstxt/request_count") == 2
    assert stat(crawler, "robotstxt/unavailable/dropped") == 5
    assert stat(crawler, "robotstxt/store_errors") is None
