"""The sitemaps protocol's location rule (sitemaps.org, "Sitemap file location" and "Sitemaps & Cross
Submits"): a sitemap may list the URLs under its own location (same scheme, host and port, at or below its
directory), and, when a site's robots.txt lists it, any URL of that site wherever the file lives."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import urlsplit

from .origins import DEFAULT_PORTS


def idna(host: str) -> str:
    """*host* in the IDNA form Scrapy requests it in (``cửa-hàng.vn`` is ``xn--ca-hng-lta4562d.vn``).
    Raises ValueError for a name IDNA refuses."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise ValueError(f"invalid host name {host!r}") from exc


def _split(url: str) -> tuple[str, str] | None:
    """(``scheme://host:port`` as :func:`~.origins.origin_of` writes a request's origin, path) of *url*;
    None for a URL no http(s) server answers."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
        host = idna(parts.hostname or "")
    except ValueError:  # a bad port, an unclosed IPv6 bracket, a host IDNA refuses
        return None
    if parts.scheme not in DEFAULT_PORTS or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port or DEFAULT_PORTS[parts.scheme]}", parts.path or "/"


def url_origin(url: str) -> str | None:
    """``scheme://host:port`` of *url*, None for a URL no http(s) server answers."""
    split = _split(url)
    return None if split is None else split[0]


@dataclass(frozen=True)
class Location:
    """Where a sitemap lives: the URLs it may list on its own authority are those of this origin whose path
    starts with this directory (``/catalog/sitemap.xml`` lists ``/catalog/...``, not ``/images/...``)."""

    origin: str
    directory: str

    @classmethod
    def of(cls, sitemap_url: str) -> Location | None:
        split = _split(sitemap_url)
        if split is None:
            return None
        origin, path = split
        return cls(origin, path[: path.rfind("/") + 1])

    def allows(self, url: str, listers: Collection[str]) -> bool:
        """Whether the sitemap may list *url*: under this location, or of an origin whose robots.txt lists
        the sitemap (*listers*, a cross-submit)."""
        split = _split(url)
        if split is None:
            return False
        origin, path = split
        return origin in listers or (origin == self.origin and path.startswith(self.directory))


@dataclass(frozen=True)
class Sitemap:
    """What a sitemap request carries (request meta, so that it survives redirects and shared queues)."""

    url: str  # as listed: the location its URLs are measured from
    depth: int  # 0 when robots.txt or sitemap_urls lists it; +1 per sitemap index above it
    # Origins whose robots.txt listed it (or the sitemap it descends from); None for the spider's own sitemaps.
    listers: tuple[str, ...] | None
    root: str  # the sitemap robots.txt or sitemap_urls listed, which it descends from


@dataclass(frozen=True)
class LocationRule:
    """The URLs one sitemap may list: under its location, or of the origins whose robots.txt lists it."""

    location: Location
    listers: frozenset[str]

    def __call__(self, url: str) -> bool:
        return self.location.allows(url, self.listers)
