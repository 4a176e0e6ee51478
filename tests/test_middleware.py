"""RobotsTxtMiddleware in real crawls against loopback sites."""

from __future__ import annotations

import logging
import time

import pytest
import pytest_twisted
from scrapy import Request, Spider, signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import deferred_from_coro

from scrapy_robots_coccoc._crawl import compat as _compat
from scrapy_robots_coccoc.exceptions import RobotsTxtForbidden

from .crawling import RecordingSpider, bounded_crawl, crawl, stat
from .sites import LoopbackSite, Page, robots

RULES = "User-agent: *\nDisallow: /private\n\nUser-agent: coccocbot-image\nDisallow: /img/\n"


def site_with(rules: str = RULES, **robots_kwargs) -> LoopbackSite:
    return LoopbackSite(
        pages={"/robots.txt": robots(rules, **robots_kwargs)},
        links={"/": ["/a", "/b", "/private/x", "/img/1.png"]},
    )


@pytest_twisted.ensureDeferred
async def test_rules_decide_and_robotstxt_is_fetched_once(sites):
    (site,) = sites(site_with())
    crawler = await crawl(urls=[site.url("/")])
    spider = crawler.spider
    assert sorted(spider.crawled) == sorted(site.url(p) for p in ("/", "/a", "/b", "/img/1.png"))
    assert isinstance(spider.failures[site.url("/private/x")], IgnoreRequest)
    assert site.paths().count("/robots.txt") == 1
    assert site.paths()[0] == "/robots.txt"
    assert stat(crawler, "robotstxt/forbidden") == 1
    assert stat(crawler, "robotstxt/response_status_count/200") == 1


@pytest_twisted.ensureDeferred
async def test_thirty_requests_in_flight_share_one_fetch_and_all_get_the_rules(sites):
    (site,) = sites(site_with(delay=0.5))
    urls = [site.url(f"/private/{i}") for i in range(15)] + [site.url(f"/page/{i}") for i in range(15)]
    crawler = await crawl({"CONCURRENT_REQUESTS": 32, "CONCURRENT_REQUESTS_PER_DOMAIN": 32}, urls=urls, follow=False)
    assert site.paths().count("/robots.txt") == 1
    assert len(crawler.spider.failures) == 15
    assert all("/private/" in url for url in crawler.spider.failures)
    assert len(crawler.spider.crawled) == 15
    assert stat(crawler, "robotstxt/request_count") == 1


@pytest_twisted.ensureDeferred
async def test_dont_obey_robotstxt_skips_the_fetch(sites):
    (site,) = sites(site_with())
    crawler = await crawl(urls=[site.url("/private/x")], follow=False, meta={"dont_obey_robotstxt": True})
    assert crawler.spider.crawled == [site.url("/private/x")]
    assert "/robots.txt" not in site.paths()


@pytest_twisted.ensureDeferred
async def test_request_meta_agent_overrides(sites):
    (site,) = sites(site_with())
    crawler = await crawl(urls=[site.url("/img/1.png"), site.url("/img/2.png")], follow=False)
    assert len(crawler.spider.crawled) == 2
    crawler = await crawl(urls=[site.url("/img/1.png")], follow=False, meta={"robotstxt_user_agent": "coccocbot-image"})
    assert crawler.spider.crawled == [] and stat(crawler, "robotstxt/forbidden") == 1


