"""How RobotsSitemapMixin finds the sitemaps robots.txt lists, with or
without our middleware, and what it says about them: which way it works at
start-up, one line per robots.txt with what was scheduled and what was not,
and what a spider class needs."""

from __future__ import annotations

import logging

import pytest
import pytest_twisted
from scrapy.spiders import CrawlSpider, SitemapSpider

from scrapy_robots_coccoc import RobotsSitemapMixin, RobotsTxtMiddleware

from .crawling import crawl, stat
from .sites import LoopbackSite, Page, robots

THROUGH_MIDDLEWARE = "Sitemaps from robots.txt: through scrapy_robots_coccoc's middleware"
ITSELF = "Sitemaps from robots.txt: the mixin requests robots.txt itself (our middleware is not enabled: {})"
NOT_LISTED = "scrapy_robots_coccoc.RobotsTxtMiddleware is not in DOWNLOADER_MIDDLEWARES"
STOCK = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
OURS = "scrapy_robots_coccoc.RobotsTxtMiddleware"

#: Ways a project leaves our middleware out; Scrapy's own runs in the first two.
WITHOUT_OUR_MIDDLEWARE = {
    "only ROBOTSTXT_OBEY": ({"DOWNLOADER_MIDDLEWARES": {}}, NOT_LISTED),
    "ours disabled by None": ({"DOWNLOADER_MIDDLEWARES": {STOCK: 543, OURS: None}}, NOT_LISTED),
    "ROBOTSTXT_OBEY False": ({"ROBOTSTXT_OBEY": False}, "ROBOTSTXT_OBEY is False"),
    "add-on, ROBOTSTXT_OBEY False": (
        {"ADDONS": {"scrapy_robots_coccoc.Addon": 0}, "DOWNLOADER_MIDDLEWARES": {}, "ROBOTSTXT_OBEY": False},
        "ROBOTSTXT_OBEY is False",
    ),
}
#: Ways a project enables it: the add-on (settings changed after the spider
#: is built), and any import path, the class itself included.
WITH_OUR_MIDDLEWARE = {
    "add-on": {"ADDONS": {"scrapy_robots_coccoc.Addon": 0}, "DOWNLOADER_MIDDLEWARES": {}},
    "public path": {},
    "module path": {
        "DOWNLOADER_MIDDLEWARES": {STOCK: None, "scrapy_robots_coccoc.middleware.RobotsTxtMiddleware": 100}
    },
    "class": {"DOWNLOADER_MIDDLEWARES": {STOCK: None, RobotsTxtMiddleware: 100}},
}


def xml(body: str) -> Page:
    return Page(f'<?xml version="1.0" encoding="UTF-8"?>{body}'.encode(), headers={"Content-Type": "application/xml"})


