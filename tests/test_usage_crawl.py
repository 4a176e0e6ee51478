"""Usage preferences in real crawls: each source (robots.txt Content-Usage with paths, Content-Signal, the
Content-Usage and Content-Signal headers, TDMRep's header and meta tag, noai) decides with a purpose set and only
annotates without one; errbacks see UsageDisallowed; the crawl says when its User-Agent hides its robot name."""

from __future__ import annotations

import logging

import pytest
import pytest_twisted
from scrapy import Request, signals

from scrapy_robots_coccoc.signals import robotstxt_request_dropped

from .crawling import RecordingSpider, crawl, ours, stat
from .sites import LoopbackSite, Page, robots

ADDON = {"ADDONS": {"scrapy_robots_coccoc.Addon": 0}, "DOWNLOADER_MIDDLEWARES": {}}
TRAIN_AI = {**ADDON, "ROBOTSTXT_USAGE_PURPOSES": ["train-ai"]}

#: The example of draft-ietf-aipref-attach, section 5.
ATTACH_EXAMPLE = (
    "User-agent: *\nAllow: /\nDisallow: /never/\nContent-Usage: train-ai=n\nContent-Usage: /ai-ok/ train-ai=y\n"
)


class ItemSpider(RecordingSpider):
    """Yields an item per page and follows its links; records the items, the preferences each response carried,
    the drop signal's kinds and the exception classes errbacks saw."""

    async def start(self):
        self.items: list[str] = []
        self.preferences: dict[str, dict[str, bool]] = {}
        self.kinds: list[str] = []
        self.crawler.signals.connect(
            lambda item, **kw: self.items.append(item["url"]), signal=signals.item_scraped, weak=False
        )
        self.crawler.signals.connect(
            lambda kind, **kw: self.kinds.append(kind), signal=robotstxt_request_dropped, weak=False
        )
        async for request in super().start():
            yield request

    def parse(self, response):
        self.preferences[response.url] = dict(response.meta["usage_preferences"])
        yield {"url": response.url}
        yield from super().parse(response)


def classes(spider: RecordingSpider) -> dict[str, str]:
    return {url: type(exc).__name__ for url, exc in spider.failures.items()}