@pytest_twisted.ensureDeferred
async def test_redirects_followed_across_hosts_up_to_five_hops(sites):
    target, hops = sites(site_with(), LoopbackSite())
    # robots.txt -> /r1 -> ... -> /r4 -> other host's robots.txt: 5 hops.
    hops.pages["/robots.txt"] = Page(status=301, headers={"Location": "/r1"})
    for i in range(1, 4):
        hops.pages[f"/r{i}"] = Page(status=302, headers={"Location": f"/r{i + 1}"})
    hops.pages["/r4"] = Page(status=307, headers={"Location": target.url("/robots.txt")})
    crawler = await crawl({"REDIRECT_MAX_TIMES": 1}, urls=[hops.url("/private/x"), hops.url("/ok")], follow=False)
    assert crawler.spider.crawled == [hops.url("/ok")]
    assert stat(crawler, "robotstxt/redirect_count") == 5

    hops.pages["/r4"] = Page(status=302, headers={"Location": "/r5"})
    hops.pages["/r5"] = Page(status=302, headers={"Location": target.url("/robots.txt")})
    crawler = await crawl(urls=[hops.url("/private/x")], follow=False)
    assert crawler.spider.crawled == [hops.url("/private/x")]  # past 5 hops: unrestricted


@pytest_twisted.ensureDeferred
async def test_non_200_answers_mean_unrestricted(sites):
    missing, broken = sites(site_with(), site_with())
    missing.pages["/robots.txt"] = Page(b"nope", status=404)
    broken.pages["/robots.txt"] = Page(b"oops", status=503)
    urls = [missing.url("/private/x"), broken.url("/private/x")]
    crawler = await crawl(urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls)
    assert stat(crawler, "robotstxt/response_status_count/404") == 1


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
async def test_rules_are_refetched_after_cache_seconds(sites):
    (site,) = sites(site_with())
    site.links = {f"/p{i}": [f"/p{i + 1}"] for i in range(6)}
    crawler = await crawl({"ROBOTSTXT_CACHE_SECONDS": 0.3, "DOWNLOAD_DELAY": 0.2}, urls=[site.url("/p0")])
    assert len(crawler.spider.crawled) == 7
    assert site.paths().count("/robots.txt") >= 2
    assert stat(crawler, "robotstxt/refresh_count") >= 1


@pytest_twisted.ensureDeferred
async def test_huge_robotstxt_is_cut_at_500_kib(sites):
    body = "User-agent: *\nDisallow: /private\n" + "# filler\n" * 1_200_000  # ~10 MB
    (site,) = sites(site_with(body))
    crawler = await crawl(urls=[site.url("/private/x"), site.url("/a")], follow=False)
    assert crawler.spider.crawled == [site.url("/a")]
    assert stat(crawler, "robotstxt/truncated") == 1
    # Asked uncompressed, so that the cut applies to the text.
    assert site.request_headers["/robots.txt"].getRawHeaders("accept-encoding") == ["identity"]


@pytest_twisted.ensureDeferred
async def test_slow_robotstxt_does_not_block_other_sites(sites):
    slow, *fast = sites(site_with(delay=2), *(site_with() for _ in range(3)))
    urls = [slow.url(f"/s{i}") for i in range(8)] + [s.url(f"/f{i}") for s in fast for i in range(4)]
    crawler = await crawl({"CONCURRENT_REQUESTS": 4}, urls=urls, follow=False)
    assert len(crawler.spider.crawled) == len(urls)
    slow_answered = slow.requests_for("/robots.txt")[0] + 2
    assert all(t < slow_answered for s in fast for t, _ in s.log)


@pytest_twisted.ensureDeferred
async def test_parser_backend_works_with_scrapys_own_middleware(sites):
    (site,) = sites(site_with("User-agent: coccocbot\nDisallow: /private\nAllow: /private/ok\n"))
    settings = {
        "DOWNLOADER_MIDDLEWARES": {},
        "ROBOTSTXT_PARSER": "scrapy_robots_coccoc.CocCocRobotParser",
    }
    urls = [site.url("/private/x"), site.url("/private/ok/1"), site.url("/a")]
    crawler = await crawl(settings, urls=urls, follow=False)
    assert sorted(crawler.spider.crawled) == sorted(urls[1:])
    assert stat(crawler, "robotstxt/forbidden") == 1


