"""RobotsSitemapMixin in real crawls: sitemaps listed in robots.txt feed a
SitemapSpider, each requested once, robots.txt fetched once per origin."""

from __future__ import annotations

import logging
import shutil

import pytest
import pytest_twisted
from scrapy.spiders import SitemapSpider

from scrapy_robots_coccoc import RobotsSitemapMixin, RobotsTxt

from .crawling import SETTINGS, ProductSpider, bounded_crawl, collector_frozen, crawl, stat
from .redisserver import free_port
from .sites import LISTED, LoopbackSite, robots, shop, urlset, xml


def assert_shop_crawled(site: LoopbackSite, other: LoopbackSite, spider: ProductSpider) -> None:
    assert sorted(spider.products) == [site.url(f"/products/{i}") for i in (1, 2, 4)]
    paths = site.paths()
    for path in ("/robots.txt", "/sitemap_index.xml", "/sitemap1.xml", "/sitemap2.xml.gz"):
        assert paths.count(path) == 1, path
    assert "/products/secret/3" not in paths  # listed, but robots.txt disallows it
    assert "/about" not in paths and "/blog/5" not in paths  # no sitemap rule routes them
    assert other.paths() == []  # another host's sitemap is out of scope by default


@pytest_twisted.ensureDeferred
async def test_plain_case_start_urls_plus_the_sitemaps_of_their_robotstxt(sites):
    site, other = sites(LoopbackSite(), LoopbackSite())
    shop(site, other)
    crawler = await crawl(spider=ProductSpider, start_urls=[site.url("/")])
    assert site.paths().count("/") == 1
    assert_shop_crawled(site, other, crawler.spider)
    assert stat(crawler, "robotstxt/sitemaps/found") == 2
    assert stat(crawler, "robotstxt/sitemaps/scheduled") == 1
    assert stat(crawler, "robotstxt/sitemaps/out_of_scope") == 1
    assert stat(crawler, "robotstxt/forbidden") == 1


@pytest_twisted.ensureDeferred
async def test_sitemaps_of_a_robotstxt_read_after_the_spider_closed_are_not_requested(sites, caplog):
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    (site,) = sites(LoopbackSite())
    # Large enough to be parsed in a thread, slow enough to come after the close.
    lines = "".join(f"Sitemap: {site.url(f'/s{i}.xml')}\n" for i in range(2_000))
    site.pages["/robots.txt"] = robots(lines + "User-agent: *\nDisallow: /x\n", delay=1)
    settings = {"CLOSESPIDER_TIMEOUT": 0.5}
    crawler = await bounded_crawl(settings, ProductSpider, timeout=10, start_urls=[site.url("/")])
    await deferLater(reactor, 0.5, lambda: None)  # the parse in its thread is over by now
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert site.paths() == ["/robots.txt"]
    assert stat(crawler, "robotstxt/sitemaps/found") is None


