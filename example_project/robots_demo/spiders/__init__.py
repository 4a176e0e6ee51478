"""The example spiders: each shows one way to use scrapy-robots-coccoc.

Every spider takes the site to crawl as an argument:
``scrapy crawl pages -a site=https://example.com``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from scrapy.exceptions import IgnoreRequest


class SiteArgument:
    """``-a site=URL``: the site the spider crawls, and its host."""

    def __init__(self, site: str = "", *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not site:
            raise ValueError(f"{self.name}: give the site to crawl, e.g. -a site=https://example.com")
        self.site = site.rstrip("/") if "://" in site else f"https://{site.rstrip('/')}"
        self.host = urlsplit(self.site).hostname or ""

    def not_downloaded(self, failure) -> None:
        """Errback: say why a request was not downloaded (robots.txt or not)."""
        reason = "forbidden" if failure.check(IgnoreRequest) else "failed"
        self.logger.info("%s %s: %s", reason, failure.request.url, failure.value)
