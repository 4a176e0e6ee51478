"""Per-agent configs: this spider names its robot through ``custom_settings``
(no ROBOTSTXT_USER_AGENT: the robot is found in its User-Agent header), and
its image requests obey the ``coccocbot-image`` group through
``meta["robotstxt_user_agent"]`` while its pages obey ``coccocbot-web``."""

from __future__ import annotations

from scrapy import Request, Spider

from . import SiteArgument


class ImagesSpider(SiteArgument, Spider):
    name = "images"
    custom_settings = {
        "ROBOTSTXT_USER_AGENT": None,
        "USER_AGENT": "Mozilla/5.0 (compatible; coccocbot-web/1.1; +http://help.coccoc.com/searchengine)",
    }

    async def start(self):
        yield Request(f"{self.site}/", errback=self.not_downloaded)

    def parse(self, response):
        for src in response.css("img::attr(src)").getall():
            yield response.follow(
                src,
                callback=self.parse_image,
                errback=self.not_downloaded,
                meta={"robotstxt_user_agent": "coccocbot-image"},
            )
        for link in response.css("a::attr(href)").getall():
            if response.urljoin(link).startswith(self.site):
                yield response.follow(link, errback=self.not_downloaded)

    def parse_image(self, response):
        yield {"image": response.url, "bytes": len(response.body)}
