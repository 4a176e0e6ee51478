"""The sitemaps a robots.txt lists, as a crawl takes them."""

from __future__ import annotations

from urllib.parse import urljoin

#: At most this many sitemaps of one robots.txt are handed to spiders, so that
#: a hostile list cannot hold the reactor; real ones list far fewer.
MAX_SITEMAPS = 1000


def listed_sitemaps(base: str, urls: list[str]) -> list[str]:
    """The first MAX_SITEMAPS of *urls*, resolved against *base*, without duplicates or unparsable ones."""
    resolved = []
    for url in urls[:MAX_SITEMAPS]:
        try:
            resolved.append(urljoin(base, url))
        except ValueError:  # an unclosed IPv6 bracket, say
            continue
    return list(dict.fromkeys(resolved))
