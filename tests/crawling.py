"""Real Scrapy crawls with our middleware enabled: the spiders that record
them, and what the crawl tests check of every crawl (each request accounted
for, no ERROR, our log lines)."""

from __future__ import annotations

import gc
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.crawler import Crawler, CrawlerRunner
from scrapy.spiders import SitemapSpider
from scrapy.utils.defer import deferred_from_coro

from scrapy_robots_coccoc import RobotsSitemapMixin

#: Whether this Scrapy can crawl without a Twisted reactor (2.15+).
REACTORLESS_SCRAPY = find_spec("scrapy.utils.reactorless") is not None

SETTINGS: dict[str, Any] = {
    "ROBOTSTXT_OBEY": True,
    "DOWNLOADER_MIDDLEWARES": {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "scrapy_robots_coccoc.RobotsTxtMiddleware": 100,
        "scrapy_robots_coccoc.RobotsTxtBodyMiddleware": 595,
    },
    "ROBOTSTXT_USER_AGENT": "coccocbot-web",
    # Named in the header it sends, as a crawler should be (else one WARNING at start says so).
    "USER_AGENT": "Mozilla/5.0 (compatible; coccocbot-web/1.0; +https://help.coccoc.com/searchengine)",
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "INFO",
    "DOWNLOAD_TIMEOUT": 5,
}


class RecordingSpider(Spider):
    """Requests ``urls`` (with ``meta``), follows links when ``follow``, and
    records what was crawled and which requests failed, with the error."""

    name = "recording"

    def __init__(self, urls: list[str], follow: bool = True, meta: dict | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls, self.follow, self.request_meta = urls, follow, meta or {}
        self.crawled: list[str] = []
        self.failures: dict[str, Exception] = {}

    async def start(self):
        for url in self.urls:
            yield Request(url, meta=dict(self.request_meta), errback=self.failed, dont_filter=True)

    def parse(self, response):
        self.crawled.append(response.url)
        if self.follow:
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, errback=self.failed, meta=dict(self.request_meta))

    def failed(self, failure):
        self.failures[failure.request.url] = failure.value


class ProductSpider(RobotsSitemapMixin, SitemapSpider):
    name = "products"
    sitemap_rules = (("/products/", "parse_product"),)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.products: list[str] = []

    def parse_product(self, response):
        self.products.append(response.url)


async def crawl(
    settings: dict[str, Any] | None = None, spider: type[Spider] = RecordingSpider, **kwargs: Any
) -> Crawler:
    runner = CrawlerRunner({**SETTINGS, **(settings or {})})
    crawler = runner.create_crawler(spider)
    await crawler.crawl(**kwargs)
    return crawler


async def bounded_crawl(
    settings: dict[str, Any] | None = None, spider: type[Spider] = RecordingSpider, timeout: float = 20, **kwargs: Any
) -> Crawler:
    """Run a crawl; fail (after stopping it) if it does not end by itself
    within *timeout* seconds."""
    from twisted.internet import reactor

    runner = CrawlerRunner({**SETTINGS, **(settings or {})})
    crawler = runner.create_crawler(spider)
    timed_out: list[bool] = []

    def stop() -> None:
        timed_out.append(True)
        if hasattr(crawler, "stop_async"):
            deferred_from_coro(crawler.stop_async())
        else:
            crawler.stop()

    call = reactor.callLater(timeout, stop)
    try:
        await crawler.crawl(**kwargs)
    finally:
        if call.active():
            call.cancel()
    assert not timed_out, f"the crawl did not end by itself within {timeout} s"
    return crawler


def stat(crawler: Crawler, key: str) -> Any:
    return crawler.stats.get_value(key)


def unaccounted(crawler: Crawler, urls: list[str]) -> set[str]:
    """Requested URLs that were neither downloaded nor errback'd."""
    spider = crawler.spider
    return set(urls) - set(spider.crawled) - set(spider.failures)


def bad_records(caplog: pytest.LogCaptureFixture) -> list[str]:
    """ERROR records, records with a traceback, and raw Failure dumps."""
    return [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.ERROR
        or r.exc_info
        or "Traceback" in r.getMessage()
        or "<twisted.python.failure.Failure" in r.getMessage()
    ]


def ours(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == level and r.name.startswith(("scrapy", "scrapy_robots_coccoc"))
    ]


@contextmanager
def collector_frozen() -> Iterator[None]:
    """Leave the objects alive now out of the cyclic collector's passes until
    the block ends: a full pass over a test session's heap holds the reactor
    for 0.2 s or more, a pause of pytest's making, not of the code under test."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_python(*args: str) -> Any:
    """Run Python with *args* (``-c`` and a script, or ``-m`` and a module)
    in a process of its own (a crawl under another reactor than the tests',
    or none) from the project's root; return the JSON it printed last."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(("{", "["))]
    assert lines, (done.stdout[-2000:], done.stderr[-3000:])
    return json.loads(lines[-1])


def run_reactorless(*args: str) -> Any:
    """``tests.reactorless_crawl`` run with *args*; skips the test where this
    Scrapy's HTTP download handler without a reactor needs a library that
    is not installed (httpx on Scrapy 2.15-2.18)."""
    result = run_python("-m", "tests.reactorless_crawl", *args)
    if any("NotSupported" in key for key in result["stats"]):
        pytest.skip(f"no HTTP download handler without a reactor here: {result['warnings']}")
    return result