@pytest_twisted.ensureDeferred
async def test_sitemap_seeded_spider_fetches_robotstxt_once_where_scrapy_fetches_it_twice(sites):
    site, other = sites(LoopbackSite(), LoopbackSite())
    shop(site, other)
    crawler = await crawl(spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert site.paths()[0] == "/robots.txt"
    assert_shop_crawled(site, other, crawler.spider)
    assert stat(crawler, "robotstxt/sitemaps/seed_failed") is None  # RobotsTxtOnly ends a seed well

    # The same crawl the way Scrapy offers it: SitemapSpider with robots.txt
    # in sitemap_urls, under Scrapy's own middleware.
    site.log.clear()
    stock = {"DOWNLOADER_MIDDLEWARES": {}}
    await crawl(stock, spider=SitemapSpider, name="stock", sitemap_urls=[site.url("/robots.txt")])
    assert site.paths().count("/robots.txt") == 2


@pytest_twisted.ensureDeferred
async def test_robotstxt_in_sitemap_urls_is_not_fetched_twice(sites):
    site, other = sites(LoopbackSite(), LoopbackSite())
    shop(site, other)
    crawler = await crawl(spider=ProductSpider, sitemap_urls=[site.url("/robots.txt")])
    assert_shop_crawled(site, other, crawler.spider)


@pytest_twisted.ensureDeferred
async def test_sitemap_follow_filter_and_alternate_links_work_as_in_sitemapspider(sites):
    site, other = sites(LoopbackSite(), LoopbackSite())
    shop(site, other)
    alternate = f'<xhtml:link rel="alternate" hreflang="vi" href="{site.url("/products/1-vi")}"/>'
    entries = "".join(f"<url><loc>{site.url(p)}</loc>{alternate if p.endswith('/1') else ''}</url>" for p in LISTED)
    site.pages["/sitemap1.xml"] = xml(
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:xhtml="http://www.w3.org/1999/xhtml">'
        f"{entries}</urlset>"
    )

    class Tuned(ProductSpider):
        sitemap_follow = ("sitemap1",)
        sitemap_alternate_links = True

        def sitemap_filter(self, entries):
            return (entry for entry in entries if not entry["loc"].endswith("/2"))

    crawler = await crawl(spider=Tuned, robots_sitemap_origins=[site.address])
    assert sorted(crawler.spider.products) == [site.url("/products/1"), site.url("/products/1-vi")]
    assert "/sitemap2.xml.gz" not in site.paths()


@pytest_twisted.ensureDeferred
async def test_sitemaps_per_site_are_capped_and_requested_once_across_refreshes(sites):
    (site,) = sites(LoopbackSite())
    listed = "".join(f"Sitemap: {site.url(f'/s{i}.xml')}\n" for i in range(50))
    site.pages["/robots.txt"] = robots(listed)
    for i in range(50):
        site.pages[f"/s{i}.xml"] = xml(urlset(site, [f"/page/{i}"]))

    class Capped(ProductSpider):
        robots_sitemap_max_per_site = 3
        sitemap_rules = (("/page/", "parse_product"),)

    settings = {"ROBOTSTXT_CACHE_SECONDS": 0.1, "DOWNLOAD_DELAY": 0.1}
    start = [site.url(f"/start/{i}") for i in range(5)]
    crawler = await crawl(settings, spider=Capped, start_urls=start)
    paths = site.paths()
    assert paths.count("/robots.txt") >= 2  # refreshed while crawling
    assert sorted(p for p in paths if p.endswith(".xml")) == [f"/s{i}.xml" for i in range(3)]
    assert sorted(crawler.spider.products) == [site.url(f"/page/{i}") for i in range(3)]
    assert stat(crawler, "robotstxt/sitemaps/over_limit") == 47


def test_mixin_needs_sitemapspider():
    from scrapy import Spider

    with pytest.raises(TypeError, match="before SitemapSpider"):
        type("Wrong", (RobotsSitemapMixin, Spider), {"name": "wrong"})


def test_mixin_behind_sitemapspider_raises_at_class_creation():
    with pytest.raises(TypeError, match="before SitemapSpider"):

        class Wrong(SitemapSpider, RobotsSitemapMixin):
            name = "wrong"


@pytest.mark.parametrize("scope", ["site", "any"])
@pytest_twisted.ensureDeferred
async def test_relative_sitemaps_are_resolved_against_the_robotstxt_url(sites, scope):
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(
        "User-agent: *\nDisallow:\nSitemap: /sitemap1.xml\nSitemap: file:///etc/passwd\n"
        # Scrapy refuses a port out of range: that line alone is declined.
        f"Sitemap: {site.address.rsplit(':', 1)[0]}:99999/x.xml\nSitemap: sitemap2.xml\n"
    )
    site.pages["/sitemap1.xml"] = xml(urlset(site, ["/products/1"]))
    site.pages["/sitemap2.xml"] = xml(urlset(site, ["/products/2"]))

    class Relative(ProductSpider):
        robots_sitemap_scope = scope

    crawler = await crawl(spider=Relative, robots_sitemap_origins=[site.address])
    assert sorted(crawler.spider.products) == [site.url("/products/1"), site.url("/products/2")]
    assert sorted(site.paths()) == ["/products/1", "/products/2", "/robots.txt", "/sitemap1.xml", "/sitemap2.xml"]
    assert stat(crawler, "robotstxt/sitemaps/scheduled") == 2
    assert stat(crawler, "robotstxt/sitemaps/invalid") == 2  # only http(s) sitemaps, whatever the scope
    assert stat(crawler, "log_count/ERROR") is None


@pytest.mark.parametrize("declined_by", ["out_of_scope", "over_limit"])
@pytest_twisted.ensureDeferred
async def test_a_sitemap_declined_for_one_origin_is_still_crawled_for_the_next(sites, declined_by):
    first, second = sites(LoopbackSite(), LoopbackSite())
    shared = second.url("/shared.xml")
    # The first origin lists the second's sitemap: out of its scope, or (scope
    # "any", one sitemap per site) after its own. The second origin's
    # robots.txt answers later and lists it too: there it must be crawled.
    own = f"Sitemap: {first.url('/own.xml')}\n" if declined_by == "over_limit" else ""
    first.pages["/robots.txt"] = robots(f"{own}Sitemap: {shared}\n")
    first.pages["/own.xml"] = xml(urlset(first, ["/products/own"]))
    second.pages["/robots.txt"] = robots(f"Sitemap: {shared}\n", delay=0.3)
    second.pages["/shared.xml"] = xml(urlset(second, ["/products/shared"]))

    class Declining(ProductSpider):
        robots_sitemap_scope = "site" if declined_by == "out_of_scope" else "any"
        robots_sitemap_max_per_site = 1

    origins = [first.address, second.address]
    crawler = await crawl(spider=Declining, robots_sitemap_origins=origins)
    assert second.paths().count("/shared.xml") == 1
    assert second.url("/products/shared") in crawler.spider.products
    assert stat(crawler, f"robotstxt/sitemaps/{declined_by}") == 1
    scheduled = 2 if declined_by == "over_limit" else 1
    assert stat(crawler, "robotstxt/sitemaps/scheduled") == scheduled
    assert stat(crawler, "robotstxt/sitemaps/found") == scheduled + 1


@pytest.mark.filterwarnings("error::scrapy.exceptions.ScrapyDeprecationWarning")
@pytest_twisted.ensureDeferred
async def test_without_our_middleware_the_seed_request_reads_robotstxt_itself(sites):
    site, other = sites(LoopbackSite(), LoopbackSite())
    shop(site, other)
    crawler = await crawl(
        {"ROBOTSTXT_OBEY": False, "DOWNLOADER_MIDDLEWARES": {}},
        spider=ProductSpider,
        robots_sitemap_origins=[site.address],
    )
    # Not obeyed now: the disallowed product is crawled too.
    assert sorted(crawler.spider.products) == [site.url(f"/products/{i}") for i in (1, 2, 4)] + [
        site.url("/products/secret/3")
    ]
    assert site.paths().count("/robots.txt") == 1
    assert stat(crawler, "robotstxt/sitemaps/scheduled") == 1
    assert stat(crawler, "robotstxt/sitemaps/seed_failed") is None


@pytest_twisted.ensureDeferred
async def test_a_seed_whose_robotstxt_does_not_answer_is_logged_and_counted(caplog):
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc.sitemaps"):
        crawler = await crawl(
            spider=ProductSpider, robots_sitemap_origins=[closed, "http://[::1", "http://127.0.0.1:0"]
        )
    assert stat(crawler, "robotstxt/sitemaps/seed_failed") == 3
    messages = [r.getMessage() for r in caplog.records if r.name == "scrapy_robots_coccoc.sitemaps"]
    assert any(f"No sitemaps seeded from {closed}/robots.txt" in m for m in messages), messages
    assert any("No sitemaps seeded from http://[::1: Invalid IPv6 URL" in m for m in messages), messages
    assert any("No sitemaps seeded from http://127.0.0.1:0: invalid port" in m for m in messages), messages


@pytest_twisted.ensureDeferred
async def test_a_listed_sitemap_a_sitemap_index_also_lists_is_fetched_once(sites):
    # The mixin remembers the sitemaps it requested: the index's repeat is not
    # even scheduled (a shared dupefilter, scrapy-redis's, still drops what
    # another worker requested).
    site, other = sites(LoopbackSite(), LoopbackSite())
    shop(site, other)
    site.pages["/robots.txt"] = robots(
        f"Sitemap: {site.url('/sitemap_index.xml')}\nSitemap: {site.url('/sitemap1.xml')}\n"
    )
    crawler = await crawl(spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert site.paths().count("/sitemap1.xml") == 1
    assert stat(crawler, "robotstxt/sitemaps/scheduled") == 2
    assert stat(crawler, "robotstxt/sitemaps/repeated") == 1
    assert stat(crawler, "dupefilter/filtered") is None


@pytest_twisted.ensureDeferred
async def test_http_cache_keeps_sitemap_seeded_crawls_working(sites, tmp_path):
    site, other = sites(LoopbackSite(), LoopbackSite())
    shop(site, other)
    cache = {"HTTPCACHE_ENABLED": True, "HTTPCACHE_DIR": str(tmp_path)}
    first = await crawl(cache, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert_shop_crawled(site, other, first.spider)
    site.log.clear()
    second = await crawl(cache, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert sorted(second.spider.products) == sorted(first.spider.products)
    assert stat(second, "robotstxt/sitemaps/scheduled") == 1
    assert site.paths() == []  # all of it came from the cache


@pytest.mark.skipif(not shutil.which("redis-server"), reason="redis-server is not installed")
@pytest_twisted.ensureDeferred
async def test_scrapy_redis_workers_share_the_sitemaps_they_requested(sites, redis_server):
    site, other = sites(LoopbackSite(), LoopbackSite())
    shop(site, other)
    cluster = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "REDIS_URL": redis_server.url,
    }
    first = await crawl(cluster, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert_shop_crawled(site, other, first.spider)
    # A second worker (its own robots.txt state here) is announced the same
    # sitemaps and schedules them; the shared dupefilter drops them.
    second = await crawl(cluster, spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert stat(second, "robotstxt/sitemaps/scheduled") == 1
    assert second.spider.products == []
    assert site.paths().count("/sitemap_index.xml") == 1


@pytest_twisted.ensureDeferred
async def test_hostile_sitemap_urls_are_declined_not_requested(sites):
    (site,) = sites(LoopbackSite())
    host, port = site.address.removeprefix("http://").rsplit(":", 1)
    parent = host.split(".", 1)[1]  # "0.0.2" of "127.0.0.2": no parent domain of an IP address
    site.pages["/robots.txt"] = robots(
        f"Sitemap: http://{parent}:{port}/secret.xml\n"
        f"Sitemap: http://user:secret@{host}:{port}/credentials.xml\n"  # Scrapy logs an ERROR for it
        f"Sitemap: {site.url('/' + 'a' * 3000 + '.xml')}\n"  # over URLLENGTH_LIMIT, as a start URL would be
        f"Sitemap: {site.url('/ok.xml')}\n"
    )
    site.pages["/ok.xml"] = xml(urlset(site, ["/products/1"]))
    crawler = await crawl(spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert crawler.spider.products == [site.url("/products/1")]
    assert sorted(site.paths()) == ["/ok.xml", "/products/1", "/robots.txt"]
    assert stat(crawler, "robotstxt/sitemaps/out_of_scope") == 1
    assert stat(crawler, "robotstxt/sitemaps/invalid") == 2
    assert stat(crawler, "log_count/ERROR") is None


def test_scope_compares_host_names_as_requested():
    from scrapy_robots_coccoc._crawl.sitemap.location import idna as _idna
    from scrapy_robots_coccoc._crawl.sitemap.scope import within

    # A site's robots.txt may write its own name in Unicode; Scrapy requests it in IDNA form.
    assert _idna("cửa-hàng.vn") == "xn--ca-hng-lta4562d.vn"
    assert within(_idna("www.cửa-hàng.vn"), _idna("cửa-hàng.vn"))
    assert not within("127.0.1", "0.1") and not within("10.0.0.1", "0.0.1")
    assert within("shop.example.com", "example.com") and within("example.com", "www.example.com")
    with pytest.raises(ValueError):
        _idna("a" * 64 + "ữ.vn")  # a label IDNA refuses


class ProbedProductSpider(ProductSpider):
    """Probes the reactor from its start until it closes: Scrapy's start-up
    is not ours to measure."""

    async def start(self):
        from scrapy import signals

        from .redis_worker import LagProbe

        self.probe = LagProbe().start()
        self.crawler.signals.connect(self.probe.stop, signal=signals.spider_closed, weak=False)
        async for request in super().start():
            yield request


@pytest_twisted.ensureDeferred
async def test_a_robotstxt_of_thousands_of_sitemaps_does_not_stall_the_crawl(sites, caplog):
    """500 KiB of "Sitemap:/sN" lines list 32,694 sitemaps: resolving and
    handing over all of them held the reactor for 1.5 s, and still holds its
    thread 0.4-0.6 s (of CPU time) without the MAX_SITEMAPS cap. Handed the
    first 1,000, the reactor's thread never works 0.2 s on end.

    The bound is on the CPU time the reactor's thread spends between two
    ticks of the probe, the test session's heap frozen out of the collector:
    the wall-clock lateness bounded before (0.3 s) was broken at 0.33-0.46 s
    on a loaded machine by waits for a core and by full collections, neither
    of them work of the crawl."""
    (site,) = sites(LoopbackSite())
    listed = [f"Sitemap:/s{i}\n" for i in range(40_000)]  # 500 KiB of them
    site.pages["/robots.txt"] = robots("".join(listed))
    with caplog.at_level(logging.DEBUG, logger="scrapy_robots_coccoc"), collector_frozen():
        crawler = await crawl(spider=ProbedProductSpider, robots_sitemap_origins=[site.address])
    worst = crawler.spider.probe.worst_cpu
    assert worst < 0.2, f"the reactor's thread worked {worst:.2f} s on end"
    handed = 1000
    total = len(RobotsTxt.parse(site.pages["/robots.txt"].body).sitemaps)  # what the 500 KiB cut leaves
    assert stat(crawler, "robotstxt/sitemaps/not_handed_over") == total - handed
    assert stat(crawler, "robotstxt/sitemaps/scheduled") == 50
    assert stat(crawler, "robotstxt/sitemaps/over_limit") == handed - 50
    declined = [r for r in caplog.records if "not taken" in r.getMessage()]
    assert len(declined) == 1 and "950 over_limit" in declined[0].getMessage()


@pytest_twisted.ensureDeferred
async def test_an_allowed_domain_idna_refuses_matches_nothing_and_breaks_nothing(sites):
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: https://elsewhere.example/x.xml\nSitemap: {site.url('/mine.xml')}\n")
    site.pages["/mine.xml"] = xml(urlset(site, ["/products/1"]))

    class Scoped(ProductSpider):
        robots_sitemap_scope = "allowed_domains"
        allowed_domains = [".bücher.de", site.address.removeprefix("http://").rsplit(":", 1)[0]]

    crawler = await crawl(spider=Scoped, robots_sitemap_origins=[site.address])
    assert crawler.spider.products == [site.url("/products/1")]
    assert stat(crawler, "robotstxt/sitemaps/out_of_scope") == 1
    assert stat(crawler, "log_count/ERROR") is None


@pytest_twisted.ensureDeferred
async def test_allowed_domains_is_read_for_the_allowed_domains_scope_only(sites):
    """Only robots_sitemap_scope = "allowed_domains" reads allowed_domains, and only for a URL it compares:
    read for every listed sitemap, a property that cannot answer (OffsiteMiddleware off) cost the spider
    the sitemaps of its own site."""
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/mine.xml')}\n")
    site.pages["/mine.xml"] = xml(urlset(site, ["/products/1"]))

    class Unscoped(ProductSpider):
        @property
        def allowed_domains(self):
            raise RuntimeError("allowed_domains is not to be read")

    offsite_off = {
        "DOWNLOADER_MIDDLEWARES": {
            **SETTINGS["DOWNLOADER_MIDDLEWARES"],
            "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,
        }
    }
    crawler = await crawl(offsite_off, spider=Unscoped, robots_sitemap_origins=[site.address])
    assert crawler.spider.products == [site.url("/products/1")]
    assert stat(crawler, "log_count/ERROR") is None


@pytest_twisted.ensureDeferred
async def test_sitemaps_not_handed_over_are_counted_once_across_refreshes(sites):
    (site,) = sites(LoopbackSite())
    site.pages["/robots.txt"] = robots("".join(f"Sitemap:/s{i}.xml\n" for i in range(1200)))
    start = [site.url(f"/start/{i}") for i in range(5)]
    settings = {"ROBOTSTXT_CACHE_SECONDS": 0.1, "DOWNLOAD_DELAY": 0.1}
    crawler = await crawl(settings, spider=ProductSpider, start_urls=start)
    assert site.paths().count("/robots.txt") >= 2  # refreshed while crawling
    assert stat(crawler, "robotstxt/sitemaps/not_handed_over") == 200
