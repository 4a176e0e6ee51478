"""Stores that fail, lie or never answer (the fakes of tests/fakestores.py):
the crawl never hangs, no store fault opens a forbidden page, and the
origins stay paced by this process alone."""

from __future__ import annotations

import logging
import textwrap

import pytest
import pytest_twisted
from scrapy.exceptions import IgnoreRequest

from scrapy_robots_coccoc.exceptions import RobotsTxtForbidden

from .crawling import bad_records, bounded_crawl, run_python, stat, unaccounted
from .sites import RULES, LoopbackSite, robots


@pytest.mark.parametrize(
    "store",
    [
        "FlakyGetStore",
        "FlakySetStore",
        "FlakyClaimStore",
        "FlakyPeekStore",
        "GarbageGetStore",
        "GarbagePeekStore",
        "NanExpiryStore",
        "FlakyAsyncSetStore",
    ],
)
@pytest_twisted.ensureDeferred
async def test_store_that_fails_once_never_hangs_the_crawl(sites, caplog, store):
    caplog.set_level(logging.INFO)
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES, delay=0.2)}))
    urls = [site.url(f"/p{i}") for i in range(4)] + [site.url(f"/private/{i}") for i in range(4)]
    settings = {"ROBOTSTXT_STORE": f"tests.fakestores.{store}", "CONCURRENT_REQUESTS": 8}
    crawler = await bounded_crawl(settings, urls=urls, follow=False, timeout=15)
    assert unaccounted(crawler, urls) == set()
    failures = crawler.spider.failures
    # Every failure is a decision or a named fault: an IgnoreRequest.
    assert all(isinstance(e, IgnoreRequest) for e in failures.values()), failures
    assert all(url in failures for url in urls if "/private/" in url)  # never opened by a store fault
    assert not [m for m in bad_records(caplog) if "ERROR" in m], bad_records(caplog)


@pytest_twisted.ensureDeferred
async def test_store_that_never_answers_does_not_hang_the_crawl(sites):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES)}))
    urls = [site.url("/a"), site.url("/private/x")]
    settings = {
        "ROBOTSTXT_STORE": "tests.fakestores.HangingGetStore",
        "ROBOTSTXT_STORE_TIMEOUT": 0.5,
        "DOWNLOAD_TIMEOUT": 1,
    }
    crawler = await bounded_crawl(settings, urls=urls, follow=False, timeout=5)
    assert unaccounted(crawler, urls) == set()
    # The store's silence is a WARNING, then robots.txt decides: under the
    # asyncio reactor the timeout must not fail the requests instead.
    assert crawler.spider.crawled == [site.url("/a")], crawler.spider.failures
    assert isinstance(crawler.spider.failures[site.url("/private/x")], RobotsTxtForbidden)
    assert stat(crawler, "robotstxt/store_errors") >= 1


@pytest_twisted.ensureDeferred
async def test_claim_held_by_a_silent_peer_expires(sites):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES)}))
    urls = [site.url("/a"), site.url("/private/x")]
    settings = {
        "ROBOTSTXT_STORE": "tests.fakestores.AlwaysClaimedStore",
        "DOWNLOAD_TIMEOUT": 0.5,
        "ROBOTSTXT_MAX_RETRIES": 0,
    }
    crawler = await bounded_crawl(settings, urls=urls, follow=False, timeout=15)
    assert crawler.spider.crawled == [site.url("/a")], crawler.spider.failures
    assert isinstance(crawler.spider.failures[site.url("/private/x")], IgnoreRequest)
    assert site.paths().count("/robots.txt") == 1


@pytest_twisted.ensureDeferred
async def test_a_store_that_forgets_its_turns_still_paces_the_crawl(sites):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES + "Crawl-delay: 0.3\n")}))
    urls = [site.url(f"/p{i}") for i in range(5)]
    settings = {"ROBOTSTXT_STORE": "tests.fakestores.ForgetfulStore", "CONCURRENT_REQUESTS": 8}
    crawler = await bounded_crawl(settings, urls=urls, follow=False, timeout=15)
    assert sorted(crawler.spider.crawled) == sorted(urls)
    assert min(site.gaps()) >= 0.95 * 0.3, site.gaps()


@pytest.mark.parametrize("store", ["NanReserveStore", "FarReserveStore", "RaisingReserveStore", "SlowReserveStore"])
@pytest_twisted.ensureDeferred
async def test_nonsense_from_a_stores_reserve_never_hangs_the_crawl_nor_unpaces_the_site(sites, store, caplog):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.2\n")}))
    urls = [site.url(f"/p{i}") for i in range(3)]
    settings = {"ROBOTSTXT_STORE": f"tests.fakestores.{store}", "ROBOTSTXT_STORE_TIMEOUT": 0.2}
    crawler = await bounded_crawl(settings, urls=urls, follow=False, timeout=10)
    assert sorted(crawler.spider.crawled) == sorted(urls)
    assert stat(crawler, "robotstxt/store_errors") >= 1
    # Paced by this process alone, as when Redis is down.
    assert min(site.gaps()) >= 0.19, site.gaps()


SILENT_RESERVE_SCRIPT = textwrap.dedent(
    """
    import json
    from scrapy.utils.reactor import install_reactor
    install_reactor("twisted.internet.selectreactor.SelectReactor")
    from twisted.internet import reactor
    from twisted.internet.defer import ensureDeferred
    from scrapy.crawler import CrawlerRunner
    from tests.crawling import SETTINGS, RecordingSpider
    from tests.sites import LoopbackSite, robots, serve

    site = serve(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\\nCrawl-delay: 1\\n")}), "127.0.0.2")
    settings = {**SETTINGS, "TWISTED_REACTOR": "twisted.internet.selectreactor.SelectReactor",
                "ROBOTSTXT_STORE": "tests.fakestores.SilentReserveStore", "ROBOTSTXT_STORE_TIMEOUT": 60,
                "CLOSESPIDER_TIMEOUT": 1}

    async def main():
        crawler = CrawlerRunner(settings).create_crawler(RecordingSpider)
        await crawler.crawl(urls=[site.url(f"/p{i}") for i in range(3)], follow=False)
        stats = crawler.stats.get_stats()
        print(json.dumps({"paths": site.paths(), "rescheduled": stats.get("robotstxt/rescheduled_on_close", 0),
                          "store_errors": stats.get("robotstxt/store_errors", 0)}))

    d = ensureDeferred(main())
    d.addBoth(lambda r: (print(r) if r is not None else None, reactor.stop()))
    reactor.run()
    """
)


def test_a_close_while_the_store_paces_sends_the_requests_back_under_another_reactor():
    """Under a non-asyncio reactor the close's cancellation is Twisted's
    CancelledError, an Exception: it must not pass for a store failure
    (which would let the requests go out unpaced as the spider closes)."""
    result = run_python("-c", SILENT_RESERVE_SCRIPT)
    assert result == {"paths": ["/robots.txt"], "rescheduled": 3, "store_errors": 0}, result
