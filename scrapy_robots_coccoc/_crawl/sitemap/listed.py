"""The sitemaps a robots.txt lists, as a crawl takes them."""

from __future__ import annotations

from urllib.parse import urljoin

#: At most this many sitemaps of one robots.txt reach spiders, so a hostile list cannot hold the reactor.
MAX_SITEMAPS = 1000


def listed_sitemaps(base: str, urls: list[str]) -> list[str]:
    resolved = []
    for url in urls[:MAX_SITEMAPS]:
        try:
            resolved.append(urljoin(base, url))
        except ValueError:  # an unclosed IPv6 bracket, say
            continue
    return list(dict.fromkeys(resolved))
