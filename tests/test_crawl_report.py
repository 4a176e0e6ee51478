"""What a crawl says about robots.txt: the line per origin, the signal and
DEBUG line per dropped request, the close WARNING when robots.txt forbade
everything, and the robots.txt request counted as the site's first."""

from __future__ import annotations

import logging

import pytest_twisted
from scrapy import Request

from scrapy_robots_coccoc.exceptions import OriginUnavailable, RobotsTxtForbidden
from scrapy_robots_coccoc.signals import robotstxt_request_dropped

from .crawling import RecordingSpider, crawl
from .sites import LoopbackSite, Page, robots

MIXED = "User-agent: *\nDisallow: /private\n\nUser-agent: coccocbot\nCrawl-delay: 0.3\nDisallow: /secret\n"


def messages(caplog, level: int = logging.INFO) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno == level]


class DroppedSpider(RecordingSpider):
    """Records what robotstxt_request_dropped says."""

    async def start(self):
        self.dropped = []

        def dropped(request, kind, reason, **kwargs):
            self.dropped.append((request.url, kind, type(reason)))

        self.crawler.signals.connect(dropped, signal=robotstxt_request_dropped, weak=False)
        async for request in super().start():
            yield request


@pytest_twisted.ensureDeferred
async def test_the_log_says_which_group_the_robot_obeys_and_the_delay_enforced(sites, caplog):
    """Issue 27, finding 3: with a '*' group disallowing /private and a group
    for the robot holding only Crawl-delay and Disallow: /secret, /private/x
    was crawled (correctly) and nothing in the log said why."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots(MIXED + "Sitemap: /s.xml\n")}))
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    crawler = await crawl(urls=[site.url("/private/x"), site.url("/b")], follow=False)
    assert sorted(crawler.spider.crawled) == [site.url("/b"), site.url("/private/x")]
    lines = [line for line in messages(caplog) if line.startswith("robots.txt of ")]
    assert lines == [
        f"robots.txt of {site.url('')}: 'coccocbot-web' obeys group 'coccocbot' (1 rule); Crawl-delay 0.3 s; "
        "1 sitemap listed"
    ]


@pytest_twisted.ensureDeferred
async def test_the_log_says_when_no_group_applies_and_names_a_capped_delay(sites, caplog):
    (free, capped) = sites(
        LoopbackSite(pages={"/robots.txt": robots("User-agent: otherbot\nDisallow: /\n")}),
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 30\n")}),
    )
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    await crawl({"ROBOTSTXT_MAX_CRAWL_DELAY": 0.2}, urls=[free.url("/"), capped.url("/")], follow=False)
    lines = sorted(line for line in messages(caplog) if line.startswith("robots.txt of "))
    assert lines == sorted(
        [
            f"robots.txt of {free.url('')}: no group for 'coccocbot-web' and no '*' group: everything allowed; "
            "Crawl-delay none; 0 sitemaps listed",
            f"robots.txt of {capped.url('')}: 'coccocbot-web' obeys group '*' (0 rules); "
            "Crawl-delay 0.2 s (asked 30.0 s, capped by ROBOTSTXT_MAX_CRAWL_DELAY); 0 sitemaps listed",
        ]
    )


@pytest_twisted.ensureDeferred
async def test_every_dropped_request_is_signalled_and_logged_at_debug(sites, caplog):
    """Issue 27, finding 8: requests dropped because their origin is
    unavailable left no per-request DEBUG line (forbidden ones did), and no
    signal told a spider or extension of any drop."""
    forbidding, silent = sites(
        LoopbackSite(pages={"/robots.txt": robots(MIXED)}),
        LoopbackSite(pages={"/robots.txt": Page(b"", delay=10)}),
    )
    caplog.set_level(logging.DEBUG, logger="scrapy_robots_coccoc")
    urls = [forbidding.url("/secret/1"), silent.url("/a")]
    crawler = await crawl({"DOWNLOAD_TIMEOUT": 0.5, "ROBOTSTXT_MAX_RETRIES": 0}, spider=DroppedSpider, urls=urls)
    assert sorted(crawler.spider.dropped) == sorted(
        [
            (forbidding.url("/secret/1"), "forbidden", RobotsTxtForbidden),
            (silent.url("/a"), "unavailable", OriginUnavailable),
        ]
    )
    debug = messages(caplog, logging.DEBUG)
    assert f"Forbidden by robots.txt (group 'coccocbot', Disallow: /secret (line 6)): <GET {urls[0]}>" in debug
    assert any(line.startswith("Dropped (robots.txt of ") and line.endswith(f"<GET {urls[1]}>") for line in debug), (
        debug
    )


@pytest_twisted.ensureDeferred
async def test_a_crawl_whose_start_requests_are_all_forbidden_says_so_at_close(sites, caplog):
    """Issue 27, finding 9: a crawl whose start requests were all forbidden
    ended like any other, 'finished', with no WARNING."""
    closed, open_ = sites(
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /\n")}),
        LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /private\n")}),
    )
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    await crawl(urls=[closed.url("/"), closed.url("/a")], follow=False)
    (warning,) = messages(caplog, logging.WARNING)
    assert warning.startswith(f"robots.txt forbade every request the spider made to 1 origin: {closed.url('')} (2). ")
    assert "Every start request (2) was forbidden, so nothing was crawled from them." in warning

    caplog.clear()
    await crawl(urls=[closed.url("/"), open_.url("/"), open_.url("/private")], follow=False)
    (warning,) = messages(caplog, logging.WARNING)
    assert f"to 1 origin: {closed.url('')} (1). See" in warning, "another origin was crawled: no start-request line"


class PagesAfterRobots(RecordingSpider):
    def parse(self, response):
        self.crawled.append(response.url)
        yield Request(response.urljoin("/next"), callback=self.parse_next)

    def parse_next(self, response):
        self.crawled.append(response.url)


@pytest_twisted.ensureDeferred
async def test_the_first_page_waits_the_crawl_delay_after_the_robotstxt_request(sites):
    """Issue 27, finding 5: with Crawl-delay: 1 the first page left 3-4 ms
    after the robots.txt fetch: two hits within a second of a site that
    asked for one second."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.6\n")}))
    crawler = await crawl(spider=PagesAfterRobots, urls=[site.url("/")], follow=False)
    assert crawler.spider.crawled == [site.url("/"), site.url("/next")]
    (fetched,) = site.requests_for("/robots.txt")
    (first,) = site.requests_for("/")
    assert first - fetched >= 0.57, first - fetched
    assert min(site.gaps()) >= 0.57


