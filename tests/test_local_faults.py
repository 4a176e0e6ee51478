"""Local faults (docs/contract.md, section 3, "Fetching robots.txt"): out of
file descriptors, or an exception in a signal handler, fails or delays the
waiting requests and is retried soon; it is never blamed on the site, and
never hangs the crawl."""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Any

import pytest
import pytest_twisted
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest

from scrapy_robots_coccoc.signals import robotstxt_sitemaps_found

from .crawling import RecordingSpider, bounded_crawl, run_python, unaccounted
from .sites import RULES, LoopbackSite, robots

LOCAL_FAULT_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, logging, os, resource, sys
    from scrapy.utils.reactor import install_reactor
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import reactor
    from scrapy import Request
    from scrapy import signals
    from scrapy.crawler import CrawlerRunner
    from scrapy.exceptions import DontCloseSpider, IgnoreRequest
    from scrapy_robots_coccoc._crawl.coordinator import OriginCoordinator
    from tests.crawling import SETTINGS, RecordingSpider
    from tests.sites import LoopbackSite, robots, serve

    # A short retry interval, so that the retry is seen within the test.
    OriginCoordinator.FAULT_SECONDS = 1.0
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append([record.levelname, record.name, record.getMessage(), bool(record.exc_info)])

    logging.getLogger().addHandler(Keep())
    logging.getLogger().setLevel(logging.INFO)
    site = serve(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\\nDisallow: /private\\n")}), "127.0.0.2")
    filler = []

    def release():
        while filler:
            os.close(filler.pop())

    class Spider(RecordingSpider):
        async def start(self):
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512), hard))
            try:
                while True:
                    filler.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                pass  # EMFILE: this process has no descriptor left
            for path in ("/a", "/b", "/private/x"):
                yield Request(site.url(path), errback=self.failed, dont_filter=True)
            reactor.callLater(0.5, release)
            self.crawler.signals.connect(self.wait_for_second_batch, signal=signals.spider_idle)

        def second_batch(self):
            self.sent = True
            for path in ("/c", "/private/y"):
                self.crawler.engine.crawl(Request(site.url(path), errback=self.failed, dont_filter=True))

        def wait_for_second_batch(self):
            if not getattr(self, "sent", False):
                raise DontCloseSpider

        def failed(self, failure):
            release()
            if not getattr(self, "second_batch_due", False):
                self.second_batch_due = True
                reactor.callLater(1.5, self.second_batch)  # past FAULT_SECONDS after the fault
            super().failed(failure)

    async def main():
        crawler = CrawlerRunner({**SETTINGS}).create_crawler(Spider)
        await crawler.crawl(urls=[])
        stats = {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("robotstxt/")}
        print(json.dumps({
            "crawled": crawler.spider.crawled,
            "failures": {u: [type(e).__name__, isinstance(e, IgnoreRequest), str(e)]
                         for u, e in crawler.spider.failures.items()},
            "stats": stats,
            "records": records,
            "robots_fetches": site.paths().count("/robots.txt"),
            "filler": len(filler),
        }, default=str))

    from twisted.internet.defer import ensureDeferred
    d = ensureDeferred(main())
    d.addBoth(lambda r: (print(r, file=sys.stderr) if r is not None else None, reactor.stop()))
    reactor.run()
    """
)


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="needs Linux RLIMIT_NOFILE")
def test_out_of_file_descriptors_is_a_local_fault_not_the_sites():
    """Real EMFILE: a crawl in a subprocess that has used up its descriptors
    when robots.txt is fetched."""
    result = run_python("-c", LOCAL_FAULT_SCRIPT)
    failures, stats = result["failures"], result["stats"]
    site = "http://127.0.0.2:"
    first = {u: f for u, f in failures.items() if u.endswith(("/a", "/b", "/private/x"))}
    assert len(first) == 3, (failures, result["records"])
    for name, ignored, message in first.values():
        assert ignored, (name, message)
        assert "Too many open files" in message or "EMFILE" in message or "24" in message, message
    warnings = [m for level, _, m, _ in result["records"] if level == "WARNING" and "robots.txt" in m]
    assert len(warnings) == 1, warnings
    assert "not the site" in warnings[0]
    assert stats.get("robotstxt/local_faults") == 1, stats
    assert stats.get("robotstxt/fault/dropped") == len(first), stats
    assert "robotstxt/unavailable/origins" not in stats, stats
    # Retried after the short fault interval, not an hour: the site's rules decide.
    assert any(u.endswith("/c") and u.startswith(site) for u in result["crawled"]), result
    later = [f for u, f in failures.items() if u.endswith("/private/y")]
    assert later and later[0][0] == "RobotsTxtForbidden", failures
    assert result["robots_fetches"] == 1
    assert not [r for r in result["records"] if r[0] in ("ERROR", "CRITICAL") or r[3]], result["records"]


class RaisingHandlersSpider(RecordingSpider):
    """A spider whose handlers of our sitemap signal and of Scrapy's
    robots_parsed raise."""

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> RaisingHandlersSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.boom, signal=robotstxt_sitemaps_found)
        from scrapy import signals

        if hasattr(signals, "robots_parsed"):
            crawler.signals.connect(spider.boom, signal=signals.robots_parsed)
        spider.booms = 0
        return spider

    def boom(self, **kwargs: Any) -> None:
        self.booms += 1
        raise RuntimeError("signal handler failed (test)")


@pytest_twisted.ensureDeferred
async def test_raising_signal_handlers_never_hang_the_crawl(sites):
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/sitemap.xml')}\n{RULES}", delay=0.2)
    urls = [site.url(f"/p{i}") for i in range(4)] + [site.url("/private/x")]
    crawler = await bounded_crawl(urls=urls, spider=RaisingHandlersSpider, follow=False, timeout=15)
    assert crawler.spider.booms >= 1
    assert unaccounted(crawler, urls) == set()
    assert sorted(crawler.spider.crawled) == sorted(urls[:4]), crawler.spider.failures
    assert isinstance(crawler.spider.failures[site.url("/private/x")], IgnoreRequest)
