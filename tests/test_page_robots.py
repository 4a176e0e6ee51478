"""Page-level robots (ROBOTSTXT_PAGE_ROBOTS): the directives of X-Robots-Tag headers and robots <meta> tags, in
Google's documented syntax, exposed in response.meta["robots_directives"]; a nofollow page's links not followed."""

from __future__ import annotations

import calendar
import logging
import time

import pytest
import pytest_twisted

from scrapy_robots_coccoc._parser.pagerobots import header_directives, meta_directives, page_directives

from .crawling import RecordingSpider, crawl, stat
from .sites import LoopbackSite, Page, robots

BOT = "coccocbot-web"  # the crawl's robot: ROBOTSTXT_USER_AGENT in tests.crawling.SETTINGS
NOW = calendar.timegm((2024, 6, 1, 12, 0, 0))
PAGE_ROBOTS = {
    "SPIDER_MIDDLEWARES": {"scrapy_robots_coccoc.RobotsTxtSpiderMiddleware": 100},
    "ROBOTSTXT_PAGE_ROBOTS": True,
}


def head(*tags: str) -> bytes:
    return f"<!DOCTYPE html><html><head><title>t</title>{''.join(tags)}</head><body>text</body></html>".encode()


# -- the parser, on Google's documented examples ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "robot", "expected"),
    [
        ('<meta name="robots" content="noindex">', BOT, {"noindex"}),
        ('<meta name="robots" content="noindex, nofollow">', BOT, {"noindex", "nofollow"}),
        ('<meta name="googlebot" content="nofollow">', "googlebot", {"nofollow"}),
        ('<meta name="googlebot" content="nofollow">', BOT, set()),
        ('<meta name="googlebot-news" content="nosnippet">', "googlebot", set()),
        ('<meta name="robots" content="none">', BOT, {"noindex", "nofollow"}),
        ('<meta name="robots" content="all">', BOT, set()),
        ('<meta name="robots" content="index, follow">', BOT, set()),
        (
            '<meta name="robots" content="max-snippet:20, max-image-preview:large">',
            BOT,
            {"max-snippet", "max-image-preview"},
        ),
        ('<META NAME="ROBOTS" CONTENT="NoIndex, NOFOLLOW">', BOT, {"noindex", "nofollow"}),
        ('<meta name="CocCocBot-Web" content="noarchive">', BOT, {"noarchive"}),
        # Google: "the robots meta tag and a robot-specific one combine"; the union applies.
        (
            '<meta name="robots" content="nofollow"><meta name="coccocbot-web" content="noindex">',
            BOT,
            {"nofollow", "noindex"},
        ),
        ("<meta content='noindex' name='robots' />", BOT, {"noindex"}),
        ("<meta name=robots content=nofollow>", BOT, {"nofollow"}),
        ('<meta name="robots" content="noindex&#44; nofollow">', BOT, {"noindex", "nofollow"}),
        ('<meta name="robots" content="noindex nofollow">', BOT, {"noindex", "nofollow"}),
        ('<meta name="description" content="noindex">', BOT, set()),
        ('<meta property="robots" content="noindex">', BOT, set()),
        ('<meta name="robots">', BOT, set()),
        ('<meta name="robots" name="description" content="nofollow">', BOT, {"nofollow"}),
    ],
)
def test_meta_tags(tags, robot, expected):
    assert meta_directives(head(tags), robot, NOW) == expected


def test_meta_tags_are_read_from_the_head_only():
    hidden = "<!-- <meta name=robots content=nofollow> --><script>'<meta name=robots content=nofollow>'</script>"
    assert meta_directives(head(hidden, "<meta name=robots content=noarchive>"), BOT, NOW) == {"noarchive"}
    after = b"<html><head></head><body><meta name=robots content=nofollow></body></html>"
    assert meta_directives(after, BOT, NOW) == set(), "after </head>"
    assert meta_directives(b"<html><body><meta name=robots content=nofollow>", BOT, NOW) == set(), "after <body>"
    assert meta_directives(b"<metadata name=robots content=nofollow>", BOT, NOW) == set(), "another tag"
    assert meta_directives(b"<meta name=robots content=nofollow>", BOT, NOW) == {"nofollow"}, "no head written"
    far = b"<html><head>" + b" " * 70_000 + b"<meta name=robots content=nofollow></head>"
    assert meta_directives(far, BOT, NOW) == set(), "past the first 64 KiB"


