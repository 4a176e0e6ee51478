"""The sitemaps protocol's location rule in real crawls, each site on its
own loopback address: a sitemap robots.txt led to (or an index it led to)
lists the URLs under its own location, and those of the sites whose
robots.txt lists it (cross-submits); others are dropped, counted, and said
once per sitemap. The spider's own sitemap_urls are not held to it."""

from __future__ import annotations

import logging

import pytest
import pytest_twisted

from .crawling import ProductSpider, crawl, ours, stat
from .sites import LoopbackSite, Page, robots, xml


def index(urls: list[str]) -> Page:
    sitemaps = "".join(f"<sitemap><loc>{url}</loc></sitemap>" for url in urls)
    return xml(f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{sitemaps}</sitemapindex>')


def listing(urls: list[str]) -> Page:
    entries = "".join(f"<url><loc>{url}</loc></url>" for url in urls)
    return xml(f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>')


class AnyScopeSpider(ProductSpider):
    robots_sitemap_scope = "any"  # the scope decides which sitemaps are fetched; the rule, what they may list


WAYS = {"through our middleware": {}, "the mixin's own requests": {"ROBOTSTXT_OBEY": False}}


def dropped_line(sitemap: str, count: int, location: str) -> str:
    return (
        f"Sitemap {sitemap}: {count} URL{'' if count == 1 else 's'} outside its location dropped (the sitemaps "
        f"protocol: under {location}, or of a site whose robots.txt lists the sitemap; "
        "robots_sitemap_location_rule = False keeps them)"
    )


@pytest.mark.parametrize("way", WAYS)
@pytest_twisted.ensureDeferred
async def test_a_sitemap_lists_urls_under_its_location_and_of_the_site_that_lists_it(sites, caplog, way):
    """robots.txt of A lists A's /catalog/sitemap.xml: A's pages under
    /catalog/ are under its location, A's others are A's own robots.txt
    vouching for them; another host's are spam."""
    site, other = sites(LoopbackSite(), LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/catalog/sitemap.xml')}\n")
    site.pages["/catalog/sitemap.xml"] = listing(
        [site.url("/catalog/products/1"), site.url("/products/2"), other.url("/products/3"), "ftp://x/products/4"]
    )
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(WAYS[way], spider=ProductSpider, robots_sitemap_origins=[site.address])
    assert sorted(crawler.spider.products) == [site.url("/catalog/products/1"), site.url("/products/2")]
    assert other.paths() == []
    assert stat(crawler, "robotstxt/sitemaps/off_location") == 2
    lines = [m for m in ours(caplog, logging.INFO) if "outside its location" in m]
    assert lines == [dropped_line(site.url("/catalog/sitemap.xml"), 2, f"{site.address}/catalog/")]


@pytest_twisted.ensureDeferred
async def test_a_cross_submitted_sitemap_lists_the_urls_of_the_site_whose_robotstxt_lists_it(sites, caplog):
    """A's robots.txt lists a sitemap that lives on B (a CDN, say): it may
    list any of A's URLs, and B's under its own directory, but none of B's
    elsewhere (B's robots.txt does not list it) nor C's."""
    shop, cdn, third = sites(LoopbackSite(), LoopbackSite(), LoopbackSite())
    shop.pages["/robots.txt"] = robots(f"Sitemap: {cdn.url('/maps/shop.xml')}\n")
    cdn.pages["/robots.txt"] = robots("User-agent: *\nDisallow:\n")
    cdn.pages["/maps/shop.xml"] = listing(
        [shop.url("/products/1"), cdn.url("/maps/products/2"), cdn.url("/products/3"), third.url("/products/4")]
    )
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(spider=AnyScopeSpider, robots_sitemap_origins=[shop.address])
    assert sorted(crawler.spider.products) == [shop.url("/products/1"), cdn.url("/maps/products/2")]
    assert third.paths() == []
    assert stat(crawler, "robotstxt/sitemaps/off_location") == 2
    lines = [m for m in ours(caplog, logging.INFO) if "outside its location" in m]
    assert lines == [dropped_line(cdn.url("/maps/shop.xml"), 2, f"{cdn.address}/maps/")]


@pytest_twisted.ensureDeferred
async def test_a_sitemap_two_sites_list_is_cross_submitted_by_both(sites, caplog):
    """B's robots.txt lists the same sitemap as A's (fetched before it,
    through our middleware, as the sitemap lives on B): it is fetched once,
    and may list the URLs of both sites."""
    shop, cdn, third = sites(LoopbackSite(), LoopbackSite(), LoopbackSite())
    shared = cdn.url("/maps/shop.xml")
    shop.pages["/robots.txt"] = robots(f"Sitemap: {shared}\n")
    cdn.pages["/robots.txt"] = robots(f"Sitemap: {shared}\n")
    cdn.pages["/maps/shop.xml"] = listing([shop.url("/products/1"), cdn.url("/products/2"), third.url("/products/3")])
    crawler = await crawl(spider=AnyScopeSpider, robots_sitemap_origins=[shop.address])
    assert sorted(crawler.spider.products) == [shop.url("/products/1"), cdn.url("/products/2")]
    assert cdn.paths().count("/maps/shop.xml") == 1
    assert stat(crawler, "robotstxt/sitemaps/off_location") == 1


@pytest_twisted.ensureDeferred
async def test_the_sitemaps_of_an_index_are_held_to_the_rule_with_the_listing_site_passed_down(sites, caplog):
    """An index A's robots.txt lists may list A's sitemaps, and they may
    list A's pages wherever they live on A; a sitemap of another host in the
    index is not even requested."""
    site, other = sites(LoopbackSite(), LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/maps/index.xml')}\n")
    site.pages["/maps/index.xml"] = index([site.url("/maps/sub/a.xml"), other.url("/maps/evil.xml")])
    site.pages["/maps/sub/a.xml"] = listing([site.url("/products/1"), other.url("/products/2")])
    other.pages["/maps/evil.xml"] = listing([other.url("/products/3")])
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(spider=AnyScopeSpider, robots_sitemap_origins=[site.address])
    assert crawler.spider.products == [site.url("/products/1")]
    assert other.paths() == []
    assert stat(crawler, "robotstxt/sitemaps/off_location") == 2
    lines = sorted(m for m in ours(caplog, logging.INFO) if "outside its location" in m)
    assert lines == [
        dropped_line(site.url("/maps/index.xml"), 1, f"{site.address}/maps/"),
        dropped_line(site.url("/maps/sub/a.xml"), 1, f"{site.address}/maps/sub/"),
    ]


@pytest.mark.parametrize("off_by", ["class attribute", "spider argument"])
@pytest_twisted.ensureDeferred
async def test_the_rule_turned_off_keeps_what_sitemaps_list(sites, caplog, off_by):
    site, other = sites(LoopbackSite(), LoopbackSite())
    site.pages["/robots.txt"] = robots(f"Sitemap: {site.url('/catalog/sitemap.xml')}\n")
    site.pages["/catalog/sitemap.xml"] = listing([site.url("/products/1"), other.url("/products/2")])

    class Unruled(ProductSpider):
        robots_sitemap_location_rule = off_by != "class attribute"

    # As `scrapy crawl -a robots_sitemap_location_rule=false` gives it: a string.
    arguments = {"robots_sitemap_location_rule": "false"} if off_by == "spider argument" else {}
    with caplog.at_level(logging.INFO, logger="scrapy_robots_coccoc"):
        crawler = await crawl(spider=Unruled, robots_sitemap_origins=[site.address], **arguments)
    assert sorted(crawler.spider.products) == [site.url("/products/1"), other.url("/products/2")]
    assert stat(crawler, "robotstxt/sitemaps/off_location") is None
    assert not [m for m in ours(caplog, logging.INFO) if "outside its location" in m]


@pytest_twisted.ensureDeferred
async def test_the_spiders_own_sitemap_urls_are_not_held_to_the_rule(sites):
    """The user's word: a sitemap in sitemap_urls (and the index's sitemaps
    under it) may list any URL."""
    site, other = sites(LoopbackSite(), LoopbackSite())
    site.pages["/maps/index.xml"] = index([other.url("/elsewhere.xml")])
    other.pages["/elsewhere.xml"] = listing([site.url("/products/1"), other.url("/products/2")])

    class Own(ProductSpider):
        sitemap_urls = [site.url("/maps/index.xml")]

    crawler = await crawl(spider=Own)
    assert sorted(crawler.spider.products) == [site.url("/products/1"), other.url("/products/2")]
    assert stat(crawler, "robotstxt/sitemaps/off_location") is None


def test_a_location_compares_origins_as_requested_and_paths_by_directory():
    from scrapy_robots_coccoc._crawl.sitemap.location import Location, url_origin

    location = Location.of("https://Shop.Example/catalog/sitemap.xml")
    assert location == Location("https://shop.example:443", "/catalog/")
    assert location.allows("https://shop.example:443/catalog/a?b=1", ())
    assert location.allows("HTTPS://SHOP.EXAMPLE/catalog/", ())
    assert not location.allows("https://shop.example/catalogue/a", ())
    assert not location.allows("http://shop.example/catalog/a", ())  # another scheme is another origin
    assert not location.allows("https://shop.example:8443/catalog/a", ())
    assert location.allows("https://cửa-hàng.vn/x", {"https://xn--ca-hng-lta4562d.vn:443"})
    assert not location.allows("https://[::1/x", {"https://[::1]:443"})
    assert url_origin("http://[::1]:8080/x") == "http://[::1]:8080"
    assert url_origin("mailto:a@b") is None and url_origin("/relative") is None
    assert Location.of("http://a.example") == Location("http://a.example:80", "/")