@pytest_twisted.ensureDeferred
async def test_the_parser_backend_warns_where_scrapys_middleware_lets_waiting_requests_through(sites, caplog):
    """Scrapy 2.14-2.19's own middleware gives the parser to the first request
    waiting for robots.txt only: the warning is logged exactly where a
    Disallow: / site's pages get through."""
    (site,) = sites(site_with("User-agent: *\nDisallow: /\n"))
    settings = {"DOWNLOADER_MIDDLEWARES": {}, "ROBOTSTXT_PARSER": "scrapy_robots_coccoc.CocCocRobotParser"}
    crawler = await crawl(settings, urls=[site.url(f"/d{i}") for i in range(6)], follow=False)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "unchecked" in r.getMessage()]
    assert len(warned) == (1 if crawler.spider.crawled else 0), crawler.spider.crawled


@pytest_twisted.ensureDeferred
async def test_requests_waiting_at_close_come_back_with_a_persistent_scheduler(sites, tmp_path):
    (site,) = sites(LoopbackSite(pages={"/robots.txt": [robots(RULES, delay=1.5), robots(RULES)]}))
    urls = [site.url(f"/page/{i}") for i in range(6)] + [site.url("/private/x")]
    settings = {"JOBDIR": str(tmp_path / "job"), "CLOSESPIDER_TIMEOUT": 0.5}
    first = await crawl(settings, urls=urls, follow=False)
    # Closed while every request waited for robots.txt: none was lost.
    assert first.spider.crawled == [] and first.spider.failures == {}
    assert stat(first, "robotstxt/rescheduled_on_close") == len(urls)
    second = await crawl({"JOBDIR": settings["JOBDIR"]}, urls=[], follow=False)
    assert sorted(second.spider.crawled) == sorted(urls[:-1])
    assert list(second.spider.failures) == [site.url("/private/x")]


class FilteredSpider(RecordingSpider):
    """Requests as Scrapy makes them by default: through the filters."""

    allowed_domains = ["127.0.0.2"]

    async def start(self):
        for url in self.urls:
            yield Request(url, errback=self.failed)


@pytest_twisted.ensureDeferred
async def test_requests_sent_back_at_close_come_back_filtered_as_before(sites, tmp_path):
    """A request sent back kept the dont_filter=True that let it through the
    scheduler again: after a resume its redirects passed the duplicate and
    offsite filters (a page downloaded 5 times, pages of another site)."""
    site, other = sites(
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.5\n")}),
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow:\n")}),
    )
    for index in range(4):
        site.pages[f"/old/{index}"] = Page(b"", status=301, headers={"Location": "/new"})
        site.pages[f"/out/{index}"] = Page(b"", status=302, headers={"Location": other.url(f"/landing/{index}")})
    urls = [site.url("/new"), *(site.url(f"/{kind}/{i}") for kind in ("old", "out") for i in range(4))]
    settings = {"JOBDIR": str(tmp_path / "job"), "DOWNLOAD_DELAY_JITTER": 0}
    first = await crawl({**settings, "CLOSESPIDER_TIMEOUT": 1.2}, spider=FilteredSpider, urls=urls, follow=False)
    assert stat(first, "robotstxt/rescheduled_on_close")
    second = await crawl(settings, spider=FilteredSpider, urls=[], follow=False)
    assert [*first.spider.crawled, *second.spider.crawled] == [site.url("/new")]
    assert other.paths() == []


class LatinAgentSpider(RecordingSpider):
    async def start(self):
        for url in self.urls:
            yield Request(url, headers={"User-Agent": b"caf\xe9bot/1.0"}, errback=self.failed)


