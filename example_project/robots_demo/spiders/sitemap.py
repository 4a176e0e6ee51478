"""Sitemap-seeded: name the site; its robots.txt's sitemaps give the start
requests, crawled by SitemapSpider's rules (robots.txt is fetched once)."""

from __future__ import annotations

from scrapy.spiders import SitemapSpider

from scrapy_robots_coccoc import RobotsSitemapMixin

from . import SiteArgument


class SitemapPagesSpider(SiteArgument, RobotsSitemapMixin, SitemapSpider):
    name = "sitemap"
    sitemap_rules = [("/products/", "parse_product"), ("/blog/", "parse_post")]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.robots_sitemap_origins = [self.site]

    def parse_product(self, response):
        yield {"product": response.url, "title": response.css("title::text").get()}

    def parse_post(self, response):
        yield {"post": response.url, "title": response.css("title::text").get()}