def urlset(site: LoopbackSite, paths: list[str]) -> Page:
    urls = "".join(f"<url><loc>{site.url(p)}</loc></url>" for p in paths)
    return xml(f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>')


PRODUCTS = ["/products/1", "/products/2", "/products/3", "/products/4", "/products/secret/5"]


def shop(site: LoopbackSite) -> LoopbackSite:
    """A site whose robots.txt disallows /products/secret and lists a sitemap of five products."""
    site.pages["/robots.txt"] = robots(
        f"User-agent: *\nDisallow: /products/secret\nSitemap: {site.url('/sitemap.xml')}\n"
    )
    site.pages["/sitemap.xml"] = urlset(site, PRODUCTS)
    return site


class ProductSpider(RobotsSitemapMixin, SitemapSpider):
    name = "products"
    sitemap_rules = (("/products/", "parse_product"),)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.products: list[str] = []

    def parse_product(self, response):
        self.products.append(response.url)
        yield {"url": response.url}


def infos(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "scrapy_robots_coccoc.sitemaps" and r.levelno == 20]


@pytest.mark.parametrize("setup", WITHOUT_OUR_MIDDLEWARE)
@pytest_twisted.ensureDeferred
async def test_without_our_middleware_start_urls_still_get_the_sitemaps_of_their_robotstxt(sites, caplog, setup):
    """Issue 27, finding 1: seeded by start_urls, with the add-on left out
    (only ROBOTSTXT_OBEY = True) or ROBOTSTXT_OBEY = False, the mixin crawled
    no sitemap: the site saw /robots.txt and /, the spider finished with 1
    item instead of 6, and nothing said why. The mixin now requests each
    origin's robots.txt itself and says so at start-up."""
    settings, why = WITHOUT_OUR_MIDDLEWARE[setup]
    (site,) = sites(LoopbackSite())
    shop(site)
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(settings, spider=ProductSpider, start_urls=[site.url("/")])
    obeyed = settings.get("ROBOTSTXT_OBEY", True)
    expected = PRODUCTS[:4] if obeyed else PRODUCTS  # Scrapy's middleware still obeys robots.txt
    assert sorted(crawler.spider.products) == [site.url(p) for p in expected]
    assert site.paths().count("/sitemap.xml") == 1
    # Scrapy's middleware fetches robots.txt for its rules, the mixin for its sitemaps.
    assert site.paths().count("/robots.txt") == (2 if obeyed else 1)
    assert ITSELF.format(why) in infos(caplog)
    assert stat(crawler, "robotstxt/sitemaps/scheduled") == 1
    assert stat(crawler, "robotstxt/sitemaps/seed_failed") is None
    assert stat(crawler, "finish_reason") == "finished"
    assert stat(crawler, "log_count/ERROR") is None


@pytest.mark.parametrize("setup", WITH_OUR_MIDDLEWARE)
@pytest_twisted.ensureDeferred
async def test_through_our_middleware_enabled_by_any_path_robotstxt_is_fetched_once(sites, caplog, setup):
    """The start-up line names the way the mixin works however the project
    enables our middleware: by the add-on (which changes the settings after
    the spider is built) or in DOWNLOADER_MIDDLEWARES by any import path."""
    (site,) = sites(LoopbackSite())
    shop(site)
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(WITH_OUR_MIDDLEWARE[setup], spider=ProductSpider, start_urls=[site.url("/")])
    assert sorted(crawler.spider.products) == [site.url(p) for p in PRODUCTS[:4]]
    assert site.paths().count("/robots.txt") == 1
    assert THROUGH_MIDDLEWARE in infos(caplog)
    assert not any(m.startswith("Sitemaps from robots.txt: the mixin") for m in infos(caplog))


@pytest.mark.parametrize("obey", [True, False], ids=["Scrapy's middleware", "ROBOTSTXT_OBEY False"])
@pytest_twisted.ensureDeferred
async def test_without_our_middleware_every_origin_the_crawl_reaches_gives_its_sitemaps(sites, caplog, obey):
    """As through our middleware, the sitemaps come from every site the crawl
    gets a page of, not only the start URLs' sites; a site without robots.txt
    (404) simply lists none."""
    start, linked, bare = sites(LoopbackSite(), LoopbackSite(), LoopbackSite())
    start.links["/"] = [linked.url("/"), bare.url("/")]
    linked.pages["/robots.txt"] = robots(f"Sitemap: {linked.url('/sitemap.xml')}\n")
    linked.pages["/sitemap.xml"] = urlset(linked, ["/products/linked"])
    bare.pages["/robots.txt"] = Page(b"not here", status=404)

    class Following(ProductSpider):
        def parse(self, response, **kwargs):
            yield from response.follow_all(css="a")

    settings = {"DOWNLOADER_MIDDLEWARES": {}, "ROBOTSTXT_OBEY": obey}
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(settings, spider=Following, start_urls=[start.url("/")])
    assert crawler.spider.products == [linked.url("/products/linked")]
    assert linked.paths().count("/sitemap.xml") == 1
    for site in (start, linked, bare):
        assert site.paths().count("/robots.txt") == (2 if obey else 1)
    assert stat(crawler, "robotstxt/sitemaps/seed_failed") is None
    assert f"1 sitemap from robots.txt of {linked.address}: 1 scheduled" in infos(caplog)


@pytest.mark.parametrize("via", ["our middleware", "the mixin itself"])
@pytest_twisted.ensureDeferred
async def test_one_info_line_per_robotstxt_says_what_was_scheduled_and_what_changes_the_scope(sites, caplog, via):
    """Issue 27, finding 2: a robots.txt on 127.0.0.1:8806 listing
    http://localhost:8806/sitemap.xml (out of the default scope "site")
    crawled nothing and said why only in robotstxt/sitemaps/out_of_scope; no
    line ever said how many sitemaps were scheduled. One INFO line per
    robots.txt now does, naming the attribute that changes the scope, the
    same whichever way the sitemaps come."""
    (site,) = sites(LoopbackSite())
    port = site.address.rsplit(":", 1)[1]
    site.pages["/robots.txt"] = robots(
        f"Sitemap: http://localhost:{port}/sitemap.xml\nSitemap: {site.url('/own.xml')}\n"
    )
    site.pages["/own.xml"] = urlset(site, ["/products/1"])
    settings = {} if via == "our middleware" else {"ROBOTSTXT_OBEY": False}
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(settings, spider=ProductSpider, start_urls=[site.url("/")])
    assert crawler.spider.products == [site.url("/products/1")]
    assert stat(crawler, "robotstxt/sitemaps/out_of_scope") == 1
    line = (
        f"2 sitemaps from robots.txt of {site.address}: 1 scheduled; not taken: 1 out_of_scope "
        "(robots_sitemap_scope = 'site'; set it to 'any' to follow them)"
    )
    assert [m for m in infos(caplog) if "from robots.txt of" in m] == [line]


@pytest_twisted.ensureDeferred
async def test_the_info_line_names_the_cap_and_what_was_seen_before(sites, caplog):
    (site,) = sites(LoopbackSite())
    listed = "".join(f"Sitemap: {site.url(f'/s{i}.xml')}\n" for i in range(4))
    site.pages["/robots.txt"] = robots("Sitemap: ftp://elsewhere/x.xml\n" + listed)
    for i in range(4):
        site.pages[f"/s{i}.xml"] = urlset(site, [f"/products/{i}"])

    class Capped(ProductSpider):
        robots_sitemap_max_per_site = 2
        sitemap_urls = (site.url("/s0.xml"),)  # requested before robots.txt is read

    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        await crawl(spider=Capped, robots_sitemap_origins=[site.address])
    line = (
        f"5 sitemaps from robots.txt of {site.address}: 2 scheduled, 1 seen before; not taken: "
        "1 over_limit (robots_sitemap_max_per_site = 2), "
        "1 invalid (not http(s), with a user name, longer than URLLENGTH_LIMIT, or refused by Scrapy)"
    )
    assert [m for m in infos(caplog) if "from robots.txt of" in m] == [line]


def test_mixin_without_sitemapspider_says_what_is_needed():
    """Issue 27, finding 6: ``class X(RobotsSitemapMixin, CrawlSpider)``
    raised "X: RobotsSitemapMixin goes before SitemapSpider in the bases",
    though SitemapSpider was not a base at all."""
    with pytest.raises(TypeError) as raised:

        class X(RobotsSitemapMixin, CrawlSpider):
            name = "x"

    assert str(raised.value) == (
        "X: RobotsSitemapMixin needs SitemapSpider among the bases, and goes before SitemapSpider "
        "(class X(RobotsSitemapMixin, SitemapSpider)); CrawlSpider is not enough"
    )


def test_mixin_behind_sitemapspider_says_so():
    with pytest.raises(TypeError) as raised:

        class Y(SitemapSpider, RobotsSitemapMixin):
            name = "y"

    assert str(raised.value) == (
        "Y: RobotsSitemapMixin goes before SitemapSpider in the bases "
        "(class Y(RobotsSitemapMixin, SitemapSpider)): behind it, its start() and parse() are hidden"
    )


@pytest_twisted.ensureDeferred
async def test_a_scope_given_as_spider_argument_is_checked_too():
    with pytest.raises(ValueError, match=r"ProductSpider.robots_sitemap_scope must be one of .*, not 'everywhere'"):
        await crawl(spider=ProductSpider, robots_sitemap_scope="everywhere")


@pytest_twisted.ensureDeferred
async def test_a_seed_that_did_its_job_is_no_exception_in_the_stats(sites):
    """Issue 27, finding 2: through our middleware the seed of robots_sitemap_origins was a robotstxt_only
    request, and appeared as downloader/exception_type_count/scrapy_robots_coccoc.exceptions.RobotsTxtOnly: 1,
    which reads as an error. The mixin now asks the middleware to make the origin known, with no download."""
    (site,) = sites(LoopbackSite())
    shop(site)
    crawler = await crawl(spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert sorted(crawler.spider.products) == sorted(site.url(p) for p in PRODUCTS[:4])
    assert not [key for key in crawler.stats.get_stats() if "RobotsTxtOnly" in key], crawler.stats.get_stats()
    assert site.paths().count("/robots.txt") == 1
    assert stat(crawler, "robotstxt/sitemaps/seed_failed") is None