@pytest_twisted.ensureDeferred
async def test_a_user_agent_header_of_any_bytes_is_decided(sites):
    """Not UTF-8, it failed every request with a UnicodeDecodeError."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /private\n")}))
    urls = [site.url("/a"), site.url("/private/x")]
    crawler = await crawl({"ROBOTSTXT_USER_AGENT": None}, spider=LatinAgentSpider, urls=urls, follow=False)
    assert crawler.spider.crawled == [urls[0]]
    assert isinstance(crawler.spider.failures[urls[1]], RobotsTxtForbidden)


@pytest_twisted.ensureDeferred
async def test_robotstxt_is_not_tried_again_once_the_spider_closed(sites, caplog):
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(RULES, delay=30)}))
    settings = {"CLOSESPIDER_TIMEOUT": 0.5, "DOWNLOAD_TIMEOUT": 1, "ROBOTSTXT_MAX_RETRIES": 1}
    crawler = await bounded_crawl(settings, urls=[site.url("/a")], follow=False, timeout=10)
    await deferLater(reactor, 1.5, lambda: None)  # a retry would have come and failed by now
    assert site.paths() == ["/robots.txt"]
    assert stat(crawler, "robotstxt/request_count") == 1
    assert stat(crawler, "robotstxt/rescheduled_on_close") == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest_twisted.ensureDeferred
async def test_a_fetch_stopped_by_the_close_sends_its_waiters_back_to_the_scheduler(sites, tmp_path, monkeypatch):
    """The fetch sees the close (its attempt timed out) before the watcher of
    waiting requests does: the waiters got a fault and were lost to JOBDIR."""
    from scrapy_robots_coccoc._crawl.parking import Parking

    monkeypatch.setattr(Parking, "WATCH_SECONDS", 5.0)
    (site,) = sites(LoopbackSite(pages={"/robots.txt": [robots(RULES, delay=3), robots(RULES)]}))
    urls = [site.url(f"/page/{i}") for i in range(3)]
    settings = {
        "JOBDIR": str(tmp_path / "job"),
        "CLOSESPIDER_TIMEOUT": 0.3,
        "DOWNLOAD_TIMEOUT": 0.5,
        "ROBOTSTXT_MAX_RETRIES": 3,
    }
    first = await bounded_crawl(settings, urls=urls, follow=False, timeout=10)
    assert first.spider.failures == {}
    assert stat(first, "robotstxt/rescheduled_on_close") == len(urls)
    assert stat(first, "robotstxt/request_count") == 1
    second = await crawl({"JOBDIR": settings["JOBDIR"]}, urls=[], follow=False)
    assert sorted(second.spider.crawled) == sorted(urls)


@pytest_twisted.ensureDeferred
async def test_a_paced_crawl_closes_about_as_fast_as_stock_scrapy(sites):
    ours_site, stock_site = sites(
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.4\n")}),
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /nothing\n")}),
    )
    close = {"CLOSESPIDER_TIMEOUT": 1, "DOWNLOAD_DELAY_JITTER": 0}
    start = time.monotonic()
    await crawl(close, urls=[ours_site.url(f"/p{i}") for i in range(40)], follow=False)
    ours = time.monotonic() - start
    stock = {**close, "DOWNLOADER_MIDDLEWARES": {}, "DOWNLOAD_DELAY": 0.4}
    start = time.monotonic()
    await crawl(stock, urls=[stock_site.url(f"/p{i}") for i in range(40)], follow=False)
    baseline = time.monotonic() - start
    assert ours <= 1.5 * baseline + 0.3, (ours, baseline)
    assert len(ours_site.paths()) < 41  # closed early, not crawled to the end


@pytest_twisted.ensureDeferred
async def test_requests_waiting_in_place_for_their_turn_leave_at_close_too(sites):
    ours_site, stock_site = sites(
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 1\n")}),
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /nothing\n")}),
    )
    # Two places, one parked request at most: the others wait in place.
    close = {"CLOSESPIDER_TIMEOUT": 1, "CONCURRENT_REQUESTS": 2, "DOWNLOAD_DELAY_JITTER": 0}
    start = time.monotonic()
    urls = [ours_site.url(f"/p{i}") for i in range(20)]
    ours = await crawl({**close, "ROBOTSTXT_MAX_PARKED_REQUESTS": 1}, urls=urls, follow=False)
    ours_seconds = time.monotonic() - start
    start = time.monotonic()
    stock = {**close, "DOWNLOADER_MIDDLEWARES": {}, "DOWNLOAD_DELAY": 1}
    await crawl(stock, urls=[stock_site.url(f"/p{i}") for i in range(20)], follow=False)
    assert ours_seconds <= 1.5 * (time.monotonic() - start) + 0.3
    assert stat(ours, "robotstxt/rescheduled_on_close") >= 1


class FileSpider(Spider):
    """Has ``files`` downloaded by Scrapy's FilesPipeline, which downloads
    outside the scheduler (``engine.download``)."""

    name = "files"

    def __init__(self, page: str, files: list[str], **kwargs) -> None:
        super().__init__(**kwargs)
        self.page, self.files = page, files

    async def start(self):
        yield Request(self.page)

    def parse(self, response):
        yield {"file_urls": self.files}


@pytest_twisted.ensureDeferred
async def test_a_crawl_closing_while_a_media_pipeline_waits_for_crawl_delay_ends(sites, tmp_path):
    """A request returned at close comes straight back when it was not the
    scheduler's: returned again and again, it kept the crawl open for ever."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 1\n")}))
    settings = {
        "ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1},
        "FILES_STORE": str(tmp_path),
        "CLOSESPIDER_TIMEOUT": 1.5,
        "DOWNLOAD_DELAY_JITTER": 0,
    }
    files = [site.url(f"/f{i}.bin") for i in range(6)]
    crawler = await bounded_crawl(settings, FileSpider, timeout=10, page=site.url("/index"), files=files)
    dropped = stat(crawler, "robotstxt/dropped_on_close")
    assert dropped and dropped == stat(crawler, "robotstxt/rescheduled_on_close")
    assert dropped + len(site.paths()) == 2 + len(files)  # robots.txt, the page, each file once
    assert min(site.gaps()) >= 0.95


