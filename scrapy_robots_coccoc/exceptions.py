"""How a request ends when robots.txt, not the site, decides: each an :class:`~scrapy.exceptions.IgnoreRequest`,
so errbacks see it and Scrapy logs it quietly, like the stock middleware's refusals."""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest


class RobotsTxtForbidden(IgnoreRequest):
    """The origin's robots.txt disallows the URL for the robot."""


class OriginUnavailable(IgnoreRequest):
    """The origin's robots.txt got no answer: the site is unavailable for now."""


class RobotsTxtFault(IgnoreRequest):
    """robots.txt could not be fetched for a reason not the site's (a local fault, a bad URL, the spider closing):
    nothing was decided."""


class RobotsTxtOnly(IgnoreRequest):
    """A ``robotstxt_only`` request is done: its origin's robots.txt is known (sitemaps announced), nothing to fetch."""


class CrawlDelayOverCap(RobotsTxtForbidden):
    """The Crawl-delay is over ``ROBOTSTXT_MAX_CRAWL_DELAY`` and ``ROBOTSTXT_CRAWL_DELAY_OVER_CAP = "skip"``."""


class UsageDisallowed(IgnoreRequest):
    """The origin's robots.txt usage preferences (``Content-Usage``, ``Content-Signal``) disallow a use the crawl
    names in ``ROBOTSTXT_USAGE_PURPOSES`` for the URL: it is not fetched."""