@pytest.mark.parametrize(
    ("values", "robot", "expected"),
    [
        ([b"noindex"], BOT, {"noindex"}),
        ([b"noarchive, nosnippet"], BOT, {"noarchive", "nosnippet"}),
        # Google's example: each robot its own header.
        ([b"googlebot: nofollow", b"otherbot: noindex, nofollow"], "googlebot", {"nofollow"}),
        ([b"googlebot: nofollow", b"otherbot: noindex, nofollow"], "otherbot", {"noindex", "nofollow"}),
        ([b"googlebot: nofollow", b"otherbot: noindex, nofollow"], BOT, set()),
        ([b"coccocbot-web: nofollow", b"noarchive"], BOT, {"nofollow", "noarchive"}),
        ([b"CocCocBot-Web: NOFOLLOW"], BOT, {"nofollow"}),
        ([b"otherbot: noindex, coccocbot-web: nofollow"], BOT, {"nofollow"}),
        ([b"none"], BOT, {"noindex", "nofollow"}),
        ([b"all"], BOT, set()),
        (["max-snippet: 20, noimageindex"], BOT, {"max-snippet", "noimageindex"}),
        ([], BOT, set()),
    ],
)
def test_x_robots_tag(values, robot, expected):
    assert header_directives(values, robot, NOW) == expected


@pytest.mark.parametrize(
    "date",
    [
        "25 Jun 2010 15:00:00 PST",  # Google's X-Robots-Tag example
        "25-Aug-2007 15:00:00 EST",  # RFC 850 without the weekday, Google's first example
        "Saturday, 25-Jun-10 15:00:00 GMT",  # RFC 850: its comma is not a separator
        "Sat, 25 Jun 2010 15:00:00 GMT",  # RFC 822
        "2020-09-21",  # ISO 8601, Google's meta example
        "2024-06-01T11:59:59Z",
        "2024-06-01T13:59:59+02:00",
    ],
)
def test_unavailable_after_a_passed_date_is_noindex(date):
    expected = {"unavailable_after", "noindex"}
    assert header_directives([f"unavailable_after: {date}"], BOT, NOW) == expected
    assert header_directives([f"coccocbot-web: unavailable_after: {date}, nofollow"], BOT, NOW) == expected | {
        "nofollow"
    }
    assert meta_directives(head(f'<meta name="robots" content="unavailable_after: {date}">'), BOT, NOW) == expected


@pytest.mark.parametrize(
    "date", ["25 Jun 2030 15:00:00 PST", "Saturday, 25-Jun-30 15:00:00 GMT", "2024-06-01T12:00:01Z", "tomorrow", ""]
)
def test_unavailable_after_a_coming_or_unreadable_date_is_nothing(date):
    assert header_directives([f"unavailable_after: {date}, noarchive"], BOT, NOW) == {"noarchive"}
    assert meta_directives(head(f'<meta name="robots" content="unavailable_after: {date}">'), BOT, NOW) == set()


def test_headers_and_meta_tags_combine():
    body = head('<meta name="robots" content="noindex">')
    assert page_directives([b"coccocbot-web: nofollow"], body, BOT, NOW) == {"noindex", "nofollow"}
    assert page_directives([b"noarchive"], None, BOT, NOW) == {"noarchive"}