class OpeningDownloadSpider(RecordingSpider):
    """Downloads ``opening_url`` outside the scheduler when the spider opens,
    before the engine runs (as an extension fetching a token would)."""

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.opened, signal=signals.spider_opened)
        return spider

    def opened(self, spider):
        request = Request(self.opening_url, dont_filter=True)
        self.opening = deferred_from_coro(_compat.download(self.crawler.engine, request))
        self.opening.addBoth(lambda result: setattr(self, "opened_with", result))


@pytest_twisted.ensureDeferred
async def test_a_download_started_as_the_spider_opens_is_not_taken_for_a_closing_one(sites):
    (site,) = sites(site_with())
    crawler = await bounded_crawl(
        spider=OpeningDownloadSpider, urls=[site.url("/a")], follow=False, opening_url=site.url("/token")
    )
    assert getattr(crawler.spider.opened_with, "status", None) == 200, crawler.spider.opened_with
    assert stat(crawler, "robotstxt/rescheduled_on_close") is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ROBOTSTXT_MAX_REDIRECTS", -1),
        ("ROBOTSTXT_MAX_RETRIES", 1.5),
        ("ROBOTSTXT_MAX_CRAWL_DELAY", "nan"),
        ("ROBOTSTXT_MAX_CRAWL_DELAY", -1),
        ("ROBOTSTXT_CACHE_SECONDS", "a day"),
        ("ROBOTSTXT_STORE_TIMEOUT", 0),
        ("ROBOTSTXT_MAX_ORIGINS", 0),
        ("ROBOTSTXT_MAX_ORIGINS_MB", "nan"),
        ("ROBOTSTXT_MAX_PARKED_REQUESTS", "many"),
        ("ROBOTSTXT_CACHE_SECONDS", True),
        # Not a name: to_unicode() failed on every request of the crawl.
        ("ROBOTSTXT_USER_AGENT", 2024),
    ],
)
@pytest_twisted.ensureDeferred
async def test_a_setting_that_makes_no_sense_stops_the_crawl_at_start(sites, name, value):
    (site,) = sites(site_with())
    with pytest.raises(ValueError, match=name):
        await crawl({name: value}, urls=[site.url("/")])
    assert site.paths() == []


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
