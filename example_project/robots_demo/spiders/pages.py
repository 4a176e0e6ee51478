"""Enable-in-settings: an ordinary CrawlSpider. Nothing here knows about
robots.txt; the project's settings make every request obey it."""

from __future__ import annotations

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from . import SiteArgument


class PagesSpider(SiteArgument, CrawlSpider):
    name = "pages"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.start_urls = [f"{self.site}/"]
        self.allowed_domains = [self.host]
        self.rules = (Rule(LinkExtractor(), callback="parse_page", follow=True, errback="not_downloaded"),)
        self._compile_rules()

    def parse_page(self, response):
        yield {"url": response.url, "title": response.css("title::text").get()}
