"""A sitemap's entries routed as ``SitemapSpider`` routes them, within the location rule, a batch at a time so
that a large sitemap can be read in a worker thread."""

from __future__ import annotations

import logging
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from scrapy import Request

from .reader import SITEMAP_TYPES

if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Iterable, Iterator

    from .location import LocationRule
    from .reader import SitemapReader

logger = logging.getLogger(__name__)


class SitemapRouting:
    """Gives a urlset's page requests, and an index's sitemap URLs only: whether those are requested depends on
    what the crawl requested already, which the spider decides in the reactor's thread."""

    def __init__(
        self,
        reader: SitemapReader,
        entry_filter: Callable[[Iterable[dict[str, Any]]], Iterable[dict[str, Any]]],
        alternates: bool,
        rules: list[tuple[re.Pattern[str], Callable[..., Any]]],
        follow: list[re.Pattern[str]],
        allowed: LocationRule | None,
    ) -> None:
        self.reader = reader
        self.allowed = allowed
        self.off_location = 0
        self._outputs = self._run(entry_filter, alternates, rules, follow)

    def take(self, count: int) -> list[Request | str]:
        return list(islice(self._outputs, count))

    def _run(
        self,
        entry_filter: Callable[[Iterable[dict[str, Any]]], Iterable[dict[str, Any]]],
        alternates: bool,
        rules: list[tuple[re.Pattern[str], Callable[..., Any]]],
        follow: list[re.Pattern[str]],
    ) -> Iterator[Request | str]:
        entries = iter(self.reader)
        first = next(entries, None)  # the root's name comes with it
        if self.reader.kind not in SITEMAP_TYPES:
            return
        urls = _iterloc(entry_filter(entries if first is None else chain([first], entries)), alternates)
        allowed = self.allowed
        if self.reader.kind == "sitemapindex":
            for loc in urls:
                if not any(pattern.search(loc) for pattern in follow):
                    continue
                if allowed is None or allowed(loc):
                    yield loc
                else:
                    self.off_location += 1
            return
        for loc in urls:
            for pattern, callback in rules:
                if pattern.search(loc):
                    if allowed is None or allowed(loc):
                        yield from _requests(loc, callback)
                    else:
                        self.off_location += 1
                    break


def _iterloc(entries: Iterable[dict[str, Any]], alternates: bool) -> Iterator[str]:
    """The URLs of sitemap *entries* as ``SitemapSpider`` takes them: each non-empty ``loc``, then its alternates."""
    for entry in entries:
        if loc := entry["loc"]:
            yield loc
        if alternates and (links := entry.get("alternate")):
            yield from links


def _requests(url: str, callback: Callable[..., Any]) -> Iterator[Request]:
    """The request for a listed page, none for a URL Scrapy refuses: one bad entry must not end the reading."""
    try:
        yield Request(url, callback=callback)
    except ValueError:
        logger.debug("A sitemap lists an invalid URL: %r", url)
