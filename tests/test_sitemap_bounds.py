"""RobotsSitemapMixin reads every sitemap within the sitemaps protocol's
bounds (50,000 entries, 50 MiB uncompressed, by default), whatever
DOWNLOAD_MAXSIZE says: real crawls of loopback sites serving gzip bombs,
oversized and endless sitemaps, and sitemap indexes nested or in a loop."""

from __future__ import annotations

import logging
import os
import textwrap
import time
import zlib

import pytest
import pytest_twisted
from twisted.web.server import NOT_DONE_YET

from . import crawling
from .crawling import ProductSpider, ours, run_python, stat
from .sites import HostileSite, LoopbackSite, Page, robots, urlset, xml

MAX_BYTES = 52_428_800
#: No test here is about a download timing out: SETTINGS' 5 s timed out a
#: loopback sitemap on a loaded machine.
PATIENT = {"DOWNLOAD_TIMEOUT": 60}


async def crawl(settings: dict | None = None, **kwargs):
    return await crawling.crawl({**PATIENT, **(settings or {})}, **kwargs)


HEAD = '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'


def bomb(site: LoopbackSite, paths: list[str], inflated: int) -> bytes:
    """A gzip sitemap that inflates to *inflated* bytes: a ``<urlset>`` of *paths*, then zero bytes (the bomb
    of issue 30), built in memory a MiB at a time."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    entries = "".join(f"<url><loc>{site.url(path)}</loc></url>" for path in paths)
    parts = [compressor.compress(f"{HEAD}{entries}".encode())]
    zeros = bytes(1 << 20)
    parts.extend(compressor.compress(zeros) for _ in range(inflated >> 20))
    parts.append(compressor.flush())
    return b"".join(parts)


def index(site: LoopbackSite, paths: list[str]) -> Page:
    sitemaps = "".join(f"<sitemap><loc>{site.url(path)}</loc></sitemap>" for path in paths)
    return xml(f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{sitemaps}</sitemapindex>')


class ListingSpider(ProductSpider):
    """Records the loc of every entry it reads, and requests none of them."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.listed: list[str] = []

    def sitemap_filter(self, entries):
        self.listed.extend(entry["loc"] for entry in entries)
        return ()


@pytest_twisted.ensureDeferred
async def test_a_gzip_bomb_robotstxt_lists_is_read_to_the_bound_and_the_other_sitemaps_are_crawled(sites, caplog):
    """Issue 30: a robots.txt listing a 1 MB gzip sitemap that inflates to
    1 GB (a <urlset> of one <url>, then zero bytes) grew the crawl by
    955 MB and held a core for 25 s, as with stock Scrapy. Here 64 MiB
    inflated: read to the 50 MiB bound as a stream, its one entry used, one
    WARNING, and the site's other sitemap (gzip in transit) crawled."""
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/bomb.xml.gz')}\nSitemap: {site.url('/sitemap.xml')}\n")
    site.pages["/bomb.xml.gz"] = Page(
        bomb(site, ["/products/0"], 64 << 20), headers={"Content-Type": "application/gzip"}
    )
    other = xml(urlset(site, ["/products/1", "/products/2"]))
    site.pages["/sitemap.xml"] = Page(
        zlib.compress(other.body, wbits=31), headers={**other.headers, "Content-Encoding": "gzip"}
    )
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert time.monotonic() - started < 30
    assert sorted(crawler.spider.products) == [site.url(f"/products/{i}") for i in range(3)]
    assert stat(crawler, "robotstxt/sitemaps/truncated") == 1
    assert ours(caplog, logging.WARNING) == [
        f"Sitemap {site.url('/bomb.xml.gz')} is larger than {MAX_BYTES} bytes uncompressed "
        "(ROBOTSTXT_SITEMAP_MAX_BYTES): the entries within them are used (1)"
    ]
    assert stat(crawler, "log_count/ERROR") is None


