"""What the sitemap mixin remembers: each record bounded, oldest first out, URLs hashed, so memory stays flat."""

from __future__ import annotations

from collections import Counter
from typing import TypeVar

#: Sitemaps requested, none twice whatever the duplicate filter does; one forgotten is left to that filter.
MAX_SITEMAPS_SEEN = 200_000
#: Declined (origin, sitemap) pairs, not counted again on a refresh; one forgotten is only counted again.
MAX_DECLINED = 100_000
#: Sitemaps another robots.txt listed once they were requested (cross-submits too), MAX_LISTERS such origins each.
MAX_LATER_LISTED = 10_000
MAX_LISTERS = 100
#: Origins whose robots.txt the mixin requested; one forgotten has it requested again, not its seen sitemaps.
MAX_ORIGINS = 100_000

_K = TypeVar("_K")


class SitemapLedger:
    def __init__(self) -> None:
        self._seen: dict[int, None] = {}
        self._declined: dict[int, None] = {}
        self._later_listers: dict[str, set[str]] = {}
        self._robots_requested: dict[str, None] = {}
        #: Sitemaps scheduled per robots.txt origin.
        self.taken: Counter[str] = Counter()

    def seen(self, url: str) -> bool:
        return hash(url) in self._seen

    def mark_seen(self, url: str) -> None:
        _remember(self._seen, hash(url), MAX_SITEMAPS_SEEN)

    def declined(self, origin: str, url: str) -> bool:
        return hash((origin, url)) in self._declined

    def decline(self, origin: str, url: str) -> None:
        _remember(self._declined, hash((origin, url)), MAX_DECLINED)

    def listed_again(self, url: str, origin: str) -> None:
        """A robots.txt lists a sitemap requested already: it cross-submits that sitemap for its origin too."""
        later = self._later_listers
        listers = later.get(url)
        if listers is None:
            if len(later) >= MAX_LATER_LISTED:
                del later[next(iter(later))]
            listers = later[url] = set()
        if len(listers) < MAX_LISTERS:
            listers.add(origin)

    def later_listers(self, *urls: str) -> set[str]:
        return {lister for url in urls for lister in self._later_listers.get(url, ())}

    def robots_requested(self, origin: str) -> bool:
        return origin in self._robots_requested

    def claim_robots(self, origin: str) -> bool:
        if origin in self._robots_requested:
            return False
        _remember(self._robots_requested, origin, MAX_ORIGINS)
        return True


def _remember(record: dict[_K, None], key: _K, bound: int) -> None:
    record[key] = None
    if len(record) > bound:
        del record[next(iter(record))]
