"""Which sitemaps a robots.txt may hand the mixin: http(s) URLs Scrapy can request, within ``robots_sitemap_scope``."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .location import idna

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

SCOPES = ("site", "allowed_domains", "any")


def check_scope(spider_name: str, scope: str) -> None:
    if scope not in SCOPES:
        raise ValueError(f"{spider_name}.robots_sitemap_scope must be one of {SCOPES}, not {scope!r}")


def declined(
    url: str, site: str, scope: str, allowed_domains: Callable[[], Iterable[str] | None], url_limit: int
) -> str | None:
    """Why *url* is not taken from the robots.txt of *site* (its host, IDNA), None when it may be.
    *allowed_domains* gives the spider's; called only for the ``allowed_domains`` scope, as a spider reads it."""
    try:
        parts = urlsplit(url)
        host = idna(parts.hostname or "")
    except ValueError:  # an unclosed IPv6 bracket, a bad port, a host IDNA refuses
        return "invalid"
    if parts.scheme not in ("http", "https") or not host or parts.username is not None:
        return "invalid"
    if 0 < url_limit < len(url):
        return "invalid"
    return None if _in_scope(site, host, scope, allowed_domains) else "out_of_scope"


def _in_scope(site: str, host: str, scope: str, allowed_domains: Callable[[], Iterable[str] | None]) -> bool:
    if scope == "any":
        return True
    if scope == "allowed_domains":
        return any(within(host, domain) for domain in map(_domain, allowed_domains() or [site]) if domain)
    return within(host, site) or within(site, host)


def within(host: str, domain: str) -> bool:
    """Whether *host* is *domain* (less ``www.``) or under it; an IP address has nothing under it."""
    host, domain = host.lower(), domain.lower().removeprefix("www.")
    return host == domain or (host.endswith("." + domain) and not _is_address(host))


def _is_address(host: str) -> bool:
    """Whether *host* is an IP address a resolver takes (``0x7f.1``, ``2130706433``, IPv6): no TLD is numeric."""
    last = host.rstrip(".").rsplit(".", 1)[-1]
    return ":" in host or last.isdigit() or last.startswith("0x")


def _domain(entry: str) -> str | None:
    try:
        return idna(entry)
    except ValueError:
        return None