# A crawl in a process of its own, its peak RSS measured (VmHWM): a 200 MiB bomb, four times the bound.
BOMB_MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, time
    from scrapy.utils.reactor import install_reactor
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from scrapy.crawler import CrawlerProcess
    from tests.crawling import SETTINGS, ProductSpider
    from tests.sites import LoopbackSite, Page, robots, serve, urlset, xml
    from tests.test_sitemap_bounds import bomb

    def high_water_kb():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

    process = CrawlerProcess({**SETTINGS, "LOG_LEVEL": "ERROR", "DOWNLOAD_TIMEOUT": 60})
    site = serve(LoopbackSite(), "127.0.0.2")
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/bomb.xml.gz')}\\nSitemap: {site.url('/s.xml')}\\n")
    site.pages["/bomb.xml.gz"] = Page(bomb(site, ["/products/0"], 200 << 20))
    site.pages["/s.xml"] = xml(urlset(site, ["/products/1"]))
    crawler = process.create_crawler(ProductSpider)
    baseline = high_water_kb()
    started = time.monotonic()
    process.crawl(crawler, robots_sitemap_origins=[site.address])
    process.start()
    print(json.dumps({
        "growth_mb": (high_water_kb() - baseline) / 1024,
        "seconds": time.monotonic() - started,
        "products": sorted(crawler.spider.products),
        "truncated": crawler.stats.get_value("robotstxt/sitemaps/truncated"),
    }))
    """
)


def test_a_gzip_bomb_costs_the_crawl_little_memory():
    """The whole crawl's peak RSS grows by a few MB for a bomb of 200 MiB
    (stock SitemapSpider holds all of it, and more: benchmarks/sitemap_bench.py)."""
    result = run_python("-c", BOMB_MEMORY_SCRIPT)
    assert result["truncated"] == 1, result
    assert [url.rsplit("/", 1)[1] for url in result["products"]] == ["0", "1"], result
    assert result["growth_mb"] < 60, result
    assert result["seconds"] < 30, result


@pytest_twisted.ensureDeferred
async def test_a_sitemap_of_more_entries_than_the_bound_gives_its_first_ones(sites, caplog):
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/sitemap.xml')}\n")
    site.pages["/sitemap.xml"] = xml(urlset(site, [f"/products/{i}" for i in range(5)]))
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(
            {"ROBOTSTXT_SITEMAP_MAX_URLS": 3}, spider=ProductSpider, robots_sitemap_origins=[site.address]
        )
    assert sorted(crawler.spider.products) == [site.url(f"/products/{i}") for i in range(3)]
    assert stat(crawler, "robotstxt/sitemaps/truncated") == 1
    assert ours(caplog, logging.WARNING) == [
        f"Sitemap {site.url('/sitemap.xml')} lists more than 3 entries (ROBOTSTXT_SITEMAP_MAX_URLS): "
        "the first 3 are used"
    ]


@pytest_twisted.ensureDeferred
async def test_a_sitemap_of_exactly_the_bound_is_read_whole_and_says_nothing(sites, caplog):
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/sitemap.xml')}\n")
    site.pages["/sitemap.xml"] = xml(urlset(site, [f"/products/{i}" for i in range(3)]))
    body = site.pages["/sitemap.xml"].body
    settings = {"ROBOTSTXT_SITEMAP_MAX_URLS": 3, "ROBOTSTXT_SITEMAP_MAX_BYTES": len(body)}
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(settings, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert len(crawler.spider.products) == 3
    assert stat(crawler, "robotstxt/sitemaps/truncated") is None
    assert ours(caplog, logging.WARNING) == []


def chunked(body: bytes, piece: int = 16 * 1024):
    """A handler that sends *body* without Content-Length, in pieces."""

    def handler(request):
        request.setHeader("Content-Type", "application/xml")
        for start in range(0, len(body), piece):
            request.write(body[start : start + piece])
        request.finish()
        return NOT_DONE_YET

    return handler


@pytest.mark.parametrize("sent", ["with Content-Length", "chunked"])
@pytest_twisted.ensureDeferred
async def test_a_raw_sitemap_past_the_byte_bound_is_stopped_and_read_that_far(sites, caplog, sent):
    """1.6 MB of plain XML against a bound of 64 KiB: the download stops
    past the bound (Scrapy would cancel one whose Content-Length is past
    DOWNLOAD_MAXSIZE before its first byte, and read nothing), and the
    entries whole within the first 64 KiB are used."""
    (site,) = sites(HostileSite())
    paths = [f"/page/{i:05d}" for i in range(30_000)]
    body = xml(urlset(site, paths)).body
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/big.xml')}\n")
    if sent == "chunked":
        site.handlers["/big.xml"] = chunked(body)
    else:
        site.pages["/big.xml"] = Page(body, headers={"Content-Type": "application/xml"})
    bound = 64 * 1024
    whole = body[:bound].count(b"</url>")  # the entries that end within the bound
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(
            {"ROBOTSTXT_SITEMAP_MAX_BYTES": bound}, spider=ListingSpider, robots_sitemap_origins=[site.address]
        )
    listed = crawler.spider.listed
    assert listed == [site.url(p) for p in paths[: len(listed)]]
    assert whole - 1 <= len(listed) <= whole  # the parser may wait for a byte past the last one
    assert stat(crawler, "robotstxt/sitemaps/truncated") == 1
    warnings = ours(caplog, logging.WARNING)
    assert len(warnings) == 1 and warnings[0].startswith(f"Sitemap {site.url('/big.xml')} is larger than 65536 bytes")
    assert site.paths().count("/big.xml") == 1
    assert stat(crawler, "log_count/ERROR") is None


@pytest.mark.parametrize("past", ["inflated", "sent"])
@pytest_twisted.ensureDeferred
async def test_a_sitemap_past_the_bound_under_its_content_encoding_is_dropped_within_it(sites, caplog, past):
    """A sitemap sent with a Content-Encoding is inflated by Scrapy's
    HttpCompressionMiddleware before any spider sees it: the mixin's
    download_maxsize keeps that to the bound (not the 1 GiB of
    DOWNLOAD_MAXSIZE), as it keeps the download of one whose compressed
    size is announced past it; the mixin says that none of it is used."""
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/bomb.xml')}\nSitemap: {site.url('/sitemap.xml')}\n")
    if past == "inflated":  # a gzip bomb
        settings, bound, body = {}, MAX_BYTES, bomb(site, ["/products/0"], 64 << 20)
    else:  # 1.1 MB that gzip cannot shrink, against a bound of 1 KiB
        settings, bound = {"ROBOTSTXT_SITEMAP_MAX_BYTES": 1024}, 1024
        body = zlib.compress(HEAD.encode() + os.urandom(1_100_000), wbits=31)
    site.pages["/bomb.xml"] = Page(body, headers={"Content-Type": "application/xml", "Content-Encoding": "gzip"})
    site.pages["/sitemap.xml"] = xml(urlset(site, ["/products/1"]))
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(settings, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert crawler.spider.products == [site.url("/products/1")]
    assert stat(crawler, "robotstxt/sitemaps/truncated") == 1
    mine = [m for m in ours(caplog, logging.WARNING) if m.startswith("Sitemap ")]
    assert mine == [
        f"Sitemap {site.url('/bomb.xml')} is larger than {bound} bytes uncompressed "
        "(ROBOTSTXT_SITEMAP_MAX_BYTES): Scrapy dropped it while inflating or downloading it, "
        "so none of its entries is used"
    ]
    assert stat(crawler, "log_count/ERROR") is None


@pytest.mark.parametrize(("depth", "leaf_read"), [(2, False), (3, True)])
@pytest_twisted.ensureDeferred
async def test_sitemap_indexes_are_followed_to_the_depth_bound(sites, caplog, depth, leaf_read):
    """Three indexes in a row above a urlset: the protocol nests none, the
    default bound (2) follows one nested index, not two."""
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/i0.xml')}\n")
    site.pages["/i0.xml"] = index(site, ["/i1.xml"])
    site.pages["/i1.xml"] = index(site, ["/i2.xml"])
    site.pages["/i2.xml"] = index(site, ["/leaf.xml"])
    site.pages["/leaf.xml"] = xml(urlset(site, ["/products/1"]))
    settings = {} if depth == 2 else {"ROBOTSTXT_SITEMAP_MAX_DEPTH": depth}
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(settings, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert ("/leaf.xml" in site.paths()) is leaf_read
    assert crawler.spider.products == ([site.url("/products/1")] if leaf_read else [])
    if leaf_read:
        assert stat(crawler, "robotstxt/sitemaps/too_deep") is None
        assert ours(caplog, logging.WARNING) == []
    else:
        assert stat(crawler, "robotstxt/sitemaps/too_deep") == 1
        assert ours(caplog, logging.WARNING) == [
            f"Sitemap index {site.url('/i2.xml')} lies under 2 others (ROBOTSTXT_SITEMAP_MAX_DEPTH = 2): "
            "the sitemaps it lists are not requested (1)"
        ]


@pytest_twisted.ensureDeferred
async def test_indexes_that_list_each_other_are_fetched_once_without_a_duplicate_filter(sites):
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/i0.xml')}\n")
    site.pages["/i0.xml"] = index(site, ["/i0.xml", "/i1.xml"])
    site.pages["/i1.xml"] = index(site, ["/i0.xml", "/i1.xml", "/leaf.xml"])
    site.pages["/leaf.xml"] = xml(urlset(site, ["/products/1"]))
    settings = {"DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter", "ROBOTSTXT_SITEMAP_MAX_DEPTH": 10}
    crawler = await crawl(settings, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert crawler.spider.products == [site.url("/products/1")]
    for path in ("/i0.xml", "/i1.xml", "/leaf.xml"):
        assert site.paths().count(path) == 1, path
    assert stat(crawler, "robotstxt/sitemaps/repeated") == 3


@pytest_twisted.ensureDeferred
async def test_the_spiders_own_sitemap_urls_get_the_same_bounds(sites, caplog):
    (site,) = sites(LoopbackSite())
    site.pages["/index.xml"] = index(site, ["/a.xml", "/b.xml"])
    site.pages["/a.xml"] = xml(urlset(site, [f"/products/a{i}" for i in range(3)]))
    site.pages["/b.xml"] = index(site, ["/c.xml"])
    site.pages["/c.xml"] = xml(urlset(site, ["/products/c"]))

    class Own(ProductSpider):
        sitemap_urls = [site.url("/index.xml")]

    settings = {"ROBOTSTXT_SITEMAP_MAX_URLS": 2, "ROBOTSTXT_SITEMAP_MAX_DEPTH": 1}
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(settings, spider=Own)
    assert sorted(crawler.spider.products) == [site.url("/products/a0"), site.url("/products/a1")]
    assert "/c.xml" not in site.paths()
    assert stat(crawler, "robotstxt/sitemaps/truncated") == 1
    assert stat(crawler, "robotstxt/sitemaps/too_deep") == 1


@pytest_twisted.ensureDeferred
async def test_a_small_download_maxsize_does_not_stop_a_sitemap_within_the_bound(sites):
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/sitemap.xml')}\n")
    site.pages["/sitemap.xml"] = xml(urlset(site, [f"/products/{i}" for i in range(50)]))
    assert len(site.pages["/sitemap.xml"].body) > 2000
    crawler = await crawl({"DOWNLOAD_MAXSIZE": 2000}, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert len(crawler.spider.products) == 50
    assert stat(crawler, "robotstxt/sitemaps/truncated") is None


@pytest_twisted.ensureDeferred
async def test_a_missing_or_invalid_sitemap_is_no_error(sites, caplog):
    """A 404 goes as without the mixin's errback (Scrapy's INFO line); a page
    that is no sitemap gets SitemapSpider's WARNING."""
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(
        f"Sitemap: {site.url('/gone.xml')}\nSitemap: {site.url('/page')}\nSitemap: {site.url('/html.xml')}\n"
    )
    site.pages["/gone.xml"] = Page(b"not here", status=404)
    site.pages["/html.xml"] = Page(b"<html><body>hi</body></html>", headers={"Content-Type": "text/html"})
    with caplog.at_level(logging.INFO):
        crawler = await crawl(spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert stat(crawler, "log_count/ERROR") is None
    warnings = ours(caplog, logging.WARNING)
    assert sorted(warnings) == [
        f"Ignoring invalid sitemap: <200 {site.url('/html.xml')}>",
        f"Ignoring invalid sitemap: <200 {site.url('/page')}>",
    ]
    assert any("Ignoring response <404" in m for m in ours(caplog, logging.INFO))


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ROBOTSTXT_SITEMAP_MAX_URLS", 0, "a whole number >= 1, not 0"),
        ("ROBOTSTXT_SITEMAP_MAX_BYTES", "50MB", "a whole number >= 1, not '50MB'"),
        ("ROBOTSTXT_SITEMAP_MAX_DEPTH", -1, "a whole number >= 0, not -1"),
    ],
)
@pytest_twisted.ensureDeferred
async def test_a_bound_that_makes_no_sense_stops_the_crawl_at_start_up(name, value, message):
    with pytest.raises(ValueError, match=f"{name} must be {message}"):
        await crawl({name: value}, spider=ProductSpider)
