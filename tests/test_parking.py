"""Requests parked while robots.txt is fetched: they never take more places
than CONCURRENT_REQUESTS once released, and a fetch answered at once still
releases the request that started it."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import pytest_twisted
from scrapy.crawler import Crawler

from .crawling import bounded_crawl, run_python, stat
from .sites import RULES, LoopbackSite, Page, robots


class InFlight:
    def __init__(self) -> None:
        self.total = 0
        self.peak = 0
        self.per_site: dict[str, int] = {}
        self.peak_per_site = 0


class CountingSite(LoopbackSite):
    """Counts page requests (robots.txt aside) in flight across all sites."""

    def __init__(self, counter: InFlight, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.counter = counter

    def render_GET(self, request):
        if request.uri != b"/robots.txt":
            counter, key = self.counter, self.address
            counter.total += 1
            counter.per_site[key] = counter.per_site.get(key, 0) + 1
            counter.peak = max(counter.peak, counter.total)
            counter.peak_per_site = max(counter.peak_per_site, counter.per_site[key])

            def done(_: Any) -> None:
                counter.total -= 1
                counter.per_site[key] -= 1

            request.notifyFinish().addBoth(done)
        return super().render_GET(request)


async def crawl_counting(sites, total: int, per_domain: int, count: int = 5) -> tuple[Crawler, InFlight]:
    """Sites whose robots.txt answers after 0.5 s and pages after 0.2 s."""
    counter = InFlight()
    pages = {f"/p{i}": Page(b"<html></html>", delay=0.2) for i in range(6)}
    started = sites(
        *(CountingSite(counter, pages={"/robots.txt": robots(RULES, delay=0.5), **pages}) for _ in range(count))
    )
    urls = [s.url(f"/p{i}") for i in range(6) for s in started]
    settings = {"CONCURRENT_REQUESTS": total, "CONCURRENT_REQUESTS_PER_DOMAIN": per_domain}
    crawler = await bounded_crawl(settings, urls=urls, follow=False, timeout=30)
    assert sorted(crawler.spider.crawled) == sorted(urls), crawler.spider.failures
    assert stat(crawler, "robotstxt/parked"), "no request was parked: the test does not test parking"
    return crawler, counter


@pytest.mark.parametrize(("total", "per_domain"), [(4, 4), (6, 2)])
@pytest_twisted.ensureDeferred
async def test_pages_in_flight_never_exceed_concurrent_requests_after_parking(sites, total, per_domain):
    _, counter = await crawl_counting(sites, total, per_domain)
    assert counter.peak <= total, f"{counter.peak} pages in flight with CONCURRENT_REQUESTS = {total}"
    assert counter.peak >= min(total, 2)  # the servers did see concurrency


@pytest.mark.xfail(
    reason="Scrapy 2.19 under the asyncio reactor: Downloader._process_queue starts downloads with "
    "loop.create_task, so slot.transferring grows only after its while loop has popped the whole queue; "
    "the waiters of one robots.txt resume in one tick and all pass (stock Scrapy overshoots too, less often)",
    strict=False,
)
@pytest_twisted.ensureDeferred
async def test_pages_in_flight_per_site_never_exceed_concurrent_requests_per_domain_after_parking(sites):
    _, counter = await crawl_counting(sites, total=6, per_domain=2, count=1)
    assert counter.peak_per_site <= 2, f"{counter.peak_per_site} pages of one site in flight, PER_DOMAIN = 2"


CACHED_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from scrapy.utils.reactor import install_reactor
    install_reactor("twisted.internet.selectreactor.SelectReactor")
    from twisted.internet import reactor
    from twisted.internet.defer import ensureDeferred
    from scrapy.crawler import CrawlerRunner
    from tests.crawling import SETTINGS, RecordingSpider
    from tests.sites import LoopbackSite, robots, serve

    site = serve(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\\nDisallow: /private\\n")}), "127.0.0.2")
    settings = {**SETTINGS, "TWISTED_REACTOR": "twisted.internet.selectreactor.SelectReactor",
                "HTTPCACHE_ENABLED": True, "HTTPCACHE_DIR": sys.argv[1]}
    urls = [site.url(p) for p in ("/p0", "/p1", "/private/x")]

    async def main():
        runs = []
        for _ in range(2):  # the second run is answered by the cache, synchronously
            crawler = CrawlerRunner(settings).create_crawler(RecordingSpider)
            await crawler.crawl(urls=urls, follow=False)
            runs.append({"crawled": sorted(crawler.spider.crawled),
                         "failures": {u: type(e).__name__ for u, e in crawler.spider.failures.items()}})
        print(json.dumps(runs))

    d = ensureDeferred(main())
    d.addBoth(lambda r: (print(r, file=sys.stderr) if r is not None else None, reactor.stop()))
    reactor.run()
    """
)


def test_a_fetch_answered_at_once_releases_its_first_request(tmp_path):
    """An HTTP cache hit under a non-asyncio reactor completes the robots.txt
    fetch before the request that started it has waited: it must get the rules."""
    runs = run_python("-c", CACHED_SCRIPT, str(tmp_path / "cache"))
    for run in runs:
        assert len(run["crawled"]) == 2, run
        assert run["failures"] == {next(u for u in run["failures"] if u.endswith("/private/x")): "RobotsTxtForbidden"}
