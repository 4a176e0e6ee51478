"""Canaries: every Scrapy internal reached through ``_compat`` still exists in
the installed Scrapy. A failure names what a Scrapy upgrade changed."""

from __future__ import annotations

import pytest
import pytest_twisted
from scrapy import Request, Spider
from scrapy.crawler import CrawlerRunner
from scrapy.spiders import SitemapSpider

from scrapy_robots_coccoc._crawl import compat as _compat


def test_check_passes_on_the_installed_scrapy():
    _compat.check()


def test_engine_download_exists():
    from scrapy.core.engine import ExecutionEngine

    assert hasattr(ExecutionEngine, "download_async") or hasattr(ExecutionEngine, "download"), (
        "ExecutionEngine lost download/download_async: update _compat.download"
    )


def test_robots_parsed_is_found_where_scrapy_has_it():
    from scrapy import signals

    assert _compat.ROBOTS_PARSED is getattr(signals, "robots_parsed", None)
    if _compat.SCRAPY_VERSION >= (2, 18):
        assert _compat.ROBOTS_PARSED is not None, "Scrapy 2.18+ should define signals.robots_parsed"


class _Inspecting(Spider):
    """Looks at the running engine through _compat, from inside a crawl."""

    name = "inspecting"
    allowed_domains = ["127.0.0.1"]

    async def start(self):
        engine = self.crawler.engine
        self.seen = {
            "active": isinstance(_compat.downloader_active(engine), set),
            "closing": _compat.engine_closing(engine),
            "hold": _compat.slot_hold(engine, Request("http://127.0.0.1/")),
            "full": _compat.slot_full(engine, Request("http://127.0.0.1/")),
            "key": _compat.slot_key(engine, Request("http://127.0.0.1/")),
            "offsite": _compat.offsite(engine, Request("http://elsewhere.example/")),
            "onsite": _compat.offsite(engine, Request("http://127.0.0.1/")),
        }
        _compat.wake_engine(engine)
        return
        yield


@pytest_twisted.ensureDeferred
async def test_engine_and_downloader_internals():
    crawler = CrawlerRunner({"TELNETCONSOLE_ENABLED": False}).create_crawler(_Inspecting)
    await crawler.crawl()
    assert crawler.spider.seen["active"], "Downloader.active is no longer a set: update _compat.downloader_active"
    assert crawler.spider.seen["closing"] is False, "a running engine counted as closing: update _compat"
    assert crawler.spider.seen["hold"] == 0.0, "no slot yet, so nothing to hold: update _compat.slot_hold"
    assert crawler.spider.seen["full"] is False, "no slot yet, so not full: update _compat.slot_full"
    assert crawler.spider.seen["key"] == "127.0.0.1", "Downloader.get_slot_key changed: update _compat.slot_key"
    offsite = (crawler.spider.seen["offsite"], crawler.spider.seen["onsite"])
    assert offsite == (True, False), "OffsiteMiddleware.should_follow changed: update _compat.offsite"
    assert _compat.engine_closing(crawler.engine), "a stopped engine should count as closing"


def test_sitemap_spider_internals():
    class Shop(SitemapSpider):
        name = "shop"
        sitemap_rules = [("/product/", "parse_product")]

        def parse_product(self, response):
            return None

    spider = Shop()
    ((pattern, callback),) = _compat.sitemap_callbacks(spider)
    assert pattern.search("https://x/product/1") and callback == spider.parse_product, (
        "SitemapSpider._cbs changed shape: update _compat.sitemap_callbacks"
    )


@pytest.mark.parametrize("name", ["send_catch_log_async", "send_catch_log_deferred"])
def test_signal_manager_can_send_async(name):
    from scrapy.signalmanager import SignalManager

    if name == "send_catch_log_async" and _compat.SCRAPY_VERSION < (2, 14):
        pytest.skip("added in Scrapy 2.14; _compat falls back to send_catch_log_deferred")
    assert hasattr(SignalManager, name)


def test_a_slot_s_delay_and_clock_are_where_slot_hold_reads_them():
    from scrapy.core.downloader import Slot

    slot = Slot(1, 2.0, 0) if _compat.SCRAPY_VERSION >= (2, 19) else Slot(1, 2.0, False)
    assert hasattr(slot, "lastseen") and slot.delay == 2.0, "Slot.lastseen/delay changed: update _compat.slot_hold"
    assert hasattr(slot, "jitter") or hasattr(slot, "randomize_delay"), "Slot jitter changed: update _compat"
    assert _compat._SLOT_CLOCK() > 0