@pytest.mark.parametrize(
    "unit",
    [
        b"<meta ",  # the brief's hostile body: a tag that never ends
        b"<meta>",
        b"<meta name=robots content=nofollow>",
        b"<meta name name name ",
        b"<",
        b"<!---->",
        b"<script></script>",
        b"<metax",
    ],
)
def test_a_hostile_body_stays_fast(unit):
    """10 MB of one unit: the head read is bounded (64 KiB, 500 tags, 100 directives) and every search is
    bytes.find or a regex without backtracking; each stays under 2 ms here (about 10 ms on a slow CI)."""
    body = unit * (10 * 1024 * 1024 // len(unit))
    best = min(_timed(lambda: meta_directives(body, BOT, NOW)) for _ in range(5))
    assert best < 0.05, f"{best * 1000:.1f} ms"


def test_hostile_headers_stay_fast():
    values = [b"," * 1_000_000, b"bot: " * 200_000, b"noindex " * 100_000]
    best = min(_timed(lambda: header_directives(values, BOT, NOW)) for _ in range(5))
    assert best < 0.05, f"{best * 1000:.1f} ms"


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


# -- real crawls ------------------------------------------------------------------------------------------------


def html_page(*tags: str, links: tuple[str, ...] = ("/a", "/b"), headers: dict[str, str] | None = None) -> Page:
    hrefs = "".join(f'<a href="{link}">{link}</a>' for link in links)
    body = f"<html><head>{''.join(tags)}</head><body>{hrefs}</body></html>".encode()
    return Page(body, headers={"Content-Type": "text/html; charset=utf-8", **(headers or {})})


def site(home: Page) -> LoopbackSite:
    return LoopbackSite(pages={"/robots.txt": robots("User-agent: *\nDisallow: /private\n"), "/": home})


class DirectivesSpider(RecordingSpider):
    """Records response.meta["robots_directives"] as the callback sees it, and yields an item per page."""

    def parse(self, response):
        self.seen = getattr(self, "seen", {})
        self.seen[response.url] = response.meta.get("robots_directives", "absent")
        yield {"url": response.url}
        yield from super().parse(response)


@pytest_twisted.ensureDeferred
async def test_the_links_of_a_nofollow_page_are_not_followed(sites, caplog):
    caplog.set_level(logging.DEBUG, logger="scrapy_robots_coccoc")
    (nofollow,) = sites(site(html_page('<meta name="robots" content="nofollow">')))
    crawler = await crawl(PAGE_ROBOTS, spider=DirectivesSpider, urls=[nofollow.url("/")])
    assert crawler.spider.crawled == [nofollow.url("/")]
    assert nofollow.paths() == ["/robots.txt", "/"]
    assert stat(crawler, "robotstxt/page/nofollow_dropped") == 2
    assert stat(crawler, "item_scraped_count") == 1, "items pass"
    dropped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Dropped (nofollow")]
    assert dropped == [f"Dropped (nofollow: {nofollow.url('/')}): <GET {nofollow.url(p)}>" for p in ("/a", "/b")]


@pytest_twisted.ensureDeferred
async def test_the_robots_name_and_x_robots_tag_say_nofollow_too(sites):
    text = b'<meta name=robots content=nofollow><a href="/a">a</a> <a href="/b">b</a>'
    by_name, by_header, prefixed, text_page = sites(
        site(html_page('<meta name="coccocbot-web" content="noindex, nofollow">')),
        site(html_page(headers={"X-Robots-Tag": "none"})),
        site(html_page(headers={"X-Robots-Tag": "CocCocBot-Web: nofollow"})),
        site(Page(text, headers={"Content-Type": "text/plain", "X-Robots-Tag": "nofollow"})),
    )
    for page in (by_name, by_header, prefixed, text_page):
        crawler = await crawl(PAGE_ROBOTS, urls=[page.url("/")])
        assert crawler.spider.crawled == [page.url("/")], page.pages["/"]
        assert page.paths() == ["/robots.txt", "/"]
        assert stat(crawler, "robotstxt/page/nofollow_dropped") == 2


@pytest_twisted.ensureDeferred
async def test_meta_tags_are_read_from_html_only(sites):
    text = b'<meta name=robots content=nofollow><a href="/a">a</a> <a href="/b">b</a>'
    (page,) = sites(site(Page(text, headers={"Content-Type": "text/plain"})))
    crawler = await crawl(PAGE_ROBOTS, spider=DirectivesSpider, urls=[page.url("/")])
    assert sorted(crawler.spider.crawled) == [page.url(p) for p in ("/", "/a", "/b")]
    assert crawler.spider.seen[page.url("/")] == set()


@pytest_twisted.ensureDeferred
async def test_a_nofollow_for_another_robot_is_followed(sites):
    other_meta, other_header = sites(
        site(html_page('<meta name="googlebot" content="nofollow">')),
        site(html_page(headers={"X-Robots-Tag": "googlebot: nofollow"})),
    )
    for page in (other_meta, other_header):
        crawler = await crawl(PAGE_ROBOTS, spider=DirectivesSpider, urls=[page.url("/")])
        assert sorted(crawler.spider.crawled) == [page.url(p) for p in ("/", "/a", "/b")]
        assert crawler.spider.seen[page.url("/")] == set()
        assert stat(crawler, "robotstxt/page/nofollow_dropped") is None


@pytest_twisted.ensureDeferred
async def test_the_spider_sees_the_directives_that_apply(sites):
    tags = ('<meta name="robots" content="noindex">', '<meta name="googlebot" content="noarchive">')
    home = html_page(*tags, headers={"X-Robots-Tag": "coccocbot-web: nosnippet"})
    (page,) = sites(site(home))
    crawler = await crawl(PAGE_ROBOTS, spider=DirectivesSpider, urls=[page.url("/")])
    seen = crawler.spider.seen
    assert seen[page.url("/")] == {"noindex", "nosnippet"}, "noindex is the spider's business: links followed"
    assert seen[page.url("/a")] == set() and seen[page.url("/b")] == set()
    assert stat(crawler, "robotstxt/page/nofollow_dropped") is None


@pytest_twisted.ensureDeferred
async def test_a_requests_own_robot_name_is_the_one_addressed(sites):
    """A request that obeys robots.txt as another robot (robotstxt_user_agent) obeys that robot's tags."""
    (page,) = sites(site(html_page('<meta name="coccocbot-image" content="nofollow">')))
    crawler = await crawl(PAGE_ROBOTS, urls=[page.url("/")], meta={"robotstxt_user_agent": "coccocbot-image"})
    assert crawler.spider.crawled == [page.url("/")]
    assert stat(crawler, "robotstxt/page/nofollow_dropped") == 2


@pytest_twisted.ensureDeferred
async def test_requests_that_do_not_obey_robots_are_not_dropped(sites):
    (page,) = sites(site(html_page('<meta name="robots" content="nofollow">')))
    crawler = await crawl(PAGE_ROBOTS, urls=[page.url("/")], meta={"dont_obey_robotstxt": True})
    assert sorted(crawler.spider.crawled) == [page.url(p) for p in ("/", "/a", "/b")]
    assert stat(crawler, "robotstxt/page/nofollow_dropped") is None


@pytest_twisted.ensureDeferred
async def test_forbidden_links_are_still_dropped(sites):
    (page,) = sites(site(html_page('<meta name="robots" content="noindex">', links=("/a", "/private/x"))))
    crawler = await crawl(PAGE_ROBOTS, urls=[page.url("/")])
    assert sorted(crawler.spider.crawled) == [page.url("/"), page.url("/a")]
    assert stat(crawler, "robotstxt/forbidden") == 1
    assert type(crawler.spider.failures[page.url("/private/x")]).__name__ == "RobotsTxtForbidden", "its errback saw it"


@pytest_twisted.ensureDeferred
async def test_with_the_setting_off_nothing_is_read_or_dropped(sites):
    (page,) = sites(site(html_page('<meta name="robots" content="nofollow">', headers={"X-Robots-Tag": "none"})))
    settings = {**PAGE_ROBOTS, "ROBOTSTXT_PAGE_ROBOTS": False}
    crawler = await crawl(settings, spider=DirectivesSpider, urls=[page.url("/")])
    assert sorted(crawler.spider.crawled) == [page.url(p) for p in ("/", "/a", "/b")]
    assert set(crawler.spider.seen.values()) == {"absent"}
    assert stat(crawler, "robotstxt/page/nofollow_dropped") is None


@pytest_twisted.ensureDeferred
async def test_the_addon_obeys_page_robots_when_asked(sites):
    (page,) = sites(site(html_page('<meta name="robots" content="nofollow">')))
    settings = {
        "ADDONS": {"scrapy_robots_coccoc.Addon": 0},
        "DOWNLOADER_MIDDLEWARES": {},
        "ROBOTSTXT_PAGE_ROBOTS": True,
    }
    crawler = await crawl(settings, urls=[page.url("/")])
    assert crawler.spider.crawled == [page.url("/")]
    assert stat(crawler, "robotstxt/page/nofollow_dropped") == 2


class CopyingSpider(DirectivesSpider):
    """Passes each response's meta on to the requests it yields, as many spiders do; follows errbacks' links."""

    def parse(self, response):
        for output in super().parse(response):
            yield output.replace(meta=response.meta) if hasattr(output, "replace") else output

    def failed(self, failure):
        super().failed(failure)
        response = getattr(failure.value, "response", None)
        if response is not None:
            yield response.follow("/a", meta=dict(response.meta))


@pytest_twisted.ensureDeferred
async def test_each_response_has_its_own_directives(sites):
    """response.meta is the request's: a copy of the linking page's meta brings its directives along, which
    the linked page's own replace; a page the spider sees only in an errback (a 404) is read all the same."""
    (page,) = sites(site(html_page('<meta name="robots" content="noindex">')))
    gone = Page(b"<html><head></head><body>gone</body></html>", status=404, headers={"X-Robots-Tag": "nofollow"})
    page.pages["/missing"] = gone
    crawler = await crawl(PAGE_ROBOTS, spider=CopyingSpider, urls=[page.url("/"), page.url("/missing")])
    assert crawler.spider.seen == {page.url("/"): {"noindex"}, page.url("/a"): set(), page.url("/b"): set()}
    assert stat(crawler, "robotstxt/page/nofollow_dropped") == 1, "the errback's request, from a nofollow 404"
    assert page.paths().count("/a") == 1
