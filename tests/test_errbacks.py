"""Scrapy's errback contract on every path that drops a request: a request with an errback that robots.txt
forbids ends in its errback with the exception the downloader raises, whichever component decided it; the
before-queue filter keeps its savings for the requests that have none."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request, Spider
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from .crawling import crawl, stat
from .redisserver import workers
from .sites import RULES, LoopbackSite, robots

ADDON = {"ADDONS": {"scrapy_robots_coccoc.Addon": 0}, "DOWNLOADER_MIDDLEWARES": {}}
OVER_CAP = {**ADDON, "ROBOTSTXT_MAX_CRAWL_DELAY": 1, "ROBOTSTXT_CRAWL_DELAY_OVER_CAP": "skip"}
TRAIN_AI = {**ADDON, "ROBOTSTXT_USAGE_PURPOSES": ["train-ai"]}


def linking(rules: str = RULES) -> LoopbackSite:
    """A home page linking to two forbidden pages and an allowed one, which links to the same three."""
    links = ["/private/1", "/private/2", "/a"]
    return LoopbackSite(pages={"/robots.txt": robots(rules)}, links={"/": links, "/a": links})


class ErrbackSpider(Spider):
    """Starts from ``first``, then, once a response arrived (its origin's rules known), from ``later``; follows
    links (with an errback if ``link_errbacks``). Records the exception class each errback saw, by URL; an
    errback for a URL in ``then`` yields a request for its value."""

    name = "errbacks"

    def __init__(
        self,
        first: list[str],
        later: list[str] = (),  # type: ignore[assignment]
        then: dict[str, str] | None = None,
        link_errbacks: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.first, self.later, self.then, self.link_errbacks = first, later, then or {}, link_errbacks
        self.crawled: list[str] = []
        self.failures: dict[str, str] = {}
        self.answered: Deferred[None] = Deferred()

    async def start(self):
        for url in self.first:
            yield Request(url, errback=self.failed)
        if self.later:
            await maybe_deferred_to_future(self.answered)
            for url in self.later:
                yield Request(url, errback=self.failed)

    def parse(self, response):
        self.crawled.append(response.url)
        if not self.answered.called:
            self.answered.callback(None)
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, errback=self.failed if self.link_errbacks else None)

    def failed(self, failure):
        url = failure.request.url
        self.failures[url] = type(failure.value).__name__
        if not self.answered.called:
            self.answered.callback(None)
        if url in self.then:
            yield Request(self.then[url], errback=self.failed)


@pytest_twisted.ensureDeferred
async def test_links_forbidden_once_the_rules_are_known_reach_their_errbacks(sites):
    """Issue 34: with the add-on, links dropped before queueing (their origin's rules known) never reached their
    errbacks, so a spider recording what it could not crawl recorded nothing after robots.txt was known."""
    (site,) = sites(linking())
    crawler = await crawl(ADDON, spider=ErrbackSpider, first=[site.url("/")])
    forbidden = [site.url("/private/1"), site.url("/private/2")]
    assert crawler.spider.failures == dict.fromkeys(forbidden, "RobotsTxtForbidden")
    assert sorted(crawler.spider.crawled) == [site.url("/"), site.url("/a")]
    assert stat(crawler, "robotstxt/forbidden") == 2, "decided once each, at the downloader, after the dupefilter"
    assert stat(crawler, "robotstxt/forbidden/before_queue") is None


@pytest_twisted.ensureDeferred
async def test_links_without_errbacks_are_still_dropped_before_the_queue(sites):
    (site,) = sites(linking())
    crawler = await crawl(ADDON, spider=ErrbackSpider, first=[site.url("/")], link_errbacks=False)
    assert stat(crawler, "robotstxt/forbidden/before_queue") == 4, "every link dropped, duplicates included"
    assert stat(crawler, "robotstxt/forbidden") == 4
    assert stat(crawler, "scheduler/enqueued") == 2, "only / and /a travelled the scheduler"
    assert not any(path.startswith("/private") for path in site.paths())


@pytest.mark.parametrize(
    ("settings", "rules", "expected"),
    [
        (ADDON, RULES, "RobotsTxtForbidden"),
        (OVER_CAP, "User-agent: *\nCrawl-delay: 5\n", "CrawlDelayOverCap"),
        (TRAIN_AI, "User-agent: *\nContent-Usage: /private train-ai=n\n", "UsageDisallowed"),
    ],
    ids=["forbidden", "crawl-delay-over-cap", "usage-disallowed"],
)
@pytest_twisted.ensureDeferred
async def test_start_requests_and_errback_requests_reach_their_errbacks(sites, settings, rules, expected):
    """Decided at the downloader (the first request, its origin unknown) and before the queue (a later start
    request, and one its errback yields), each errback sees the same exception class."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(rules)}))
    first, later, yielded = site.url("/private/first"), site.url("/private/later"), site.url("/private/yielded")
    crawler = await crawl(settings, spider=ErrbackSpider, first=[first], later=[later], then={later: yielded})
    assert crawler.spider.failures == dict.fromkeys([first, later, yielded], expected)
    assert site.paths() == ["/robots.txt"]


@pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")
@pytest_twisted.ensureDeferred
async def test_scrapy_redis_workers_deliver_forbidden_links_to_their_errbacks(sites, redis_server):
    """Three workers with the add-on, a shared queue and store: a forbidden link reaches its errback in whichever
    worker the shared queue gives it to, once (the shared dupefilter)."""
    (site,) = sites(
        LoopbackSite(pages={"/robots.txt": robots(RULES)}, links={"/": [f"/private/{i}" for i in range(6)]})
    )
    results = await workers(
        redis_server.url, [site.url("/")], [site.url("/private/a")], [site.url("/private/b")], addon=True
    )
    for _, err, code in results:
        assert code == 0, err.decode()[-3000:]
    failures: dict[str, str] = {}
    for out, _, _ in results:
        for url, name in json.loads(out.decode().strip().splitlines()[-1])["failures"].items():
            assert url not in failures, f"{url} failed in two workers"
            failures[url] = name
    expected = [site.url(f"/private/{i}") for i in range(6)] + [site.url("/private/a"), site.url("/private/b")]
    assert failures == dict.fromkeys(expected, "RobotsTxtForbidden")
    assert site.paths().count("/robots.txt") == 1


class RulesSpider(CrawlSpider):
    """Follows every link by a rule, with an errback of the rule's when ``rule_errback``."""

    name = "rules"

    def __init__(self, start: str, rule_errback: bool, **kwargs: Any) -> None:
        self.start_urls = [start]
        self.failures: dict[str, str] = {}
        errback = "failed" if rule_errback else None
        self.rules = (Rule(LinkExtractor(), follow=True, errback=errback),)
        super().__init__(**kwargs)

    def failed(self, failure):
        self.failures[failure.request.url] = type(failure.value).__name__


@pytest.mark.parametrize("rule_errback", [False, True], ids=["no-rule-errback", "rule-errback"])
@pytest_twisted.ensureDeferred
async def test_crawl_spider_links_are_dropped_before_the_queue_unless_their_rule_has_an_errback(sites, rule_errback):
    """A review: CrawlSpider gives every request its own _errback, which calls the rule's errback only if the rule
    has one; taken for an errback, it kept every forbidden link of every CrawlSpider in the scheduler."""
    (site,) = sites(linking())
    crawler = await crawl(ADDON, spider=RulesSpider, start=site.url("/"), rule_errback=rule_errback)
    forbidden = [site.url("/private/1"), site.url("/private/2")]
    if rule_errback:
        assert crawler.spider.failures == dict.fromkeys(forbidden, "RobotsTxtForbidden")
        assert stat(crawler, "robotstxt/forbidden/before_queue") is None
    else:
        assert stat(crawler, "robotstxt/forbidden/before_queue") == 4
    assert not any(path.startswith("/private") for path in site.paths())