@pytest_twisted.ensureDeferred
async def test_robots_txt_content_usage_with_paths_decides_the_draft_example(sites):
    """draft-ietf-aipref-attach's table: /test train-ai=n, /never/test not crawled (no preference),
    /ai-ok/test train-ai=y."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(ATTACH_EXAMPLE)}))
    urls = [site.url("/test"), site.url("/never/test"), site.url("/ai-ok/test")]
    crawler = await crawl(TRAIN_AI, spider=ItemSpider, urls=urls, follow=False)
    spider = crawler.spider
    assert spider.crawled == [site.url("/ai-ok/test")]
    assert classes(spider) == {urls[0]: "UsageDisallowed", urls[1]: "RobotsTxtForbidden"}
    assert "Content-Usage: train-ai=n (robots.txt line 4)" in str(spider.failures[urls[0]])
    assert spider.preferences == {urls[2]: {"train-ai": True}}
    assert sorted(spider.kinds) == ["forbidden", "usage"]
    assert stat(crawler, "robotstxt/usage/disallowed") == 1
    assert stat(crawler, "robotstxt/usage/disallowed/train-ai") == 1
    assert sorted(site.paths()) == ["/ai-ok/test", "/robots.txt"], "the disallowed page was never requested"


@pytest_twisted.ensureDeferred
async def test_without_a_purpose_preferences_are_read_and_nothing_is_dropped(sites, caplog):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(ATTACH_EXAMPLE)}))
    urls = [site.url("/test"), site.url("/ai-ok/test")]
    with caplog.at_level(logging.INFO):
        crawler = await crawl(ADDON, spider=ItemSpider, urls=urls, follow=False)
    spider = crawler.spider
    assert sorted(spider.items) == sorted(urls)
    assert spider.preferences == {urls[0]: {"train-ai": False}, urls[1]: {"train-ai": True}}
    assert stat(crawler, "robotstxt/usage/disallowed") is None
    (line,) = [m for m in ours(caplog, logging.INFO) if m.startswith(f"robots.txt of {site.address}")]
    assert line.endswith("; usage preferences for /: train-ai=n"), line


@pytest_twisted.ensureDeferred
async def test_a_groups_content_signal_decides_train_ai_through_ai_train(sites):
    rules = "User-agent: *\nContent-Signal: search=yes, ai-train=no\n\nUser-agent: coccocbot\nAllow: /\n"
    other = "User-agent: coccocbot\nContent-Signal: ai-train=no\n"
    open_site, closed = sites(
        LoopbackSite(pages={"/robots.txt": robots(rules)}), LoopbackSite(pages={"/robots.txt": robots(other)})
    )
    urls = [open_site.url("/a"), closed.url("/a")]
    crawler = await crawl(TRAIN_AI, spider=ItemSpider, urls=urls, follow=False)
    assert crawler.spider.crawled == [open_site.url("/a")], "the * group's signal is not coccocbot's"
    assert classes(crawler.spider) == {closed.url("/a"): "UsageDisallowed"}


def page_with(headers: dict[str, str] | None = None, head: str = "") -> Page:
    body = f"<html><head>{head}</head><body><a href='/next'>next</a></body></html>".encode()
    return Page(body, headers={"Content-Type": "text/html", **(headers or {})})


SOURCES = {
    "content-usage-header": page_with({"Content-Usage": "train-ai=n"}),
    "content-signal-header": page_with({"Content-Signal": "ai-train=no"}),
    "tdm-reservation-header": page_with({"tdm-reservation": "1"}),
    "tdm-reservation-meta": page_with(head='<meta name="tdm-reservation" content="1">'),
    "noai-header": page_with({"X-Robots-Tag": "noai"}),
    "noai-meta": page_with(head='<meta name="robots" content="noai">'),
}


@pytest.mark.parametrize("source", SOURCES)
@pytest_twisted.ensureDeferred
async def test_a_pages_own_statement_drops_its_items_and_follows_its_links(sites, source):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nAllow: /\n"), "/": SOURCES[source]}))
    crawler = await crawl(TRAIN_AI, spider=ItemSpider, urls=[site.url("/")])
    spider = crawler.spider
    assert sorted(spider.crawled) == [site.url("/"), site.url("/next")], "its links are followed"
    assert spider.items == [site.url("/next")]
    assert spider.preferences[site.url("/")]["train-ai"] is False
    assert stat(crawler, "robotstxt/usage/items_dropped") == 1

    (annotated,) = sites(LoopbackSite(pages={"/robots.txt": robots(""), "/": SOURCES[source]}))
    crawler = await crawl(ADDON, spider=ItemSpider, urls=[annotated.url("/")])
    assert sorted(crawler.spider.items) == [annotated.url("/"), annotated.url("/next")], "no purpose: kept"
    assert crawler.spider.preferences[annotated.url("/")]["train-ai"] is False


@pytest_twisted.ensureDeferred
async def test_disallowed_links_reach_their_errbacks_or_are_dropped_before_the_queue(sites):
    rules = "User-agent: *\nContent-Usage: /ai/ train-ai=n\n"
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(rules)}, links={"/": ["/ai/1", "/ai/2", "/b"]}))
    crawler = await crawl(TRAIN_AI, spider=ItemSpider, urls=[site.url("/")])
    assert classes(crawler.spider) == dict.fromkeys([site.url("/ai/1"), site.url("/ai/2")], "UsageDisallowed")

    class NoErrbackSpider(ItemSpider):
        def parse(self, response):
            self.crawled.append(response.url)
            yield from response.follow_all(css="a")

    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(rules)}, links={"/": ["/ai/1", "/ai/2", "/b"]}))
    crawler = await crawl(TRAIN_AI, spider=NoErrbackSpider, urls=[site.url("/")])
    assert sorted(crawler.spider.crawled) == [site.url("/"), site.url("/b")]
    assert crawler.spider.kinds == ["usage", "usage"]
    assert stat(crawler, "robotstxt/usage/disallowed") == 2
    assert stat(crawler, "scheduler/enqueued") == 2, "the disallowed links never reached the scheduler"


@pytest_twisted.ensureDeferred
async def test_a_user_agent_that_hides_the_robot_name_is_warned_of_once(sites, caplog):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("")}))
    await crawl({**ADDON, "USER_AGENT": "Scrapy/2 (+https://scrapy.org)"}, urls=[site.url("/")])
    (warning,) = [m for m in ours(caplog, logging.WARNING) if "User-Agent" in m]
    assert "'coccocbot-web' (ROBOTSTXT_USER_AGENT)" in warning and "Set USER_AGENT" in warning
    caplog.clear()
    await crawl(ADDON, urls=[site.url("/")])
    assert not [m for m in ours(caplog, logging.WARNING) if "User-Agent" in m], "the test settings name the robot"


@pytest_twisted.ensureDeferred
async def test_requests_with_an_errback_yielded_before_robots_txt_is_known_are_decided_at_the_downloader(sites):
    """The first request of an origin is decided at the downloader, once robots.txt is fetched."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nContent-Usage: train-ai=n\n")}))

    class OneRequest(ItemSpider):
        async def start(self):
            async for request in super().start():
                yield request
            yield Request(site.url("/late"), errback=self.failed)

    crawler = await crawl(TRAIN_AI, spider=OneRequest, urls=[site.url("/")])
    assert classes(crawler.spider) == dict.fromkeys([site.url("/"), site.url("/late")], "UsageDisallowed")
    assert site.paths() == ["/robots.txt"]


@pytest.mark.parametrize(
    "where", ["DEFAULT_REQUEST_HEADERS", "spider"], ids=["default-request-headers", "spider-user-agent"]
)
@pytest_twisted.ensureDeferred
async def test_the_user_agent_the_crawl_really_sends_is_the_one_checked(sites, caplog, where):
    """A review: only USER_AGENT was read, though DEFAULT_REQUEST_HEADERS and a spider's user_agent win over it."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("")}))
    named = "Mozilla/5.0 (compatible; coccocbot-web/1.0)"

    class NamedSpider(RecordingSpider):
        user_agent = named if where == "spider" else None

    settings = {**ADDON, "USER_AGENT": "Scrapy/2"}
    if where == "DEFAULT_REQUEST_HEADERS":
        settings["DEFAULT_REQUEST_HEADERS"] = {"User-Agent": named}
    await crawl(settings, spider=NamedSpider, urls=[site.url("/")])
    assert not [m for m in ours(caplog, logging.WARNING) if "User-Agent" in m]
    assert site.request_headers["/"].getRawHeaders(b"User-Agent") == [named.encode()]
