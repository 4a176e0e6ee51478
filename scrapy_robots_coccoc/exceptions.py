"""How a request ends when robots.txt, not the site, decides: each an
:class:`~scrapy.exceptions.IgnoreRequest`, so errbacks see it and Scrapy logs
it quietly, like the stock middleware's refusals."""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest


class RobotsTxtForbidden(IgnoreRequest):
    """The origin's robots.txt disallows the URL for the robot."""


class OriginUnavailable(IgnoreRequest):
    """The origin's robots.txt got no answer: the site is unavailable for now."""


class RobotsTxtFault(IgnoreRequest):
    """robots.txt could not be fetched for a reason that is not the site's
    (a local fault, a bad URL, the spider closing): nothing was decided."""


class RobotsTxtOnly(IgnoreRequest):
    """A ``robotstxt_only`` request is done: its origin's robots.txt is known
    (and its sitemaps announced); there is nothing to download."""


class CrawlDelayOverCap(RobotsTxtForbidden):
    """The origin asks for a Crawl-delay over ``ROBOTSTXT_MAX_CRAWL_DELAY`` and
    ``ROBOTSTXT_CRAWL_DELAY_OVER_CAP = "skip"``: its requests are not made."""