@pytest_twisted.ensureDeferred
async def test_a_failed_fetch_is_one_readable_line_in_the_log(caplog):
    """Issue 27, finding 8: an https URL of a plain-HTTP site logged
    ``DownloadFailedError: [<twisted.python.failure.Failure OpenSSL.SSL.Error:
    [('SSL routines', '', 'wrong version number')]>]``."""
    from twisted.internet import protocol, reactor

    class PlainAnswer(protocol.Protocol):
        def connectionMade(self):
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            self.transport.loseConnection()

    port = reactor.listenTCP(0, protocol.Factory.forProtocol(PlainAnswer), interface="127.0.0.40")
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    https = f"https://127.0.0.40:{port.getHost().port}/"
    try:
        await crawl({"ROBOTSTXT_MAX_RETRIES": 0}, urls=[https], follow=False)
    finally:
        await port.stopListening()
    (warning,) = [line for line in messages(caplog, logging.WARNING) if line.startswith("robots.txt of https://")]
    assert "Failure" not in warning and "<" not in warning, warning
    assert "wrong version number" in warning, warning


@pytest_twisted.ensureDeferred
async def test_the_log_names_a_download_delay_that_spaces_requests_more_than_the_crawl_delay(sites, caplog):
    """Issue 27: the line gives the Crawl-delay actually enforced, after the project's DOWNLOAD_DELAY (the
    startproject template's DOWNLOAD_DELAY = 1 makes Crawl-delay: 1 give 1.5 s gaps)."""
    (site,) = sites(LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nCrawl-delay: 0.2\n")}))
    caplog.set_level(logging.INFO, logger="scrapy_robots_coccoc")
    await crawl({"DOWNLOAD_DELAY": 0.4}, urls=[site.url("/")], follow=False)
    (line,) = [line for line in messages(caplog) if line.startswith("robots.txt of ")]
    assert "Crawl-delay 0.2 s, requests 0.6 s apart: DOWNLOAD_DELAY at its longest draw is larger;" in line, line