def test_a_slot_s_requests_and_concurrency_are_where_slot_full_reads_them():
    from scrapy.core.downloader import Slot

    slot = Slot(1, 0.0, 0) if _compat.SCRAPY_VERSION >= (2, 19) else Slot(1, 0.0, False)
    assert slot.active == set() and slot.concurrency == 1, "Slot.active/concurrency changed: update _compat.slot_full"


def test_a_slot_s_scheduled_release_is_where_slot_hold_reads_it():
    from scrapy.core.downloader import Slot

    slot = Slot(1, 2.0, 0) if _compat.SCRAPY_VERSION >= (2, 19) else Slot(1, 2.0, False)
    assert slot.latercall is None, "Slot.latercall changed: update _compat.slot_hold"
    if _compat.SCRAPY_VERSION >= (2, 14):
        from scrapy.utils.asyncio import CallLaterResult

        assert hasattr(CallLaterResult, "_timer_handle") and hasattr(CallLaterResult, "_delayed_call")


@pytest_twisted.ensureDeferred
async def test_seconds_until_reads_every_kind_of_scheduled_call():
    from twisted.internet import reactor

    delayed = reactor.callLater(5, lambda: None)
    try:
        assert 4.5 < _compat._seconds_until(delayed) <= 5
        if _compat.SCRAPY_VERSION >= (2, 14):
            from scrapy.utils.asyncio import call_later

            later = call_later(5, lambda: None)
            assert 4.5 < _compat._seconds_until(later) <= 5
            later.cancel()
            assert _compat._seconds_until(later) == 0
    finally:
        delayed.cancel()
    assert _compat._seconds_until(delayed) == 0
    assert _compat._seconds_until(None) == 0


def test_the_stock_middleware_is_where_we_disable_it():
    from scrapy.utils.misc import load_object

    assert load_object(_compat.STOCK_ROBOTSTXT_MIDDLEWARE).__name__ == "RobotsTxtMiddleware"


def test_httpproxy_notes_whose_credentials_a_request_carries():
    from scrapy.downloadermiddlewares.httpproxy import HttpProxyMiddleware

    request = Request("http://example.com/", meta={"proxy": "http://user:pass@proxy.example:8080"})
    HttpProxyMiddleware().process_request(request, None)
    assert request.headers[b"Proxy-Authorization"] == b"Basic dXNlcjpwYXNz"
    assert request.meta[_compat.PROXY_AUTH_META] == "http://proxy.example:8080"


def test_the_dns_cache_is_where_moved_to_reads_it():
    from scrapy import resolver

    assert resolver.dnscache is _compat.dnscache and hasattr(resolver.dnscache, "get")


def test_sitemap_follow_is_where_the_mixin_reads_it():
    class Shop(SitemapSpider):
        name = "shop"
        sitemap_follow = ["/products"]

    (pattern,) = _compat.sitemap_follow(Shop())
    assert pattern.search("https://x/products.xml") and not pattern.search("https://x/blog.xml"), (
        "SitemapSpider._follow changed shape: update _compat.sitemap_follow"
    )


def test_a_response_given_up_past_download_maxsize_is_recognised():
    """HttpCompressionMiddleware's refusal as it raises it, and the message
    of a download cancelled over its announced size; nothing else."""
    import gzip

    from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
    from scrapy.exceptions import IgnoreRequest
    from scrapy.http import Response
    from scrapy.utils.test import get_crawler
    from twisted.internet.defer import CancelledError

    crawler = get_crawler(Spider)
    middleware = HttpCompressionMiddleware.from_crawler(crawler)
    request = Request("http://example.com/s.xml", meta={"download_maxsize": 100})
    response = Response(request.url, body=gzip.compress(bytes(1000)), headers={"Content-Encoding": "gzip"})
    # The spider argument: required before Scrapy 2.14, deprecated after.
    spider = (Spider("s"),) if _compat.SCRAPY_VERSION < (2, 14) else ()
    with pytest.raises(IgnoreRequest) as raised:
        middleware.process_response(request, response, *spider)
    assert _compat.over_download_bound(raised.value), "HttpCompressionMiddleware's refusal changed"
    cancelled = "Cancelling download of x: expected response size (9) larger than download max size (5)."
    assert _compat.over_download_bound(CancelledError(cancelled))
    assert not _compat.over_download_bound(IgnoreRequest("forbidden by robots.txt"))
    assert not _compat.over_download_bound(CancelledError())
