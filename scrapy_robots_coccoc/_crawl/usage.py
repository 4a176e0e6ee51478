"""Usage preferences in the crawl: ``ROBOTSTXT_USAGE_PURPOSES``, the requests robots.txt's preferences disallow, and
the preferences each downloaded response carries in ``response.meta["usage_preferences"]``."""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from scrapy.http import HtmlResponse

from .._parser.usage import NO_PREFERENCES, UsagePreferences, page_usage
from ..exceptions import UsageDisallowed

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

    from .._parser import RobotsTxt


def purposes(settings: BaseSettings) -> tuple[str, ...]:
    """``ROBOTSTXT_USAGE_PURPOSES``: the labels the crawl uses content for, lower-cased as written in the vocabulary."""
    raw = settings.getlist("ROBOTSTXT_USAGE_PURPOSES", [])
    if not all(isinstance(label, str) and label.strip() for label in raw):
        raise ValueError(f"ROBOTSTXT_USAGE_PURPOSES must be a list of labels such as 'train-ai', not {raw!r}")
    return tuple(dict.fromkeys(label.strip().lower() for label in raw))


def disallowed(preferences: UsagePreferences, labels: tuple[str, ...]) -> str | None:
    """The first of *labels* that *preferences* disallow; None when none is."""
    return next((label for label in labels if preferences.allows(label) is False), None)


class UsageCheck:
    """Decides requests by robots.txt's preferences for the crawl's purposes, and annotates responses."""

    def __init__(self, crawler: Crawler) -> None:
        self._crawler = crawler
        self._stats = crawler.stats
        self.purposes = purposes(crawler.settings)
        # Request -> robots.txt's preferences for it when it was decided, until its response comes.
        self._of_robots: WeakKeyDictionary[Request, UsagePreferences] = WeakKeyDictionary()

    def decide(self, request: Request, robots: RobotsTxt, agent: str) -> None:
        """Raise :class:`UsageDisallowed` if robots.txt's preferences for *request* disallow a purpose."""
        if not self.purposes or request.meta.get("robotstxt_only"):
            return  # a robotstxt_only request downloads nothing
        preferences = robots.usage(request.url, agent)
        label = disallowed(preferences, self.purposes)
        if label is not None:
            self._stats.inc_value("robotstxt/usage/disallowed")
            self._stats.inc_value(f"robotstxt/usage/disallowed/{label}")
            raise UsageDisallowed(f"Usage disallowed by robots.txt: {label} ({preferences.source(label)})")

    def note(self, request: Request, robots: RobotsTxt, agent: str) -> None:
        """Keep robots.txt's preferences for *request*, decided to go, for its response."""
        preferences = robots.usage(request.url, agent)
        if preferences:
            self._of_robots[request] = preferences

    def annotate(self, request: Request, response: Response, robot: str) -> None:
        """Set the response's preferences: robots.txt's for its URL, combined with its own headers and tags."""
        body = response.body if isinstance(response, HtmlResponse) else None
        content_type = response.headers.get(b"Content-Type") or b""
        own = page_usage(response.headers.getlist, body, robot, image=content_type.lower().startswith(b"image/"))
        request.meta["usage_preferences"] = UsagePreferences.combine(self._of_robots.pop(request, NO_PREFERENCES), own)
